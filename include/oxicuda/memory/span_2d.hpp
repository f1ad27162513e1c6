// oxicuda/memory/span_2d.hpp — 2D views: DeviceSpan2D<T> and HostSpan2D<T>
// (rows of elements a pitch apart), their extent checks, and view_2d over
// a linear device or host range.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "copy.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// `height()` rows of `width()` elements of T in device memory, each row
// `pitch_bytes()` after the one before it. Like DeviceSpan, it may know the
// memory's context and stream-ordering stream. Its extents are checked when
// it is used (a 2D copy): a row wider than the pitch is an Error.
template <class T>
class DeviceSpan2D {
 public:
  using element_type = T;

  constexpr DeviceSpan2D() noexcept = default;
  constexpr DeviceSpan2D(ffi::CUdeviceptr ptr, std::size_t width, std::size_t height, std::size_t pitch_bytes,
                         CUcontext ctx = nullptr, CUstream stream = nullptr) noexcept
      : ptr_(ptr), width_(width), height_(height), pitch_(pitch_bytes), ctx_(ctx), stream_(stream) {}
  // clang-format off
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr DeviceSpan2D(DeviceSpan2D<U> o) noexcept  // NOLINT(google-explicit-constructor): T to const T
      : DeviceSpan2D(o.device_ptr(), o.width(), o.height(), o.pitch_bytes(), o.context(), o.stream()) {}
  // clang-format on

  [[nodiscard]] constexpr ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  // The first row's address as a T* (a kernel's argument, with pitch_bytes()).
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] constexpr std::size_t width() const noexcept { return width_; }
  [[nodiscard]] constexpr std::size_t height() const noexcept { return height_; }
  [[nodiscard]] constexpr std::size_t pitch_bytes() const noexcept { return pitch_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return width_ == 0 || height_ == 0; }
  [[nodiscard]] constexpr CUcontext context() const noexcept { return ctx_; }
  [[nodiscard]] constexpr CUstream stream() const noexcept { return stream_; }
  // Row `y` as a DeviceSpan (empty past the last row).
  [[nodiscard]] constexpr DeviceSpan<T> row(std::size_t y) const noexcept {
    return y < height_ ? DeviceSpan<T>(ptr_ + y * pitch_, width_, ctx_, stream_) : DeviceSpan<T>();
  }
  // The rectangle of `width` x `height` elements from column x, row y;
  // clamped to this one.
  [[nodiscard]] constexpr DeviceSpan2D block(std::size_t x, std::size_t y, std::size_t width,
                                             std::size_t height) const noexcept {
    if (x > width_) x = width_;
    if (y > height_) y = height_;
    if (width > width_ - x) width = width_ - x;
    if (height > height_ - y) height = height_ - y;
    return {ptr_ + y * pitch_ + x * sizeof(T), width, height, pitch_, ctx_, stream_};
  }
  [[nodiscard]] constexpr DeviceSpan2D span_2d() const noexcept { return *this; }

 private:
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t width_ = 0;
  std::size_t height_ = 0;
  std::size_t pitch_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

// `height()` rows of `width()` elements of T in host memory, each row
// `pitch_bytes()` after the one before it (a matrix, an image, or a
// rectangle of a larger one).
template <class T>
class HostSpan2D {
 public:
  using element_type = T;

  constexpr HostSpan2D() noexcept = default;
  constexpr HostSpan2D(T* data, std::size_t width, std::size_t height, std::size_t pitch_bytes) noexcept
      : data_(data), width_(width), height_(height), pitch_(pitch_bytes) {}
  // clang-format off
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr HostSpan2D(HostSpan2D<U> o) noexcept  // NOLINT(google-explicit-constructor): T to const T
      : HostSpan2D(o.data(), o.width(), o.height(), o.pitch_bytes()) {}
  // clang-format on

  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t width() const noexcept { return width_; }
  [[nodiscard]] constexpr std::size_t height() const noexcept { return height_; }
  [[nodiscard]] constexpr std::size_t pitch_bytes() const noexcept { return pitch_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return width_ == 0 || height_ == 0; }
  // Row `y` (empty past the last row).
  [[nodiscard]] std::span<T> row(std::size_t y) const noexcept {
    if (y >= height_) return {};
    using Byte = std::conditional_t<std::is_const_v<T>, const std::byte, std::byte>;
    return {reinterpret_cast<T*>(reinterpret_cast<Byte*>(data_) + y * pitch_), width_};
  }
  [[nodiscard]] constexpr HostSpan2D span_2d() const noexcept { return *this; }

 private:
  T* data_ = nullptr;
  std::size_t width_ = 0;
  std::size_t height_ = 0;
  std::size_t pitch_ = 0;
};

