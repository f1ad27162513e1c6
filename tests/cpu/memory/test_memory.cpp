// DeviceBuffer on the fake driver (whose device memory is host memory, so
// copies and the `dbl` kernel really move and change bytes).
#include <doctest/doctest.h>

#include "../fixtures.hpp"
#include "two_stream_check.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <thread>
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

// issue 23 (5): fills of 2- and 8-byte elements with no kernel: cuMemsetD16Async;
// for 8 bytes, one cuMemsetD32Async when both halves are equal, else two
// cuMemsetD2D32Async one word wide with an 8-byte pitch.
TEST_CASE_FIXTURE(StreamTest, "issue 23 (5): fills of 2- and 8-byte elements, with halves that differ, and of spans") {
  DeviceBuffer<std::int16_t> h(ctx, 33);
  DeviceBuffer<double> d(ctx, 17);
  DeviceBuffer<std::int64_t> q(ctx, 9);
  fill(h, std::int16_t{-2});
  fill_async(s, d, 1.0);  // 0x3ff00000'00000000: the halves differ
  fill(s, q, std::int64_t{0x0000000700000007});  // equal halves: one 32-bit fill
  std::vector<std::int16_t> hh(33);
  std::vector<double> dh(17);
  std::vector<std::int64_t> qh(9);
  copy(hh, h);
  copy(s, dh, d);
  copy(qh, q);
  CHECK(std::all_of(hh.begin(), hh.end(), [](std::int16_t v) { return v == -2; }));
  CHECK(std::all_of(dh.begin(), dh.end(), [](double v) { return v == 1.0; }));
  CHECK(std::all_of(qh.begin(), qh.end(), [](std::int64_t v) { return v == 0x0000000700000007; }));
  CHECK(fake.calls("cuMemsetD16Async") == 1);
  CHECK(fake.calls("cuMemsetD2D32Async") == 2);
  CHECK(fake.calls("cuMemsetD32Async") == 1);

  // A span in the middle: its neighbours keep their values.
  fill(d.subspan(5, 3), -0.5);
  fill(h.subspan(31, 1), std::int16_t{0x1234});
  fill(q.subspan(1, 1), std::int64_t{-1});
  copy(dh, d);
  copy(hh, h);
  copy(qh, q);
  for (std::size_t i = 0; i < dh.size(); ++i) CHECK(dh[i] == (i >= 5 && i < 8 ? -0.5 : 1.0));
  CHECK(hh[30] == -2);
  CHECK(hh[31] == 0x1234);
  CHECK(hh[32] == -2);
  CHECK(qh[0] == 0x0000000700000007);
  CHECK(qh[1] == -1);
  CHECK(qh[2] == 0x0000000700000007);

  // Empty spans: no error, nothing written.
  fill(d.subspan(0, 0), 2.0);
  fill_async(s, h.subspan(0, 0), std::int16_t{1});
  s.synchronize();
  copy(dh, d);
  CHECK(dh[0] == 1.0);

  // A moved-from buffer is an Error naming the type, for each width.
  DeviceBuffer<double> gone = std::move(d);
  DeviceBuffer<std::int16_t> gone16 = std::move(h);
  CHECK_THROWS_WITH_AS(fill(d, 1.0), doctest::Contains("DeviceBuffer"), Error);  // NOLINT(bugprone-use-after-move)
  CHECK_THROWS_WITH_AS(fill_async(s, h, std::int16_t{1}), doctest::Contains("DeviceBuffer"), Error);  // NOLINT
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

// --- issue 30: ordering of the synchronous copies and fills; overflowing spans; moved-from fills ---

TEST_CASE_FIXTURE(StreamTest, "issue 30.1: a stream-ordered buffer's synchronous copies and fills are ordered after its stream's pending work") {
  auto b = DeviceBuffer<float>::allocate_async(s, 4);
  b.copy_from(std::vector<float>(4, 1.0f));
  std::vector<float> h(4, 0.0f);
  fake.hold(s.raw(), 1);  // the stream's work waits, as behind a slow kernel
  fill_async(s, b, 7.0f);
  b.copy_to(h);  // after the fill
  CHECK(h == std::vector<float>(4, 7.0f));
  // The review's case: copy_from returns, and the stream's earlier work
  // must not land on the copied bytes afterwards.
  fill_async(s, b, 9.0f);
  b.copy_from(std::vector<float>{1, 2, 3, 4});
  fake.hold(s.raw(), 0);
  s.synchronize();
  b.copy_to(h);
  CHECK(h == std::vector<float>{1, 2, 3, 4});
  // copy() and fill() of the buffer, and of a span of it, likewise.
  fake.hold(s.raw(), 1);
  fill_async(s, b, 5.0f);
  std::vector<float> two(2, 0.0f);
  copy(two, b.subspan(1, 2));
  CHECK(two == std::vector<float>(2, 5.0f));
  fill_async(s, b, 8.0f);
  fill(b, 3.0f);
  CHECK(fake.pending(s.raw()) == 0);
  b.copy_to(h);
  CHECK(h == std::vector<float>(4, 3.0f));
  fill_async(s, b, 2.0f);
  fill_bytes(b.subspan(0, 1), 0);
  fake.hold(s.raw(), 0);
  s.synchronize();
  b.copy_to(h);
  CHECK(h == std::vector<float>{0.0f, 2.0f, 2.0f, 2.0f});
  // Two stream-ordered buffers on different streams: after both.
  Stream t(ctx);
  auto c = DeviceBuffer<float>::allocate_async(t, 4);
  fake.hold(t.raw(), 1);
  fill_async(t, c, 6.0f);
  copy(b, c);
  CHECK(fake.pending(t.raw()) == 0);
  b.copy_to(h);
  CHECK(h == std::vector<float>(4, 6.0f));
  fake.hold(t.raw(), 0);
}

TEST_CASE_FIXTURE(StreamTest, "issue 30.1: copy(stream, ...), fill(stream, ...) and fill_bytes(stream, ...) wait for the stream's pending work (the README's pattern)") {
  for (const bool non_blocking : {true, false}) {
    Stream q(ctx, {.non_blocking = non_blocking});
    DeviceBuffer<float> x(ctx, 4), y(ctx, 4);  // synchronous allocations: no stream of their own
    std::vector<float> host(4, 2.0f), out(4, 0.0f);
    fill(y, 0.0f);
    fake.hold(q.raw(), 1);
    copy_async(q, x, host);
    copy_async(q, y, x);  // y written on q, as the README's kernel writes it
    copy(q, out, y);      // enqueued after them, and waited for
    CHECK(out == std::vector<float>(4, 2.0f));
    CHECK(fake.pending(q.raw()) == 0);
    fake.hold(q.raw(), 1);
    fill_async(q, y, 4.0f);
    fill(q, x, 1.0f);
    copy(q, out, y);
    CHECK(out == std::vector<float>(4, 4.0f));
    fill_bytes_async(q, y, 0xff);
    fill_bytes(q, y, 0);
    copy(q, out, y);
    CHECK(out == std::vector<float>(4, 0.0f));
    copy(q, out, x);
    CHECK(out == std::vector<float>(4, 1.0f));
    fake.hold(q.raw(), 0);
  }
}

TEST_CASE_FIXTURE(ContextTest, "issue 30.1: allocate_async and free_on refuse the per-thread default stream; is_same_queue never calls two threads' per-thread queues the same") {
  Stream per_thread = Stream::per_thread_default(ctx);
  const Error e = error_of([&] { (void)DeviceBuffer<int>::allocate_async(per_thread, 16); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(e.call() == "oxicuda::DeviceBuffer::allocate_async");
  CHECK(e.detail().find("the per-thread default stream is a different queue on every thread") == 0);
  CHECK(fake.calls("cuMemAllocAsync") == 0);
  Stream own(ctx);
  auto b = DeviceBuffer<int>::allocate_async(own, 16);
  const Error f = error_of([&] { b.free_on(per_thread); });
  CHECK(f.call() == "oxicuda::DeviceBuffer::free_on");
  CHECK(b.device_span().stream() == own.raw());
  CHECK_NOTHROW(b.free_on(Stream::legacy_default(ctx)));  // one queue of the context, for every thread
  // A handle to the per-thread stream made on another thread names that
  // thread's queue there, and this thread's here: never the same queue.
  Stream theirs;
  std::thread([&] { theirs = Stream::per_thread_default(ctx); }).join();
  CHECK_FALSE(per_thread.is_same_queue(theirs));
  CHECK_FALSE(per_thread.is_same_queue(per_thread));
  // The legacy default stream: one queue per context.
  Context other = Context::create(Device::get(0));
  CHECK(Stream::legacy_default(ctx).is_same_queue(Stream::legacy_default(ctx)));
  CHECK_FALSE(Stream::legacy_default(ctx).is_same_queue(Stream::legacy_default(other)));
  CHECK(own.is_same_queue(Stream(own)));
}

TEST_CASE_FIXTURE(StreamTest, "issue 30.4: a span whose size in bytes overflows is an Error, not a zero-byte copy") {
  DeviceBuffer<double> real(ctx, 4);
  const DeviceSpan<double> huge(real.device_ptr(), std::size_t{1} << 61, ctx.raw());
  CHECK(huge.size_bytes() == static_cast<std::size_t>(-1));  // not 0
  CHECK_FALSE(huge.size_fits());
  for (const Error& e : {error_of([&] { copy(huge, huge); }), error_of([&] { fill_bytes(huge, 0); }),
                         error_of([&] { fill_bytes_async(s, huge, 0); }), error_of([&] { copy_async(s, huge, huge); })}) {
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.detail() == "the device span has 2305843009213693952 elements of 8 bytes: more bytes than a size_t "
                        "holds; its count is wrong");
  }
  CHECK(fake.calls("cuMemsetD8Async") == 0);
  CHECK(fake.calls("cuMemcpyDtoDAsync") == 0);
}

TEST_CASE_FIXTURE(StreamTest, "issue 30.4: fills of a moved-from or default-constructed DeviceBuffer are an Error naming the type") {
  DeviceBuffer<float> a(ctx, 4);
  DeviceBuffer<float> taken = std::move(a);
  DeviceBuffer<float> never;
  for (DeviceBuffer<float>* b : {&a, &never}) {  // NOLINT(bugprone-use-after-move)
    for (const Error& e : {error_of([&] { fill_async(s, *b, 1.0f); }), error_of([&] { fill_bytes_async(s, *b, 0); }),
                           error_of([&] { fill(*b, 1.0f); }), error_of([&] { fill_bytes(*b, 0); }),
                           error_of([&] { fill(s, *b, 1.0f); }),
                           error_of([&] { copy(*b, std::vector<float>()); })}) {
      CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
      CHECK(e.detail() ==
            "this oxicuda::DeviceBuffer is empty (default-constructed or moved-from); it has no driver handle");
    }
  }
  CHECK(fake.calls("cuMemsetD32Async") == 0);
  // An empty buffer of a context is no such handle: its fills do nothing.
  DeviceBuffer<float> empty(ctx, 0);
  CHECK_NOTHROW(fill(empty, 1.0f));
  CHECK_NOTHROW(fill_async(s, empty, 1.0f));
  auto empty_ordered = DeviceBuffer<float>::allocate_async(s, 0);
  CHECK_NOTHROW(fill_bytes(empty_ordered, 0));
}

TEST_CASE_FIXTURE(ContextTest, "issue 30.5: a PinnedBuffer allocated mapped has the device's address of its memory") {
  PinnedBuffer<float> mapped(ctx, 16, {.device_map = true});
  CHECK(mapped.mapped());
  CHECK(mapped.device_ptr() == reinterpret_cast<std::uintptr_t>(mapped.data()));  // the fake: unified addressing
  const DeviceSpan<float> span = mapped.mapped_span();
  CHECK(span.device_ptr() == mapped.device_ptr());
  CHECK(span.size() == 16);
  CHECK(span.context() == ctx.raw());
  CHECK(fake.calls("cuMemHostGetDevicePointer") == 1);
  PinnedBuffer<float> plain(ctx, 16);
  CHECK_FALSE(plain.mapped());
  const Error e = error_of([&] { (void)plain.mapped_span(); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_MAPPED);
  CHECK(e.detail() == "this PinnedBuffer was not allocated mapped: allocate it with {.device_map = true}");
  PinnedBuffer<float> moved = std::move(mapped);
  CHECK(moved.mapped());
  CHECK_FALSE(mapped.mapped());  // NOLINT(bugprone-use-after-move)
  DeviceBuffer<float> device(ctx, 16);
  copy(device, moved);  // still a host range for copies
}
