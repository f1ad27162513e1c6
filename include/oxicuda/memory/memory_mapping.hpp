// oxicuda/memory/memory_mapping.hpp — physical memory mapped into a reserved
// range (cuMemMap), and who may read and write it there (cuMemSetAccess):
// the driver maps with no access at all, and an access before
// cuMemSetAccess faults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "span.hpp"
#include "virtual_range.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Who may read and write mapped memory, from a device.
enum class MemoryAccess : int {
  none = ffi::CU_MEM_ACCESS_FLAGS_PROT_NONE,
  read = ffi::CU_MEM_ACCESS_FLAGS_PROT_READ,
  read_write = ffi::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
};

// All of a PhysicalMemory mapped at `offset` bytes into a VirtualRange,
// owned: move-only, unmapped (cuMemUnmap) when dropped. It holds a copy of
// its range, which therefore outlives it; it need not hold the memory (the
// driver frees that only once it is unmapped too). A default-constructed
// or moved-from one is empty, and every operation on it is an Error.
class Mapping {
 public:
  Mapping() noexcept = default;
  // Maps `memory` at `offset` bytes into `range` (cuMemMap), then gives the
  // memory's own device `access` to it (cuMemSetAccess; MemoryAccess::none
  // leaves every device without access until set_access). `offset` must be
  // a multiple of the memory's granularity, and the memory must fit in the
  // range from there: both are Errors before the driver is asked. Mapping
  // over another mapping is the driver's Error. If giving access fails,
  // the memory is unmapped again before the Error leaves.
  Mapping(const VirtualRange& range, std::size_t offset, const PhysicalMemory& memory,
          MemoryAccess access = MemoryAccess::read_write, SourceLocation where = SourceLocation::current());
  Mapping(Mapping&& other) noexcept { swap(other); }
  Mapping& operator=(Mapping&& other) noexcept {
    Mapping(std::move(other)).swap(*this);
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { release(); }

  [[nodiscard]] explicit operator bool() const noexcept { return ptr_ != 0; }
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  // Where it starts in its range, in bytes.
  [[nodiscard]] std::size_t offset() const noexcept { return ptr_ ? static_cast<std::size_t>(ptr_ - range_.address()) : 0; }
  [[nodiscard]] const VirtualRange& range() const noexcept { return range_; }
  // The mapped bytes as `size() / sizeof(T)` elements of T.
  template <class T>
  [[nodiscard]] DeviceSpan<T> span() const noexcept {
    return {ptr_, bytes_ / sizeof(T), range_.context().raw()};
  }

  // Gives `device` this access to the mapped memory (cuMemSetAccess).
  // Another device than the memory's needs peer access to it.
  void set_access(const Device& device, MemoryAccess access, SourceLocation where = SourceLocation::current()) const;
  // The access `device` has (cuMemGetAccess).
  [[nodiscard]] MemoryAccess access(const Device& device, SourceLocation where = SourceLocation::current()) const;

  // Unmaps now; the mapping is then empty. A failure is an Error (and the
  // handle keeps the mapping); the destructor reports one instead.
  void unmap(SourceLocation where = SourceLocation::current());

  void swap(Mapping& other) noexcept {
    std::swap(range_, other.range_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
  }

 private:
  void release() noexcept;
  void check_mapped(const char* operation, SourceLocation where) const {
    if (OXICUDA_DETAIL_UNLIKELY(ptr_ == 0)) detail::empty_handle("oxicuda::Mapping", operation, where);
  }

  VirtualRange range_;
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

namespace detail {
inline void set_mem_access(ffi::CUdeviceptr ptr, std::size_t bytes, const Device& device, MemoryAccess access,
                           const char* operation, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(access != MemoryAccess::none && access != MemoryAccess::read &&
                              access != MemoryAccess::read_write))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, "a MemoryAccess that is none of none, read and read_write",
                where));
  const ffi::CUmemAccessDesc desc{{ffi::CU_MEM_LOCATION_TYPE_DEVICE, device.raw()},
                                  static_cast<ffi::CUmemAccess_flags>(access)};
  check(OXICUDA_DRIVER(MemSetAccess, ptr, bytes, &desc, 1), where);
}
}  // namespace detail

inline Mapping::Mapping(const VirtualRange& range, std::size_t offset, const PhysicalMemory& memory,
                        MemoryAccess access, SourceLocation where) {
  constexpr const char* operation = "oxicuda::Mapping::Mapping";
  if (!range) detail::empty_handle("oxicuda::VirtualRange", operation, where);
  const ffi::CUmemGenericAllocationHandle raw = memory.checked_raw(operation, where);
  const std::size_t g = memory.granularity();
  if (OXICUDA_DETAIL_UNLIKELY(offset % g != 0 || (range.address() + offset) % g != 0))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        detail::cat({"a map at offset ", std::to_string(offset),
                                     " is not aligned to the allocation granularity, ", std::to_string(g),
                                     " bytes: offsets in the range must be multiples of it"}),
                        where));
  if (OXICUDA_DETAIL_UNLIKELY(offset > range.size() || memory.size() > range.size() - offset))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        detail::cat({"memory of ", std::to_string(memory.size()), " bytes mapped at offset ",
                                     std::to_string(offset), " does not fit in a range of ",
                                     std::to_string(range.size()), " bytes"}),
                        where));
  const ffi::CUdeviceptr ptr = range.address() + offset;
  const Context ctx = range.context();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemMap, ptr, memory.size(), 0, raw, 0), where);
  range_ = range;
  ptr_ = ptr;
  bytes_ = memory.size();
  if (access != MemoryAccess::none) {
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
    try {
      detail::set_mem_access(ptr_, bytes_, memory.device(), access, operation, where);
    } catch (...) {
      release();
      throw;
    }
#else
    detail::set_mem_access(ptr_, bytes_, memory.device(), access, operation, where);
#endif
  }
}

inline void Mapping::set_access(const Device& device, MemoryAccess access, SourceLocation where) const {
  constexpr const char* operation = "oxicuda::Mapping::set_access";
  check_mapped(operation, where);
  const Context ctx = range_.context();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::set_mem_access(ptr_, bytes_, device, access, operation, where);
}

inline MemoryAccess Mapping::access(const Device& device, SourceLocation where) const {
  check_mapped("oxicuda::Mapping::access", where);
  const ffi::CUmemLocation location{ffi::CU_MEM_LOCATION_TYPE_DEVICE, device.raw()};
  unsigned long long flags = 0;
  const Context ctx = range_.context();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemGetAccess, &flags, &location, ptr_), where);
  return static_cast<MemoryAccess>(flags);
}

inline void Mapping::unmap(SourceLocation where) {
  check_mapped("oxicuda::Mapping::unmap", where);
  {
    const Context ctx = range_.context();
    detail::SwitchCurrent current(ctx.raw(), where);
    detail::check(OXICUDA_DRIVER(MemUnmap, ptr_, bytes_), where);
  }
  range_ = VirtualRange();
  ptr_ = 0;
  bytes_ = 0;
}

inline void Mapping::release() noexcept {
  if (ptr_ != 0) {
    constexpr const char* during = "unmapping an oxicuda::Mapping";
    const Context ctx = range_.context();
    detail::ScopedCurrentNothrow current(ctx.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(MemUnmap, ptr_, bytes_), during);
  }
  range_ = VirtualRange();
  ptr_ = 0;
  bytes_ = 0;
}

OXICUDA_DETAIL_NAMESPACE_END
