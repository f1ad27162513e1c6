// oxicuda/memory/shareable_memory.hpp — physical memory shared with other
// processes (cuMemExportToShareableHandle, cuMemImportFromShareableHandle):
// exported as a POSIX file descriptor (sent to another process over a Unix
// socket, or inherited by a child) or as a fabric handle (64 bytes, sent by
// any means), and imported there as a PhysicalMemory to map.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#if !OXICUDA_DETAIL_WINDOWS
#include <unistd.h>
#endif

#include "physical_memory.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

#if !OXICUDA_DETAIL_WINDOWS
// A POSIX file descriptor, owned: closed when dropped. Move-only; -1 when
// empty (default-constructed, moved-from or released).
class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    FileDescriptor(std::move(other)).swap(*this);
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  // Gives the descriptor up to the caller, who closes it; this one is then empty.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void swap(FileDescriptor& other) noexcept { std::swap(fd_, other.fd_); }

 private:
  int fd_ = -1;
};

// The memory as a new file descriptor (cuMemExportToShareableHandle), for
// another process to import with import_fd. The memory must have been made
// with {.exportable = ExportKind::posix_fd}: otherwise an Error before the
// driver is asked. The descriptor keeps the memory alive (with the
// driver's own count) until it is closed and every import released.
[[nodiscard]] FileDescriptor export_fd(const PhysicalMemory& memory, SourceLocation where = SourceLocation::current());

// Physical memory exported by another process (or this one) as `fd`, of
// `bytes` bytes (the exporter's size: the descriptor does not say it), for
// `ctx`'s process (cuMemImportFromShareableHandle). `fd` stays the
// caller's: close it when done; the PhysicalMemory does not need it.
[[nodiscard]] PhysicalMemory import_fd(const Context& ctx, int fd, std::size_t bytes,
                                       SourceLocation where = SourceLocation::current());
#endif

// A fabric handle's bytes (CUmemFabricHandle).
using FabricHandle = std::array<unsigned char, ffi::ipc_handle_size>;

// The memory as a fabric handle; it must have been made with
// {.exportable = ExportKind::fabric} (an Error before the driver is asked).
[[nodiscard]] FabricHandle export_fabric(const PhysicalMemory& memory, SourceLocation where = SourceLocation::current());

// Physical memory exported as `handle`, of `bytes` bytes.
[[nodiscard]] PhysicalMemory import_fabric(const Context& ctx, const FabricHandle& handle, std::size_t bytes,
                                           SourceLocation where = SourceLocation::current());

namespace detail {
inline void check_export(const PhysicalMemory& memory, ExportKind kind, const char* operation, SourceLocation where) {
  (void)memory.checked_raw(operation, where);
  if (OXICUDA_DETAIL_UNLIKELY(!memory.exportable_as(kind)))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                cat({"this memory was not made exportable as ",
                     kind == ExportKind::posix_fd ? "a POSIX file descriptor: create it with {.exportable = "
                                                    "ExportKind::posix_fd}"
                                                  : "a fabric handle: create it with {.exportable = ExportKind::fabric}"}),
                where));
}

// cuMemImportFromShareableHandle, the handle then owned by a PhysicalMemory.
inline PhysicalMemory import_shareable(const Context& ctx, void* os_handle, ExportKind kind, std::size_t bytes,
                                       const char* operation, SourceLocation where) {
  if (!ctx) empty_handle("oxicuda::Context", operation, where);
  ffi::CUmemGenericAllocationHandle raw = 0;
  {
    SwitchCurrent current(ctx.raw(), where);
    check(OXICUDA_DRIVER(MemImportFromShareableHandle, &raw, os_handle,
                         static_cast<ffi::CUmemAllocationHandleType>(kind)),
          where);
  }
  return PhysicalMemory::adopt(ctx, raw, bytes, where);
}
}  // namespace detail

#if !OXICUDA_DETAIL_WINDOWS
inline FileDescriptor export_fd(const PhysicalMemory& memory, SourceLocation where) {
  detail::check_export(memory, ExportKind::posix_fd, "oxicuda::export_fd", where);
  int fd = -1;
  const Context ctx = memory.context();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemExportToShareableHandle, static_cast<void*>(&fd), memory.raw(),
                               ffi::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                where);
  return FileDescriptor(fd);
}

inline PhysicalMemory import_fd(const Context& ctx, int fd, std::size_t bytes, SourceLocation where) {
  constexpr const char* operation = "oxicuda::import_fd";
  if (OXICUDA_DETAIL_UNLIKELY(fd < 0))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        detail::cat({"file descriptor ", std::to_string(fd), " is not one"}), where));
  // The driver takes the descriptor as the pointer's value.
  return detail::import_shareable(ctx, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), ExportKind::posix_fd,
                                  bytes, operation, where);
}
#endif

inline FabricHandle export_fabric(const PhysicalMemory& memory, SourceLocation where) {
  detail::check_export(memory, ExportKind::fabric, "oxicuda::export_fabric", where);
  ffi::CUmemFabricHandle raw{};
  const Context ctx = memory.context();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemExportToShareableHandle, static_cast<void*>(&raw), memory.raw(),
                               ffi::CU_MEM_HANDLE_TYPE_FABRIC, 0),
                where);
  FabricHandle out{};
  std::memcpy(out.data(), raw.data, out.size());
  return out;
}

inline PhysicalMemory import_fabric(const Context& ctx, const FabricHandle& handle, std::size_t bytes,
                                    SourceLocation where) {
  ffi::CUmemFabricHandle raw{};
  std::memcpy(raw.data, handle.data(), handle.size());
  return detail::import_shareable(ctx, static_cast<void*>(&raw), ExportKind::fabric, bytes, "oxicuda::import_fabric",
                                  where);
}

OXICUDA_DETAIL_NAMESPACE_END
