// oxicuda/memory/external_memory.hpp — memory that another API (Vulkan,
// Direct3D, NvSciBuf, or oxicuda's own exported virtual memory) made,
// imported into a context (cuImportExternalMemory) and mapped there as
// device buffers (cuExternalMemoryGetMappedBuffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "buffer.hpp"
#include "shareable_memory.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// What kind of handle the memory comes as (CUexternalMemoryHandleType).
// Linux: opaque_fd (Vulkan's VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
// or export_fd of a PhysicalMemory) and dmabuf_fd. Windows: the Win32 and
// Direct3D kinds. Tegra: nvscibuf.
enum class ExternalMemoryType : int {
  opaque_fd = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
  opaque_win32 = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32,
  opaque_win32_kmt = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_KMT,
  d3d12_heap = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_HEAP,
  d3d12_resource = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_RESOURCE,
  d3d11_resource = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE,
  d3d11_resource_kmt = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE_KMT,
  nvscibuf = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF,
  dmabuf_fd = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD,
};

struct ExternalMemoryOptions {
  // The memory is a dedicated allocation (Vulkan's dedicated allocation,
  // a committed Direct3D 12 resource): CUDA_EXTERNAL_MEMORY_DEDICATED. The
  // Direct3D 12 resource and Direct3D 11 kinds require it.
  bool dedicated = false;
};

// Whether the loaded driver has the external-memory and external-semaphore
// calls (CUDA 10.0; a driver without them makes each import an Error
// naming the driver it needs).
[[nodiscard]] inline bool external_memory_available() noexcept {
  return !detail::missing(ffi::Entry::ImportExternalMemory);
}

// Imported memory, owned: destroyed (cuDestroyExternalMemory) when it is
// dropped. Move-only; a default-constructed or moved-from one is empty, and
// every operation on it is an Error. Its mapped buffers are DeviceBuffers
// of their own (freed by cuMemFree, as the driver requires), which must not
// be used once the ExternalMemory is gone: keep it for as long as they are.
class ExternalMemory {
 public:
  ExternalMemory() noexcept = default;
#if !OXICUDA_DETAIL_WINDOWS
  // `bytes` of memory exported by another API as the file descriptor in
  // `fd`, into `ctx`: `type` is opaque_fd or dmabuf_fd. The descriptor's
  // ownership follows the driver's rule: on success the driver takes it (it
  // closes it itself; `fd` is left empty), on failure it stays yours (`fd`
  // still holds it, and closes it when dropped), so it is never leaked nor
  // closed twice. `bytes` must be the exporter's size (the descriptor does
  // not say it). A dma_buf (Tegra Thor only, not tested) takes no options,
  // and cuda.h does not say that the driver takes it: oxicuda gives it up
  // all the same (a leak at worst, never a second close).
  [[nodiscard]] static ExternalMemory import_fd(const Context& ctx, FileDescriptor&& fd, std::size_t bytes,
                                                ExternalMemoryType type = ExternalMemoryType::opaque_fd,
                                                ExternalMemoryOptions options = {},
                                                SourceLocation where = SourceLocation::current());
#endif
  // Memory exported as a Win32 handle (or, for the kinds that allow it,
  // by `name`, a const wchar_t*: then `handle` is null), of a Win32 or
  // Direct3D `type`. The driver does not take the handle: close it when
  // you like (the import holds its own reference).
  [[nodiscard]] static ExternalMemory import_win32(const Context& ctx, ExternalMemoryType type, void* handle,
                                                   const void* name, std::size_t bytes,
                                                   ExternalMemoryOptions options = {},
                                                   SourceLocation where = SourceLocation::current());
  // An NvSciBufObj's memory (Tegra).
  [[nodiscard]] static ExternalMemory import_nvscibuf(const Context& ctx, const void* object, std::size_t bytes,
                                                      SourceLocation where = SourceLocation::current());

