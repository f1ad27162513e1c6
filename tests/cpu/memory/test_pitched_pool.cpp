// 2D memory and copies, and memory pools of one's own (issue 23, items 6
// and 9), on the fake driver: its device memory is host memory, so a 2D
// copy really moves rows, and its pools count what is drawn from them.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {
bool mentions(const Error& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }
}  // namespace

TEST_CASE_FIXTURE(StreamTest, "issue 23 (6): a PitchedBuffer's rows round-trip through host rows, pitched and linear") {
  const std::size_t w = 37, h = 5;
  std::vector<int> host(w * h);
  std::iota(host.begin(), host.end(), 1);
  {
    PitchedBuffer<int> p(ctx, w, h);
    REQUIRE(p.width() == w);
    REQUIRE(p.height() == h);
    CHECK(p.pitch_bytes() >= w * sizeof(int));
    CHECK(p.pitch_bytes() % 512 == 0);  // the fake pads rows to 512 bytes
    CHECK(fake.calls("cuMemAllocPitch") == 1);
    copy_2d(p, view_2d(host, w, h));
    // Rows are pitch_bytes() apart on the device: row 3 starts there.
    std::vector<int> row3(w);
    copy(row3, p.row(3));
    CHECK(row3.front() == static_cast<int>(3 * w + 1));
    CHECK(row3.back() == static_cast<int>(4 * w));
    CHECK(p.row(h).empty());  // past the last row
    // Pitched to linear device memory and back to the host.
    DeviceBuffer<int> linear(ctx, w * h);
    copy_2d(s, view_2d(linear, w, h), p);
    std::vector<int> back(w * h);
    copy(back, linear);
    CHECK(back == host);
    // Stream-ordered: into a host rectangle of a wider matrix (its own pitch).
    const std::size_t wide = 50;
    std::vector<int> matrix(wide * h, -1);
    copy_2d_async(s, view_2d(matrix, w, h, wide * sizeof(int)), p);
    s.synchronize();
    for (std::size_t y = 0; y < h; ++y) {
      CHECK(matrix[y * wide] == static_cast<int>(y * w + 1));
      CHECK(matrix[y * wide + w - 1] == static_cast<int>(y * w + w));
      CHECK(matrix[y * wide + w] == -1);  // the padding of the host rows is untouched
    }
    // A block: columns 10..19 of rows 1..3, to a packed 10 x 3 host matrix.
    std::vector<int> block(30);
    copy_2d(view_2d(block, 10, 3), p.block(10, 1, 10, 3));
    CHECK(block[0] == static_cast<int>(1 * w + 11));
    CHECK(block[29] == static_cast<int>(3 * w + 20));
    CHECK(p.block(30, 4, 100, 100).width() == 7);  // clamped
    CHECK(p.block(30, 4, 100, 100).height() == 1);
    CHECK(fake.calls("cuMemcpy2DAsync") == 4);
    PitchedBuffer<int> moved = std::move(p);
    CHECK(p.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
    CHECK(p.device_ptr() == 0);
    CHECK(fake.live("memory") - at_start.memory == 2);
  }
  CHECK(fake.calls("cuMemFree") == 2);
  CHECK(fake.live("memory") - at_start.memory == 0);
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (6): 2D extents are checked before the driver sees them") {
  PitchedBuffer<float> p(ctx, 16, 4);
  std::vector<float> host(64);
  const long copies = fake.calls("cuMemcpy2DAsync");
  // Different extents.
  Error e = error_of([&] { copy_2d(p, view_2d(host, 16, 3)); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(mentions(e, "extent mismatch: the destination is 16 x 4 elements (width x height), the source 16 x 3"));
  // A row wider than its pitch: a view, and a raw span.
  e = error_of([&] { (void)view_2d(host, 16, 2, 60); });
  CHECK(mentions(e, "a row is wider than the pitch"));
  e = error_of([&] { copy_2d(p, HostSpan2D<float>(host.data(), 16, 4, 32)); });
  CHECK(mentions(e, "the source: 4 rows of 16 elements of 4 bytes, a pitch of 32 bytes: a row is wider than the pitch"));
  e = error_of([&] { copy_2d(DeviceSpan2D<float>(p.device_ptr(), 16, 4, 8), view_2d(host, 16, 4)); });
  CHECK(mentions(e, "the destination: "));
  // Rows that do not fit the range, and a pitch that misaligns them.
  e = error_of([&] { (void)view_2d(host, 16, 5); });
  CHECK(mentions(e, "5 rows of 16 elements, 64 bytes apart, reach 320 bytes; the range has 256"));
  e = error_of([&] { (void)view_2d(host, 3, 2, 14); });
  CHECK(mentions(e, "not a multiple of the element's alignment (4 bytes)"));
  DeviceBuffer<float> linear(ctx, 10);
  e = error_of([&] { (void)view_2d(linear, 4, 3); });
  CHECK(mentions(e, "reach 48 bytes; the range has 40"));
  // Moved-from and default-constructed buffers, and an empty context.
  PitchedBuffer<float> gone = std::move(p);
  e = error_of([&] { copy_2d(p, view_2d(host, 0, 0)); });  // NOLINT(bugprone-use-after-move)
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(mentions(e, "oxicuda::PitchedBuffer"));
  CHECK(error_of([&] { PitchedBuffer<float> x(Context(), 4, 4); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)view_2d(DeviceBuffer<float>(), 1, 1); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  // An empty extent is no copy at all; an empty buffer allocates nothing.
  copy_2d(gone.block(0, 0, 0, 4), view_2d(host, 0, 4));
  PitchedBuffer<float> none(ctx, 0, 7);
  CHECK(none.empty());
  CHECK(fake.calls("cuMemAllocPitch") == 1);
  CHECK(fake.calls("cuMemcpy2DAsync") == copies);
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (6): a 2D copy the driver refuses is its Error, naming the call") {
  PitchedBuffer<double> p(ctx, 8, 2);
  std::vector<double> host(16);
  fake.fail("cuMemcpy2DAsync", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  const Error e = error_of([&] { copy_2d(view_2d(host, 8, 2), p); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(mentions(e, "cuMemcpy2DAsync"));
  fake.fail("cuMemAllocPitch", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(error_of([&] { PitchedBuffer<char> q(ctx, 100, 100); }).result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (9): a pool of one's own: allocations drawn from it, destroyed by its last handle") {
  {
    const std::uint64_t default_used = MemoryPool::device_default(Device::get(0)).used_bytes();
    const MemoryPool pool = MemoryPool::create(Device::get(0), {.release_threshold = 1 << 20});
    REQUIRE(pool);
    CHECK(pool.owns());
    CHECK(pool.device() == Device::get(0));
    CHECK(pool != MemoryPool::device_default(Device::get(0)));
    CHECK(!MemoryPool::device_default(Device::get(0)).owns());
    CHECK(pool.release_threshold() == 1 << 20);
    CHECK(pool.access(Device::get(0)) == PoolAccess::read_write);
    CHECK(fake.live("pool") - at_start.pool == 1);
    {
      auto b = DeviceBuffer<float>::allocate_async(s, 256, pool);
      CHECK(b.stream_ordered());
      CHECK(pool.used_bytes() == 1024);
      CHECK(MemoryPool::device_default(Device::get(0)).used_bytes() == default_used);
      fill(b, 2.0f);
      std::vector<float> back(256);
      copy(back, b);
      CHECK(back[255] == 2.0f);
      const MemoryPool copy_of = pool;  // copies share the pool
      CHECK(copy_of == pool);
    }
    s.synchronize();
    CHECK(pool.used_bytes() == 0);
    CHECK(fake.calls("cuMemAllocFromPoolAsync") == 1);
    CHECK(fake.calls("cuMemAllocAsync") == 0);
    CHECK(fake.calls("cuMemPoolDestroy") == 0);
  }
  CHECK(fake.calls("cuMemPoolDestroy") == 1);
  CHECK(fake.live("pool") - at_start.pool == 0);
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (9): a pool dropped with memory still drawn from it lives until that memory is freed") {
  auto pool = std::make_unique<MemoryPool>(MemoryPool::create(Device::get(0)));
  auto b = DeviceBuffer<int>::allocate_async(s, 64, *pool);
  pool.reset();
  CHECK(fake.calls("cuMemPoolDestroy") == 1);
  CHECK(fake.live("pool") - at_start.pool == 1);  // (the driver's rule: released with its last allocation)
  fill(b, 5);
  b.reset();
  s.synchronize();
  CHECK(fake.live("pool") - at_start.pool == 0);
}

TEST_CASE_FIXTURE(StreamTest, "issue 23 (9): a pool's limits and empty handles are Errors that lose nothing") {
  const MemoryPool pool = MemoryPool::create(Device::get(0), {.max_size = 4096});
  auto a = DeviceBuffer<char>::allocate_async(s, 4000, pool);
  const Error e = error_of([&] { auto b = DeviceBuffer<char>::allocate_async(s, 200, pool); });
  CHECK(e.result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(mentions(e, "cuMemAllocFromPoolAsync"));
  const MemoryPool empty;
  CHECK(!empty);
  const Error e2 = error_of([&] { auto b = DeviceBuffer<char>::allocate_async(s, 1, empty); });
  CHECK(e2.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(mentions(e2, "oxicuda::MemoryPool"));
  CHECK(error_of([&] { (void)empty.used_bytes(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { empty.set_access(Device::get(0), PoolAccess::read); }).result() ==
        ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { empty.trim_to(0); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(fake.calls("cuMemPoolSetAccess") == 0);
  fake.fail("cuMemPoolCreate", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(error_of([&] { (void)MemoryPool::create(Device::get(0)); }).result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  // The release threshold is set after the pool is made: if that fails, the pool is destroyed.
  fake.fail("cuMemPoolSetAttribute", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { (void)MemoryPool::create(Device::get(0), {.release_threshold = 1}); }).result() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(fake.live("pool") - at_start.pool == 1);
}

TEST_CASE_FIXTURE(TwoDevices, "issue 23 (9): a peer device reaches a pool once it is given access") {
  const Device d0 = Device::get(0), d1 = Device::get(1);
  {
    const MemoryPool pool = MemoryPool::create(d0);
    CHECK(pool.access(d1) == PoolAccess::none);
    Context c1 = Context::primary(d1);
    Stream s1(c1);
    // A stream on device 1 cannot draw from device 0's pool without access.
    CHECK(error_of([&] { auto b = DeviceBuffer<int>::allocate_async(s1, 8, pool); }).result() ==
          ffi::CUDA_ERROR_INVALID_VALUE);
    pool.set_access(d1, PoolAccess::read_write);
    CHECK(pool.access(d1) == PoolAccess::read_write);
    { auto b = DeviceBuffer<int>::allocate_async(s1, 8, pool); }
    s1.synchronize();
    pool.set_access(d1, PoolAccess::read);
    CHECK(pool.access(d1) == PoolAccess::read);
    // The pool's own device keeps read-write access; no peer access, no access.
    CHECK(error_of([&] { pool.set_access(d0, PoolAccess::read); }).result() == ffi::CUDA_ERROR_INVALID_DEVICE);
    fake.set_peer_access(1, 0, 0);
    const Error e = error_of([&] { pool.set_access(d1, PoolAccess::read_write); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_DEVICE);
    CHECK(mentions(e, "cuMemPoolSetAccess"));
    CHECK(pool.access(d1) == PoolAccess::read);  // unchanged
    fake.set_peer_access(1, 0, 1);
  }
  CHECK(fake.live("pool") - at_start.pool == 0);
}
