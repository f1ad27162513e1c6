// The GPU suite, part: issue 24 (7), tensor maps on a real driver. A kernel
// compiled by NVRTC copies a box through TMA (cp.async.bulk.tensor, inline
// PTX: no CCCL headers) into shared memory, waits on an mbarrier, and writes
// the box out; the result is compared with a CPU reference, out-of-bounds
// elements included. Needs compute capability 9.0 (skipped with a message
// before it).
#include <doctest/doctest.h>

#include "gpu_common.hpp"
#include "tma_kernel.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

// The shared tile kernels (examples/tma_kernel.hpp) and an im2col load, which
// uses their mbarrier helpers.
const std::string kTmaSource = std::string(oxicuda_examples::kTmaTileSource) + R"(
// An im2col load of a 3D (C, W, N) tensor at (c, w, n), offset 0.
extern "C" __global__ void im2col_copy(const __grid_constant__ Map map, float* out, int c, int w, int n, unsigned count) {
  __shared__ alignas(128) float tile[64 * 64];
  __shared__ alignas(8) unsigned long long bar;
  init(&bar);
  if (threadIdx.x == 0) {
    arm(&bar, count * 4u);
    const unsigned short offset = 0;
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5], {%6};"
                 :: "r"(smem(tile)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c), "r"(w), "r"(n),
                    "r"(smem(&bar)), "h"(offset) : "memory");
  }
  wait(&bar);
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) out[i] = tile[i];
}
)";

bool has_tma() {
  const ComputeCapability cc = ctx().device().compute_capability();
  if (cc.major >= 9) return true;
  MESSAGE("TMA needs compute capability 9.0; this device is ", cc.major, ".", cc.minor, ": skipped");
  return false;
}

// The box of `w` x `h` at (x, y) of a `cols` x `rows` tensor whose rows are
// `pitch` floats apart, out-of-bounds elements `oob`.
std::vector<float> reference(const std::vector<float>& in, long cols, long rows, long pitch, long x, long y, long w,
                             long h, float oob) {
  std::vector<float> box(static_cast<std::size_t>(w * h));
  for (long r = 0; r < h; ++r)
    for (long c = 0; c < w; ++c) {
      const long gx = x + c, gy = y + r;
      box[static_cast<std::size_t>(r * w + c)] =
          gx >= 0 && gx < cols && gy >= 0 && gy < rows ? in[static_cast<std::size_t>(gy * pitch + gx)] : oob;
    }
  return box;
}

// Compares, NaN matching NaN; reports the first difference.
bool same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
    if (!ok) {
      MESSAGE(what, ": element ", i, " is ", got[i], ", expected ", want[i]);
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("issue 24 (7): a TMA tile copy of a 2D float tensor matches the CPU, out-of-bounds boxes filled with zeros") {
  if (!has_tma()) return;
  Stream s(ctx());
  const Module m = module_from_source(ctx(), kTmaSource);
  const auto tile = m.kernel<void(TensorMap, float*, int, int, unsigned, unsigned, unsigned)>("tile_copy");
  constexpr long cols = 1024, rows = 512;
  std::vector<float> host(cols * rows);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) + 1.0f;
  DeviceBuffer<float> in(ctx(), host.size()), out(ctx(), 32 * 32);
  copy(in, host);
  const TensorMap map = TensorMap::tiled(in, {cols, rows}, {}, {32, 32});
  const long coords[][2] = {{0, 0}, {64, 32}, {992, 480}, {1008, 500}, {-16, -8}, {1020, 0}, {0, 510}};
  for (const auto& c : coords) {
    CAPTURE(c[0]);
    CAPTURE(c[1]);
    launch(s, tile, {.grid = 1, .block = 128}, map, out, static_cast<int>(c[0]), static_cast<int>(c[1]), 32u, 32u, 32u);
    std::vector<float> got(32 * 32);
    copy(s, got, out);
    CHECK(same(got, reference(host, cols, rows, cols, c[0], c[1], 32, 32, 0.0f),
               "box at (" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ")"));
  }
}

