// Tensor maps (issue 24, item 7) on the fake driver, whose
// cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col check cuda.h's documented
// rules and write the description into the descriptor (a FakeTensorMap), so
// these tests read back what the library passed. The fake cannot copy
// through a map: the copies are the GPU suite's.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {

bool mentions(const Error& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }

FakeTensorMap decode(const TensorMap& m) {
  FakeTensorMap f;
  std::memcpy(&f, &m.raw(), sizeof f);
  return f;
}

// A kernel that takes a tensor map first (as CUDA 13's CUtensorMap lays out),
// and one that takes it after a pointer, aligned to 64 (as CUDA 12's did).
const char* const kTmaPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry tile_copy(.param .align 128 .b8 map[128], .param .u64 out, .param .u32 x, .param .u32 y)
{ ret; }
.visible .entry cuda12_layout(.param .u64 out, .param .align 64 .b8 map[128])
{ ret; }
)";

}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 24 (7): a tiled tensor map encodes its typed description") {
  DeviceBuffer<float> buf(ctx, 1024 * 512);
  const TensorMap m = TensorMap::tiled(buf, {1024, 512}, {}, {32, 32});
  CHECK(fake.calls("cuTensorMapEncodeTiled") == 1);
  CHECK(static_cast<bool>(m));
  CHECK_FALSE(static_cast<bool>(TensorMap{}));
  FakeTensorMap f = decode(m);
  CHECK(f.kind == 1);
  CHECK(f.address == buf.device_ptr());
  CHECK(f.data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  CHECK(f.rank == 2);
  CHECK(f.dims[0] == 1024);
  CHECK(f.dims[1] == 512);
  CHECK(f.strides[0] == 4096);  // packed: a row of 1024 floats
  CHECK(f.box[0] == 32);
  CHECK(f.box[1] == 32);
  CHECK(f.element_strides[0] == 1);
  CHECK(f.element_strides[1] == 1);
  CHECK(f.interleave == 0);
  CHECK(f.swizzle == 0);
  CHECK(f.l2_promotion == 0);
  CHECK(f.oob_fill == 0);

  // Every option reaches the driver; strides given explicitly (rows padded).
  const TensorMap o = TensorMap::tiled(buf, {1000, 500}, {4096}, {32, 8},
                                       {.element_strides = {1, 2},
                                        .swizzle = TensorSwizzle::bytes_128,
                                        .l2_promotion = TensorL2Promotion::bytes_256,
                                        .oob_fill = TensorOobFill::nan_request_zero_fma});
  f = decode(o);
  CHECK(f.dims[0] == 1000);
  CHECK(f.strides[0] == 4096);
  CHECK(f.box[1] == 8);
  CHECK(f.element_strides[1] == 2);
  CHECK(f.swizzle == ffi::CU_TENSOR_MAP_SWIZZLE_128B);
  CHECK(f.l2_promotion == ffi::CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  CHECK(f.oob_fill == ffi::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);

  // Rank 5 from a vector, packed strides multiplied out.
  const std::vector<std::uint64_t> extents{4, 2, 3, 5, 7};
  DeviceBuffer<double> d(ctx, 4 * 2 * 3 * 5 * 7);
  f = decode(TensorMap::tiled(d, extents, {}, {2, 2, 3, 5, 7}));
  CHECK(f.rank == 5);
  CHECK(f.data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT64);
  CHECK(f.strides[0] == 32);
  CHECK(f.strides[1] == 64);
  CHECK(f.strides[2] == 192);
  CHECK(f.strides[3] == 960);
  CHECK(f.dims[4] == 7);
  CHECK(fake.calls("cuTensorMapEncodeTiled") == 3);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (7): the element type is deduced, or named for 16-bit floats") {
  DeviceBuffer<std::uint8_t> u8(ctx, 4096);
  CHECK(decode(TensorMap::tiled(u8, {64, 64}, {}, {16, 4})).data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_UINT8);
  DeviceBuffer<std::uint16_t> u16(ctx, 4096);
  CHECK(decode(TensorMap::tiled(u16, {64, 64}, {}, {8, 4})).data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_UINT16);
  CHECK(decode(TensorMap::tiled(u16, {64, 64}, {}, {8, 4}, {.element = TensorElement::float16})).data_type ==
        ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  CHECK(decode(TensorMap::tiled(u16, {64, 64}, {}, {8, 4}, {.element = TensorElement::bfloat16})).data_type ==
        ffi::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  DeviceBuffer<std::int32_t> i32(ctx, 4096);
  CHECK(decode(TensorMap::tiled(i32, {64, 64}, {}, {4, 4})).data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_INT32);
  DeviceBuffer<std::uint32_t> u32(ctx, 4096);
  CHECK(decode(TensorMap::tiled(u32, {64, 64}, {}, {4, 4})).data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_UINT32);
  DeviceBuffer<std::int64_t> i64(ctx, 4096);
  CHECK(decode(TensorMap::tiled(i64, {64, 64}, {}, {2, 4})).data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_INT64);
  DeviceBuffer<std::uint64_t> u64(ctx, 4096);
  CHECK(decode(TensorMap::tiled(u64, {64, 64}, {}, {2, 4})).data_type == ffi::CU_TENSOR_MAP_DATA_TYPE_UINT64);
  // A float as tf32, from a const span.
  DeviceBuffer<float> f(ctx, 4096);
  const DeviceSpan<const float> cf = f.device_span();
  CHECK(decode(TensorMap::tiled(cf, {64, 64}, {}, {4, 4}, {.element = TensorElement::tfloat32})).data_type ==
        ffi::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32);

  // A type with no TMA element, and an element of another size: refused.
  struct Rgba {
    std::uint8_t c[4];
  };
  DeviceBuffer<Rgba> rgba(ctx, 4096);
  Error e = error_of([&] { (void)TensorMap::tiled(rgba, {64, 64}, {}, {4, 4}); });
  CHECK(mentions(e, "has no TMA element type: name one in TensorMapOptions::element"));
  CHECK(decode(TensorMap::tiled(rgba, {64, 64}, {}, {4, 4}, {.element = TensorElement::uint32})).data_type ==
        ffi::CU_TENSOR_MAP_DATA_TYPE_UINT32);
  e = error_of([&] { (void)TensorMap::tiled(u16, {64, 64}, {}, {4, 4}, {.element = TensorElement::float32}); });
  CHECK(mentions(e, "the element float32 (4 bytes) is not the size of the memory's element type (2 bytes)"));
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (7): tensor maps over pitched memory, a raw address, and im2col") {
  PitchedBuffer<float> p(ctx, 100, 50);
  {
    // Encoding needs a current context (driver 580): a buffer's is made
    // current; a raw address with none current is an Error that says so.
    CHECK(static_cast<bool>(TensorMap::tiled(p, {4, 4})));
    const Error e = error_of([&] { (void)TensorMap::tiled(p.data(), {100, 50}, {p.pitch_bytes()}, {4, 4}); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
    CHECK(mentions(e, "encoding a tensor map needs a current context"));
  }
  const ScopedCurrent current(ctx);
  FakeTensorMap f = decode(TensorMap::tiled(p, {32, 16}));
  CHECK(f.dims[0] == 100);
  CHECK(f.dims[1] == 50);
  CHECK(f.strides[0] == p.pitch_bytes());
  CHECK(f.box[1] == 16);
  CHECK(f.address == p.device_ptr());

  DeviceBuffer<float> buf(ctx, 1 << 16);
  f = decode(TensorMap::tiled(buf.data(), {256, 256}, {1024}, {64, 64}));
  CHECK(f.address == buf.device_ptr());
  CHECK(f.dims[1] == 256);

  // NWC: 8 channels, 16 pixels wide, 4 images.
  f = decode(TensorMap::im2col(buf, {8, 16, 4}, {}, {.lower_corner = {-1}, .upper_corner = {1},
                                                      .channels_per_pixel = 8, .pixels_per_column = 32}));
  CHECK(fake.calls("cuTensorMapEncodeIm2col") == 1);
  CHECK(f.kind == 2);
  CHECK(f.rank == 3);
  CHECK(f.strides[0] == 32);
  CHECK(f.strides[1] == 512);
  CHECK(f.lower_corner[0] == -1);
  CHECK(f.upper_corner[0] == 1);
  CHECK(f.channels_per_pixel == 8);
  CHECK(f.pixels_per_column == 32);
  // NHWC at rank 4: two offsets each.
  f = decode(TensorMap::im2col(buf, {16, 8, 8, 2}, {}, {.lower_corner = {-128, 0}, .upper_corner = {127, -1},
                                                         .channels_per_pixel = 16, .pixels_per_column = 1024},
                               {.swizzle = TensorSwizzle::bytes_64}));
  CHECK(f.lower_corner[0] == -128);
  CHECK(f.upper_corner[1] == -1);
  CHECK(f.swizzle == ffi::CU_TENSOR_MAP_SWIZZLE_64B);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (7): each broken rule is an Error naming it, before the driver sees it") {
  DeviceBuffer<float> buf(ctx, 1 << 16);
  DeviceBuffer<std::int32_t> ints(ctx, 1 << 16);
  const float* raw = buf.data();
  struct Case {
    const char* text;
    std::function<void()> f;
  };
  const std::vector<Case> cases = {
      {"rank 0 (extents {}): a tensor map has 1 to 5 dimensions", [&] { (void)TensorMap::tiled(buf, {}, {}, {}); }},
      {"rank 6 (extents {1, 1, 1, 1, 1, ...}): a tensor map has 1 to 5 dimensions",
       [&] { (void)TensorMap::tiled(raw, {1, 1, 1, 1, 1, 1}, {}, {1, 1, 1, 1, 1, 1}); }},
      {"rank 2 (extents {64, 64}): a tensor map with an interleaved layout has 3 to 5 dimensions",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4, 4}, {.interleave = TensorInterleave::bytes_16}); }},
      {"the global address is null", [&] { (void)TensorMap::tiled(static_cast<const float*>(nullptr), {64}, {}, {4}); }},
      {"is not aligned to 16 bytes: TMA needs a 16-byte aligned start",
       [&] { (void)TensorMap::tiled(buf.subspan(1), {64, 64}, {}, {4, 4}); }},
      {"is not aligned to 32 bytes (32 with a 32-byte interleave)",
       [&] {
         (void)TensorMap::tiled(buf.subspan(4), {8, 4, 4}, {}, {8, 4, 4},
                                {.interleave = TensorInterleave::bytes_32, .swizzle = TensorSwizzle::bytes_32});
       }},
      {"extent[1] is 0 (extents {64, 0}): each extent is 1 to 2^32 elements",
       [&] { (void)TensorMap::tiled(buf, {64, 0}, {}, {4, 1}); }},
      {"extent[0] is 4294967297", [&] { (void)TensorMap::tiled(raw, {(1ull << 32) + 1}, {}, {4}); }},
      {"1 strides {256} for rank 3: give the byte strides of dimensions 1 to rank - 1 (2), or none",
       [&] { (void)TensorMap::tiled(buf, {64, 4, 4}, {256}, {4, 4, 4}); }},
      {"the stride of dimension 1 is 12 bytes (packed): strides are multiples of 16 bytes below 2^40; pad the rows",
       [&] { (void)TensorMap::tiled(buf, {3, 4}, {}, {3, 4}); }},
      {"the stride of dimension 1 is 1099511627776 bytes: strides are multiples of 16 bytes below 2^40",
       [&] { (void)TensorMap::tiled(raw, {4, 2}, {1ull << 40}, {4, 2}); }},
      {"the box {4} has 1 dimensions, the tensor (extents {64, 64}) 2",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4}); }},
      {"box[1] is 0 (box {4, 0}): each box dimension is 1 to 256 elements",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4, 0}); }},
      {"box[1] is 257 (box {4, 257}): each box dimension is 1 to 256 elements",
       [&] { (void)TensorMap::tiled(buf, {64, 300}, {}, {4, 257}); }},
      {"the box {32, 32} exceeds the extents {64, 16} in dimension 1 (32 > 16)",
       [&] { (void)TensorMap::tiled(buf, {64, 16}, {}, {32, 32}); }},
      {"the box's inner dimension is 3 elements of 4 bytes = 12 bytes, not a multiple of 16",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {3, 4}); }},
      {"the box's inner dimension (box[0] elements) is 256 bytes, more than the 128-byte span of its swizzle",
       [&] { (void)TensorMap::tiled(buf, {256, 64}, {}, {64, 4}, {.swizzle = TensorSwizzle::bytes_128}); }},
      {"is 64 bytes, more than the 32-byte span",
       [&] { (void)TensorMap::tiled(buf, {256, 64}, {}, {16, 4}, {.swizzle = TensorSwizzle::bytes_32}); }},
      {"a 32-byte interleave needs the 32-byte swizzle (TensorSwizzle::bytes_32), not swizzle 0",
       [&] { (void)TensorMap::tiled(buf, {8, 4, 4}, {}, {8, 4, 4}, {.interleave = TensorInterleave::bytes_32}); }},
      {"1 element strides {1} for rank 2: give one per dimension, or none",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4, 4}, {.element_strides = {1}}); }},
      {"element stride[1] is 9: element strides are 1 to 8",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4, 4}, {.element_strides = {1, 9}}); }},
      {"the NaN out-of-bounds fill is for floating-point elements, not int32 (4 bytes)",
       [&] { (void)TensorMap::tiled(ints, {64, 64}, {}, {4, 4}, {.oob_fill = TensorOobFill::nan_request_zero_fma}); }},
      {"an option is not one of its enumeration's values (element -, interleave 0, swizzle 7,",
       [&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4, 4}, {.swizzle = static_cast<TensorSwizzle>(7)}); }},
      {"the tensor (extents {256, 257}) reaches 263168 bytes from its address, but the memory holds 262144 bytes",
       [&] { (void)TensorMap::tiled(buf, {256, 257}, {}, {4, 4}); }},
      {"rank 2 (extents {8, 16}): a im2col tensor map has 3 to 5 dimensions",
       [&] { (void)TensorMap::im2col(buf, {8, 16}, {}, {.channels_per_pixel = 8, .pixels_per_column = 8}); }},
      {"the pixel box's lower corner {} has 0 offsets; rank 3 takes 1 (one per spatial dimension)",
       [&] { (void)TensorMap::im2col(buf, {8, 16, 4}, {}, {.channels_per_pixel = 8, .pixels_per_column = 8}); }},
      {"the pixel box's upper corner {0, 128}: offset 128 is outside [-128, 127], the range for rank 4",
       [&] {
         (void)TensorMap::im2col(buf, {8, 16, 16, 4}, {},
                                 {.lower_corner = {0, 0}, .upper_corner = {0, 128}, .channels_per_pixel = 8,
                                  .pixels_per_column = 8});
       }},
      {"offset -17 is outside [-16, 15], the range for rank 5",
       [&] {
         (void)TensorMap::im2col(buf, {8, 4, 4, 4, 2}, {},
                                 {.lower_corner = {0, -17, 0}, .upper_corner = {0, 0, 0}, .channels_per_pixel = 8,
                                  .pixels_per_column = 8});
       }},
      {"channels_per_pixel is 257: a load reads 1 to 256 channels of each pixel",
       [&] {
         (void)TensorMap::im2col(buf, {8, 16, 4}, {},
                                 {.lower_corner = {0}, .upper_corner = {0}, .channels_per_pixel = 257, .pixels_per_column = 8});
       }},
      {"pixels_per_column is 1025: a load reads a column of 1 to 1024 pixels",
       [&] {
         (void)TensorMap::im2col(buf, {8, 16, 4}, {},
                                 {.lower_corner = {0}, .upper_corner = {0}, .channels_per_pixel = 8, .pixels_per_column = 1025});
       }},
      {"the box's inner dimension (channels_per_pixel elements) is 64 bytes, more than the 32-byte span",
       [&] {
         (void)TensorMap::im2col(buf, {16, 16, 4}, {},
                                 {.lower_corner = {0}, .upper_corner = {0}, .channels_per_pixel = 16, .pixels_per_column = 8},
                                 {.swizzle = TensorSwizzle::bytes_32});
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const Error e = error_of(c.f);
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(mentions(e, c.text));
    CHECK((mentions(e, "oxicuda::TensorMap::tiled") || mentions(e, "oxicuda::TensorMap::im2col")));
  }
  // The library refused every one: the driver saw none.
  CHECK(fake.calls("cuTensorMapEncodeTiled") == 0);
  CHECK(fake.calls("cuTensorMapEncodeIm2col") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (7): the fake refuses what the driver's documentation rules out") {
  DeviceBuffer<float> buf(ctx, 4096);
  const ScopedCurrent current(ctx);  // (raw encodes need one, as on the driver)
  const auto& api = detail::api();
  alignas(128) ffi::CUtensorMap map{};
  const ffi::cuuint64_t dims[2] = {64, 64}, strides[1] = {256};
  const ffi::cuuint32_t box[2] = {4, 4}, ones[2] = {1, 1};
  const auto tiled = [&](void* address, const ffi::cuuint32_t* b, ffi::CUtensorMapSwizzle swizzle) {
    return api.TensorMapEncodeTiled(&map, ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, address, dims, strides, b, ones,
                                    ffi::CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, ffi::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    ffi::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  void* const address = buf.data();
  CHECK(tiled(address, box, ffi::CU_TENSOR_MAP_SWIZZLE_NONE) == ffi::CUDA_SUCCESS);
  CHECK(tiled(static_cast<char*>(address) + 4, box, ffi::CU_TENSOR_MAP_SWIZZLE_NONE) == ffi::CUDA_ERROR_INVALID_VALUE);
  const ffi::cuuint32_t narrow[2] = {3, 4}, wide[2] = {64, 4};
  CHECK(tiled(address, narrow, ffi::CU_TENSOR_MAP_SWIZZLE_NONE) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(tiled(address, wide, ffi::CU_TENSOR_MAP_SWIZZLE_128B) == ffi::CUDA_ERROR_INVALID_VALUE);
  const int corner[1] = {0};
  const ffi::cuuint64_t dims3[3] = {8, 16, 4}, strides3[2] = {32, 512};
  const ffi::cuuint32_t ones3[3] = {1, 1, 1};
  CHECK(api.TensorMapEncodeIm2col(&map, ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, address, dims3, strides3, corner,
                                  corner, 8, 1025, ones3, ffi::CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  ffi::CU_TENSOR_MAP_SWIZZLE_NONE, ffi::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  ffi::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(api.TensorMapEncodeIm2col(&map, ffi::CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, address, dims3, strides3, corner,
                                  corner, 8, 8, ones3, ffi::CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  ffi::CU_TENSOR_MAP_SWIZZLE_NONE, ffi::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  ffi::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == ffi::CUDA_ERROR_INVALID_VALUE);

  // The driver's own refusal is an Error that names the call.
  fake.fail("cuTensorMapEncodeTiled", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  const Error e = error_of([&] { (void)TensorMap::tiled(buf, {64, 64}, {}, {4, 4}); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(mentions(e, "cuTensorMapEncodeTiled"));
}

TEST_CASE_FIXTURE(LaunchTest, "issue 24 (7): a TensorMap is a kernel parameter, passed by value") {
  static_assert(is_kernel_parameter_v<TensorMap>);
  const Module tm = Module::from_ptx(ctx, kTmaPtx);
  const auto copy = tm.kernel<void(TensorMap, float*, int, int)>("tile_copy");
  DeviceBuffer<float> buf(ctx, 1024 * 512), out(ctx, 32 * 32);
  const TensorMap map = TensorMap::tiled(buf, {1024, 512}, {}, {32, 32});
  launch(s, copy, {.grid = 1, .block = 128}, map, out, 64, -8);
  FakeLaunch l{};
  fake.last_launch(&l);
  REQUIRE(l.param_count == 4);
  CHECK(l.param_offsets[0] == 0);
  CHECK(l.param_sizes[0] == 128);
  CHECK(l.param_offsets[1] == 128);
  CHECK(std::memcmp(l.params, &map.raw(), 128) == 0);
  ffi::CUdeviceptr o = 0;
  std::memcpy(&o, l.params + 128, sizeof o);
  CHECK(o == out.device_ptr());
  // A kernel compiled against CUDA 12's CUtensorMap (aligned to 64) puts a
  // map after a pointer at 64, not at 128. The driver places each
  // parameter itself (and reports offsets from where the parameters begin,
  // which on the H100 is not a multiple of 128: a 128-byte-aligned map
  // first comes at 112), so the check accepts any layout that one base of
  // the bank gives; the sizes must still agree.
  CHECK_NOTHROW((void)tm.kernel<void(float*, TensorMap)>("cuda12_layout"));
  const Error e = error_of([&] { (void)tm.kernel<void(float*, float*)>("cuda12_layout"); });
  CHECK(mentions(e, "but the module's kernel takes 2 parameters (8 bytes at 0, 128 bytes at 64)"));
}
