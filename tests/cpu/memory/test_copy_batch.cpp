// Batched copies and managed-memory batches (issue 25, capability 3) on the
// fake driver, which models cuMemcpyBatchAsync_v2 and the managed batch
// calls (tests/fake/fake_batch.cpp): bytes copied, attribute groups as the
// driver gets them, bad input refused before the driver sees anything.
// The loop of single calls (a driver without the batched ones) runs in the
// loader test "batched calls missing" (tests/loader/loader_modes.cpp).
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {
FakeBatch last(Fake& fake) {
  FakeBatch b{};
  fake.last_batch(&b);
  return b;
}
int code(MemoryLocation l) { return static_cast<int>(l.raw().type) * 100 + l.raw().id; }
}  // namespace

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): copy_batch copies host to device, device to device and device to host in one call") {
  REQUIRE(batched_copies_available());
  std::vector<int> a(5), c(3, 0);
  std::iota(a.begin(), a.end(), 10);
  std::array<int, 3> b{7, 8, 9};
  DeviceBuffer<int> da(ctx, 5), db(ctx, 3), dc(ctx, 3);
  {
    const ScopedCurrent current(ctx);
    copy_batch(s, {{da, a}, {db, b}});
    copy_batch(s, {{dc, db}, {c, dc.device_span()}});  // (no order within a batch: two batches)
    s.synchronize();
  }
  CHECK(fake.calls("cuMemcpyBatchAsync") == 2);
  CHECK(fake.calls("cuMemcpyHtoDAsync") + fake.calls("cuMemcpyDtoDAsync") + fake.calls("cuMemcpyDtoHAsync") == 0);
  CHECK(c == std::vector<int>{7, 8, 9});
  std::vector<int> back(5);
  copy(back, da);
  CHECK(back == a);
  const FakeBatch batch = last(fake);
  CHECK(std::string(batch.entry) == "cuMemcpyBatchAsync");
  CHECK(batch.count == 2);
  CHECK(batch.sizes[0] == 3 * sizeof(int));
  CHECK(batch.sizes[1] == 3 * sizeof(int));
  // One attribute entry for both (the default options): stream order.
  CHECK(batch.groups == 1);
  CHECK(batch.starts[0] == 0);
  CHECK(batch.access[0] == ffi::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
  CHECK(batch.flags[0] == 0);
  CHECK(batch.src_hint[0] == 0);  // no hint: CU_MEM_LOCATION_TYPE_INVALID
  // With no context current (this thread's state outside the scope above),
  // the fake refuses the batch as driver 580 does; it goes again with the
  // stream's context current, which is not left current.
  const long set = fake.calls("cuCtxSetCurrent");
  copy_batch(s, {{db, b}});
  CHECK(fake.calls("cuMemcpyBatchAsync") == 2 + 2);
  CHECK(fake.calls("cuCtxSetCurrent") == set + 2);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 0);
  CHECK(!Context::current());
  // A view of the stream that knows no context: the copy's device memory
  // names it; with no copy's range knowing one either (raw spans), the
  // driver does (cuStreamGetCtx).
  const long getctx = fake.calls("cuStreamGetCtx");
  copy_batch(StreamRef(s.raw()), {{db, b}});
  CHECK(fake.calls("cuMemcpyBatchAsync") == 4 + 2);
  CHECK(fake.calls("cuStreamGetCtx") == getctx);
  const DeviceSpan<int> raw_span{db.device_ptr(), db.size()};
  copy_batch(StreamRef(s.raw()), {{raw_span, b}});
  CHECK(fake.calls("cuMemcpyBatchAsync") == 6 + 2);
  CHECK(fake.calls("cuStreamGetCtx") == getctx + 1);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 0);
  CHECK(!Context::current());
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): consecutive copies of equal options share one attribute entry") {
  std::vector<float> h(4, 1.5f);
  DeviceBuffer<float> d0(ctx, 4), d1(ctx, 4), d2(ctx, 4), d3(ctx, 4);
  const CopyOptions during{.source_access = SourceAccess::during_call};
  const CopyOptions hinted{.source_access = SourceAccess::any,
                           .destination_hint = MemoryLocation::device(Device::get(0)),
                           .prefer_overlap_with_compute = true};
  copy_batch(s, {{d0, h, during}, {d1, h, during}, {d2, h, hinted}, {d3, h, during}});
  const FakeBatch b = last(fake);
  CHECK(b.count == 4);
  REQUIRE(b.groups == 3);
  CHECK(b.starts[0] == 0);
  CHECK(b.starts[1] == 2);
  CHECK(b.starts[2] == 3);
  CHECK(b.access[0] == ffi::CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
  CHECK(b.access[1] == ffi::CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
  CHECK(b.flags[1] == ffi::CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE);
  CHECK(b.dst_hint[1] == code(MemoryLocation::device(Device::get(0))));
  CHECK(b.src_hint[1] == 0);
  CHECK(b.access[2] == ffi::CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
  std::vector<float> back(4);
  copy(back, d3);
  CHECK(back == h);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): a batch with mismatched sizes is an Error naming the copy; nothing is enqueued") {
  std::vector<int> h4(4), h5(5);
  DeviceBuffer<int> d4(ctx, 4);
  // Every driver call but cuGetErrorString (an Error's description).
  auto driver_calls = [&] { return fake.calls("*") - fake.calls("cuGetErrorString"); };
  const long calls = driver_calls();
  const Error e = error_of([&] { copy_batch(s, {{d4, h4}, {d4, h4}, {h5, d4}}); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(e.call() == "oxicuda::copy_batch");
  CHECK(e.detail() == "copy 2 of the batch: size mismatch: the destination has 5 elements, the source 4 (element "
                      "size 4 bytes)");
  CHECK(driver_calls() == calls);  // the driver saw nothing
  // A moved-from DeviceBuffer, named by its index too.
  DeviceBuffer<int> gone = std::move(d4);
  const Error empty = error_of([&] { copy_batch(s, {{gone, h4}, {d4, h4}}); });
  CHECK(empty.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(empty.detail().find("copy 1 of the batch: ") == 0);
  // A span whose count overflows size_t.
  const DeviceSpan<int> huge(gone.device_ptr(), std::size_t(-1) / 2);
  const DeviceSpan<int> huge2(gone.device_ptr(), std::size_t(-1) / 2);
  const Error big = error_of([&] { copy_batch(s, {{huge, huge2}}); });
  CHECK(big.detail().find("copy 0 of the batch: ") == 0);
  CHECK(big.detail().find("more bytes than a size_t holds") != std::string::npos);
  CHECK(driver_calls() == calls);
  CHECK(fake.live("memory") - at_start.memory == 1);  // gone's; nothing leaked
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): an empty batch, and copies of no elements, enqueue nothing") {
  std::vector<int> none;
  DeviceBuffer<int> empty(ctx, 0), d(ctx, 2);
  const long calls = fake.calls("*");
  copy_batch(s, std::span<const BatchCopy>{});
  copy_batch(s, {{empty, none}, {none, empty}});
  CHECK(fake.calls("*") == calls);
  std::vector<int> h{1, 2};
  copy_batch(s, {{empty, none}, {d, h}});  // the empty copy is left out
  const FakeBatch b = last(fake);
  CHECK(b.count == 1);
  CHECK(b.sizes[0] == 2 * sizeof(int));
  // An empty batch on an empty Stream handle is still an Error.
  Stream moved = std::move(s);
  CHECK(error_of([&] { copy_batch(s, std::span<const BatchCopy>{}); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): a batch from a std::vector of copies; more than 16 copies; the driver's refusal") {
  std::vector<std::vector<int>> host(40, std::vector<int>(3));
  std::vector<DeviceBuffer<int>> dev;
  std::vector<BatchCopy> copies;
  for (int i = 0; i < 40; ++i) {
    std::iota(host[i].begin(), host[i].end(), i * 3);
    dev.emplace_back(ctx, 3);
  }
  for (int i = 0; i < 40; ++i) copies.emplace_back(dev[i], host[i]);
  copy_batch(s, copies);
  CHECK(last(fake).count == 40);
  std::vector<int> back(3);
  copy(back, dev[39]);
  CHECK(back == std::vector<int>{117, 118, 119});
  // A device range overrunning its allocation: the driver refuses the
  // batch, then that copy on its own; the Error names the copy.
  const DeviceSpan<int> past(dev[0].device_ptr() + 8, 3);
  const Error e = error_of([&] { copy_batch(s, {{dev[1], host[1]}, {past, host[0]}}); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(e.call() == "cuMemcpyHtoDAsync");
  CHECK(e.detail() == "copy 1 of the batch");
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): a batch the driver refuses as a whole runs copy by copy; other refusals are Errors") {
  std::vector<int> h{7, 8, 9}, back(3);
  DeviceBuffer<int> d(ctx, 3), e(ctx, 3);
  // A batch refused with CUDA_ERROR_INVALID_VALUE (here first for want of
  // a current context, as driver 580 does) again with the stream's context
  // current runs copy by copy.
  fake.fail("cuMemcpyBatchAsync", 2, ffi::CUDA_ERROR_INVALID_VALUE);
  const long syncs_before = fake.calls("cuStreamSynchronize");
  copy_batch(s, {{d, h}, {e, h, {.source_access = SourceAccess::during_call}}});
  CHECK(fake.calls("cuMemcpyBatchAsync") == 2);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 2);
  CHECK(fake.calls("cuStreamSynchronize") == syncs_before + 1);  // (a copy asked for during_call)
  copy(back, e);
  CHECK(back == h);
  // Any other refusal of the batch is the Error, and nothing is retried.
  fake.fail("cuMemcpyBatchAsync", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  const Error oom = error_of([&] { copy_batch(s, {{d, h}}); });
  CHECK(oom.result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(oom.call() == "cuMemcpyBatchAsync");
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 2);
  // Copy by copy, a refused copy is the Error naming it; a copy before it
  // that reads its source during the call is finished before it leaves.
  fake.fail("cuMemcpyBatchAsync", 2, ffi::CUDA_ERROR_INVALID_VALUE);
  fake.fail("cuMemcpyHtoDAsync", 2, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  const long syncs = fake.calls("cuStreamSynchronize");
  const Error second =
      error_of([&] { copy_batch(s, {{d, h, {.source_access = SourceAccess::during_call}}, {e, h}}); });
  CHECK(second.result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(second.call() == "cuMemcpyHtoDAsync");
  CHECK(second.detail() == "copy 1 of the batch");
  CHECK(fake.calls("cuStreamSynchronize") == syncs + 1);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): on the legacy default stream, which the batched call refuses, copy_batch loops") {
  std::vector<int> h{4, 5, 6};
  DeviceBuffer<int> d(ctx, 3), e(ctx, 3);
  copy_batch(Stream::legacy_default(ctx), {{d, h}, {e, d}});
  CHECK(fake.calls("cuMemcpyBatchAsync") == 0);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 1);
  CHECK(fake.calls("cuMemcpyDtoDAsync") == 1);
  std::vector<int> back(3);
  copy(back, e);
  CHECK(back == h);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): copy_batch on a held stream copies when the stream runs; host sources are read at once") {
  std::vector<int> h{1, 2, 3};
  DeviceBuffer<int> d(ctx, 3);
  fake.hold(s.raw(), 1);
  copy_batch(s, {{d, h}});
  h = {9, 9, 9};  // after the call: the copy took the old bytes
  CHECK(fake.pending(s.raw()) == 1);
  s.synchronize();
  std::vector<int> back(3);
  copy(back, d);
  CHECK(back == std::vector<int>{1, 2, 3});
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): prefetch_batch groups ranges by location; discard_batch; discard_and_prefetch_batch") {
  REQUIRE(batched_managed_available());
  ManagedBuffer<int> m(ctx, 64), n(ctx, 8);
  std::iota(m.begin(), m.end(), 0);
  const MemoryLocation gpu = MemoryLocation::device(Device::get(0)), host = MemoryLocation::host();
  prefetch_batch(s, {{m.subspan(0, 16), gpu}, {m.subspan(16, 16), gpu}, {n, host}, {m.subspan(32, 0), host}});
  FakeBatch b = last(fake);
  CHECK(std::string(b.entry) == "cuMemPrefetchBatchAsync");
  CHECK(b.count == 3);  // the empty range is left out
  REQUIRE(b.groups == 2);
  CHECK(b.starts[1] == 2);
  CHECK(b.location[0] == code(gpu));
  CHECK(b.location[1] == code(host));
  CHECK(m[20] == 20);  // a prefetch keeps the contents
  CHECK(fake.calls("cuMemPrefetchAsync") == 0);

  discard_batch(s, {m.subspan(0, 4), n});
  b = last(fake);
  CHECK(std::string(b.entry) == "cuMemDiscardBatchAsync");
  CHECK(b.count == 2);
  CHECK(b.sizes[0] == 16);
  CHECK(m[4] == 4);  // outside the discarded range

  discard_and_prefetch_batch(s, {{m.subspan(8, 8), gpu}});
  b = last(fake);
  CHECK(std::string(b.entry) == "cuMemDiscardAndPrefetchBatchAsync");
  CHECK(b.count == 1);
  CHECK(b.location[0] == code(gpu));
  // Empty batches enqueue nothing.
  const long calls = fake.calls("*");
  prefetch_batch(s, std::span<const Prefetch>{});
  discard_batch(s, std::span<const ManagedRange>{});
  CHECK(fake.calls("*") == calls);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): managed batches refuse bad input with a clear Error") {
  ManagedBuffer<int> m(ctx, 16);
  DeviceBuffer<int> plain(ctx, 16);
  // A target device without concurrent managed access: refused before any call.
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0);
  const long calls = fake.calls("cuMemPrefetchBatchAsync");
  const Error e = error_of([&] { prefetch_batch(s, {{m, MemoryLocation::device(Device::get(0))}}); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(e.detail().find("concurrent managed access") != std::string::npos);
  CHECK(fake.calls("cuMemPrefetchBatchAsync") == calls);
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1);
  // Memory that is not managed: the driver's refusal, named.
  const Error not_managed = error_of([&] { discard_batch(s, {plain}); });
  CHECK(not_managed.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(not_managed.call() == "cuMemDiscardBatchAsync");
  // A moved-from buffer, when the range is made.
  ManagedBuffer<int> gone = std::move(m);
  CHECK(error_of([&] { discard_batch(s, {m}); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  // The legacy default stream: prefetches loop; a discard is refused, saying why.
  prefetch_batch(Stream::legacy_default(ctx), {{gone, MemoryLocation::host()}});
  CHECK(fake.calls("cuMemPrefetchAsync") == 1);
  const Error legacy = error_of([&] { discard_batch(Stream::legacy_default(ctx), {gone}); });
  CHECK(legacy.detail().find("legacy default stream") != std::string::npos);
  CHECK(fake.live("memory") - at_start.memory == 2);
}

TEST_CASE_FIXTURE(StreamTest, "issue 25 (3): a batch of up to 16 copies is one driver call and no allocation; more, one allocation") {
  std::vector<std::vector<int>> host(17, std::vector<int>(2, 1));
  std::vector<DeviceBuffer<int>> dev;
  for (int i = 0; i < 17; ++i) dev.emplace_back(ctx, 2);
  std::vector<BatchCopy> copies;
  for (int i = 0; i < 17; ++i)
    copies.emplace_back(dev[i], host[i], CopyOptions{.prefer_overlap_with_compute = i % 2 == 0});
  const std::span<const BatchCopy> sixteen(copies.data(), 16);
  const ScopedCurrent current(ctx);  // (without one, driver 580 refuses a batch: see above)
  copy_batch(s, sixteen);  // (warm: the driver is loaded)
  long calls = fake.calls("*"), heap = heap_allocations();
  copy_batch(s, sixteen);
  CHECK(fake.calls("*") - calls == 1);
  CHECK(heap_allocations() - heap == 0);
  CHECK(last(fake).groups == 16);  // alternating options: an entry each
  calls = fake.calls("*"), heap = heap_allocations();
  copy_batch(s, copies);
  CHECK(fake.calls("*") - calls == 1);
  CHECK(heap_allocations() - heap == 1);
  // The managed batches: up to 32 ranges without allocation.
  ManagedBuffer<int> m(ctx, 64);
  std::vector<Prefetch> p;
  for (int i = 0; i < 32; ++i) p.push_back({m.subspan(i * 2, 2), MemoryLocation::host()});
  prefetch_batch(s, p);
  calls = fake.calls("*"), heap = heap_allocations();
  prefetch_batch(s, p);
  CHECK(fake.calls("*") - calls == 1);
  CHECK(heap_allocations() - heap == 0);
  CHECK(last(fake).groups == 1);
}