// Once the box at column 990 of this case stopped the kernel with
// CUDA_ERROR_ILLEGAL_INSTRUCTION (H100 and H200, driver 580.159.04): a box's
// innermost start (3960 bytes) must be a multiple of 16 bytes, which no
// encoder can check (README, "What no encoder can check"). Probes, one
// factor at a time, ruled out the map's place, the pitched memory, the NaN
// fill and the box's shape; columns 988, 996, 4 and -4 copy right.
TEST_CASE("issue 24 (7): a tensor map after a pointer, over pitched memory, a 64 x 16 box, NaN out-of-bounds fill") {
  if (!has_tma()) return;
  Stream s(ctx());
  const Module m = module_from_source(ctx(), kTmaSource);
  // The layout check passes: the driver reports the map at offset 128, as oxicuda::TensorMap lays it out.
  const auto tile = m.kernel<void(float*, TensorMap, int, int, unsigned, unsigned, unsigned)>("tile_copy_after");
  constexpr long cols = 1000, rows = 300;
  PitchedBuffer<float> p(ctx(), cols, rows);
  const long pitch = static_cast<long>(p.pitch_bytes() / sizeof(float));
  MESSAGE("pitch: ", p.pitch_bytes(), " bytes");
  std::vector<float> host(static_cast<std::size_t>(pitch * rows), -1.0f);
  for (long r = 0; r < rows; ++r)
    for (long c = 0; c < cols; ++c) host[static_cast<std::size_t>(r * pitch + c)] = static_cast<float>(r * cols + c);
  copy_2d(p, view_2d(host, cols, rows, pitch * sizeof(float)));
  DeviceBuffer<float> out(ctx(), 64 * 16);
  for (const bool nan_fill : {false, true}) {
    const TensorMap map = TensorMap::tiled(
        p, {64, 16}, {.oob_fill = nan_fill ? TensorOobFill::nan_request_zero_fma : TensorOobFill::zeros});
    const long coords[][2] = {{0, 0}, {100, 7}, {960, 290}, {988, 295}};
    for (const auto& c : coords) {
      CAPTURE(nan_fill);
      CAPTURE(c[0]);
      CAPTURE(c[1]);
      launch(s, tile, {.grid = 1, .block = 128}, out, map, static_cast<int>(c[0]), static_cast<int>(c[1]), 64u, 16u, 64u);
      std::vector<float> got(64 * 16);
      copy(s, got, out);
      CHECK(same(got, reference(host, cols, rows, pitch, c[0], c[1], 64, 16, nan_fill ? NAN : 0.0f),
                 "pitched box at (" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ")"));
    }
  }
}

TEST_CASE("issue 24 (7): an im2col load of a (C, W, N) tensor reads its pixels in order") {
  if (!has_tma()) return;
  Stream s(ctx());
  const Module m = module_from_source(ctx(), kTmaSource);
  const auto column = m.kernel<void(TensorMap, float*, int, int, int, unsigned)>("im2col_copy");
  constexpr long channels = 8, width = 16, images = 4;
  std::vector<float> host(channels * width * images);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) + 1.0f;
  DeviceBuffer<float> in(ctx(), host.size()), out(ctx(), 32 * channels);
  copy(in, host);
  // The bounding box is the whole row of pixels (corners 0): a column of 32
  // pixels from (w 0, n 0) is images 0 and 1 whole, that is, the first 256 floats.
  const TensorMap map = TensorMap::im2col(
      in, {channels, width, images}, {},
      {.lower_corner = {0}, .upper_corner = {0}, .channels_per_pixel = channels, .pixels_per_column = 32});
  launch(s, column, {.grid = 1, .block = 128}, map, out, 0, 0, 0, 32u * channels);
  std::vector<float> got(32 * channels);
  copy(s, got, out);
  CHECK(same(got, std::vector<float>(host.begin(), host.begin() + 32 * channels), "im2col column"));
}

