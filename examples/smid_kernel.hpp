// The SM-recording kernel that the GPU suite (tests/gpu/gpu_green_context.cpp)
// and the benchmark (bench/bench_driver.cpp) share: PTX, loaded by the
// driver's JIT (no NVRTC needed).
//   record_smid(unsigned* out, unsigned long long cycles): each block spins
//   `cycles` clock64 cycles, then its thread 0 writes %smid, the SM it ran
//   on, to out[blockIdx.x].
#pragma once

namespace oxicuda_examples {

inline constexpr const char* kSmidPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry record_smid(.param .u64 out, .param .u64 cycles)
{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [cycles];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %smid;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %tid.x;
  mov.u64 %rd3, %clock64;
SPIN:
  mov.u64 %rd4, %clock64;
  sub.s64 %rd5, %rd4, %rd3;
  setp.lt.s64 %p1, %rd5, %rd2;
  @%p1 bra SPIN;
  setp.ne.s32 %p2, %r3, 0;
  @%p2 bra DONE;
  mul.wide.u32 %rd6, %r2, 4;
  add.s64 %rd7, %rd1, %rd6;
  st.global.u32 [%rd7], %r1;
DONE:
  ret;
}
)";

}  // namespace oxicuda_examples