  ExternalMemory(ExternalMemory&& other) noexcept { swap(other); }
  ExternalMemory& operator=(ExternalMemory&& other) noexcept {
    ExternalMemory(std::move(other)).swap(*this);
    return *this;
  }
  ExternalMemory(const ExternalMemory&) = delete;
  ExternalMemory& operator=(const ExternalMemory&) = delete;
  ~ExternalMemory() { reset(); }

  [[nodiscard]] CUexternalMemory raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] ExternalMemoryType type() const noexcept { return type_; }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }

  // `count` elements of T at byte `offset` of the memory, as a device
  // buffer of its own (cuExternalMemoryGetMappedBuffer; freed by cuMemFree
  // when dropped). Errors before the driver is asked: the range not inside
  // the memory (naming both sizes), an offset not aligned for T. Mapping no
  // element gives an empty buffer without asking the driver.
  template <class T>
  [[nodiscard]] DeviceBuffer<T> mapped_buffer(std::size_t offset, std::size_t count,
                                              SourceLocation where = SourceLocation::current()) const;

  // Destroys it now; it is then empty.
  void reset() noexcept;
  void swap(ExternalMemory& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(raw_, other.raw_);
    std::swap(bytes_, other.bytes_);
    std::swap(type_, other.type_);
  }

 private:
  static ExternalMemory import(const Context& ctx, ffi::CUDA_EXTERNAL_MEMORY_HANDLE_DESC& desc, const char* operation,
                               SourceLocation where);
  // The mapped buffer's device address, after the checks.
  ffi::CUdeviceptr map(std::size_t offset, std::size_t bytes, std::size_t align, SourceLocation where) const;

  Context ctx_;
  CUexternalMemory raw_ = nullptr;
  std::size_t bytes_ = 0;
  ExternalMemoryType type_ = ExternalMemoryType::opaque_fd;
};

namespace detail {
[[noreturn]] OXICUDA_DETAIL_COLD inline void bad_import(const char* operation, const char* why, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, why, where));
}

[[noreturn]] OXICUDA_DETAIL_COLD inline void bad_mapping(std::size_t offset, std::size_t bytes, std::size_t size,
                                                         std::size_t align, SourceLocation where) {
  const std::string why =
      offset % align != 0 ? cat({"offset ", std::to_string(offset), " is not a multiple of the element's alignment, ",
                                 std::to_string(align), " bytes"})
                          : cat({std::to_string(bytes), " bytes at offset ", std::to_string(offset),
                                 " do not lie inside the external memory's ", std::to_string(size), " bytes"});
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::ExternalMemory::mapped_buffer", why, where));
}
}  // namespace detail

inline ExternalMemory ExternalMemory::import(const Context& ctx, ffi::CUDA_EXTERNAL_MEMORY_HANDLE_DESC& desc,
                                             const char* operation, SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", operation, where);
  if (OXICUDA_DETAIL_UNLIKELY(desc.size == 0)) detail::bad_import(operation, "a size of 0 bytes", where);
  ExternalMemory m;
  {
    detail::SwitchCurrent current(ctx.raw(), where);
    detail::check(OXICUDA_DRIVER(ImportExternalMemory, &m.raw_, &desc), where);
  }
  m.ctx_ = ctx;
  m.bytes_ = static_cast<std::size_t>(desc.size);
  m.type_ = static_cast<ExternalMemoryType>(desc.type);
  return m;
}

