// The fake driver's tensor maps (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col):
// each refuses with CUDA_ERROR_INVALID_VALUE what cuda.h's documentation of
// the call rules out, and otherwise writes the description into the
// descriptor as a FakeTensorMap (fake_abi.h), the rest of the 128 bytes zero.
// The fake needs no current context for either, and cannot copy through a map
// (its kernels run on the host, without TMA).
#include "fake_state.hpp"

#include <cstdint>
#include <cstring>

namespace {

constexpr unsigned element_bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

// The rules both calls share; `least` is the smallest rank allowed.
bool shared_rules(const CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                  const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* element_strides,
                  CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                  CUtensorMapFloatOOBfill oob, cuuint32_t least) {
  if (!map || reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return false;
  if (type < 0 || type > 12 || interleave < 0 || interleave > 2 || swizzle < 0 || swizzle > 6 || l2 < 0 || l2 > 3 ||
      oob < 0 || oob > 1)
    return false;
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && least < 3) least = 3;
  if (rank < least || rank > 5 || !dims || !element_strides || (rank > 1 && !strides)) return false;
  const std::uintptr_t align = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (reinterpret_cast<std::uintptr_t>(address) % align != 0) return false;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return false;
    if (element_strides[i] < 1 || element_strides[i] > 8) return false;
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i)
    if (strides[i] % align != 0 || strides[i] >= (1ull << 40)) return false;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B) return false;
  if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && type < CU_TENSOR_MAP_DATA_TYPE_FLOAT16) return false;
  return true;
}

// The swizzle's limit on the box's inner dimension, in bytes.
bool swizzle_fits(CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, unsigned long long inner) {
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE || swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) return true;
  const unsigned long long span = swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64 : 128;
  return inner <= span;
}

FakeTensorMap common(CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims,
                     const cuuint64_t* strides, const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  FakeTensorMap f{};
  f.address = reinterpret_cast<std::uintptr_t>(address);
  for (cuuint32_t i = 0; i < rank; ++i) {
    f.dims[i] = dims[i];
    f.element_strides[i] = static_cast<unsigned char>(element_strides[i]);
    if (i + 1 < rank) f.strides[i] = strides[i];
  }
  f.data_type = static_cast<unsigned char>(type);
  f.rank = static_cast<unsigned char>(rank);
  f.interleave = static_cast<unsigned char>(interleave);
  f.swizzle = static_cast<unsigned char>(swizzle);
  f.l2_promotion = static_cast<unsigned char>(l2);
  f.oob_fill = static_cast<unsigned char>(oob);
  return f;
}

void store(CUtensorMap* map, const FakeTensorMap& f) {
  static_assert(sizeof(FakeTensorMap) <= sizeof(CUtensorMap));
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &f, sizeof f);
}

}  // namespace

CUresult fake_TensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                   const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                   const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  FAKE_ENTRY(TensorMapEncodeTiled);
  // (driver 580 answers CUDA_ERROR_INVALID_CONTEXT with no context current, seen on the H100)
  if (const CUresult r = fake::need_current()) return r;
  if (!shared_rules(map, type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob, 1) || !box)
    return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i < rank; ++i)
    if (box[i] < 1 || box[i] > 256) return CUDA_ERROR_INVALID_VALUE;
  const unsigned long long inner = static_cast<unsigned long long>(box[0]) * element_bytes[type];
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!swizzle_fits(interleave, swizzle, inner)) return CUDA_ERROR_INVALID_VALUE;
  FakeTensorMap f = common(type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob);
  f.kind = 1;
  for (cuuint32_t i = 0; i < rank; ++i) f.box[i] = static_cast<unsigned short>(box[i]);
  store(map, f);
  return CUDA_SUCCESS;
}

CUresult fake_TensorMapEncodeIm2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                    const cuuint64_t* dims, const cuuint64_t* strides, const int* lower,
                                    const int* upper, cuuint32_t channels, cuuint32_t pixels,
                                    const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  FAKE_ENTRY(TensorMapEncodeIm2col);
  // (driver 580 answers CUDA_ERROR_INVALID_CONTEXT with no context current, seen on the H100)
  if (const CUresult r = fake::need_current()) return r;
  if (!shared_rules(map, type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob, 3) ||
      !lower || !upper)
    return CUDA_ERROR_INVALID_VALUE;
  const int range = rank == 3 ? 32768 : rank == 4 ? 128 : 16;
  for (cuuint32_t i = 0; i + 2 < rank; ++i)
    if (lower[i] < -range || lower[i] >= range || upper[i] < -range || upper[i] >= range) return CUDA_ERROR_INVALID_VALUE;
  if (channels < 1 || channels > 256 || pixels < 1 || pixels > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (!swizzle_fits(interleave, swizzle, static_cast<unsigned long long>(channels) * element_bytes[type]))
    return CUDA_ERROR_INVALID_VALUE;
  FakeTensorMap f = common(type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob);
  f.kind = 2;
  for (cuuint32_t i = 0; i + 2 < rank; ++i) {
    f.lower_corner[i] = static_cast<short>(lower[i]);
    f.upper_corner[i] = static_cast<short>(upper[i]);
  }
  f.channels_per_pixel = static_cast<unsigned short>(channels);
  f.pixels_per_column = static_cast<unsigned short>(pixels);
  store(map, f);
  return CUDA_SUCCESS;
}
