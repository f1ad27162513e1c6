// Shared by the GPU suite's files.
#pragma once

#include <doctest/doctest.h>

#include "oxicuda.hpp"

namespace gpu {

// The primary context of device 0, for the whole run.
inline oxicuda::Context& ctx() {
  static oxicuda::Context c = oxicuda::Context::primary(oxicuda::Device::get(0));
  return c;
}

// The oxicuda::Error that `f` raises (the test fails when it raises none).
template <class F>
oxicuda::Error raised_by(F&& f) {
  try {
    f();
  } catch (const oxicuda::Error& e) {
    return e;
  }
  FAIL_CHECK("no error");
  return oxicuda::Error(oxicuda::ffi::CUDA_SUCCESS, "");
}

}  // namespace gpu
