// The CPU suite's fixtures, for TEST_CASE_FIXTURE: a test on the fake driver
// with what most tests begin with (the primary context of device 0, a
// stream in it, the fake's PTX module loaded in it), checked at the end.
#pragma once

#include "fake_driver.hpp"

#include <string>

// Resets the fake's counters and faults before the test; after it, once the
// test's handles and the fixture's own are gone, checks that the fake is
// balanced: no handle left alive, nothing destroyed twice.
struct FakeTest : FakeScope {
  FakeTest() = default;
  FakeTest(const FakeTest&) = delete;
  FakeTest& operator=(const FakeTest&) = delete;
  // Runs after the destructors of the fixtures below, so after their handles.
  ~FakeTest() {
    const std::string left = imbalance();
    INFO("fake driver not balanced: " << left);
    CHECK(left.empty());
    // A test that failed half way may leave contexts current on this thread;
    // pop them, so that one failure is reported once, not again by every
    // test after it that begins with no context current.
    CUcontext c = nullptr;
    while (oxicuda::detail::api().CtxGetCurrent(&c) == oxicuda::ffi::CUDA_SUCCESS && c != nullptr)
      if (oxicuda::detail::api().CtxPopCurrent(nullptr) != oxicuda::ffi::CUDA_SUCCESS) break;
  }
};

// Two fake devices for the test's scope (peer access, pools of two devices).
struct TwoDevices : FakeTest {
  TwoDevices() { fake.set_device_count(2); }
  TwoDevices(const TwoDevices&) = delete;
  TwoDevices& operator=(const TwoDevices&) = delete;
  ~TwoDevices() { fake.set_device_count(1); }
};

// The primary context of device 0.
struct ContextTest : FakeTest {
  oxicuda::Context ctx = oxicuda::Context::primary(oxicuda::Device::get(0));
};

// ... and a stream in it.
struct StreamTest : ContextTest {
  oxicuda::Stream s{ctx};
};

// The primary context and the fake's PTX module loaded in it (kFakePtx).
struct ModuleTest : ContextTest {
  oxicuda::Module m = oxicuda::Module::from_ptx(ctx, kFakePtx);
};

// The primary context, a stream, and the fake's PTX module, made in that order.
struct LaunchTest : StreamTest {
  oxicuda::Module m = oxicuda::Module::from_ptx(ctx, kFakePtx);
};
