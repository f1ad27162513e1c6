// Device and Context on the fake driver.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

using namespace oxicuda;

TEST_CASE("device: count, name, compute capability, memory, attributes, uuid, PCI bus id") {
  FakeScope scope;
  CHECK(Device::count() == 1);
  const Device d = Device::get(0);
  CHECK(d.raw() == 0);
  CHECK(d.name() == "oxicuda fake GPU 0");
  CHECK(d.compute_capability() == ComputeCapability{9, 0});
  CHECK(d.compute_capability() > ComputeCapability{8, 9});
  CHECK(d.total_memory() == (std::size_t{80} << 30));
  CHECK(d.multiprocessor_count() == 132);
  CHECK(d.attribute(ffi::CU_DEVICE_ATTRIBUTE_WARP_SIZE) == 32);
  CHECK(d.uuid().to_string() == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  CHECK(d.pci_bus_id() == "0000:18:00.0");
  CHECK(driver_version() == 13000);
  CHECK(Device::get(0) == d);
}

TEST_CASE("device: zero devices is an answer, and get() then explains") {
  FakeScope scope;
  scope.fake.set_device_count(0);
  CHECK(Device::count() == 0);
  {
    const Error e = error_of([&] { (void)Device::get(0); });
    CHECK(e.detail() == "device ordinal 0 is out of range: the driver sees 0 devices");
  }
  scope.fake.set_device_count(1);
}

TEST_CASE_FIXTURE(FakeTest, "context: the primary context is retained once and released when the last copy drops") {
  {
    Context a = Context::primary(Device::get(0));
    CHECK(a.kind() == Context::Kind::primary);
    CHECK(fake.live("primary") == at_start.primary + 1);
    {
      Context b = a;  // NOLINT(performance-unnecessary-copy-initialization)
      Context c = b;
      CHECK(c == a);
      CHECK(a.use_count() == 3);
    }
    CHECK(fake.calls("cuDevicePrimaryCtxRelease") == 0);
    CHECK(a.device() == Device::get(0));
  }
  CHECK(fake.calls("cuDevicePrimaryCtxRetain") == 1);
  CHECK(fake.calls("cuDevicePrimaryCtxRelease") == 1);
}

TEST_CASE_FIXTURE(FakeTest, "context: a created context is destroyed once and leaves the thread's current context alone") {
  CHECK(Context::current().raw() == nullptr);
  {
    Context created = Context::create(Device::get(0), {.schedule = Schedule::blocking_sync});
    CHECK(created.kind() == Context::Kind::created);
    CHECK(Context::current().raw() == nullptr);  // cuCtxCreate pushed it; create() popped it
    Context copy = created;
    CHECK(fake.live("context") == at_start.context + 1);
  }
  CHECK(fake.calls("cuCtxDestroy") == 1);
}

TEST_CASE_FIXTURE(FakeTest, "context: ScopedCurrent makes current and restores, also nothing, also when nested") {
  Context a = Context::primary(Device::get(0));
  Context b = Context::create(Device::get(0));
  CHECK(Context::current().raw() == nullptr);
  {
    ScopedCurrent sa(a);
    CHECK(Context::current() == a);
    {
      ScopedCurrent sb(b);
      CHECK(Context::current() == b);
      {
        const long before = fake.calls("*");
        ScopedCurrent again(b);  // already current: one cuCtxGetCurrent, no switch
        CHECK(fake.calls("*") - before == 1);
      }
      CHECK(Context::current() == b);
    }
    CHECK(Context::current() == a);
  }
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(ContextTest, "context: synchronize, priority range and memory info restore the current context") {
  ctx.synchronize();
  const StreamPriorityRange r = ctx.stream_priority_range();
  CHECK(r.least == 0);
  CHECK(r.greatest == -5);
  const MemoryInfo m = ctx.memory_info();
  CHECK(m.total == (std::size_t{80} << 30));
  CHECK(m.free <= m.total);
  CHECK(Context::current().raw() == nullptr);
  {
    Context b = Context::create(Device::get(0));
    ScopedCurrent restore(b);  // restores "none current" on exit
    ctx.make_current();
    CHECK(Context::current() == ctx);
  }
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(FakeTest, "context: a borrowed context is never released") {
  Context owner = Context::create(Device::get(0));
  {
    Context borrowed = Context::borrow(owner.raw());
    CHECK(borrowed.kind() == Context::Kind::borrowed);
    CHECK(borrowed.use_count() == 0);
    CHECK(borrowed.device() == Device::get(0));  // asked of the driver, with it made current
  }
  CHECK(fake.calls("cuCtxDestroy") == 0);
}

// --- issue 30.2: the context guard ---

TEST_CASE_FIXTURE(FakeTest, "issue 30.2: a guard made from a temporary keeps its context alive for its scope") {
  {
    ScopedCurrent guard{Context::primary(Device::get(0))};
    CHECK(fake.live("primary") == at_start.primary + 1);
    CHECK(Context::current().memory_info().total > 0);
    DeviceBuffer<float> b(Context::current(), 16);
    CHECK_NOTHROW((void)Stream(Context::current()));
  }
  CHECK(fake.live("primary") == at_start.primary);
  CHECK(Context::current().raw() == nullptr);
  {
    ScopedCurrent guard{Context::create(Device::get(0))};
    REQUIRE(Context::current().raw() != nullptr);
    CHECK(fake.live("context") == at_start.context + 1);
    CHECK_NOTHROW((void)Stream(Context::current()));
    DeviceBuffer<float> b(Context::current(), 16);
  }
  CHECK(fake.live("context") == at_start.context);
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(FakeTest, "issue 30.2: the fake as the driver: a fully released primary context is destroyed where it is still current") {
  {
    Context p = Context::primary(Device::get(0));
    p.make_current();
  }  // released by its last holder: still current, destroyed
  REQUIRE(Context::current().raw() != nullptr);
  ffi::CUdeviceptr d = 0;
  CHECK(detail::api().MemAlloc(&d, 16) == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  std::size_t free_bytes = 0, total = 0;
  CHECK(detail::api().MemGetInfo(&free_bytes, &total) == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
}

TEST_CASE_FIXTURE(ContextTest, "issue 30.2: a guard restores what was current before, also when its context was current already") {
  Context other = Context::create(Device::get(0));
  ctx.make_current();
  {
    ScopedCurrent guard(ctx);  // current already
    other.make_current();
    CHECK(Context::current() == other);
  }
  CHECK(Context::current() == ctx);
  {
    ScopedCurrent guard(other);  // not current: switched, and switched back
    ctx.make_current();
  }
  CHECK(Context::current() == ctx);
  REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
}

// --- issue 30.5: sticky errors, the primary context's reset, any entry point ---

TEST_CASE_FIXTURE(ContextTest, "issue 30.5: a sticky error says that the context is unusable and how to recover") {
  for (const ffi::CUresult r : {ffi::CUDA_ERROR_ASSERT, ffi::CUDA_ERROR_ILLEGAL_ADDRESS, ffi::CUDA_ERROR_LAUNCH_FAILED,
                                ffi::CUDA_ERROR_ILLEGAL_INSTRUCTION, ffi::CUDA_ERROR_MISALIGNED_ADDRESS}) {
    fake.fail("cuMemAlloc", 1, r);  // as after a device-side assert: any later call repeats it
    const Error e = error_of([&] { DeviceBuffer<int> b(ctx, 4); });
    CHECK(e.result() == r);
    CHECK(e.call() == "cuMemAlloc");
    CHECK(e.detail().find("this error is sticky: a kernel faulted") == 0);
    CHECK(e.detail().find("Context::reset_primary(device) (cuDevicePrimaryCtxReset") != std::string::npos);
  }
  fake.fail("cuMemAlloc", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);  // not sticky: no such text
  CHECK(error_of([&] { DeviceBuffer<int> b(ctx, 4); }).detail().empty());
}

TEST_CASE_FIXTURE(ContextTest, "issue 30.5: Context::reset_primary resets the device's primary context") {
  Context::reset_primary(Device::get(0));
  CHECK(fake.calls("cuDevicePrimaryCtxReset") == 1);
  CHECK_NOTHROW((void)DeviceBuffer<int>(ctx, 4));
  fake.fail("cuDevicePrimaryCtxReset", 1, ffi::CUDA_ERROR_INVALID_DEVICE);
  CHECK(error_of([] { Context::reset_primary(Device::get(0)); }).call() == "cuDevicePrimaryCtxReset");
}

namespace {
// As cudaTypedefs.h declares it (PFN_cuCtxGetApiVersion_v3020).
using GetApiVersion = ffi::CUresult(OXICUDA_DETAIL_CUDAAPI*)(CUcontext, unsigned*);
}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 30.5: any driver entry point by name and version, also one not in oxicuda's table") {
  for (const auto& e : ffi::entries) REQUIRE(std::string_view(e.name) != "cuCtxGetApiVersion");
  auto get = driver_entry_point<GetApiVersion>("cuCtxGetApiVersion", 3020);
  const bool found = get != nullptr;
  REQUIRE(found);
  unsigned v = 0;
  CHECK(get(ctx.raw(), &v) == ffi::CUDA_SUCCESS);
  CHECK(v == 3020);
  CHECK(static_cast<bool>(driver_entry_point("cuMemAlloc", 3020)));  // untyped, from the table's functions too
  const Error missing = error_of([] { (void)driver_entry_point("cuNoSuchFunction", 12000); });
  CHECK(missing.result() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(missing.call() == "oxicuda::driver_entry_point");
  CHECK(missing.detail().find("has no entry point named cuNoSuchFunction (at version 12000)") != std::string::npos);
  const Error old = error_of([] { (void)driver_entry_point("cuCtxGetApiVersion", 2000); });
  CHECK(old.detail().find("has cuCtxGetApiVersion, but not at version 2000") != std::string::npos);
  CHECK(error_of([] { (void)driver_entry_point("", 12000); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
}
