// Shared by the GPU suite's files.
#pragma once

#include <doctest/doctest.h>

#include "oxicuda.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

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

// Runs this binary again in a child process with only the test case `name`,
// `env` ("NAME=value ...") set for it, and open file descriptors without
// close-on-exec inherited; its exit status, 128 + the signal's number when a
// signal ended it.
inline int run_self(const std::string& env, const std::string& name) {
  std::fflush(nullptr);
  const std::string cmd = env + " /proc/" + std::to_string(::getpid()) + "/exe '" + test_case_filter(name) + "'";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace gpu
