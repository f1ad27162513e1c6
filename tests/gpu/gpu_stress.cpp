// GPU stress: 64 streams x 1,000 launches, ordered only by cross-stream
// event waits, computing a 1-D diffusion over 64 segments (segment s of
// round r reads segments s-1, s, s+1 of round r-1). A missing or misplaced
// dependency reads stale or half-written data, which the bit-exact CPU
// reference catches. OXICUDA_STRESS_ROUNDS overrides the 1,000 rounds.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

// out[s*len+i] = 0.5*in[s*len+i] + 0.25*in[left*len+i] + 0.25*in[right*len+i],
// each product and sum rounded separately (no fma), as the CPU does.
constexpr const char* kStencilPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry stencil(.param .u64 out, .param .u64 in, .param .u32 seg, .param .u32 nseg, .param .u32 len)
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<10>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [out];
    ld.param.u64 %rd1, [in];
    ld.param.u32 %r0, [seg];
    ld.param.u32 %r1, [nseg];
    ld.param.u32 %r2, [len];
    add.u32 %r3, %r0, %r1;
    sub.u32 %r3, %r3, 1;
    rem.u32 %r3, %r3, %r1;
    add.u32 %r4, %r0, 1;
    rem.u32 %r4, %r4, %r1;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mov.u32 %r7, %tid.x;
    mad.lo.u32 %r8, %r5, %r6, %r7;
    mov.u32 %r9, %nctaid.x;
    mul.lo.u32 %r10, %r9, %r6;
$LOOP:
    setp.ge.u32 %p0, %r8, %r2;
    @%p0 bra $DONE;
    mad.lo.u32 %r11, %r0, %r2, %r8;
    mad.lo.u32 %r12, %r3, %r2, %r8;
    mad.lo.u32 %r13, %r4, %r2, %r8;
    mul.wide.u32 %rd2, %r11, 4;
    mul.wide.u32 %rd3, %r12, 4;
    mul.wide.u32 %rd4, %r13, 4;
    add.u64 %rd5, %rd1, %rd2;
    add.u64 %rd6, %rd1, %rd3;
    add.u64 %rd7, %rd1, %rd4;
    ld.global.f32 %f0, [%rd5];
    ld.global.f32 %f1, [%rd6];
    ld.global.f32 %f2, [%rd7];
    mul.rn.f32 %f3, %f0, 0f3F000000;
    mul.rn.f32 %f4, %f1, 0f3E800000;
    mul.rn.f32 %f5, %f2, 0f3E800000;
    add.rn.f32 %f6, %f3, %f4;
    add.rn.f32 %f7, %f6, %f5;
    add.u64 %rd8, %rd0, %rd2;
    st.global.f32 [%rd8], %f7;
    add.u32 %r8, %r8, %r10;
    bra $LOOP;
$DONE:
    ret;
}
)";

}  // namespace

TEST_CASE("stress: 64 streams x 1,000 launches chained by cross-stream events, against a CPU reference") {
  constexpr unsigned nseg = 64, len = 4096;
  unsigned rounds = 1000;
  if (const char* r = std::getenv("OXICUDA_STRESS_ROUNDS")) rounds = static_cast<unsigned>(std::atoi(r));
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed << ", rounds " << rounds);

  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> host(nseg * len);
  for (auto& v : host) v = dist(rng);

  ScopedCurrent current(ctx());
  Module m = Module::from_ptx(ctx(), kStencilPtx);
  auto stencil = m.kernel<void(float*, const float*, unsigned, unsigned, unsigned)>("stencil");
  std::vector<Stream> streams;
  std::vector<Event> done[2];  // done[r % 2][s]: segment s finished round r
  for (unsigned s = 0; s < nseg; ++s) {
    streams.emplace_back(ctx());
    done[0].emplace_back(ctx(), EventOptions{.timing = false});
    done[1].emplace_back(ctx(), EventOptions{.timing = false});
  }
  DeviceBuffer<float> buf[2] = {DeviceBuffer<float>(ctx(), host.size()), DeviceBuffer<float>(ctx(), host.size())};
  copy(buf[0], host);
  fill_bytes(buf[1], 0xff);

  for (unsigned r = 0; r < rounds; ++r) {
    const DeviceBuffer<float>& in = buf[r % 2];
    const DeviceBuffer<float>& out = buf[(r + 1) % 2];
    for (unsigned s = 0; s < nseg; ++s) {
      const Stream& q = streams[s];
      if (r > 0) {
        // Segments s-1 and s+1 of the last round: what this launch reads,
        // and the readers of what it overwrites. (Segment s itself is
        // ordered by the stream.)
        q.wait(done[(r - 1) % 2][(s + nseg - 1) % nseg]);
        q.wait(done[(r - 1) % 2][(s + 1) % nseg]);
      }
      launch(q, stencil, {.grid = 16, .block = 256}, out, in, s, nseg, len);
      q.record(done[r % 2][s]);
    }
  }
  for (const Stream& q : streams) q.synchronize();
  std::vector<float> gpu(host.size());
  copy(gpu, buf[rounds % 2]);

  std::vector<float> a = host, b(host.size());
  for (unsigned r = 0; r < rounds; ++r) {
    for (unsigned s = 0; s < nseg; ++s) {
      const unsigned left = (s + nseg - 1) % nseg, right = (s + 1) % nseg;
      for (unsigned i = 0; i < len; ++i) {
        const float c = a[s * len + i] * 0.5f;
        const float l = a[left * len + i] * 0.25f;
        const float rr = a[right * len + i] * 0.25f;
        const float t = c + l;
        b[s * len + i] = t + rr;
      }
    }
    a.swap(b);
  }
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &gpu[i], sizeof(float)) != 0 && mismatches++ == 0) first = i;
  INFO("first mismatch at " << first << ": gpu " << gpu[first] << ", cpu " << a[first]);
  CHECK(mismatches == 0);
  MESSAGE("stress: " << nseg << " streams x " << rounds << " launches, " << 2 * nseg * (rounds - 1)
                     << " cross-stream waits, bit-exact against the CPU");
}
