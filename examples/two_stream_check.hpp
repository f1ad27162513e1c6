// The two-stream event-ordering check from the Rust original
// (seed/stream.rs, `two_streams_concurrent_and_cross_stream_event`), on a
// real device: double buffer A on stream A and buffer B on stream B
// concurrently, record an event on A, make B wait for it, double A again on
// B; then A must hold 4x and B 2x its input, element by element.
// Shared by oxicuda-doctor and the GPU test suite.
#pragma once

#include "oxicuda.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace oxicuda_examples {

// Grid-stride in-place doubling kernel, arch-portable (.target sm_70).
inline constexpr const char* kDoublePtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry dbl(
    .param .u64 ptr,
    .param .u32 n
)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<2>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [ptr];
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
    mul.wide.u32 %rd1, %r4, 4;
    add.u64 %rd2, %rd0, %rd1;
    ld.global.f32 %f0, [%rd2];
    add.f32 %f0, %f0, %f0;
    st.global.f32 [%rd2], %f0;
    add.u32 %r4, %r4, %r6;
    bra $LOOP;
$DONE:
    ret;
}
)";

struct CheckResult {
  bool passed = false;
  std::string message;  // what failed, or a one-line summary
};

// Runs the check in `ctx` (made current for its duration). Throws
// oxicuda::Error when a driver call fails.
inline CheckResult two_stream_check(const oxicuda::Context& ctx) {
  using namespace oxicuda;
  ScopedCurrent current(ctx);
  Stream stream_a(ctx), stream_b(ctx);
  Module module = Module::from_ptx(ctx, kDoublePtx);
  Function dbl = module.function("dbl");

  constexpr unsigned n = 2048;
  std::vector<float> a_in(n), b_in(n);
  for (unsigned i = 0; i < n; ++i) {
    a_in[i] = static_cast<float>(i);
    b_in[i] = static_cast<float>(i) + 1000.0f;
  }
  DeviceBuffer<float> da(ctx, n), db(ctx, n);
  da.copy_from(a_in);
  db.copy_from(b_in);

  // Concurrent: double A on stream A, double B on stream B.
  launch(stream_a, dbl, 8, 128, 0, da.device_ptr(), n);
  launch(stream_b, dbl, 8, 128, 0, db.device_ptr(), n);
  // Cross-stream dependency: B waits for A's first doubling, then doubles A again.
  Event evt(ctx, {.timing = false});
  stream_a.record(evt);
  stream_b.wait(evt);
  launch(stream_b, dbl, 8, 128, 0, da.device_ptr(), n);

  stream_a.synchronize();
  stream_b.synchronize();
  std::vector<float> a_out(n), b_out(n);
  da.copy_to(a_out);
  db.copy_to(b_out);

  for (unsigned i = 0; i < n; ++i) {
    const float want = 4.0f * static_cast<float>(i);
    if (std::fabs(a_out[i] - want) > 1e-4f)
      return {false, "stream A buffer element " + std::to_string(i) + ": got " + std::to_string(a_out[i]) +
                         ", expected " + std::to_string(want)};
  }
  for (unsigned i = 0; i < n; ++i) {
    const float want = 2.0f * (static_cast<float>(i) + 1000.0f);
    if (std::fabs(b_out[i] - want) > 1e-3f)
      return {false, "stream B buffer element " + std::to_string(i) + ": got " + std::to_string(b_out[i]) +
                         ", expected " + std::to_string(want)};
  }
  return {true, "A x4 and B x2 on all " + std::to_string(n) + " elements"};
}

}  // namespace oxicuda_examples
