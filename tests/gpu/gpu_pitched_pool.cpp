// The GPU suite, part: issue 23's 2D (pitched) memory and copies, and
// memory pools of one's own, on a real driver.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <cstddef>
#include <string>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

const char* const kPitched = R"(
extern "C" __global__ void scale_rows(float* p, unsigned long long pitch, unsigned w, unsigned h, float a) {
  const unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) {
    float* row = (float*)((char*)p + y * pitch);
    row[x] = a * row[x] + (float)y;
  }
}
extern "C" __global__ void iota(int* p, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = (int)i * 3;
}
)";

}  // namespace

TEST_CASE("issue 23 (6): 2D copies and a kernel over pitched rows, against a CPU reference") {
  const Module m = module_from_source(ctx(), kPitched);
  const auto scale = m.kernel<void(float*, unsigned long long, unsigned, unsigned, float)>("scale_rows");
  Stream s(ctx());
  const unsigned w = 1000, h = 77;
  PitchedBuffer<float> p(ctx(), w, h);
  MESSAGE("cuMemAllocPitch: ", w, " floats a row -> pitch ", p.pitch_bytes(), " bytes");
  CHECK(p.pitch_bytes() >= w * sizeof(float));
  std::vector<float> host(std::size_t{w} * h);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 977) * 0.25f;
  copy_2d(p, view_2d(host, w, h));
  launch(s, scale, {.grid = {(w + 127) / 128, h}, .block = 128}, p.data(),
         static_cast<unsigned long long>(p.pitch_bytes()), w, h, 2.0f);
  // Into host rows of a wider matrix (a pitch of its own), ordered after the kernel.
  const std::size_t wide = w + 24;
  std::vector<float> matrix(wide * h, -7.0f);
  copy_2d(s, view_2d(matrix, w, h, wide * sizeof(float)), p);
  std::size_t wrong = 0, padding_touched = 0;
  for (std::size_t y = 0; y < h; ++y) {
    for (std::size_t x = 0; x < w; ++x)
      wrong += matrix[y * wide + x] != 2.0f * host[y * w + x] + static_cast<float>(y);
    for (std::size_t x = w; x < wide; ++x) padding_touched += matrix[y * wide + x] != -7.0f;
  }
  CHECK(wrong == 0);
  CHECK(padding_touched == 0);
  // Pitched to linear device memory, then a block of it, through pinned rows, async.
  DeviceBuffer<float> linear(ctx(), std::size_t{w} * h);
  copy_2d_async(s, view_2d(linear, w, h), p);
  PinnedBuffer<float> pinned(ctx(), 30 * 5);
  copy_2d_async(s, view_2d(pinned, 30, 5), view_2d(linear, w, h).block(100, 20, 30, 5));
  s.synchronize();
  wrong = 0;
  for (std::size_t y = 0; y < 5; ++y)
    for (std::size_t x = 0; x < 30; ++x)
      wrong += pinned[y * 30 + x] != 2.0f * host[(y + 20) * w + x + 100] + static_cast<float>(y + 20);
  CHECK(wrong == 0);
  // Doubles (8-byte accesses), device to device between two pitched buffers.
  PitchedBuffer<double> d1(ctx(), 33, 9), d2(ctx(), 33, 9);
  std::vector<double> dh(33 * 9);
  for (std::size_t i = 0; i < dh.size(); ++i) dh[i] = 1.0 + static_cast<double>(i) / 8.0;
  copy_2d(d1, view_2d(dh, 33, 9));
  copy_2d(d2, d1);
  std::vector<double> dback(33 * 9);
  copy_2d(view_2d(dback, 33, 9), d2);
  CHECK(dback == dh);
  // Bad extents are Errors before the driver sees them; the real driver's
  // own refusal of a pitch wider than its maximum is an Error too.
  CHECK_THROWS_AS(copy_2d(p, view_2d(host, w, h - 1)), Error);
  try {
    copy_2d(DeviceSpan2D<float>(p.device_ptr(), 1, 2, std::size_t{1} << 40), view_2d(host, 1, 2));
    FAIL("a pitch of 1 TiB was accepted");
  } catch (const Error& e) {
    MESSAGE("a 1 TiB pitch: ", std::string(e.what()));
  }
}

TEST_CASE("issue 23 (9): a pool of one's own: allocation, access, limits, and its release") {
  const Device dev = ctx().device();
  const Module m = module_from_source(ctx(), kPitched);
  const auto iota = m.kernel<void(int*, unsigned)>("iota");
  Stream s(ctx());
  MemoryPool pool = MemoryPool::create(dev, {.release_threshold = 64u << 20});
  CHECK(pool.owns());
  CHECK(pool.release_threshold() == 64u << 20);
  CHECK(pool.access(dev) == PoolAccess::read_write);
  const unsigned n = 1u << 20;
  {
    auto b = DeviceBuffer<int>::allocate_async(s, n, pool);
    CHECK(pool.used_bytes() >= n * sizeof(int));
    launch(s, iota, {.grid = n / 256, .block = 256}, b, n);
    std::vector<int> back(n);
    copy(back, b);  // (on the buffer's stream, after the kernel)
    std::size_t wrong = 0;
    for (unsigned i = 0; i < n; ++i) wrong += back[i] != static_cast<int>(i) * 3;
    CHECK(wrong == 0);
  }
  s.synchronize();
  CHECK(pool.used_bytes() == 0);
  CHECK(pool.reserved_bytes() >= n * sizeof(int));  // kept: under the release threshold
  pool.trim_to(0);
  MESSAGE("after trim_to(0): reserved ", pool.reserved_bytes(), " bytes");
  // Setting the owner's own access: what the driver says.
  try {
    pool.set_access(dev, PoolAccess::read_write);
    MESSAGE("set_access(own device, read_write): accepted");
  } catch (const Error& e) {
    MESSAGE("set_access(own device, read_write): ", std::string(e.what()));
  }
  try {
    pool.set_access(dev, PoolAccess::read);
    MESSAGE("set_access(own device, read): accepted; access now ", static_cast<int>(pool.access(dev)));
  } catch (const Error& e) {
    MESSAGE("set_access(own device, read): ", std::string(e.what()));
  }
  // Dropped with memory still drawn from it: that memory stays usable.
  auto kept = DeviceBuffer<int>::allocate_async(s, 256, pool);
  pool = MemoryPool();
  launch(s, iota, {.grid = 1, .block = 256}, kept, 256u);
  std::vector<int> back(256);
  copy(back, kept);
  CHECK(back[255] == 765);
  kept.reset();
  s.synchronize();
  // A pool with a maximum size refuses more.
  const MemoryPool small = MemoryPool::create(dev, {.max_size = 2u << 20});
  try {
    auto big = DeviceBuffer<char>::allocate_async(s, 64u << 20, small);
    s.synchronize();
    FAIL("64 MiB from a pool of at most 2 MiB was allocated");
  } catch (const Error& e) {
    MESSAGE("64 MiB from a 2 MiB pool: ", std::string(e.what()));
    CHECK(e.call() == "cuMemAllocFromPoolAsync");
  }
  s.synchronize();
}
