// Shared by the GPU suite's files.
#pragma once

#include "oxicuda.hpp"

namespace gpu {

// The primary context of device 0, for the whole run.
inline oxicuda::Context& ctx() {
  static oxicuda::Context c = oxicuda::Context::primary(oxicuda::Device::get(0));
  return c;
}

}  // namespace gpu
