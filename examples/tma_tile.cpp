// A tile copied through TMA (README, "Tensor maps"): a tensor map over a
// 1024 x 512 matrix of floats, passed by value to a kernel compiled by NVRTC
// (tma_kernel.hpp) that loads one 32 x 32 box into shared memory with
// cp.async.bulk.tensor and writes it out; the box at the matrix's corner
// reads zeros past its edges.
// Needs a GPU of compute capability 9.0 or newer (it says so otherwise).
//   oxicuda-tma-tile
#include "oxicuda.hpp"
#include "tma_kernel.hpp"

#include <cstdio>
#include <utility>
#include <vector>

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
    const Module m = module_from_source(ctx, oxicuda_examples::kTmaTileSource);
    const auto tile = m.kernel<void(TensorMap, float*, int, int, unsigned, unsigned, unsigned)>("tile_copy");
    std::vector<float> box(32 * 32);
    for (const auto& [x, y] : {std::pair{64, 32}, std::pair{1008, 500}}) {
      launch(stream, tile, {.grid = 1, .block = 128}, map, out, x, y, 32u, 32u, 32u);
      copy(stream, box, out);
      std::printf("box at (%d, %d): first row starts %g, last row ends %g\n", x, y, box[0], box[32 * 32 - 1]);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "oxicuda-tma-tile: %s\n", e.what());
    return 1;
  }
}
