// DeviceBuffer on the fake driver (whose device memory is host memory, so
// copies and the `dbl` kernel really move and change bytes).
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "two_stream_check.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "device buffer: allocated in its context, freed once, move-only") {
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
    CHECK(fake.calls("cuMemFree") == 1);  // c's old storage
    CHECK(fake.live("memory") == at_start.memory + 1);
    DeviceBuffer<float> empty(ctx, 0);
    CHECK(empty.empty());
  }
  CHECK(fake.calls("cuMemAlloc") == 2);
  CHECK(fake.calls("cuMemFree") == 2);
}

TEST_CASE_FIXTURE(ContextTest, "device buffer: copies round-trip and sizes are checked") {
  std::vector<int> in(257);
  std::iota(in.begin(), in.end(), -100);
  DeviceBuffer<int> d(ctx, in.size());
  d.copy_from(in);
  std::vector<int> out(in.size(), 0);
  d.copy_to(out);
  CHECK(out == in);
  std::vector<int> wrong(256);
  {
    const Error e = error_of([&] { d.copy_to(wrong); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.call() == "oxicuda::copy");
    CHECK(e.detail() == "size mismatch: the destination has 256 elements, the source 257 (element size 4 bytes)");
  }
  CHECK_THROWS_AS(d.copy_from(wrong), Error);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 1);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "device buffer: a failed allocation leaks nothing and restores the context") {
  fake.fail("cuMemAlloc", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_THROWS_WITH_AS(DeviceBuffer<double>(ctx, 8), doctest::Contains("CUDA_ERROR_OUT_OF_MEMORY"), Error);
  CHECK(Context::current().raw() == nullptr);
  CHECK_THROWS_WITH_AS(DeviceBuffer<double>(ctx, std::size_t(-1) / 4), doctest::Contains("overflow size_t"), Error);
}

// The seed's two-stream test (seed/stream.rs) — the very code that
// oxicuda-doctor and the GPU suite run — on the fake: the fake runs kernels
// when they are launched, so this checks the wrapper's plumbing (buffers,
// launch arguments, event record/wait); the GPU suite checks the ordering
// on a real device.
TEST_CASE_FIXTURE(FakeTest, "the seed's two-stream test runs on the fake") {
  const auto result = oxicuda_examples::two_stream_check(Context::primary(Device::get(0)));
  INFO(result.message);
  CHECK(result.passed);
  CHECK(fake.calls("cuLaunchKernel") == 3);
  CHECK(fake.calls("cuStreamWaitEvent") == 1);
}

TEST_CASE_FIXTURE(StreamTest, "copies: every direction, sync and async, between vectors, pinned buffers and device memory") {
  std::vector<std::uint32_t> host(1000);
  std::iota(host.begin(), host.end(), 7u);
  PinnedBuffer<std::uint32_t> pinned(ctx, 1000);
  CHECK(pinned.size() == 1000);
  CHECK(fake.live("pinned") == at_start.pinned + 1);
  DeviceBuffer<std::uint32_t> a(ctx, 1000), b(ctx, 1000);
  copy(a, host);                        // H -> D
  copy(b, a);                           // D -> D
  copy(pinned, b);                      // D -> pinned H
  CHECK(std::equal(pinned.begin(), pinned.end(), host.begin()));
  fill(a, 0u);
  copy_async(s, a, pinned);             // pinned H -> D
  copy_async(s, b.subspan(0, 500), a.subspan(500));  // D -> D, part
  std::vector<std::uint32_t> back(500);
  copy_async(s, back, b.subspan(0, 500));  // D -> H
  s.synchronize();
  CHECK(std::equal(back.begin(), back.end(), host.begin() + 500));
  // Synchronous copies are stream-ordered copies on the per-thread default
  // stream, then a wait for it: two of each, and three waits.
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 2);
  CHECK(fake.calls("cuMemcpyDtoDAsync") == 2);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == 2);
  CHECK(fake.calls("cuStreamSynchronize") == 5);  // 3 copies, 1 fill, s.synchronize()
  std::vector<std::uint32_t> small(10);
  CHECK_THROWS_WITH_AS(copy_async(s, small, a), doctest::Contains("the destination has 10 elements, the source 1000"),
                       Error);
  CHECK_THROWS_AS(copy_async(Stream(), a, host), Error);
}

TEST_CASE_FIXTURE(StreamTest, "fills: 1- and 4-byte elements, and bytes of any element") {
  DeviceBuffer<float> f(ctx, 64);
  DeviceBuffer<unsigned char> c(ctx, 64);
  DeviceBuffer<double> d(ctx, 8);
  fill(f, 1.5f);
  std::vector<float> fh(64);
  copy(fh, f);
  CHECK(fh[63] == 1.5f);
  fill_async(s, c, static_cast<unsigned char>(9));
  fill_bytes_async(s, d, 0xff);
  std::vector<unsigned char> ch(64);
  std::vector<double> dh(8);
  copy(ch, c);
  copy(dh, d);
  CHECK(ch[10] == 9);
  std::uint64_t bits;
  std::memcpy(&bits, &dh[3], 8);
  CHECK(bits == ~std::uint64_t{0});
  fill_bytes(f.subspan(0, 1), 0);
  copy(fh, f);
  CHECK(fh[0] == 0.0f);
  CHECK(fh[1] == 1.5f);
  CHECK(fake.calls("cuMemsetD32Async") == 1);
  CHECK(fake.calls("cuMemsetD8Async") == 3);
}

TEST_CASE_FIXTURE(FakeTest, "pinned buffer: move-only, freed once, a contiguous range") {
  {
    Context ctx = Context::primary(Device::get(0));
    PinnedBuffer<int> p(ctx, 16, {.write_combined = true});
    for (int& x : p) x = 3;
    std::span<const int> view = std::as_const(p);
    CHECK(view.size() == 16);
    CHECK(p[15] == 3);
    PinnedBuffer<int> q = std::move(p);
    CHECK(p.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(q.size() == 16);
    CHECK(Context::current().raw() == nullptr);
  }
  CHECK(fake.calls("cuMemHostAlloc") == 1);
  CHECK(fake.calls("cuMemFreeHost") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "stream-ordered allocation: allocate on one stream, use and free on another after an event") {
  Stream producer(ctx), consumer(ctx);
  MemoryPool pool = MemoryPool::device_default(Device::get(0));
  const std::uint64_t used_before = pool.used_bytes();
  pool.set_release_threshold(std::uint64_t{1} << 30);
  CHECK(pool.release_threshold() == (std::uint64_t{1} << 30));
  {
    auto buf = DeviceBuffer<int>::allocate_async(producer, 256);
    CHECK(buf.stream_ordered());
    CHECK(pool.used_bytes() == used_before + 1024);
    fill_async(producer, buf, 5);
    Event ready(ctx, {.timing = false});
    producer.record(ready);
    consumer.wait(ready);
    std::vector<int> host(256);
    copy_async(consumer, host, buf);
    buf.free_on(consumer);
  }
  CHECK(fake.calls("cuMemFreeAsync") == 1);
  CHECK(pool.used_bytes() == used_before);
  pool.trim_to(0);
  DeviceBuffer<int> sync(ctx, 4);
  CHECK_THROWS_WITH_AS(sync.free_on(consumer), doctest::Contains("not allocated stream-ordered"), Error);
}