TEST_CASE("issue 24 (7): the driver refuses what the library refuses, and accepts descriptions at the limits") {
  if (!has_tma()) return;
  DeviceBuffer<float> buf(ctx(), 1 << 20);
  const auto& api = detail::api();
  ffi::CUtensorMap map{};
  char* const base = static_cast<char*>(static_cast<void*>(buf.data()));
  struct Case {
    const char* rule;
    ffi::CUtensorMapDataType type;
    std::vector<ffi::cuuint64_t> dims, strides;
    std::vector<ffi::cuuint32_t> box, element_strides;
    std::size_t offset;
    ffi::CUtensorMapInterleave interleave;
    ffi::CUtensorMapSwizzle swizzle;
    ffi::CUtensorMapFloatOOBfill oob;
  };
  using namespace oxicuda::ffi;
  const ScopedCurrent current(ctx());  // (the driver encodes in a current context only: 201 without one)
  const auto encode = [&](const Case& c) {
    return api.TensorMapEncodeTiled(&map, c.type, static_cast<ffi::cuuint32_t>(c.dims.size()), base + c.offset,
                                    c.dims.data(), c.strides.data(), c.box.data(), c.element_strides.data(),
                                    c.interleave, c.swizzle, ffi::CU_TENSOR_MAP_L2_PROMOTION_NONE, c.oob);
  };
  const std::vector<Case> refused = {
      {"address misaligned", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {32, 32}, {1, 1}, 4,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"extent 0", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 0}, {1024}, {32, 1}, {1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_NONE,
       CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"stride not a multiple of 16", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {3, 256}, {12}, {4, 32}, {1, 1}, 0,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"box 0", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {32, 0}, {1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_NONE,
       CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"box 257", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 512}, {1024}, {32, 257}, {1, 1}, 0,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"inner box 12 bytes", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {3, 32}, {1, 1}, 0,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"inner box 256 bytes with the 128-byte swizzle", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {64, 8},
       {1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"element stride 9", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {32, 32}, {1, 9}, 0,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"rank 6", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {4, 2, 2, 2, 2, 2}, {16, 32, 64, 128, 256}, {4, 2, 2, 2, 2, 2},
       {1, 1, 1, 1, 1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"NaN fill of int32", CU_TENSOR_MAP_DATA_TYPE_INT32, {256, 256}, {1024}, {32, 32}, {1, 1}, 0,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA},
  };
  for (const Case& c : refused) {
    CAPTURE(std::string(c.rule));
    const ffi::CUresult r = encode(c);
    MESSAGE(std::string(c.rule), ": the driver answers ", static_cast<int>(r));
    CHECK(r != ffi::CUDA_SUCCESS);
  }
  // Refused by the library, accepted by driver 580 (H100): the library is
  // stricter here than the driver. For the record, not a check.
  const Case interleaved{"32-byte interleave without the 32-byte swizzle", CU_TENSOR_MAP_DATA_TYPE_UINT16, {16, 8, 8},
                         {32, 256}, {16, 8, 8}, {1, 1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_32B, CU_TENSOR_MAP_SWIZZLE_NONE,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE};
  MESSAGE(std::string(interleaved.rule), ": the driver answers ", static_cast<int>(encode(interleaved)));
  const std::vector<Case> accepted = {
      {"rank 5, element strides 8", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {8, 8, 8, 8, 8}, {32, 256, 2048, 16384},
       {8, 8, 8, 8, 8}, {1, 8, 8, 8, 8}, 0, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"inner box 128 bytes with the 128-byte swizzle", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {32, 8},
       {1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"address 16 bytes in", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 256}, {1024}, {32, 32}, {1, 1}, 16,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
      {"32-byte interleave with the 32-byte swizzle", CU_TENSOR_MAP_DATA_TYPE_UINT16, {16, 8, 8}, {32, 256},
       {16, 8, 8}, {1, 1, 1}, 0, CU_TENSOR_MAP_INTERLEAVE_32B, CU_TENSOR_MAP_SWIZZLE_32B,
       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE},
  };
  for (const Case& c : accepted) {
    CAPTURE(std::string(c.rule));
    const ffi::CUresult r = encode(c);
    MESSAGE(std::string(c.rule), ": the driver answers ", static_cast<int>(r));
    CHECK(r == ffi::CUDA_SUCCESS);
  }
  // Within every documented rule, accepted by the library, refused by driver
  // 580 (H100: CUDA_ERROR_INVALID_VALUE): a box of 256 x 256 floats, 256 KiB,
  // more than a block's shared memory. For the record, not a check.
  const Case box_256{"box 256 x 256 floats", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {256, 1024}, {1024}, {256, 256}, {1, 1}, 0,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE};
  MESSAGE(std::string(box_256.rule), ": the driver answers ", static_cast<int>(encode(box_256)));
  // Not a documented rule, refused by the library (issue 24's bad input): a
  // box larger than the tensor. What the driver says of it, for the record.
  const Case larger{"box larger than the extents", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {16, 16}, {64}, {32, 32}, {1, 1}, 0,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE};
  MESSAGE("a box of 32 x 32 over a 16 x 16 tensor: the driver answers ", static_cast<int>(encode(larger)));
}

TEST_CASE("issue 24 (7): with no context current, a map of a buffer is encoded in the buffer's; a raw address is an Error that says why") {
  if (!has_tma()) return;
  DeviceBuffer<float> buf(ctx(), 1 << 16);
  const auto& api = detail::api();
  CUcontext before = nullptr;
  REQUIRE(api.CtxGetCurrent(&before) == ffi::CUDA_SUCCESS);
  REQUIRE(api.CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
  std::string error;
  bool from_buffer = false;
  try {
    from_buffer = static_cast<bool>(TensorMap::tiled(buf, {256, 256}, {}, {32, 32}));
    (void)TensorMap::tiled(buf.data(), {256, 256}, {}, {32, 32});
  } catch (const Error& e) {
    error = e.what();
  }
  CUcontext after = nullptr;
  REQUIRE(api.CtxGetCurrent(&after) == ffi::CUDA_SUCCESS);
  REQUIRE(api.CtxSetCurrent(before) == ffi::CUDA_SUCCESS);
  CHECK(after == nullptr);  // the buffer's context was current for the call only
  CHECK(from_buffer);
  MESSAGE("a raw address with no context current: ", error.empty() ? std::string("encoded") : error);
  CHECK(error.find("encoding a tensor map needs a current context") != std::string::npos);
}
