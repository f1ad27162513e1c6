// oxicuda/memory/span.hpp — DeviceSpan<T>, a view of elements in device memory, and
// the device_range concept that copies, fills and launches accept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../core/ffi.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A view of `size()` elements of T in device memory. Passes to a typed
// kernel parameter `T*` (and converts to T* wherever one is wanted). It may
// know the context of its memory (a span of a DeviceBuffer does), which
// synchronous copies and fills make current for their call, and, for the
// memory of a stream-ordered buffer (allocate_async), the stream it is
// ordered on, after which synchronous copies and fills order themselves.
template <class T>
class DeviceSpan {
 public:
  using element_type = T;

  constexpr DeviceSpan() noexcept = default;
  constexpr DeviceSpan(ffi::CUdeviceptr ptr, std::size_t count, CUcontext ctx = nullptr,
                       CUstream stream = nullptr) noexcept
      : ptr_(ptr), count_(count), ctx_(ctx), stream_(stream) {}
  // A span of T converts to a span of const T.
  // clang-format off
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr DeviceSpan(DeviceSpan<U> other) noexcept
      : ptr_(other.device_ptr()), count_(other.size()), ctx_(other.context()), stream_(other.stream()) {}
  // clang-format on

  [[nodiscard]] constexpr ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return count_; }
  // size() * sizeof(T); a count too large for that (a span made from a raw
  // pointer and a wrong count) gives SIZE_MAX instead of wrapping, and every
  // copy and fill of such a span is an Error.
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept {
    return count_ > std::size_t(-1) / sizeof(T) ? std::size_t(-1) : count_ * sizeof(T);
  }
  // Whether size() * sizeof(T) fits a size_t.
  [[nodiscard]] constexpr bool size_fits() const noexcept { return count_ <= std::size_t(-1) / sizeof(T); }
  [[nodiscard]] constexpr bool empty() const noexcept { return count_ == 0; }
  // The context of the memory, when known (else null).
  [[nodiscard]] constexpr CUcontext context() const noexcept { return ctx_; }
  // The stream that a stream-ordered buffer's memory is ordered on (else null).
  [[nodiscard]] constexpr CUstream stream() const noexcept { return stream_; }
  // Elements [offset, offset + count); clamped to the span.
  [[nodiscard]] constexpr DeviceSpan subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    if (offset > count_) offset = count_;
    if (count > count_ - offset) count = count_ - offset;
    return {ptr_ + offset * sizeof(T), count, ctx_, stream_};
  }
  [[nodiscard]] constexpr DeviceSpan device_span() const noexcept { return *this; }
  // NOLINTNEXTLINE(google-explicit-constructor): a device span is a kernel's T*
  operator T*() const noexcept { return data(); }

 private:
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

// `count` elements of T in device memory, freed when the buffer is
// destroyed. Move-only, like std::vector's storage; the elements are not
// initialized. Allocated either synchronously in a context (cuMemAlloc; freed
// with cuMemFree) or stream-ordered on a stream (allocate_async:
// cuMemAllocAsync; freed with cuMemFreeAsync on the stream given to free_on,

namespace detail {

// A device range: anything with device_span() (DeviceSpan, DeviceBuffer).
template <class R>
concept device_range = requires(const R& r) {
  r.device_span();
};

template <class R>
using device_element_t = typename decltype(std::declval<const R&>().device_span())::element_type;

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
