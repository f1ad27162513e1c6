// The GPU suite, part two: typed kernels, launch configurations, occupancy,
// buffers and copies on a real device.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

// z = a*x + y over n elements, grid-stride.
constexpr const char* kSaxpyPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry saxpy(.param .u64 z, .param .u64 x, .param .u64 y, .param .f32 a, .param .u32 n)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<10>;
    .reg .f32 %f<5>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [z];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.f32 %f0, [a];
    ld.param.u32 %r0, [n];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r4, %r1, %r2, %r3;
    mov.u32 %r5, %nctaid.x;
    mul.lo.u32 %r6, %r5, %r2;
$LOOP:
    setp.ge.u32 %p0, %r4, %r0;
    @%p0 bra $DONE;
    mul.wide.u32 %rd3, %r4, 4;
    add.u64 %rd4, %rd1, %rd3;
    add.u64 %rd5, %rd2, %rd3;
    add.u64 %rd6, %rd0, %rd3;
    ld.global.f32 %f1, [%rd4];
    ld.global.f32 %f2, [%rd5];
    fma.rn.f32 %f3, %f0, %f1, %f2;
    st.global.f32 [%rd6], %f3;
    add.u32 %r4, %r4, %r6;
    bra $LOOP;
$DONE:
    ret;
}
)";

// out[block] = the block's rank in its cluster (Hopper, sm_90).
constexpr const char* kClusterPtx = R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry cluster_rank(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %cluster_ctarank;
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd1, %r1, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r0;
    ret;
}
)";

// Copies n words through dynamic shared memory (thread i: smem[i] = in[i]; out[i] = smem[i]).
constexpr const char* kSharedPtx = R"(.version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 smem[];
.visible .entry through_shared(.param .u64 out, .param .u64 in, .param .u32 words)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [out];
    ld.param.u64 %rd1, [in];
    ld.param.u32 %r0, [words];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, smem;
$LOOP:
    setp.ge.u32 %p0, %r1, %r0;
    @%p0 bra $DONE;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r4, [%rd3];
    mad.lo.u32 %r5, %r1, 4, %r3;
    st.shared.u32 [%r5], %r4;
    ld.shared.u32 %r6, [%r5];
    add.u64 %rd4, %rd0, %rd2;
    st.global.u32 [%rd4], %r6;
    add.u32 %r1, %r1, %r2;
    bra $LOOP;
$DONE:
    ret;
}
)";

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

}  // namespace

TEST_CASE("typed launch: SAXPY on 2^26 random floats matches a CPU reference") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  Module m = Module::from_ptx(ctx(), kSaxpyPtx);
  auto saxpy = m.kernel<void(float*, const float*, const float*, float, unsigned)>("saxpy");
  const unsigned n = 1u << 26;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n), y(n), z(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : y) v = dist(rng);
  const float a = dist(rng) * 4.0f;
  DeviceBuffer<float> dx(ctx(), n), dy(ctx(), n), dz(ctx(), n);
  copy_async(s, dx, x);
  copy_async(s, dy, y);
  fill_bytes_async(s, dz, 0xff);  // poison: NaN everywhere until written
  const BlockSizeSuggestion b = saxpy.function().suggested_block_size();
  launch(s, saxpy, {.grid = static_cast<unsigned>(b.min_grid_size), .block = static_cast<unsigned>(b.block_size)}, dz,
         dx, dy, a, n);
  copy_async(s, z, dz);
  s.synchronize();
  double err = 0, ref = 0;
  std::size_t non_finite = 0;
  for (unsigned i = 0; i < n; ++i) {
    const double want = double(a) * double(x[i]) + double(y[i]);
    non_finite += !std::isfinite(z[i]);
    err += (double(z[i]) - want) * (double(z[i]) - want);
    ref += want * want;
  }
  const double rel = std::sqrt(err / ref);
  MESSAGE("saxpy: n = 2^26, block " << b.block_size << ", grid " << b.min_grid_size << ", relative error " << rel);
  CHECK(non_finite == 0);
  CHECK(rel <= 1e-6);
}

TEST_CASE("typed kernel: the driver's parameter layout is checked at lookup") {
  Module m = Module::from_ptx(ctx(), kSaxpyPtx);
  CHECK_NOTHROW((void)m.kernel<void(float*, const float*, const float*, float, unsigned)>("saxpy"));
  try {
    (void)m.kernel<void(float*, const float*, float, unsigned)>("saxpy");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.call() == "oxicuda::Module::kernel");
    CHECK(e.detail().find("but the module's kernel takes 5 parameters (8 bytes at 0, 8 bytes at 8, 8 bytes at 16, "
                          "4 bytes at 24, 4 bytes at 28)") != std::string::npos);
    MESSAGE(std::string(e.what()));
  }
}

TEST_CASE("copies: every direction round-trips random bytes, sync and async, pageable and pinned") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  const std::size_t n = (std::size_t{64} << 20) + 13;  // 64 MiB and an odd tail
  const auto in = random_bytes(n, 7);
  DeviceBuffer<std::uint8_t> d1(ctx(), n), d2(ctx(), n);
  PinnedBuffer<std::uint8_t> pin_in(ctx(), n), pin_out(ctx(), n);
  std::memcpy(pin_in.data(), in.data(), n);
  std::vector<std::uint8_t> out(n);

  copy(d1, in);  // pageable H -> D
  copy(d2, d1);  // D -> D
  copy(out, d2);  // D -> pageable H
  CHECK(out == in);

  fill_bytes(d1, 0);
  fill_bytes(d2, 0);
  copy_async(s, d1, pin_in);   // pinned H -> D
  copy_async(s, d2, d1);       // D -> D
  copy_async(s, pin_out, d2);  // D -> pinned H
  s.synchronize();
  CHECK(std::memcmp(pin_out.data(), in.data(), n) == 0);

  std::fill(out.begin(), out.end(), 0);
  fill_bytes_async(s, d1, 0);
  copy_async(s, d1, in);   // pageable H -> D, async
  copy_async(s, out, d1);  // D -> pageable H, async
  s.synchronize();
  CHECK(out == in);

  // Fills of 1 and 4 bytes.
  DeviceBuffer<std::uint32_t> words(ctx(), 1000);
  fill_async(s, words, 0xdeadbeefu);
  std::vector<std::uint32_t> wh(1000);
  copy_async(s, wh, words);
  s.synchronize();
  CHECK(wh[0] == 0xdeadbeefu);
  CHECK(wh[999] == 0xdeadbeefu);
}

