// Tests' access to the fake driver's controls (tests/fake/fake_abi.h),
// through the very library the loader opened (OXICUDA_LIBCUDA_PATH).
#pragma once

#include "fake/fake_abi.h"
#include "oxicuda.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

struct Fake {
  fake_reset_fn reset;
  fake_calls_fn calls;
  fake_fail_fn fail;
  fake_live_fn live;
  fake_invalid_destroys_fn invalid_destroys;
  fake_set_device_count_fn set_device_count;
  fake_last_launch_fn last_launch;
  fake_host_funcs_run_fn host_funcs_run;
  fake_last_context_fn last_context;

  // The fake that oxicuda loaded (loading it first if need be).
  static Fake& get() {
    static Fake f = [] {
      const oxicuda::DriverInfo& info = oxicuda::driver_info();
      void* lib = dlopen(info.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
      if (!lib || !dlsym(lib, "fake_reset")) {
        std::fprintf(stderr, "these tests need the fake driver (OXICUDA_LIBCUDA_PATH); loaded: '%s' (%s)\n",
                     info.library.c_str(), info.reason.c_str());
        std::abort();
      }
      Fake x{};
      x.reset = reinterpret_cast<fake_reset_fn>(dlsym(lib, "fake_reset"));
      x.calls = reinterpret_cast<fake_calls_fn>(dlsym(lib, "fake_calls"));
      x.fail = reinterpret_cast<fake_fail_fn>(dlsym(lib, "fake_fail"));
      x.live = reinterpret_cast<fake_live_fn>(dlsym(lib, "fake_live"));
      x.invalid_destroys = reinterpret_cast<fake_invalid_destroys_fn>(dlsym(lib, "fake_invalid_destroys"));
      x.set_device_count = reinterpret_cast<fake_set_device_count_fn>(dlsym(lib, "fake_set_device_count"));
      x.last_launch = reinterpret_cast<fake_last_launch_fn>(dlsym(lib, "fake_last_launch"));
      x.host_funcs_run = reinterpret_cast<fake_host_funcs_run_fn>(dlsym(lib, "fake_host_funcs_run"));
      x.last_context = reinterpret_cast<fake_last_context_fn>(dlsym(lib, "fake_last_context"));
      return x;
    }();
    return f;
  }
};

// Resets the fake's counters and faults for one test, and on exit checks
// that the test left no handle alive and destroyed nothing twice.
struct FakeScope {
  Fake& fake = Fake::get();
  long streams, events, contexts, primaries, modules, memory, pinned;
  FakeScope() {
    fake.reset();
    streams = fake.live("stream");
    events = fake.live("event");
    contexts = fake.live("context");
    primaries = fake.live("primary");
    modules = fake.live("module");
    memory = fake.live("memory");
    pinned = fake.live("pinned");
  }
  bool balanced() const {
    const bool ok = fake.live("stream") == streams && fake.live("event") == events && fake.live("context") == contexts &&
           fake.live("primary") == primaries && fake.live("module") == modules && fake.live("memory") == memory && fake.live("pinned") == pinned &&
           fake.invalid_destroys() == 0;
    if (!ok)
      std::fprintf(stderr,
                   "fake driver not balanced: streams %ld->%ld events %ld->%ld contexts %ld->%ld primary %ld->%ld "
                   "modules %ld->%ld memory %ld->%ld invalid destroys %ld\n",
                   streams, fake.live("stream"), events, fake.live("event"), contexts, fake.live("context"),
                   primaries, fake.live("primary"), modules, fake.live("module"), memory, fake.live("memory"),
                   fake.invalid_destroys());
    return ok;
  }
};

// The oxicuda::Error that `f` raises (the test fails when it raises none).
template <class F>
oxicuda::Error error_of(F&& f) {
  try {
    f();
  } catch (const oxicuda::Error& e) {
    return e;
  }
  FAIL("no error");
  return oxicuda::Error(oxicuda::ffi::CUDA_SUCCESS, "");
}

// Heap allocations made by this process so far (tests/cpu/main.cpp counts them).
long heap_allocations();

// A tiny PTX module for the fake: `dbl(.u64 ptr, .u32 n)` doubles n floats,
// `layout(.u64, .u32, .f32, .align 8 .b8[24])` and `none()` take what they say.
inline constexpr const char* kFakePtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry dbl(
    .param .u64 ptr,
    .param .u32 n
)
{ ret; }
.visible .entry layout(.param .u64 a, .param .u32 b, .param .f32 c, .param .align 8 .b8 d[24])
{ ret; }
.visible .entry none()
{ ret; }
)";
