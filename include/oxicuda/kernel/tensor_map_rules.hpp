// oxicuda/kernel/tensor_map_rules.hpp — what a tensor map (a TMA descriptor)
// may describe: its element types, dimension lists and options, and the
// driver's documented rules for them, checked before the driver sees a
// description so that a broken rule is an Error that names it and the values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The element types a tensor map describes (CUtensorMapDataType; the packed
// 4- and 6-bit types are not offered).
enum class TensorElement : int {
  uint8 = 0,
  uint16 = 1,
  uint32 = 2,
  int32 = 3,
  uint64 = 4,
  int64 = 5,
  float16 = 6,
  float32 = 7,
  float64 = 8,
  bfloat16 = 9,
  float32_ftz = 10,
  tfloat32 = 11,
  tfloat32_ftz = 12,
};

// The element type of T: deduced for the unsigned integers, int32, int64,
// float and double. Specialize it for a type of your own, e.g. for a half:
//   template <> struct oxicuda::tensor_element<__half>
//       : std::integral_constant<oxicuda::TensorElement, oxicuda::TensorElement::float16> {};
// or name the element in TensorMapOptions::element (a float16 held as std::uint16_t).
template <class T>
struct tensor_element {};
namespace detail {
template <class T>
constexpr TensorElement deduced_element() noexcept {
  if constexpr (std::is_same_v<T, float>) return TensorElement::float32;
  else if constexpr (std::is_same_v<T, double>) return TensorElement::float64;
  else if constexpr (std::is_signed_v<T>) return sizeof(T) == 4 ? TensorElement::int32 : TensorElement::int64;
  else return sizeof(T) == 1 ? TensorElement::uint8 : sizeof(T) == 2 ? TensorElement::uint16
                                                    : sizeof(T) == 4 ? TensorElement::uint32 : TensorElement::uint64;
}
template <class T>
concept deducible_element = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                            (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_unsigned_v<T>) ||
                            (std::is_integral_v<T> && std::is_signed_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));
}  // namespace detail
template <class T>
  requires detail::deducible_element<T>
struct tensor_element<T> : std::integral_constant<TensorElement, detail::deduced_element<T>()> {};

// How the box lands in shared memory: 16-byte chunks swizzled within a
// 32-, 64- or 128-byte span (or 32- or 64-byte atoms within 128 bytes).
enum class TensorSwizzle : int {
  none = 0,
  bytes_32 = 1,
  bytes_64 = 2,
  bytes_128 = 3,
  bytes_128_atom_32 = 4,
  bytes_128_atom_32_flip_8 = 5,
  bytes_128_atom_64 = 6,
};
// Interleaved layouts (NC/8HWC8: 16 bytes; NC/16HWC16: 32 bytes).
enum class TensorInterleave : int { none = 0, bytes_16 = 1, bytes_32 = 2 };
// The granularity at which L2 is filled from memory.
enum class TensorL2Promotion : int { none = 0, bytes_64 = 1, bytes_128 = 2, bytes_256 = 3 };
// What out-of-bounds elements read as: zeros, or (floating-point elements
// only) a NaN that FMA treats as zero.
enum class TensorOobFill : int { zeros = 0, nan_request_zero_fma = 1 };

// Up to five values, one per dimension, the innermost (contiguous) first:
// extents {columns, rows}. From a brace list or any contiguous range of V; a
// list of more than five keeps its count, and the rank check refuses it.
template <class V>
class TensorDims {
 public:
  static constexpr std::size_t capacity = 5;
  constexpr TensorDims() noexcept = default;
  constexpr TensorDims(std::initializer_list<V> values) noexcept : TensorDims(values.begin(), values.size()) {}
  // clang-format off
  template <class R>
    requires(!std::is_same_v<std::remove_cvref_t<R>, TensorDims> && requires(const R& r) {
      { std::data(r) } -> std::convertible_to<const V*>;
      std::size(r);
    })
  constexpr TensorDims(const R& r) noexcept : TensorDims(std::data(r), std::size(r)) {}  // NOLINT: a range's values
  // clang-format on
  [[nodiscard]] constexpr std::size_t size() const noexcept { return n_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return n_ == 0; }
  [[nodiscard]] constexpr V operator[](std::size_t i) const noexcept { return i < capacity ? v_[i] : V{}; }
  [[nodiscard]] constexpr const V* data() const noexcept { return v_.data(); }

 private:
  constexpr TensorDims(const V* p, std::size_t n) noexcept : n_(n) {
    for (std::size_t i = 0; i < n && i < capacity; ++i) v_[i] = p[i];
  }
  std::array<V, capacity> v_{};
  std::size_t n_ = 0;
};