TEST_CASE("stream-ordered allocation: allocated on one stream, used and freed on another after an event") {
  ScopedCurrent current(ctx());
  Stream producer(ctx()), consumer(ctx());
  MemoryPool pool = MemoryPool::device_default(Device::get(0));
  const std::uint64_t threshold = pool.release_threshold();
  pool.set_release_threshold(std::uint64_t{256} << 20);
  CHECK(pool.release_threshold() == (std::uint64_t{256} << 20));
  const auto in = random_bytes(1 << 20, 11);
  std::vector<std::uint8_t> out(1 << 20);
  {
    auto buf = DeviceBuffer<std::uint8_t>::allocate_async(producer, in.size());
    copy_async(producer, buf, in);
    Event ready(ctx(), {.timing = false});
    producer.record(ready);
    consumer.wait(ready);
    copy_async(consumer, out, buf);
    buf.free_on(consumer);
    CHECK(pool.used_bytes() >= in.size());
  }
  consumer.synchronize();
  producer.synchronize();
  CHECK(out == in);
  CHECK(pool.used_bytes() == 0);
  CHECK(pool.reserved_bytes() > 0);  // kept under the release threshold
  pool.trim_to(0);
  CHECK(pool.reserved_bytes() == 0);
  pool.set_release_threshold(threshold);
}

TEST_CASE("cluster launch on Hopper: clusters of 2 blocks, each block writes its rank in the cluster") {
  if (Device::get(0).compute_capability() < ComputeCapability{9, 0}) {
    MESSAGE("skipped: clusters need compute capability 9.0");
    return;
  }
  ScopedCurrent current(ctx());
  Stream s(ctx());
  Module m = Module::from_ptx(ctx(), kClusterPtx);
  auto k = m.kernel<void(unsigned*)>("cluster_rank");
  DeviceBuffer<unsigned> out(ctx(), 64);
  fill(out, 0xffffffffu);
  launch(s, k, {.grid = 64, .block = 32, .cluster = {2}}, out);
  std::vector<unsigned> host(64);
  copy_async(s, host, out);
  s.synchronize();
  for (unsigned i = 0; i < 64; ++i) {
    INFO("block " << i);
    CHECK(host[i] == i % 2);
  }
  // Clusters must divide the grid: the driver refuses, and the error says what was asked.
  CHECK_THROWS_WITH_AS(launch(s, k, {.grid = 63, .block = 32, .cluster = {2}}, out),
                       doctest::Contains("cluster 2x1x1"), Error);
}

TEST_CASE("cooperative launch and dynamic shared memory above 48 KiB") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  Module m = Module::from_ptx(ctx(), kSharedPtx);
  auto k = m.kernel<void(unsigned*, const unsigned*, unsigned)>("through_shared");
  const unsigned words = 100 * 1024 / 4;  // 100 KiB
  std::vector<unsigned> in(words), out(words, 0);
  for (unsigned i = 0; i < words; ++i) in[i] = i * 2654435761u;
  DeviceBuffer<unsigned> din(ctx(), words), dout(ctx(), words);
  copy(din, in);
  launch(s, k, {.grid = 1, .block = 256, .shared_bytes = words * 4}, dout, din, words);
  copy_async(s, out, dout);
  s.synchronize();
  CHECK(out == in);
  CHECK(k.function().allowed_dynamic_shared_bytes() == words * 4);
  // Cooperative: a grid no larger than what fits at once.
  const int per_sm = k.function().max_active_blocks_per_multiprocessor(256, 1024);
  const unsigned grid = static_cast<unsigned>(per_sm * Device::get(0).multiprocessor_count());
  fill(dout, 0u);
  launch(s, k, {.grid = grid, .block = 256, .shared_bytes = 1024, .cooperative = true}, dout, din, 256u);
  s.synchronize();
  copy(out, dout);
  CHECK(out[255] == in[255]);
  CHECK(out[256] == 0u);
}

TEST_CASE("occupancy: the suggested block size reaches the best occupancy the driver reports") {
  Module m = Module::from_ptx(ctx(), kSaxpyPtx);
  Function f = m.function("saxpy");
  const BlockSizeSuggestion s = f.suggested_block_size();
  const int sms = Device::get(0).multiprocessor_count();
  REQUIRE(s.block_size > 0);
  const int blocks = f.max_active_blocks_per_multiprocessor(s.block_size);
  CHECK(s.min_grid_size == blocks * sms);
  int best = 0;
  for (int b = 32; b <= 1024; b += 32) best = std::max(best, b * f.max_active_blocks_per_multiprocessor(b));
  CHECK(s.block_size * blocks == best);
  MESSAGE("saxpy occupancy: block " << s.block_size << " x " << blocks << " blocks per SM, min grid " << s.min_grid_size);
  const BlockSizeSuggestion limited = f.suggested_block_size(0, 128);
  CHECK(limited.block_size <= 128);
}
