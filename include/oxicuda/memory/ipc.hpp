// oxicuda/memory/ipc.hpp — device memory shared between processes (CUDA
// IPC): ipc_export(buffer) gives an IpcMemoryHandle (cuIpcGetMemHandle), its
// bytes go to another process by any means, and IpcMemory<T> maps the
// memory there (cuIpcOpenMemHandle) until it is closed (cuIpcCloseMemHandle).
// The envelope of the bytes is driver/ipc_handle.hpp's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "buffer.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A DeviceBuffer's IPC handle: the driver's handle and what the opener
// checks (the element size and count). Copyable; to_bytes() gives the
// bytes to send to another process, from_bytes() reads them back (every
// malformed input is an Error).
class IpcMemoryHandle {
 public:
  static constexpr std::size_t bytes_size = detail::ipc_header_bytes + 16;
  using Bytes = std::array<std::byte, bytes_size>;

  IpcMemoryHandle() noexcept = default;
  IpcMemoryHandle(detail::IpcExported, const ffi::CUipcMemHandle& raw, std::size_t element_size,
                  std::size_t count) noexcept
      : raw_(raw), stamp_(detail::this_process()), element_size_(element_size), count_(count) {}
  // A handle another program exported with the driver or runtime API
  // (cuIpcGetMemHandle, cudaIpcGetMemHandle: the same 64 bytes), of `count`
  // elements of `element_size` bytes: your word for both. Who exported it
  // is not known: opening it in that same process is the driver's error.
  [[nodiscard]] static IpcMemoryHandle from_raw(const ffi::CUipcMemHandle& raw, std::size_t element_size,
                                                std::size_t count, SourceLocation where = SourceLocation::current());

  [[nodiscard]] Bytes to_bytes(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] static IpcMemoryHandle from_bytes(std::span<const std::byte> bytes,
                                                  SourceLocation where = SourceLocation::current());

  [[nodiscard]] explicit operator bool() const noexcept { return element_size_ != 0; }
  [[nodiscard]] std::size_t element_size() const noexcept { return element_size_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * element_size_; }
  // Whether this process exported it (and so cannot open it).
  [[nodiscard]] bool exported_here() const noexcept { return element_size_ != 0 && stamp_ == detail::this_process(); }
  [[nodiscard]] const ffi::CUipcMemHandle& raw() const noexcept { return raw_; }
  [[nodiscard]] detail::IpcStamp stamp() const noexcept { return stamp_; }

 private:
  ffi::CUipcMemHandle raw_{};
  detail::IpcStamp stamp_{};
  std::size_t element_size_ = 0;  // 0: empty
  std::size_t count_ = 0;
};

// The IPC handle of a buffer's memory (cuIpcGetMemHandle, with the buffer's
// context current), for another process to open with IpcMemory<T>. The
// whole buffer is exported: the driver exports allocations, not parts of
// them. A stream-ordered buffer (allocate_async) is an Error: its memory is
// a pool's, which cuIpcGetMemHandle does not export. So are an empty buffer
// and a moved-from one. The buffer must outlive every process's mapping.
template <class T>
[[nodiscard]] IpcMemoryHandle ipc_export(const DeviceBuffer<T>& buffer, SourceLocation where = SourceLocation::current());

// Another process's device memory (exported with ipc_export), mapped into
// `ctx`'s device while this handle lives: a device range of the handle's
// elements, which copies, fills and launches take as they take a
// DeviceBuffer. The element size the handle records must be sizeof(T).
// Opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (the one flag the driver
// takes: peer access is enabled when the memory is on another device).
// Closed (cuIpcCloseMemHandle) on destruction; move-only. A handle this
// process exported is an Error: use the buffer itself here. The driver
// maps a handle once per context: opening it again there shares that one
// mapping (each IpcMemory closes its own reference).
template <class T>
class IpcMemory {
  static_assert(std::is_trivially_copyable_v<T>, "IpcMemory<T> needs a trivially copyable T");

 public:
  using value_type = T;

  IpcMemory() noexcept = default;
  IpcMemory(const Context& ctx, const IpcMemoryHandle& handle, SourceLocation where = SourceLocation::current());
  IpcMemory(IpcMemory&& other) noexcept { swap(other); }
  IpcMemory& operator=(IpcMemory&& other) noexcept {
    IpcMemory(std::move(other)).swap(*this);
    return *this;
  }
  IpcMemory(const IpcMemory&) = delete;
  IpcMemory& operator=(const IpcMemory&) = delete;
  ~IpcMemory() { release(); }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  // The device address as a T* (for a kernel argument; not dereferenceable on the host).
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] DeviceSpan<T> device_span() const noexcept { return {ptr_, count_, ctx_.raw()}; }
  [[nodiscard]] DeviceSpan<T> subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    return device_span().subspan(offset, count);
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator DeviceSpan<T>() const noexcept { return device_span(); }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }
  // Closes the mapping now; the handle is then empty.
  void reset() noexcept { release(); }

  void swap(IpcMemory& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(ptr_, other.ptr_);
    std::swap(count_, other.count_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
};

namespace detail {
inline constexpr const char* ipc_open = "oxicuda::IpcMemory::IpcMemory";

// A handle's element size and count, checked: an Error unless both make a
// size in bytes (from bytes read off a pipe, anything may come).
inline void check_ipc_extent(std::size_t element_size, std::size_t count, const char* operation, SourceLocation where) {
  if (element_size == 0)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, "an element size of 0 bytes: no memory handle has one",
                where));
  (void)checked_bytes(count, element_size, operation, where);
}
}  // namespace detail