// The options of a tensor map, by designated initializers:
//   {.swizzle = TensorSwizzle::bytes_128, .oob_fill = TensorOobFill::nan_request_zero_fma}
struct TensorMapOptions {
  std::optional<TensorElement> element{};  // default: tensor_element<T>
  TensorDims<std::uint32_t> element_strides{};  // the traversal step per dimension, 1 to 8; empty: all 1
  TensorInterleave interleave = TensorInterleave::none;
  TensorSwizzle swizzle = TensorSwizzle::none;
  TensorL2Promotion l2_promotion = TensorL2Promotion::none;
  TensorOobFill oob_fill = TensorOobFill::zeros;
};

namespace detail {

inline constexpr std::uint64_t tensor_extent_limit = 1ull << 32;
inline constexpr std::uint64_t tensor_stride_limit = 1ull << 40;

inline constexpr const char* element_names[] = {"uint8",   "uint16",   "uint32",   "int32",       "uint64",
                                                "int64",   "float16",  "float32",  "float64",     "bfloat16",
                                                "float32_ftz", "tfloat32", "tfloat32_ftz"};
inline constexpr unsigned char element_sizes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

// A description with its element resolved and its lists filled to the rank
// (strides: packed where none were given; element strides: 1).
struct TensorMapDescription {
  TensorElement element = TensorElement::uint8;
  std::size_t element_bytes = 1;
  std::uint64_t address = 0;
  std::size_t rank = 0;
  TensorDims<std::uint64_t> extents;
  std::array<std::uint64_t, 4> strides{};
  std::array<std::uint32_t, 5> element_strides{};
  TensorMapOptions options;
  CUcontext ctx = nullptr;  // the memory's context, made current to encode (null: the current one)
};

inline TensorMapDescription in_context(TensorMapDescription d, CUcontext ctx) noexcept {
  d.ctx = ctx;
  return d;
}

inline std::string hex_text(std::uint64_t v) {
  std::string s;
  do s.insert(s.begin(), "0123456789abcdef"[v % 16]), v /= 16;
  while (v);
  return s;
}

template <class V>
std::string dims_text(const TensorDims<V>& d) {
  std::string s = "{";
  for (std::size_t i = 0; i < d.size() && i < d.capacity; ++i) s = cat({s, i ? ", " : "", std::to_string(d[i])});
  return cat({s, d.size() > d.capacity ? ", ...}" : "}"});
}

// The description's rules that tiled and im2col maps share (cuda.h's
// cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col). `rank_least` is 1 for
// a tiled map, 3 for im2col. Raises the first rule broken.
inline TensorMapDescription describe_tensor(const char* op, std::optional<TensorElement> deduced, std::size_t type_bytes,
                                            std::uint64_t address, const TensorDims<std::uint64_t>& extents,
                                            const TensorDims<std::uint64_t>& strides, const TensorMapOptions& o,
                                            std::size_t rank_least, SourceLocation where) {
  const auto bad = [&](const std::string& why) { raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op, why, where)); };
  const auto in = [](auto e, int last) { return static_cast<int>(e) >= 0 && static_cast<int>(e) <= last; };
  TensorMapDescription d;
  d.options = o;
  if (!in(o.interleave, 2) || !in(o.swizzle, 6) || !in(o.l2_promotion, 3) || !in(o.oob_fill, 1) ||
      (o.element && !in(*o.element, 12)))
    bad(cat({"an option is not one of its enumeration's values (element ", o.element ? std::to_string(int(*o.element)) : "-",
             ", interleave ", std::to_string(int(o.interleave)), ", swizzle ", std::to_string(int(o.swizzle)),
             ", L2 promotion ", std::to_string(int(o.l2_promotion)), ", OOB fill ", std::to_string(int(o.oob_fill)), ")"}));
  if (!o.element && !deduced)
    bad("the element type has no TMA element type: name one in TensorMapOptions::element, or specialize "
        "oxicuda::tensor_element<T>");
  d.element = o.element ? *o.element : *deduced;
  d.element_bytes = element_sizes[int(d.element)];
  const std::string element = cat({element_names[int(d.element)], " (", std::to_string(d.element_bytes), " bytes)"});
  if (d.element_bytes != type_bytes)
    bad(cat({"the element ", element, " is not the size of the memory's element type (", std::to_string(type_bytes),
             " bytes)"}));
  const bool interleaved = o.interleave != TensorInterleave::none;
  d.rank = extents.size();
  const std::size_t least = interleaved && rank_least < 3 ? 3 : rank_least;
  if (d.rank < least || d.rank > 5)
    bad(cat({"rank ", std::to_string(d.rank), " (extents ", dims_text(extents), "): a ",
             rank_least == 3 ? "im2col tensor map has 3 to 5 dimensions"
             : interleaved   ? "tensor map with an interleaved layout has 3 to 5 dimensions"
                             : "tensor map has 1 to 5 dimensions"}));
  d.extents = extents;
  d.address = address;
  const std::uint64_t align = o.interleave == TensorInterleave::bytes_32 ? 32 : 16;
  if (address == 0) bad("the global address is null: a tensor map describes device memory");
  if (address % align != 0)
    bad(cat({"the global address 0x", hex_text(address), " is not aligned to ", std::to_string(align), " bytes",
             align == 32 ? " (32 with a 32-byte interleave)" : "", ": TMA needs a ", std::to_string(align),
             "-byte aligned start"}));
  for (std::size_t i = 0; i < d.rank; ++i)
    if (extents[i] == 0 || extents[i] > tensor_extent_limit)
      bad(cat({"extent[", std::to_string(i), "] is ", std::to_string(extents[i]), " (extents ", dims_text(extents),
               "): each extent is 1 to 2^32 elements"}));
  if (strides.empty()) {
    std::uint64_t s = extents[0] * d.element_bytes;
    for (std::size_t i = 0; i + 1 < d.rank; ++i) {
      d.strides[i] = s;
      s = extents[i + 1] > (std::uint64_t(-1) / s) ? std::uint64_t(-1) : s * extents[i + 1];
    }
  } else if (strides.size() != d.rank - 1) {
    bad(cat({std::to_string(strides.size()), " strides ", dims_text(strides), " for rank ", std::to_string(d.rank),
             ": give the byte strides of dimensions 1 to rank - 1 (", std::to_string(d.rank - 1),
             "), or none for a packed tensor"}));
  } else {
    for (std::size_t i = 0; i + 1 < d.rank; ++i) d.strides[i] = strides[i];
  }
  const std::uint64_t stride_align = o.interleave == TensorInterleave::bytes_32 ? 32 : 16;
  for (std::size_t i = 0; i + 1 < d.rank; ++i)
    if (d.strides[i] % stride_align != 0 || d.strides[i] >= tensor_stride_limit)
      bad(cat({"the stride of dimension ", std::to_string(i + 1), " is ", std::to_string(d.strides[i]),
               " bytes", strides.empty() ? " (packed)" : "", ": strides are multiples of ", std::to_string(stride_align),
               " bytes below 2^40", strides.empty() ? "; pad the rows and give the strides" : ""}));
  if (!o.element_strides.empty() && o.element_strides.size() != d.rank)
    bad(cat({std::to_string(o.element_strides.size()), " element strides ", dims_text(o.element_strides),
             " for rank ", std::to_string(d.rank), ": give one per dimension, or none"}));
  for (std::size_t i = 0; i < d.rank; ++i) {
    d.element_strides[i] = o.element_strides.empty() ? 1 : o.element_strides[i];
    if (d.element_strides[i] < 1 || d.element_strides[i] > 8)
      bad(cat({"element stride[", std::to_string(i), "] is ", std::to_string(d.element_strides[i]),
               ": element strides are 1 to 8"}));
  }
  if (o.interleave == TensorInterleave::bytes_32 && o.swizzle != TensorSwizzle::bytes_32)
    bad(cat({"a 32-byte interleave needs the 32-byte swizzle (TensorSwizzle::bytes_32), not swizzle ",
             std::to_string(int(o.swizzle))}));
  const bool floating = d.element >= TensorElement::float16;
  if (o.oob_fill == TensorOobFill::nan_request_zero_fma && !floating)
    bad(cat({"the NaN out-of-bounds fill is for floating-point elements, not ", element}));
  return d;
}

