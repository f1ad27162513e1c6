// Managed memory, registered host memory and pointer queries (issue 23,
// items 2, 7 and 8) on the fake driver, whose device memory is host memory:
// managed memory there is reachable from the host as on the GPU.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(StreamTest, "issue 23 (2): a ManagedBuffer is a host range and a device range, freed once") {
  {
    ManagedBuffer<int> m(ctx, 100);
    REQUIRE(m.size() == 100);
    CHECK(m.size_bytes() == 400);
    CHECK(fake.live("memory") - at_start.memory == 1);
    std::iota(m.begin(), m.end(), 0);  // the host writes it in place
    CHECK(m[99] == 99);
    // A device range: copies and fills take it.
    std::vector<int> back(100);
    copy(back, m);
    CHECK(back[42] == 42);
    fill(m, 7);
    CHECK(m[0] == 7);
    CHECK(m[99] == 7);
    CHECK(m.device_span().context() == ctx.raw());
    CHECK(static_cast<DeviceSpan<int>>(m).data() == m.data());
    // Prefetch and advice, stream-ordered and not.
    prefetch_async(s, m, MemoryLocation::device(Device::get(0)));
    prefetch_async(s, m.subspan(10, 20), MemoryLocation::host());
    advise(m, Advice::set_read_mostly, MemoryLocation::host());
    advise(m, Advice::set_preferred_location, MemoryLocation::device(Device::get(0)));
    advise(m, Advice::set_accessed_by, MemoryLocation::device(Device::get(0)));
    CHECK(fake.calls("cuMemPrefetchAsync") == 2);
    CHECK(fake.calls("cuMemAdvise") == 3);
    ManagedBuffer<int> moved = std::move(m);
    CHECK(m.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
    CHECK(moved.size() == 100);
    ManagedBuffer<int> host_attached(ctx, 4, {.attach = Attach::host});
    CHECK(fake.live("memory") - at_start.memory == 2);
  }
  CHECK(fake.calls("cuMemFree") == 2);
  CHECK(fake.live("memory") - at_start.memory == 0);
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (2): prefetch to a device without concurrent managed access is an Error; so is memory that is not managed") {
  ManagedBuffer<float> m(ctx, 16);
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0);
  const Error e = error_of([&] { prefetch_async(s, m, MemoryLocation::device(Device::get(0))); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(std::string(e.what()).find("concurrent managed access") != std::string::npos);
  CHECK(fake.calls("cuMemPrefetchAsync") == 0);
  prefetch_async(s, m, MemoryLocation::host());  // the host is always a target
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1);
  DeviceBuffer<float> plain(ctx, 16);
  CHECK(error_of([&] { prefetch_async(s, plain, MemoryLocation::host()); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { advise(plain, Advice::set_read_mostly, MemoryLocation::host()); }).result() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  // Advice needs a current context: the buffer's is made current; a bare
  // span with none current is the driver's error.
  CHECK_NOTHROW(advise(m, Advice::set_read_mostly, MemoryLocation::host()));
  CHECK(error_of([&] { advise(DeviceSpan<float>(m.device_ptr(), 16), Advice::set_read_mostly, MemoryLocation::host()); })
            .result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  ManagedBuffer<float> empty;
  CHECK(error_of([&] { prefetch_async(s, empty, MemoryLocation::host()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { ManagedBuffer<float> b(Context(), 4); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { ManagedBuffer<double> b(ctx, std::size_t(-1) / 4); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (7): HostRegistration page-locks your memory for its scope, mapped on request") {
  std::vector<float> host(64, 1.5f);
  {
    HostRegistration<float> r(ctx, std::span<float>(host), {.device_map = true});
    CHECK(fake.live("registered") - at_start.registered == 1);
    CHECK(r.size() == 64);
    CHECK(r.data() == host.data());
    REQUIRE(r.mapped());
    const DeviceSpan<float> d = r.mapped_span();
    CHECK(d.size() == 64);
    CHECK(d.context() == ctx.raw());
    // A host range for copies.
    DeviceBuffer<float> dev(ctx, 64);
    copy(dev, r);
    std::vector<float> back(64);
    copy(back, dev);
    CHECK(back[63] == 1.5f);
    // Registering it again, or part of it, is an Error that says why.
    const Error twice = error_of([&] { HostRegistration<float> again(ctx, std::span<float>(host).subspan(8, 8)); });
    CHECK(twice.result() == ffi::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK(std::string(twice.what()).find("registered already") != std::string::npos);
    CHECK(fake.live("registered") - at_start.registered == 1);
    HostRegistration<float> moved = std::move(r);
    CHECK(r.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(error_of([&] { (void)r.mapped_span(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
    HostRegistration<float> plain;
    std::vector<float> other(8);
    plain = HostRegistration<float>(ctx, std::span<float>(other));
    CHECK(!plain.mapped());
    CHECK(error_of([&] { (void)plain.mapped_span(); }).result() == ffi::CUDA_ERROR_NOT_MAPPED);
    CHECK(fake.live("registered") - at_start.registered == 2);
    plain.reset();
    CHECK(fake.live("registered") - at_start.registered == 1);
  }
  CHECK(fake.live("registered") - at_start.registered == 0);
  CHECK(fake.calls("cuMemHostUnregister") == 2);
  // Pinned memory is page-locked already.
  PinnedBuffer<float> pinned(ctx, 8);
  CHECK(error_of([&] { HostRegistration<float> r(ctx, std::span<float>(pinned)); }).result() ==
        ffi::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CHECK(error_of([&] { HostRegistration<float> r(Context{}, std::span<float>(host)); }).result() ==
        ffi::CUDA_ERROR_INVALID_HANDLE);
  HostRegistration<float> none(ctx, std::span<float>());  // nothing to register
  CHECK(none.empty());
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (8): pointer_info tells device, pinned, registered, managed and unknown memory apart") {
  DeviceBuffer<int> dev(ctx, 16);
  PinnedBuffer<int> pinned(ctx, 16);
  ManagedBuffer<int> managed(ctx, 16);
  std::vector<int> plain(16);
  HostRegistration<int> reg(ctx, std::span<int>(plain));

  const PointerInfo d = pointer_info(dev.subspan(4));
  CHECK(d.known());
  CHECK(d.type == MemoryType::device);
  CHECK(!d.managed);
  CHECK(d.device == 0);
  CHECK(d.context == ctx);
  CHECK(d.range_start == dev.device_ptr());
  CHECK(d.range_size == 64);
  CHECK(d.device_ptr == dev.device_ptr() + 16);  // asked again from its context: none is current here
  CHECK(d.host_ptr == nullptr);
  CHECK(d.buffer_id != 0);

  const PointerInfo p = pointer_info(pinned.data());
  CHECK(p.type == MemoryType::host);
  CHECK(p.host_ptr == pinned.data());
  CHECK(p.buffer_id != d.buffer_id);

  const PointerInfo m = pointer_info(managed);
  CHECK(m.managed);
  CHECK(m.host_ptr == managed.data());
  CHECK(m.device_ptr == managed.device_ptr());

  const PointerInfo r = pointer_info(plain.data() + 3);
  CHECK(r.type == MemoryType::host);
  CHECK(r.range_start == reinterpret_cast<std::uintptr_t>(plain.data()));
  CHECK(r.range_size == 64);

  int on_stack = 0;
  const PointerInfo none = pointer_info(&on_stack);
  CHECK(!none.known());
  CHECK(none.device == -1);
  CHECK(!none.context);
  CHECK(none.range_size == 0);
  CHECK(!pointer_info(ffi::CUdeviceptr{0}).known());
  CHECK(Context::current().raw() == nullptr);
  // The device address as the driver gives it with no context current: 0;
  // pointer_info asks again from the memory's own context.
  void* data[] = {nullptr};
  ffi::CUdeviceptr raw_device = 1;
  data[0] = &raw_device;
  ffi::CUpointer_attribute attr[] = {ffi::CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
  REQUIRE(detail::api().PointerGetAttributes(1, attr, data, dev.device_ptr()) == ffi::CUDA_SUCCESS);
  CHECK(raw_device == 0);
  CHECK(fake.calls("cuPointerGetAttributes") == 11);  // 5 queries, each known one asked twice, and this one
}