namespace detail {

[[noreturn]] OXICUDA_DETAIL_COLD inline void bad_2d(const char* operation, const std::string& what,
                                                    SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, what, where));
}

// The bytes that `height` rows of `width` elements `pitch` bytes apart
// reach, checked: rows no wider than the pitch, a pitch that keeps every row
// aligned to T, and no size_t overflow. `side` names the side for the message.
template <class T>
std::size_t extent_bytes_2d(std::size_t width, std::size_t height, std::size_t pitch, const char* side,
                            const char* operation, SourceLocation where) {
  if (width == 0 || height == 0) return 0;
  const auto fmt = [&] {
    return cat({side, ": ", std::to_string(height), " rows of ", std::to_string(width), " elements of ",
                std::to_string(sizeof(T)), " bytes, a pitch of ", std::to_string(pitch), " bytes"});
  };
  if (width > std::size_t(-1) / sizeof(T) || width * sizeof(T) > pitch)
    bad_2d(operation, cat({fmt(), ": a row is wider than the pitch (the pitch is the bytes from one row to the next)"}),
           where);
  if (pitch % alignof(T) != 0)
    bad_2d(operation, cat({fmt(), ": the pitch is not a multiple of the element's alignment (", std::to_string(alignof(T)),
                           " bytes), so rows after the first would be misaligned"}),
           where);
  if (height - 1 > (std::size_t(-1) - width * sizeof(T)) / pitch)
    bad_2d(operation, cat({fmt(), ": more bytes than a size_t holds"}), where);
  return (height - 1) * pitch + width * sizeof(T);
}

// view_2d's checks, for either side: the pitch (0: rows packed), the rows'
// extent, and that they fit the `have` bytes of the range. Gives the pitch.
template <class T>
std::size_t view_pitch_2d(std::size_t width, std::size_t height, std::size_t pitch, std::size_t have,
                          SourceLocation where) {
  constexpr const char* op = "oxicuda::view_2d";
  if (pitch == 0) pitch = width * sizeof(T);
  const std::size_t need = extent_bytes_2d<T>(width, height, pitch, "the view", op, where);
  if (OXICUDA_DETAIL_UNLIKELY(need > have))
    bad_2d(op,
           cat({std::to_string(height), " rows of ", std::to_string(width), " elements, ", std::to_string(pitch),
                " bytes apart, reach ", std::to_string(need), " bytes; the range has ", std::to_string(have)}),
           where);
  return pitch;
}

template <class R>
concept device_range_2d = requires(const R& r) {
  { r.span_2d() } -> std::same_as<DeviceSpan2D<typename decltype(r.span_2d())::element_type>>;
};
template <class R>
concept host_range_2d = requires(const R& r) {
  { r.span_2d() } -> std::same_as<HostSpan2D<typename decltype(r.span_2d())::element_type>>;
};
template <class R>
concept range_2d = device_range_2d<R> || host_range_2d<R>;

template <class R>
using element_2d_t = typename decltype(std::declval<const R&>().span_2d())::element_type;

}  // namespace detail

// A 2D view of a linear range: `height` rows of `width` elements, each
// `pitch_bytes` after the one before (0: width * sizeof(T), rows packed).
// A device range (DeviceBuffer, DeviceSpan, ManagedBuffer) gives a
// DeviceSpan2D; a contiguous host range (std::vector, std::array,
// PinnedBuffer) a HostSpan2D. An Error when the rows do not fit the range,
// a row is wider than the pitch, or the pitch misaligns the rows.
template <class R>
  requires detail::device_range<std::remove_cvref_t<R>>
[[nodiscard]] auto view_2d(R&& range, std::size_t width, std::size_t height, std::size_t pitch_bytes = 0,
                           SourceLocation where = SourceLocation::current()) {
  using T = detail::device_element_t<std::remove_cvref_t<R>>;
  constexpr const char* op = "oxicuda::view_2d";
  detail::check_buffer_handle(range, op, where);
  const auto s = range.device_span();
  pitch_bytes = detail::view_pitch_2d<T>(width, height, pitch_bytes, detail::span_bytes(s, op, where), where);
  return DeviceSpan2D<T>(s.device_ptr(), width, height, pitch_bytes, s.context(), s.stream());
}

template <class R>
  requires detail::host_range<std::remove_cvref_t<R>>
[[nodiscard]] auto view_2d(R&& range, std::size_t width, std::size_t height, std::size_t pitch_bytes = 0,
                           SourceLocation where = SourceLocation::current()) {
  using T = detail::host_element_t<std::remove_reference_t<R>>;
  pitch_bytes = detail::view_pitch_2d<T>(width, height, pitch_bytes, std::size(range) * sizeof(T), where);
  return HostSpan2D<T>(std::data(range), width, height, pitch_bytes);
}

OXICUDA_DETAIL_NAMESPACE_END