// The swizzle rule on the box's inner dimension (interleave none): at most
// the swizzle's span.
inline void check_swizzle_span(const char* op, const TensorMapDescription& d, std::uint64_t inner_bytes,
                               const char* inner, SourceLocation where) {
  if (d.options.interleave != TensorInterleave::none || d.options.swizzle == TensorSwizzle::none) return;
  const std::uint64_t span = d.options.swizzle == TensorSwizzle::bytes_32 ? 32
                             : d.options.swizzle == TensorSwizzle::bytes_64 ? 64 : 128;
  if (inner_bytes > span)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                cat({"the box's inner dimension (", inner, ") is ", std::to_string(inner_bytes), " bytes, more than the ",
                     std::to_string(span), "-byte span of its swizzle: narrow the box or take a wider swizzle"}),
                where));
}

// Whether a tensor of this description fits `bytes` of memory from its
// address: the last element's end, (extent[i] - 1) * stride[i] summed, plus
// a row's bytes.
inline void check_reach(const char* op, const TensorMapDescription& d, std::size_t bytes, SourceLocation where) {
  const auto mul = [](std::uint64_t a, std::uint64_t b) { return a && b > std::uint64_t(-1) / a ? std::uint64_t(-1) : a * b; };
  const auto add = [](std::uint64_t a, std::uint64_t b) { return a > std::uint64_t(-1) - b ? std::uint64_t(-1) : a + b; };
  std::uint64_t reach = mul(d.extents[0], d.element_bytes);
  for (std::size_t i = 1; i < d.rank; ++i) reach = add(reach, mul(d.extents[i] - 1, d.strides[i - 1]));
  if (reach > bytes)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                cat({"the tensor (extents ", dims_text(d.extents), ") reaches ", std::to_string(reach),
                     " bytes from its address, but the memory holds ", std::to_string(bytes), " bytes"}),
                where));
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