inline IpcMemoryHandle IpcMemoryHandle::from_raw(const ffi::CUipcMemHandle& raw, std::size_t element_size,
                                                 std::size_t count, SourceLocation where) {
  detail::check_ipc_extent(element_size, count, "oxicuda::IpcMemoryHandle::from_raw", where);
  IpcMemoryHandle h;
  h.raw_ = raw;
  h.element_size_ = element_size;
  h.count_ = count;
  return h;
}

inline IpcMemoryHandle::Bytes IpcMemoryHandle::to_bytes(SourceLocation where) const {
  if (!*this) detail::empty_handle("oxicuda::IpcMemoryHandle", "oxicuda::IpcMemoryHandle::to_bytes", where);
  Bytes out{};
  detail::put_ipc_header(out.data(), detail::IpcKind::memory, stamp_, raw_.reserved);
  detail::put_u64(out.data() + detail::ipc_header_bytes, element_size_);
  detail::put_u64(out.data() + detail::ipc_header_bytes + 8, count_);
  return out;
}

inline IpcMemoryHandle IpcMemoryHandle::from_bytes(std::span<const std::byte> bytes, SourceLocation where) {
  constexpr const char* operation = "oxicuda::IpcMemoryHandle::from_bytes";
  IpcMemoryHandle h;
  const detail::IpcStamp stamp =
      detail::get_ipc_header(bytes, bytes_size, detail::IpcKind::memory, h.raw_.reserved, operation, where);
  const std::uint64_t element_size = detail::get_u64(bytes.data() + detail::ipc_header_bytes);
  const std::uint64_t count = detail::get_u64(bytes.data() + detail::ipc_header_bytes + 8);
  if constexpr (sizeof(std::size_t) < sizeof(std::uint64_t))
    if (element_size > std::size_t(-1) || count > std::size_t(-1))
      detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, "a size too large for this process's size_t", where));
  detail::check_ipc_extent(static_cast<std::size_t>(element_size), static_cast<std::size_t>(count), operation, where);
  h.stamp_ = stamp;
  h.element_size_ = static_cast<std::size_t>(element_size);
  h.count_ = static_cast<std::size_t>(count);
  return h;
}

template <class T>
IpcMemoryHandle ipc_export(const DeviceBuffer<T>& buffer, SourceLocation where) {
  constexpr const char* operation = "oxicuda::ipc_export";
  if (!buffer.context()) detail::empty_handle("oxicuda::DeviceBuffer", operation, where);
  if (OXICUDA_DETAIL_UNLIKELY(buffer.stream_ordered()))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        "this buffer is stream-ordered (allocate_async): its memory comes from a memory pool, which "
                        "cuIpcGetMemHandle does not export. Export a buffer allocated with DeviceBuffer(ctx, count)",
                        where));
  if (OXICUDA_DETAIL_UNLIKELY(buffer.empty()))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        "this buffer holds 0 elements: there is no allocation to export", where));
  ffi::CUipcMemHandle h{};
  detail::SwitchCurrent current(buffer.context().raw(), where);
  detail::check(OXICUDA_DRIVER(IpcGetMemHandle, &h, buffer.device_ptr()), where);
  return IpcMemoryHandle(detail::IpcExported{}, h, sizeof(T), buffer.size());
}

template <class T>
IpcMemory<T>::IpcMemory(const Context& ctx, const IpcMemoryHandle& handle, SourceLocation where) : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", detail::ipc_open, where);
  if (!handle) detail::empty_handle("oxicuda::IpcMemoryHandle", detail::ipc_open, where);
  if (OXICUDA_DETAIL_UNLIKELY(handle.element_size() != sizeof(T)))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, detail::ipc_open,
                        detail::cat({"the handle's memory holds ", std::to_string(handle.size()), " elements of ",
                                     std::to_string(handle.element_size()), " bytes; this IpcMemory<T> has elements of ",
                                     std::to_string(sizeof(T)), " bytes: open it with the exporter's element type"}),
                        where));
  detail::refuse_own_handle(handle.stamp(), detail::ipc_open, "use the DeviceBuffer itself here", where);
  detail::SwitchCurrent current(ctx.raw(), where);
  const detail::Outcome r =
      OXICUDA_DRIVER(IpcOpenMemHandle, &ptr_, handle.raw(), static_cast<unsigned>(ffi::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
    ptr_ = 0;
    detail::fail(r, where, detail::own_handle_hint(handle.stamp()));
  }
  count_ = handle.size();
}

template <class T>
void IpcMemory<T>::release() noexcept {
  if (ptr_ != 0) {
    constexpr const char* during = "closing an oxicuda::IpcMemory";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(IpcCloseMemHandle, ptr_), during);
  }
  ctx_ = Context();
  ptr_ = 0;
  count_ = 0;
}

OXICUDA_DETAIL_NAMESPACE_END
