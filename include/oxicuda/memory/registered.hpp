// oxicuda/memory/registered.hpp — HostRegistration<T>: host memory you
// already have (a std::vector's, an mmap'd file's), page-locked for the
// scope of a handle (cuMemHostRegister / cuMemHostUnregister), and mapped
// into the device's address space on request.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "buffer.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

struct RegisterOptions {
  // CU_MEMHOSTREGISTER_PORTABLE: page-locked for every context, not only
  // the one it was registered in.
  bool portable = true;
  // CU_MEMHOSTREGISTER_DEVICEMAP: mapped into the device's address space,
  // so that kernels read and write it in place: mapped_span().
  bool device_map = false;
  // CU_MEMHOSTREGISTER_READ_ONLY: the device only reads it (needs the
  // device attribute CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED).
  bool read_only = false;
};

// A range of your host memory, page-locked while this handle lives: copies
// to and from it run at full bus speed and truly asynchronously, as with a
// PinnedBuffer. The memory stays yours: it must outlive the handle, and is
// neither copied nor freed. A host range (data, size) for copies;
// move-only. A range can be registered once at a time (the driver refuses
// an overlap: an Error saying so).
template <class T>
class HostRegistration {
  static_assert(std::is_trivially_copyable_v<T>, "HostRegistration<T> needs a trivially copyable T");

 public:
  using value_type = T;

  HostRegistration() noexcept = default;
  HostRegistration(const Context& ctx, std::span<T> host, RegisterOptions options = {},
                   SourceLocation where = SourceLocation::current());
  HostRegistration(HostRegistration&& other) noexcept { swap(other); }
  HostRegistration& operator=(HostRegistration&& other) noexcept {
    HostRegistration(std::move(other)).swap(*this);
    return *this;
  }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration() { release(); }

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::span<T> host() const noexcept { return {data_, count_}; }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }
  // Registered with {.device_map = true}: the device's address of the
  // memory (cuMemHostGetDevicePointer), 0 when not mapped.
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return device_ptr_; }
  [[nodiscard]] bool mapped() const noexcept { return device_ptr_ != 0; }
  // The mapped memory as a DeviceSpan, for a kernel to read and write in
  // place. An Error when it was not registered mapped.
  [[nodiscard]] DeviceSpan<T> mapped_span(SourceLocation where = SourceLocation::current()) const;
  // Unregisters now; the handle is then empty.
  void reset() noexcept { release(); }

  void swap(HostRegistration& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    std::swap(device_ptr_, other.device_ptr_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  T* data_ = nullptr;
  std::size_t count_ = 0;
  ffi::CUdeviceptr device_ptr_ = 0;
};

namespace detail {
[[noreturn]] OXICUDA_DETAIL_COLD inline void register_failed(Outcome o, std::size_t bytes, SourceLocation where) {
  std::string why = cat({"registering ", std::to_string(bytes), " bytes of host memory"});
  if (o.result == ffi::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    why += ": this memory, or part of it, is registered already (a PinnedBuffer's memory is page-locked from the "
           "start; another HostRegistration may hold it). A range can be registered once at a time";
  fail(o, where, std::move(why));
}
}  // namespace detail

template <class T>
HostRegistration<T>::HostRegistration(const Context& ctx, std::span<T> host, RegisterOptions options,
                                      SourceLocation where)
    : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::HostRegistration::HostRegistration", where);
  if (host.empty()) return;
  unsigned flags = 0;
  if (options.portable) flags |= ffi::memhostregister_portable;
  if (options.device_map) flags |= ffi::memhostregister_devicemap;
  if (options.read_only) flags |= ffi::memhostregister_read_only;
  void* p = const_cast<void*>(static_cast<const void*>(host.data()));  // (read-only registration of const T)
  detail::SwitchCurrent current(ctx.raw(), where);
  const detail::Outcome r = OXICUDA_DRIVER(MemHostRegister, p, host.size_bytes(), flags);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::register_failed(r, host.size_bytes(), where);
  if (options.device_map) {
    const detail::Outcome m = OXICUDA_DRIVER(MemHostGetDevicePointer, &device_ptr_, p, 0u);
    if (OXICUDA_DETAIL_UNLIKELY(!m.ok())) {
      detail::check_nothrow(OXICUDA_DRIVER(MemHostUnregister, p), "unregistering the memory of a failed oxicuda::HostRegistration");
      device_ptr_ = 0;
      detail::fail(m, where);
    }
  }
  data_ = host.data();
  count_ = host.size();
}

template <class T>
DeviceSpan<T> HostRegistration<T>::mapped_span(SourceLocation where) const {
  return detail::mapped_span_of<T>(device_ptr_, count_, ctx_, "oxicuda::HostRegistration",
                                   "oxicuda::HostRegistration::mapped_span",
                                   "this memory was not registered mapped: register it with {.device_map = true}", where);
}

template <class T>
void HostRegistration<T>::release() noexcept {
  if (data_ != nullptr) {
    constexpr const char* during = "unregistering an oxicuda::HostRegistration";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(MemHostUnregister, const_cast<void*>(static_cast<const void*>(data_))), during);
  }
  ctx_ = Context();
  data_ = nullptr;
  count_ = 0;
  device_ptr_ = 0;
}

OXICUDA_DETAIL_NAMESPACE_END
