// The GPU suite, part: issue 23's memory on a real driver: fills of every
// element width, with no kernel of oxicuda's.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

// Fills a buffer of `n` T with `a`, then [first, first + count) with `b`
// (stream-ordered, then synchronously), and reads it back: every element
// must be `a` outside that span and `b` inside, bit for bit.
template <class T>
void check_fill(const Stream& s, std::size_t n, T a, T b, std::size_t first, std::size_t count) {
  DeviceBuffer<T> buf(ctx(), n);
  fill_async(s, buf, a);
  s.synchronize();
  fill(buf.subspan(first, count), b);
  std::vector<T> host(n);
  copy(std::span<T>(host), buf);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T want = i >= first && i < first + count ? b : a;
    if (std::memcmp(&host[i], &want, sizeof(T)) != 0) ++wrong;
  }
  CHECK_MESSAGE(wrong == 0, sizeof(T), "-byte elements: ", wrong, " of ", n, " wrong");
}

}  // namespace

TEST_CASE("issue 23 (5): fills of 1-, 2-, 4- and 8-byte elements, halves that differ, on the real driver") {
  Stream s(ctx());
  const std::size_t n = (std::size_t{1} << 20) + 3;  // not a multiple of anything the driver may favour
  check_fill<std::int8_t>(s, n, -3, 5, 7, 1001);
  check_fill<std::uint16_t>(s, n, 0x3f80, 0xc000, 1, n - 2);      // bfloat16 1.0 and -2.0 as bit patterns
  check_fill<std::int16_t>(s, n, -2, 0x1234, n - 1, 1);
  check_fill<float>(s, n, 1.5f, -0.25f, 3, 4097);
  check_fill<double>(s, n, 1.0, -3.5, 11, n - 100);               // 0x3ff00000'00000000: the halves differ
  check_fill<std::int64_t>(s, n, 0x0000000700000007, -1, 0, 1);   // equal halves: one 32-bit fill
  check_fill<std::uint64_t>(s, n, 0x0123456789abcdefull, 0xfedcba9876543210ull, 1, n - 1);
  // Empty spans of each width: no error.
  DeviceBuffer<double> d(ctx(), 0);
  DeviceBuffer<std::int16_t> h(ctx(), 0);
  CHECK_NOTHROW(fill(d, 1.0));
  CHECK_NOTHROW(fill_async(s, h, std::int16_t{1}));
  CHECK_NOTHROW(s.synchronize());
}

TEST_CASE("issue 23 (3): __constant__ and __device__ variables set from the host, read and written by a kernel") {
  const char* const source = R"(
__constant__ float coef[2];
__device__ unsigned hits;
namespace ns { __device__ int bias; }
extern "C" __global__ void apply(float* y, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = coef[0] + coef[1] * y[i] + ns::bias;
    atomicAdd(&hits, 1u);
  }
}
)";
  const Module m = module_from_source(ctx(), source, {.name_expressions = {"&ns::bias"}});
  const DeviceSpan<float> coef = m.global<float>("coef");
  const DeviceSpan<unsigned> hits = m.global<unsigned>("hits");
  const DeviceSpan<int> bias = m.global<int>("&ns::bias");
  CHECK(coef.size() == 2);
  CHECK(hits.size() == 1);
  CHECK(bias.size() == 1);
  copy(coef, std::vector<float>{1.0f, 3.0f});
  fill(hits, 0u);
  copy(bias, std::vector<int>{10});
  constexpr unsigned n = 1000;
  DeviceBuffer<float> y(ctx(), n);
  fill(y, 2.0f);
  Stream s(ctx());
  launch(s, m.kernel<void(float*, unsigned)>("apply"), {.grid = 4, .block = 256}, y, n);
  std::vector<float> host(n);
  copy(s, std::span<float>(host), y);
  CHECK(host[0] == 17.0f);  // 1 + 3 * 2 + 10
  CHECK(host[n - 1] == 17.0f);
  std::vector<unsigned> count(1);
  copy(count, hits);
  CHECK(count[0] == n);
  // Bad input, from the real driver.
  CHECK_THROWS_WITH_AS((void)m.global<float>("nope"), doctest::Contains("no __device__ or __constant__ variable named 'nope'"),
                       Error);
  CHECK_THROWS_WITH_AS((void)m.global<double>("hits"), doctest::Contains("4 bytes (not a whole number of 8-byte"), Error);
}
