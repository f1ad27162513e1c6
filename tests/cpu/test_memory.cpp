// DeviceBuffer on the fake driver (whose device memory is host memory, so
// copies and the `dbl` kernel really move and change bytes).
#include <doctest/doctest.h>

#include "fake_control.hpp"

#include <numeric>
#include <vector>

using namespace oxicuda;

TEST_CASE("device buffer: allocated in its context, freed once, move-only") {
  FakeScope scope;
  {
    Context ctx = Context::primary(Device::get(0));
    DeviceBuffer<float> a(ctx, 1000);
    CHECK(a.size() == 1000);
    CHECK(a.size_bytes() == 4000);
    CHECK(a.device_ptr() != 0);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) == a.device_ptr());
    CHECK(Context::current().raw() == nullptr);
    DeviceBuffer<float> b = std::move(a);
    CHECK(a.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(a.device_ptr() == 0);
    CHECK(b.size() == 1000);
    DeviceBuffer<float> c(ctx, 10);
    c = std::move(b);
    CHECK(scope.fake.calls("cuMemFree") == 1);  // c's old storage
    CHECK(scope.fake.live("memory") == scope.memory + 1);
    DeviceBuffer<float> empty(ctx, 0);
    CHECK(empty.empty());
  }
  CHECK(scope.fake.calls("cuMemAlloc") == 2);
  CHECK(scope.fake.calls("cuMemFree") == 2);
  CHECK(scope.balanced());
}

TEST_CASE("device buffer: copies round-trip and sizes are checked") {
  FakeScope scope;
  Context ctx = Context::primary(Device::get(0));
  std::vector<int> in(257);
  std::iota(in.begin(), in.end(), -100);
  DeviceBuffer<int> d(ctx, in.size());
  d.copy_from(in);
  std::vector<int> out(in.size(), 0);
  d.copy_to(out);
  CHECK(out == in);
  std::vector<int> wrong(256);
  try {
    d.copy_to(wrong);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.call() == "oxicuda::DeviceBuffer::copy_to");
    CHECK(e.detail() == "size mismatch: the device side has 257 elements, the other side 256 (element size 4 bytes)");
  }
  CHECK_THROWS_AS(d.copy_from(wrong), Error);
  CHECK(scope.fake.calls("cuMemcpyHtoD") == 1);
  CHECK(scope.fake.calls("cuMemcpyDtoH") == 1);
}

TEST_CASE("device buffer: a failed allocation leaks nothing and restores the context") {
  FakeScope scope;
  {
    Context ctx = Context::primary(Device::get(0));
    scope.fake.fail("cuMemAlloc", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_THROWS_WITH_AS(DeviceBuffer<double>(ctx, 8), doctest::Contains("CUDA_ERROR_OUT_OF_MEMORY"), Error);
    CHECK(Context::current().raw() == nullptr);
    CHECK_THROWS_WITH_AS(DeviceBuffer<double>(ctx, std::size_t(-1) / 4), doctest::Contains("overflow size_t"), Error);
  }
  CHECK(scope.balanced());
}

// The seed's two-stream test (seed/stream.rs), on the fake: the fake runs
// kernels when they are launched, so this checks the wrapper's plumbing
// (buffers, launch arguments, event record/wait); the GPU suite checks the
// ordering on a real device.
TEST_CASE("the seed's two-stream test runs on the fake") {
  FakeScope scope;
  {
    Context ctx = Context::primary(Device::get(0));
    ScopedCurrent current(ctx);
    Stream a(ctx), b(ctx);
    Module m = Module::from_ptx(ctx, kFakePtx);
    Function dbl = m.function("dbl");
    const unsigned n = 2048;
    std::vector<float> a_in(n), b_in(n);
    for (unsigned i = 0; i < n; ++i) a_in[i] = float(i), b_in[i] = float(i) + 1000.0f;
    DeviceBuffer<float> da(ctx, n), db(ctx, n);
    da.copy_from(a_in);
    db.copy_from(b_in);
    launch(a, dbl, 8, 128, 0, da.device_ptr(), n);
    launch(b, dbl, 8, 128, 0, db.device_ptr(), n);
    Event e(ctx, {.timing = false});
    a.record(e);
    b.wait(e);
    launch(b, dbl, 8, 128, 0, da.device_ptr(), n);
    a.synchronize();
    b.synchronize();
    std::vector<float> a_out(n), b_out(n);
    da.copy_to(a_out);
    db.copy_to(b_out);
    for (unsigned i = 0; i < n; ++i) {
      REQUIRE(a_out[i] == 4.0f * float(i));
      REQUIRE(b_out[i] == 2.0f * (float(i) + 1000.0f));
    }
  }
  CHECK(scope.balanced());
}
