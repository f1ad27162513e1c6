// The TMA tile kernels, compiled by NVRTC at run time, that the example
// (examples/tma_tile.cpp), the GPU suite (tests/gpu/gpu_tma.cpp) and the
// benchmark (bench/bench_driver.cpp) share. Inline PTX, no CCCL headers.
//
// `Map` is laid out as CUDA 13's CUtensorMap (128 bytes, aligned to 128), the
// layout of oxicuda::TensorMap. Block (bx, by) copies the w x h box of floats
// at (x + bx * w, y + by * h): thread 0 arms an mbarrier with the box's bytes
// and issues cp.async.bulk.tensor into shared memory; every thread waits for
// the barrier's phase 0, then writes the box to `out` at row by * h, column
// bx * w of a matrix `out_cols` wide (one box: out_cols = w, the box packed).
// w * h is at most 64 * 64. On the device a box's innermost start must be a
// multiple of 16 bytes (README, "What no encoder can check").
//   tile_copy(Map, float* out, int x, int y, unsigned w, unsigned h, unsigned out_cols)
//   tile_copy_after(float* out, Map, ...): the same with the map at offset 128
#pragma once

namespace oxicuda_examples {

inline constexpr const char* kTmaTileSource = R"(
struct alignas(128) Map { unsigned long long q[16]; };

__device__ __forceinline__ unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void arm(unsigned long long* bar, unsigned bytes) {
  asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}"
               :: "r"(smem(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void init(unsigned long long* bar) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(bar)) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
}

__device__ __forceinline__ void wait(unsigned long long* bar) {
  unsigned done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem(bar)), "r"(0u) : "memory");
}

__device__ __forceinline__ void copy_box(const Map& map, float* out, int x, int y, unsigned w, unsigned h,
                                         unsigned out_cols) {
  __shared__ alignas(128) float tile[64 * 64];
  __shared__ alignas(8) unsigned long long bar;
  const int bx = static_cast<int>(blockIdx.x * w), by = static_cast<int>(blockIdx.y * h);
  init(&bar);
  if (threadIdx.x == 0) {
    arm(&bar, w * h * 4u);
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(smem(tile)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x + bx), "r"(y + by),
                    "r"(smem(&bar)) : "memory");
  }
  wait(&bar);
  for (unsigned i = threadIdx.x; i < w * h; i += blockDim.x) out[(by + i / w) * out_cols + bx + i % w] = tile[i];
}

extern "C" __global__ void tile_copy(const __grid_constant__ Map map, float* out, int x, int y, unsigned w,
                                     unsigned h, unsigned out_cols) {
  copy_box(map, out, x, y, w, h, out_cols);
}

extern "C" __global__ void tile_copy_after(float* out, const __grid_constant__ Map map, int x, int y, unsigned w,
                                           unsigned h, unsigned out_cols) {
  copy_box(map, out, x, y, w, h, out_cols);
}
)";

}  // namespace oxicuda_examples
