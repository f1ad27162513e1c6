// Shared by the GPU suite's files.
#pragma once

#include <doctest/doctest.h>

#include "oxicuda.hpp"

#include <string>

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

// The doctest option that runs exactly the test case `name` in a child
// process: doctest splits a filter at commas unless escaped with a
// backslash, and a filter that matches nothing runs nothing and exits 0 (a
// child that would pass without running).
inline std::string test_case_filter(const std::string& name) {
  std::string f = "--test-case=";
  for (const char c : name) {
    if (c == ',' || c == '\\') f += '\\';
    f += c;
  }
  return f;
}

}  // namespace gpu
