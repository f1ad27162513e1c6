// oxicuda/span.hpp — DeviceSpan<T>, a view of elements in device memory, and
// the device_range concept that copies, fills and launches accept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ffi.hpp"

OXICUDA_NAMESPACE_BEGIN

// A view of `size()` elements of T in device memory. Passes to a typed
// kernel parameter `T*` (and converts to T* wherever one is wanted). It may
// know the context of its memory (a span of a DeviceBuffer does), which
// synchronous copies and fills make current for their call.
template <class T>
class DeviceSpan {
 public:
  using element_type = T;

  constexpr DeviceSpan() noexcept = default;
  constexpr DeviceSpan(ffi::CUdeviceptr ptr, std::size_t count, CUcontext ctx = nullptr) noexcept
      : ptr_(ptr), count_(count), ctx_(ctx) {}
  // A span of T converts to a span of const T.
  // clang-format off
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr DeviceSpan(DeviceSpan<U> other) noexcept
      : ptr_(other.device_ptr()), count_(other.size()), ctx_(other.context()) {}
  // clang-format on

  [[nodiscard]] constexpr ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return count_; }
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] constexpr bool empty() const noexcept { return count_ == 0; }
  // The context of the memory, when known (else null).
  [[nodiscard]] constexpr CUcontext context() const noexcept { return ctx_; }
  // Elements [offset, offset + count); clamped to the span.
  [[nodiscard]] constexpr DeviceSpan subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    if (offset > count_) offset = count_;
    if (count > count_ - offset) count = count_ - offset;
    return {ptr_ + offset * sizeof(T), count, ctx_};
  }
  [[nodiscard]] constexpr DeviceSpan device_span() const noexcept { return *this; }
  // NOLINTNEXTLINE(google-explicit-constructor): a device span is a kernel's T*
  operator T*() const noexcept { return data(); }

 private:
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
  CUcontext ctx_ = nullptr;
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

OXICUDA_NAMESPACE_END
