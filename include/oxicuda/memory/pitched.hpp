// oxicuda/memory/pitched.hpp — 2D memory: DeviceSpan2D<T> and HostSpan2D<T>
// (rows of elements a pitch apart), PitchedBuffer<T> (cuMemAllocPitch), and
// 2D copies between any two of them, synchronous and stream-ordered, with
// the extents checked (cuMemcpy2DAsync).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "buffer.hpp"

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

template <class R>
CUcontext context_2d(const R& r) noexcept {
  if constexpr (device_range_2d<R>)
    return r.span_2d().context();
  else
    return nullptr;
}
template <class R>
CUstream stream_2d(const R& r) noexcept {
  if constexpr (device_range_2d<R>)
    return r.span_2d().stream();
  else
    return nullptr;
}

// One side of a CUDA_MEMCPY2D, after its checks.
template <class R>
void describe_2d(const R& r, bool destination, ffi::CUDA_MEMCPY2D& p, const char* operation, SourceLocation where) {
  const auto s = r.span_2d();
  (void)extent_bytes_2d<element_2d_t<R>>(s.width(), s.height(), s.pitch_bytes(),
                                        destination ? "the destination" : "the source", operation, where);
  if constexpr (requires { { r.context() } -> std::same_as<const Context&>; })  // a PitchedBuffer: moved-from?
    if (OXICUDA_DETAIL_UNLIKELY(!r.context())) empty_handle("oxicuda::PitchedBuffer", operation, where);
  if (destination) {
    p.dstPitch = s.pitch_bytes();
    if constexpr (device_range_2d<R>) {
      p.dstMemoryType = ffi::CU_MEMORYTYPE_DEVICE;
      p.dstDevice = s.device_ptr();
    } else {
      p.dstMemoryType = ffi::CU_MEMORYTYPE_HOST;
      p.dstHost = const_cast<void*>(static_cast<const void*>(s.data()));  // not const: asserted by the caller
    }
  } else {
    p.srcPitch = s.pitch_bytes();
    if constexpr (device_range_2d<R>) {
      p.srcMemoryType = ffi::CU_MEMORYTYPE_DEVICE;
      p.srcDevice = s.device_ptr();
    } else {
      p.srcMemoryType = ffi::CU_MEMORYTYPE_HOST;
      p.srcHost = s.data();
    }
  }
}

// The one implementation of every 2D copy, enqueued on `q`: the element
// types agree, the destination is mutable, both sides have the same extents
// and each is valid; an empty copy makes no call.
template <class Dst, class Src>
void copy_2d_on(CUstream q, const Dst& dst, const Src& src, const char* op, SourceLocation where) {
  using T = element_2d_t<Dst>;
  static_assert(same_element_v<T, element_2d_t<Src>>, "copy_2d: element types differ");
  static_assert(!std::is_const_v<T>, "copy_2d: the destination is const");
  const auto d = dst.span_2d();
  const auto s = src.span_2d();
  if (OXICUDA_DETAIL_UNLIKELY(d.width() != s.width() || d.height() != s.height()))
    bad_2d(op,
           cat({"extent mismatch: the destination is ", std::to_string(d.width()), " x ", std::to_string(d.height()),
                " elements (width x height), the source ", std::to_string(s.width()), " x ",
                std::to_string(s.height())}),
           where);
  ffi::CUDA_MEMCPY2D p{};
  describe_2d(dst, true, p, op, where);
  describe_2d(src, false, p, op, where);
  if (d.empty()) return;
  p.WidthInBytes = d.width() * sizeof(T);
  p.Height = d.height();
  check(OXICUDA_DRIVER(Memcpy2DAsync, &p, q), where);
}

template <class Dst, class Src>
concept copyable_2d = range_2d<Dst> && range_2d<Src> && (device_range_2d<Dst> || device_range_2d<Src>);

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
  if (pitch_bytes == 0) pitch_bytes = width * sizeof(T);
  const std::size_t need = detail::extent_bytes_2d<T>(width, height, pitch_bytes, "the view", op, where);
  if (OXICUDA_DETAIL_UNLIKELY(need > detail::span_bytes(s, op, where)))
    detail::bad_2d(op,
                   detail::cat({std::to_string(height), " rows of ", std::to_string(width), " elements, ",
                                std::to_string(pitch_bytes), " bytes apart, reach ", std::to_string(need),
                                " bytes; the range has ", std::to_string(s.size_bytes())}),
                   where);
  return DeviceSpan2D<T>(s.device_ptr(), width, height, pitch_bytes, s.context(), s.stream());
}

template <class R>
  requires detail::host_range<std::remove_cvref_t<R>>
[[nodiscard]] auto view_2d(R&& range, std::size_t width, std::size_t height, std::size_t pitch_bytes = 0,
                           SourceLocation where = SourceLocation::current()) {
  using T = detail::host_element_t<std::remove_reference_t<R>>;
  constexpr const char* op = "oxicuda::view_2d";
  if (pitch_bytes == 0) pitch_bytes = width * sizeof(T);
  const std::size_t need = detail::extent_bytes_2d<T>(width, height, pitch_bytes, "the view", op, where);
  const std::size_t have = std::size(range) * sizeof(T);
  if (OXICUDA_DETAIL_UNLIKELY(need > have))
    detail::bad_2d(op,
                   detail::cat({std::to_string(height), " rows of ", std::to_string(width), " elements, ",
                                std::to_string(pitch_bytes), " bytes apart, reach ", std::to_string(need),
                                " bytes; the range has ", std::to_string(have)}),
                   where);
  return HostSpan2D<T>(std::data(range), width, height, pitch_bytes);
}

