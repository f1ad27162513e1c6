// oxicuda/kernel/tensor_map.hpp — TensorMap, a TMA descriptor
// (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col) encoded from a typed
// description and checked against the driver's rules first
// (tensor_map_rules.hpp). It is the 128 bytes a kernel takes as a
// `const __grid_constant__` parameter, passed by value like any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include "../memory/pitched.hpp"
#include "../memory/span.hpp"
#include "tensor_map_rules.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The pixel box of an im2col tensor map: the bounding box's corners as
// offsets along the spatial dimensions (W, H, D, innermost first: rank - 2
// of them; in [-32768, 32767] for rank 3, [-128, 127] for rank 4, [-16, 15]
// for rank 5), and what one load reads: `channels_per_pixel` elements along
// C (1 to 256) for each of `pixels_per_column` pixels (1 to 1024).
struct Im2colBox {
  TensorDims<int> lower_corner{};
  TensorDims<int> upper_corner{};
  std::uint32_t channels_per_pixel = 0;
  std::uint32_t pixels_per_column = 0;
};

// A tensor map: 128 opaque bytes that describe a tensor in device memory and
// the box a TMA copy moves. Trivially copyable and aligned as cuda.h (CUDA
// 13) aligns CUtensorMap, so Kernel<void(TensorMap, float*)> passes it to
//   __global__ void k(const __grid_constant__ CUtensorMap map, float* out)
// or to a parameter of any 128-byte type aligned to 128 (Module::kernel
// checks the layout). A default TensorMap is zeros and describes nothing.
// The driver reads the memory only when a kernel copies through the map,
// which must not outlive the memory. On the device, a box's innermost start
// coordinate times the element size must be a multiple of 16 bytes: driver
// 580 on the H100 and H200 stops the kernel with CUDA_ERROR_ILLEGAL_INSTRUCTION
// otherwise (README, "What no encoder can check").
class TensorMap {
 public:
  TensorMap() noexcept = default;

  // A tiled map over the memory of a device range (DeviceBuffer, DeviceSpan):
  // `extents` in elements and `strides_bytes` (dimensions 1 to rank - 1;
  // none: packed) innermost first, and the `box` a copy moves. The element
  // type is tensor_element<T> unless the options name one. Refused before
  // the driver sees it: a broken rule of the driver's, a box larger than the
  // extents, or a tensor reaching past the memory.
  template <detail::device_range R>
  [[nodiscard]] static TensorMap tiled(const R& memory, TensorDims<std::uint64_t> extents,
                                       TensorDims<std::uint64_t> strides_bytes, TensorDims<std::uint32_t> box,
                                       const TensorMapOptions& options = {},
                                       SourceLocation where = SourceLocation::current()) {
    const auto span = memory.device_span();
    using T = std::remove_cv_t<detail::device_element_t<R>>;
    return encode_tiled(detail::in_context(detail::describe_tensor(tiled_op, deduced<T>(), sizeof(T),
                                                                   span.device_ptr(), extents, strides_bytes,
                                                                   options, 1, where),
                                           span.context()),
                        box, span.size_bytes(), where);
  }
  // The same over a raw device address, whose size is not known.
  template <class T>
  [[nodiscard]] static TensorMap tiled(const T* device_address, TensorDims<std::uint64_t> extents,
                                       TensorDims<std::uint64_t> strides_bytes, TensorDims<std::uint32_t> box,
                                       const TensorMapOptions& options = {},
                                       SourceLocation where = SourceLocation::current()) {
    using U = std::remove_cv_t<T>;
    return encode_tiled(detail::describe_tensor(tiled_op, deduced<U>(), sizeof(U),
                                                reinterpret_cast<std::uintptr_t>(device_address), extents,
                                                strides_bytes, options, 1, where),
                        box, std::nullopt, where);
  }
  // A 2D map over pitched memory (PitchedBuffer, DeviceSpan2D): extents
  // {width, height}, the pitch as the row stride.
  template <detail::device_range_2d R>
  [[nodiscard]] static TensorMap tiled(const R& memory, TensorDims<std::uint32_t> box,
                                          const TensorMapOptions& options = {},
                                          SourceLocation where = SourceLocation::current()) {
    const auto s = memory.span_2d();
    using T = std::remove_cv_t<detail::element_2d_t<R>>;
    return encode_tiled(detail::in_context(detail::describe_tensor(tiled_op, deduced<T>(), sizeof(T), s.device_ptr(),
                                                                   {s.width(), s.height()}, {s.pitch_bytes()},
                                                                   options, 1, where),
                                           s.context()),
                        box, std::nullopt, where);
  }