#if !OXICUDA_DETAIL_WINDOWS
inline ExternalMemory ExternalMemory::import_fd(const Context& ctx, FileDescriptor&& fd, std::size_t bytes,
                                                ExternalMemoryType type, ExternalMemoryOptions options,
                                                SourceLocation where) {
  constexpr const char* operation = "oxicuda::ExternalMemory::import_fd";
  if (!fd) detail::bad_import(operation, "the FileDescriptor is empty (moved from, released, or never opened)", where);
  if (type != ExternalMemoryType::opaque_fd && type != ExternalMemoryType::dmabuf_fd)
    detail::bad_import(operation, "a file descriptor is imported as opaque_fd or dmabuf_fd only", where);
  if (type == ExternalMemoryType::dmabuf_fd && options.dedicated)
    detail::bad_import(operation, "a dma_buf takes no flags: it cannot be imported as dedicated", where);
  ffi::CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
  desc.type = static_cast<ffi::CUexternalMemoryHandleType>(type);
  desc.handle.fd = fd.get();
  desc.size = bytes;
  desc.flags = options.dedicated ? ffi::external_memory_dedicated : 0u;
  ExternalMemory m = import(ctx, desc, operation, where);
  (void)fd.release();  // the driver's now (it closes it)
  return m;
}
#endif

inline ExternalMemory ExternalMemory::import_win32(const Context& ctx, ExternalMemoryType type, void* handle,
                                                   const void* name, std::size_t bytes, ExternalMemoryOptions options,
                                                   SourceLocation where) {
  constexpr const char* operation = "oxicuda::ExternalMemory::import_win32";
  const int t = static_cast<int>(type);
  if (t < ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32 ||
      t > ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE_KMT)
    detail::bad_import(operation, "a Win32 handle is imported as one of the Win32 and Direct3D types only", where);
  if ((handle == nullptr) == (name == nullptr))
    detail::bad_import(operation, "give exactly one of a handle and a name", where);
  ffi::CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
  desc.type = static_cast<ffi::CUexternalMemoryHandleType>(type);
  desc.handle.win32.handle = handle;
  desc.handle.win32.name = name;
  desc.size = bytes;
  desc.flags = options.dedicated ? ffi::external_memory_dedicated : 0u;
  return import(ctx, desc, operation, where);
}

inline ExternalMemory ExternalMemory::import_nvscibuf(const Context& ctx, const void* object, std::size_t bytes,
                                                      SourceLocation where) {
  constexpr const char* operation = "oxicuda::ExternalMemory::import_nvscibuf";
  if (!object) detail::bad_import(operation, "a null NvSciBufObj", where);
  ffi::CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
  desc.type = ffi::CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF;
  desc.handle.nvSciObject = object;
  desc.size = bytes;
  return import(ctx, desc, operation, where);
}

inline ffi::CUdeviceptr ExternalMemory::map(std::size_t offset, std::size_t bytes, std::size_t align,
                                            SourceLocation where) const {
  if (!raw_) detail::empty_handle("oxicuda::ExternalMemory", "oxicuda::ExternalMemory::mapped_buffer", where);
  if (OXICUDA_DETAIL_UNLIKELY(offset % align != 0 || offset > bytes_ || bytes > bytes_ - offset))
    detail::bad_mapping(offset, bytes, bytes_, align, where);
  if (bytes == 0) return 0;  // (nothing to map: the driver is not asked)
  ffi::CUDA_EXTERNAL_MEMORY_BUFFER_DESC desc{};
  desc.offset = offset;
  desc.size = bytes;
  ffi::CUdeviceptr p = 0;
  detail::SwitchCurrent current(ctx_.raw(), where);
  detail::check(OXICUDA_DRIVER(ExternalMemoryGetMappedBuffer, &p, raw_, &desc), where);
  return p;
}

template <class T>
DeviceBuffer<T> ExternalMemory::mapped_buffer(std::size_t offset, std::size_t count, SourceLocation where) const {
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::ExternalMemory::mapped_buffer", where);
  const ffi::CUdeviceptr p = map(offset, bytes, alignof(T), where);
  return DeviceBuffer<T>(ctx_, p, p ? count : 0);
}

inline void ExternalMemory::reset() noexcept {
  if (raw_) {
    constexpr const char* during = "destroying an oxicuda::ExternalMemory";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(DestroyExternalMemory, raw_), during);
  }
  raw_ = nullptr;
  bytes_ = 0;
  ctx_ = Context();
}

OXICUDA_DETAIL_NAMESPACE_END
