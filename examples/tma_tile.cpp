// A tile copied through TMA (README, "Tensor maps"): a tensor map over a
// 1024 x 512 matrix of floats, passed by value to a kernel compiled by NVRTC
// that loads one 32 x 32 box into shared memory with cp.async.bulk.tensor and
// writes it out; the box at the matrix's corner reads zeros past its edges.
// Needs a GPU of compute capability 9.0 or newer (it says so otherwise).
//   oxicuda-tma-tile
#include "oxicuda.hpp"

#include <cstdio>
#include <utility>
#include <vector>

namespace {

// `Map` has the layout of oxicuda::TensorMap and of CUDA 13's CUtensorMap.
constexpr const char* kSource = R"(
struct alignas(128) Map { unsigned long long q[16]; };

__device__ unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

extern "C" __global__ void tile_copy(const __grid_constant__ Map map, float* out, int x, int y) {
  __shared__ alignas(128) float tile[32 * 32];
  __shared__ alignas(8) unsigned long long bar;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(&bar)) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}"
                 :: "r"(smem(&bar)), "r"(32u * 32u * 4u) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(smem(tile)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(smem(&bar))
                 : "memory");
  }
  unsigned done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem(&bar)), "r"(0u) : "memory");
  for (unsigned i = threadIdx.x; i < 32 * 32; i += blockDim.x) out[i] = tile[i];
}
)";

}  // namespace

int main() {
  using namespace oxicuda;
  try {
    if (!driver_info().available() || Device::count() == 0) {
      std::puts("oxicuda-tma-tile: no GPU here; nothing to copy");
      return 0;
    }
    const Device device = Device::get(0);
    const ComputeCapability cc = device.compute_capability();
    if (cc.major < 9) {
      std::printf("oxicuda-tma-tile: TMA needs compute capability 9.0; %s is %d.%d\n", device.name().c_str(), cc.major,
                  cc.minor);
      return 0;
    }
    const Context ctx = Context::primary(device);
    Stream stream(ctx);
    constexpr unsigned cols = 1024, rows = 512;
    std::vector<float> host(cols * rows);
    for (unsigned i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
    DeviceBuffer<float> matrix(ctx, host.size()), out(ctx, 32 * 32);
    copy(matrix, host);

    const TensorMap map = TensorMap::tiled(matrix, {cols, rows}, {}, {32, 32});
    const Module m = module_from_source(ctx, kSource);
    const auto tile = m.kernel<void(TensorMap, float*, int, int)>("tile_copy");
    std::vector<float> box(32 * 32);
    for (const auto& [x, y] : {std::pair{64, 32}, std::pair{1008, 500}}) {
      launch(stream, tile, {.grid = 1, .block = 128}, map, out, x, y);
      copy(stream, box, out);
      std::printf("box at (%d, %d): first row starts %g, last row ends %g\n", x, y, box[0], box[32 * 32 - 1]);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "oxicuda-tma-tile: %s\n", e.what());
    return 1;
  }
}