  // An im2col map (rank 3 to 5: C, the spatial dimensions, N) over a device
  // range, for convolutions: a load reads a column of pixels of the box.
  template <detail::device_range R>
  [[nodiscard]] static TensorMap im2col(const R& memory, TensorDims<std::uint64_t> extents,
                                        TensorDims<std::uint64_t> strides_bytes, const Im2colBox& box,
                                        const TensorMapOptions& options = {},
                                        SourceLocation where = SourceLocation::current()) {
    const auto span = memory.device_span();
    using T = std::remove_cv_t<detail::device_element_t<R>>;
    const detail::TensorMapDescription d = detail::in_context(
        detail::describe_tensor(im2col_op, deduced<T>(), sizeof(T), span.device_ptr(), extents, strides_bytes, options,
                                3, where),
        span.context());
    detail::check_reach(im2col_op, d, span.size_bytes(), where);
    return encode_im2col(d, box, where);
  }

  // The descriptor, for cuda.h's APIs: reinterpret_cast<const CUtensorMap*>(&map.raw()).
  [[nodiscard]] const ffi::CUtensorMap& raw() const noexcept { return map_; }
  // Whether it was encoded (a default TensorMap is all zeros).
  [[nodiscard]] explicit operator bool() const noexcept {
    for (const auto q : map_.opaque)
      if (q) return true;
    return false;
  }

 private:
  static constexpr const char* tiled_op = "oxicuda::TensorMap::tiled";
  static constexpr const char* im2col_op = "oxicuda::TensorMap::im2col";

  template <class T>
  static constexpr std::optional<TensorElement> deduced() noexcept {
    if constexpr (requires { tensor_element<T>::value; })
      return TensorElement(tensor_element<T>::value);
    else
      return std::nullopt;
  }

  static TensorMap encode_tiled(const detail::TensorMapDescription& d, const TensorDims<std::uint32_t>& box,
                                std::optional<std::size_t> memory_bytes, SourceLocation where);
  static TensorMap encode_im2col(const detail::TensorMapDescription& d, const Im2colBox& box, SourceLocation where);

  ffi::CUtensorMap map_{};
};

static_assert(sizeof(TensorMap) == 128 && alignof(TensorMap) == alignof(ffi::CUtensorMap) &&
              std::is_trivially_copyable_v<TensorMap>);

namespace detail {

[[noreturn]] OXICUDA_DETAIL_COLD inline void bad_box(const char* op, const std::string& why, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op, why, where));
}

// The encode call, with the memory's context current when it is known:
// the driver (580) answers CUDA_ERROR_INVALID_CONTEXT with none current.
template <class Encode>
void encode_in(CUcontext ctx, SourceLocation where, Encode&& encode) {
  Outcome r;
  if (ctx) {
    const SwitchCurrent current(ctx, where);
    r = encode();
  } else {
    r = encode();
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
    fail(r, where,
         r.result == ffi::CUDA_ERROR_INVALID_CONTEXT
             ? "encoding a tensor map needs a current context (the driver answers CUDA_ERROR_INVALID_CONTEXT without "
               "one): make one current (ScopedCurrent), or encode from a buffer or span that knows its context"
             : "");
}

template <class E>
auto raw_enum(E e) noexcept {
  if constexpr (std::is_same_v<E, TensorElement>) return static_cast<ffi::CUtensorMapDataType>(e);
  else if constexpr (std::is_same_v<E, TensorInterleave>) return static_cast<ffi::CUtensorMapInterleave>(e);
  else if constexpr (std::is_same_v<E, TensorSwizzle>) return static_cast<ffi::CUtensorMapSwizzle>(e);
  else if constexpr (std::is_same_v<E, TensorL2Promotion>) return static_cast<ffi::CUtensorMapL2promotion>(e);
  else return static_cast<ffi::CUtensorMapFloatOOBfill>(e);
}

}  // namespace detail

