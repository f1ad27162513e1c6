// oxicuda/memory.hpp — device memory: DeviceBuffer<T> and copies.
#pragma once

#include "stream.hpp"

#include <span>
#include <type_traits>

OXICUDA_NAMESPACE_BEGIN

// `count` elements of T in device memory, allocated in a context and freed
// when the buffer is destroyed. Move-only, like std::vector's storage.
template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;

  DeviceBuffer() noexcept = default;
  // Uninitialized storage for `count` elements, allocated with `ctx` current.
  DeviceBuffer(const Context& ctx, std::size_t count, SourceLocation where = SourceLocation::current());
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ctx_(std::move(other.ctx_)), ptr_(std::exchange(other.ptr_, 0)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      ctx_ = std::move(other.ctx_);
      ptr_ = std::exchange(other.ptr_, 0);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  // The device address, as the driver API spells it.
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  // The device address as a T* for a kernel argument (not dereferenceable on the host).
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }

  // Synchronous copies between this buffer and host memory; the host range
  // must have exactly size() elements.
  void copy_from(std::span<const T> host, SourceLocation where = SourceLocation::current());
  void copy_to(std::span<T> host, SourceLocation where = SourceLocation::current()) const;

 private:
  void release() noexcept;
  void check_size(std::size_t n, const char* operation, SourceLocation where) const;

  Context ctx_;
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
};

namespace detail {

// ScopedCurrent for destructors: never throws, reports failures.
class ScopedCurrentNothrow {
 public:
  explicit ScopedCurrentNothrow(CUcontext ctx) noexcept {
    auto get = api().CtxGetCurrent;
    auto set = api().CtxSetCurrent;
    if (get && set && get(&previous_) == ffi::CUDA_SUCCESS && previous_ != ctx)
      switched_ = set(ctx) == ffi::CUDA_SUCCESS;
  }
  ScopedCurrentNothrow(const ScopedCurrentNothrow&) = delete;
  ScopedCurrentNothrow& operator=(const ScopedCurrentNothrow&) = delete;
  ~ScopedCurrentNothrow() {
    if (switched_) call_nothrow<ffi::Entry::CtxSetCurrent>(previous_);
  }

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

[[noreturn]] OXICUDA_COLD inline void size_mismatch(const char* operation, std::size_t expected, std::size_t got,
                                                    std::size_t element_size, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
              "size mismatch: the device side has " + std::to_string(expected) + " elements, the other side " +
                  std::to_string(got) + " (element size " + std::to_string(element_size) + " bytes)",
              where));
}

}  // namespace detail

template <class T>
DeviceBuffer<T>::DeviceBuffer(const Context& ctx, std::size_t count, SourceLocation where) : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::DeviceBuffer::DeviceBuffer", where);
  if (count == 0) return;
  if (count > static_cast<std::size_t>(-1) / sizeof(T))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::DeviceBuffer::DeviceBuffer",
                        std::to_string(count) + " elements of " + std::to_string(sizeof(T)) +
                            " bytes overflow size_t",
                        where));
  ScopedCurrent current(ctx, where);
  detail::call<ffi::Entry::MemAlloc>(where, &ptr_, count * sizeof(T));
  count_ = count;
}

template <class T>
void DeviceBuffer<T>::release() noexcept {
  if (ptr_ == 0) return;
  detail::ScopedCurrentNothrow current(ctx_.raw());
  detail::call_nothrow<ffi::Entry::MemFree>(ptr_);
  ptr_ = 0;
  count_ = 0;
}

template <class T>
void DeviceBuffer<T>::check_size(std::size_t n, const char* operation, SourceLocation where) const {
  if (OXICUDA_UNLIKELY(n != count_)) detail::size_mismatch(operation, count_, n, sizeof(T), where);
}

template <class T>
void DeviceBuffer<T>::copy_from(std::span<const T> host, SourceLocation where) {
  check_size(host.size(), "oxicuda::DeviceBuffer::copy_from", where);
  if (count_ == 0) return;
  ScopedCurrent current(ctx_, where);
  detail::call<ffi::Entry::MemcpyHtoD>(where, ptr_, host.data(), size_bytes());
}

template <class T>
void DeviceBuffer<T>::copy_to(std::span<T> host, SourceLocation where) const {
  check_size(host.size(), "oxicuda::DeviceBuffer::copy_to", where);
  if (count_ == 0) return;
  ScopedCurrent current(ctx_, where);
  detail::call<ffi::Entry::MemcpyDtoH>(where, host.data(), ptr_, size_bytes());
}

OXICUDA_NAMESPACE_END