// `height()` rows of `width()` elements of T in device memory, each row
// aligned for the device (cuMemAllocPitch chooses pitch_bytes(), a row's
// stride, at least width() * sizeof(T)). Freed when the buffer is
// destroyed; move-only. A kernel takes data() and pitch_bytes().
template <class T>
class PitchedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "PitchedBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;

  PitchedBuffer() noexcept = default;
  PitchedBuffer(const Context& ctx, std::size_t width, std::size_t height,
                SourceLocation where = SourceLocation::current());
  PitchedBuffer(PitchedBuffer&& o) noexcept { swap(o); }
  PitchedBuffer& operator=(PitchedBuffer&& o) noexcept {
    PitchedBuffer(std::move(o)).swap(*this);
    return *this;
  }
  PitchedBuffer(const PitchedBuffer&) = delete;
  PitchedBuffer& operator=(const PitchedBuffer&) = delete;
  ~PitchedBuffer() { release(); }

  [[nodiscard]] std::size_t width() const noexcept { return width_; }
  [[nodiscard]] std::size_t height() const noexcept { return height_; }
  [[nodiscard]] std::size_t pitch_bytes() const noexcept { return pitch_; }
  [[nodiscard]] bool empty() const noexcept { return width_ == 0 || height_ == 0; }
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }
  [[nodiscard]] DeviceSpan2D<T> span_2d() const noexcept {
    return {ptr_, width_, height_, pitch_, ctx_.raw(), nullptr};
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator DeviceSpan2D<T>() const noexcept { return span_2d(); }
  [[nodiscard]] DeviceSpan<T> row(std::size_t y) const noexcept { return span_2d().row(y); }
  [[nodiscard]] DeviceSpan2D<T> block(std::size_t x, std::size_t y, std::size_t width,
                                      std::size_t height) const noexcept {
    return span_2d().block(x, y, width, height);
  }

  void swap(PitchedBuffer& o) noexcept {
    std::swap(ctx_, o.ctx_);
    std::swap(ptr_, o.ptr_);
    std::swap(width_, o.width_);
    std::swap(height_, o.height_);
    std::swap(pitch_, o.pitch_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t width_ = 0;
  std::size_t height_ = 0;
  std::size_t pitch_ = 0;
};

template <class T>
PitchedBuffer<T>::PitchedBuffer(const Context& ctx, std::size_t width, std::size_t height, SourceLocation where)
    : ctx_(ctx) {
  constexpr const char* op = "oxicuda::PitchedBuffer::PitchedBuffer";
  if (!ctx) detail::empty_handle("oxicuda::Context", op, where);
  const std::size_t row = detail::checked_bytes(width, sizeof(T), op, where);
  if (width == 0 || height == 0) return;  // nothing to allocate
  // The widest access the rows get, which the driver aligns the pitch for: 4, 8 or 16 bytes.
  constexpr unsigned access = sizeof(T) <= 4 ? 4 : sizeof(T) <= 8 ? 8 : 16;
  detail::reclaim();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemAllocPitch, &ptr_, &pitch_, row, height, access), where);
  width_ = width;
  height_ = height;
}

template <class T>
void PitchedBuffer<T>::release() noexcept {
  if (ptr_ != 0) {
    constexpr const char* during = "freeing an oxicuda::PitchedBuffer";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(MemFree, ptr_), during);
  }
  ptr_ = 0;
  width_ = height_ = pitch_ = 0;
}

// 2D copies between device memory (PitchedBuffer, DeviceSpan2D, a view_2d
// of a DeviceBuffer) and host rows (HostSpan2D, a view_2d of a vector), in
// any direction, device to device included: the element types must be the
// same and both sides must have the same width and height (in elements);
// each side's pitch is its own. One cuMemcpy2DAsync. The synchronous form
// follows copy.hpp's ordering rule (the bytes are in place when it
// returns); with a stream it is enqueued there and waited for; the _async
// form only enqueues (from pageable host memory the driver may stage it).
template <class Dst, class Src>
  requires detail::copyable_2d<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy_2d(const Dst& dst, const Src& src, SourceLocation where = SourceLocation::current()) {
  const CUcontext ctx = detail::context_2d(dst) ? detail::context_2d(dst) : detail::context_2d(src);
  const CUstream on = detail::stream_2d(dst) ? detail::stream_2d(dst) : detail::stream_2d(src);
  detail::synchronously(ctx, on, detail::stream_2d(src), where,
                        [&](CUstream q) { detail::copy_2d_on(q, dst, src, "oxicuda::copy_2d", where); });
}

template <class Dst, class Src>
  requires detail::copyable_2d<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy_2d(StreamRef stream, const Dst& dst, const Src& src, SourceLocation where = SourceLocation::current()) {
  detail::on_stream_and_wait(stream, "oxicuda::copy_2d", where,
                             [&](CUstream q) { detail::copy_2d_on(q, dst, src, "oxicuda::copy_2d", where); });
}

template <class Dst, class Src>
  requires detail::copyable_2d<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy_2d_async(StreamRef stream, const Dst& dst, const Src& src, SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::copy_2d_async", where,
                    [&](CUstream q) { detail::copy_2d_on(q, dst, src, "oxicuda::copy_2d_async", where); });
}

OXICUDA_DETAIL_NAMESPACE_END