inline TensorMap TensorMap::encode_tiled(const detail::TensorMapDescription& d, const TensorDims<std::uint32_t>& box,
                                         std::optional<std::size_t> memory_bytes, SourceLocation where) {
  using detail::cat, detail::dims_text;
  if (box.size() != d.rank)
    detail::bad_box(tiled_op, cat({"the box ", dims_text(box), " has ", std::to_string(box.size()),
                                   " dimensions, the tensor (extents ", dims_text(d.extents), ") ",
                                   std::to_string(d.rank), ": give one box dimension per extent"}),
                    where);
  for (std::size_t i = 0; i < d.rank; ++i) {
    if (box[i] < 1 || box[i] > 256)
      detail::bad_box(tiled_op, cat({"box[", std::to_string(i), "] is ", std::to_string(box[i]), " (box ",
                                     dims_text(box), "): each box dimension is 1 to 256 elements"}),
                      where);
    if (box[i] > d.extents[i])
      detail::bad_box(tiled_op, cat({"the box ", dims_text(box), " exceeds the extents ", dims_text(d.extents),
                                     " in dimension ", std::to_string(i), " (", std::to_string(box[i]), " > ",
                                     std::to_string(d.extents[i]),
                                     "): a box lies within the tensor (boxes at its edges are filled out of bounds)"}),
                      where);
  }
  const std::uint64_t inner = std::uint64_t(box[0]) * d.element_bytes;
  if (d.options.interleave == TensorInterleave::none && inner % 16 != 0)
    detail::bad_box(tiled_op, cat({"the box's inner dimension is ", std::to_string(box[0]), " elements of ",
                                   std::to_string(d.element_bytes), " bytes = ", std::to_string(inner),
                                   " bytes, not a multiple of 16: TMA moves rows of whole 16-byte chunks"}),
                    where);
  detail::check_swizzle_span(tiled_op, d, inner, "box[0] elements", where);
  if (memory_bytes) detail::check_reach(tiled_op, d, *memory_bytes, where);
  TensorMap m;
  detail::encode_in(d.ctx, where, [&] {
    return OXICUDA_DRIVER(TensorMapEncodeTiled, &m.map_, detail::raw_enum(d.element),
                                 static_cast<ffi::cuuint32_t>(d.rank),
                                 reinterpret_cast<void*>(static_cast<std::uintptr_t>(d.address)), d.extents.data(),
                                 d.strides.data(), box.data(), d.element_strides.data(),
                                 detail::raw_enum(d.options.interleave), detail::raw_enum(d.options.swizzle),
                                 detail::raw_enum(d.options.l2_promotion), detail::raw_enum(d.options.oob_fill));
  });
  return m;
}

inline TensorMap TensorMap::encode_im2col(const detail::TensorMapDescription& d, const Im2colBox& box,
                                          SourceLocation where) {
  using detail::cat, detail::dims_text;
  const std::size_t corners = d.rank - 2;
  const int range = d.rank == 3 ? 32768 : d.rank == 4 ? 128 : 16;
  for (const auto* c : {&box.lower_corner, &box.upper_corner}) {
    const char* which = c == &box.lower_corner ? "lower" : "upper";
    if (c->size() != corners)
      detail::bad_box(im2col_op, cat({"the pixel box's ", which, " corner ", dims_text(*c), " has ",
                                      std::to_string(c->size()), " offsets; rank ", std::to_string(d.rank),
                                      " takes ", std::to_string(corners), " (one per spatial dimension)"}),
                      where);
    for (std::size_t i = 0; i < corners; ++i)
      if ((*c)[i] < -range || (*c)[i] > range - 1)
        detail::bad_box(im2col_op, cat({"the pixel box's ", which, " corner ", dims_text(*c), ": offset ",
                                        std::to_string((*c)[i]), " is outside [", std::to_string(-range), ", ",
                                        std::to_string(range - 1), "], the range for rank ", std::to_string(d.rank)}),
                        where);
  }
  if (box.channels_per_pixel < 1 || box.channels_per_pixel > 256)
    detail::bad_box(im2col_op, cat({"channels_per_pixel is ", std::to_string(box.channels_per_pixel),
                                    ": a load reads 1 to 256 channels of each pixel"}),
                    where);
  if (box.pixels_per_column < 1 || box.pixels_per_column > 1024)
    detail::bad_box(im2col_op, cat({"pixels_per_column is ", std::to_string(box.pixels_per_column),
                                    ": a load reads a column of 1 to 1024 pixels"}),
                    where);
  detail::check_swizzle_span(im2col_op, d, std::uint64_t(box.channels_per_pixel) * d.element_bytes,
                             "channels_per_pixel elements", where);
  TensorMap m;
  detail::encode_in(d.ctx, where, [&] {
    return OXICUDA_DRIVER(TensorMapEncodeIm2col, &m.map_, detail::raw_enum(d.element),
                                 static_cast<ffi::cuuint32_t>(d.rank),
                                 reinterpret_cast<void*>(static_cast<std::uintptr_t>(d.address)), d.extents.data(),
                                 d.strides.data(), box.lower_corner.data(), box.upper_corner.data(),
                                 box.channels_per_pixel, box.pixels_per_column, d.element_strides.data(),
                                 detail::raw_enum(d.options.interleave), detail::raw_enum(d.options.swizzle),
                                 detail::raw_enum(d.options.l2_promotion), detail::raw_enum(d.options.oob_fill));
  });
  return m;
}

OXICUDA_DETAIL_NAMESPACE_END
