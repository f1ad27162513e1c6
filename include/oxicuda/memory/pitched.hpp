// oxicuda/memory/pitched.hpp — PitchedBuffer<T> (cuMemAllocPitch), and 2D
// copies between pitched device memory, linear device memory and host rows
// (span_2d.hpp's views), synchronous and stream-ordered, with the extents
// checked (cuMemcpy2DAsync).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "buffer.hpp"
#include "span_2d.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

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
