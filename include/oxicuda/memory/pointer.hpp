// oxicuda/memory/pointer.hpp — what a pointer is (cuPointerGetAttributes):
// host, device or managed memory, its device and context, and the start and
// size of the allocation it lies in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "span.hpp"
#include "../driver/context.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Where a pointer's memory lives, as the driver says (CUmemorytype; 0:
// memory the driver does not know, such as a plain malloc'd range).
enum class MemoryType : int {
  unregistered = 0,
  host = ffi::CU_MEMORYTYPE_HOST,        // page-locked host memory (PinnedBuffer, HostRegistration)
  device = ffi::CU_MEMORYTYPE_DEVICE,    // device memory, and managed memory (see PointerInfo::managed)
  array = ffi::CU_MEMORYTYPE_ARRAY,
  unified = ffi::CU_MEMORYTYPE_UNIFIED,
};

// What the driver knows of a pointer. For memory it does not know, type is
// unregistered and the rest is empty (device -1).
struct PointerInfo {
  MemoryType type = MemoryType::unregistered;
  bool managed = false;  // ManagedBuffer (cuMemAllocManaged)
  bool mapped = false;   // backed by a mapping (false for unregistered memory)
  int device = -1;       // the ordinal of the device it was allocated or registered on
  Context context;       // borrowed: the context it was allocated or registered in (empty when none)
  // Its addresses as seen from its own context (asked with that context
  // current): on the device (0 when the device cannot reach it), and on the
  // host (null when the host cannot reach it).
  ffi::CUdeviceptr device_ptr = 0;
  void* host_ptr = nullptr;
  ffi::CUdeviceptr range_start = 0;  // the allocation (or registration) it lies in: first byte
  std::size_t range_size = 0;        // ... and size in bytes
  std::uint64_t buffer_id = 0;       // unique per allocation in the process (0: none)

  // Whether the driver knows the memory at all.
  [[nodiscard]] bool known() const noexcept { return type != MemoryType::unregistered; }
};

// What `address` is. Never an Error for memory the driver does not know
// (that is an answer: type unregistered); an Error only when the driver
// itself fails.
[[nodiscard]] PointerInfo pointer_info(ffi::CUdeviceptr address, SourceLocation where = SourceLocation::current());
[[nodiscard]] inline PointerInfo pointer_info(const void* p, SourceLocation where = SourceLocation::current()) {
  return pointer_info(static_cast<ffi::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)), where);
}
// Of a device range's first element (DeviceBuffer, DeviceSpan, ManagedBuffer).
template <class R>
  requires detail::device_range<R>
[[nodiscard]] PointerInfo pointer_info(const R& range, SourceLocation where = SourceLocation::current()) {
  return pointer_info(range.device_span().device_ptr(), where);
}

inline PointerInfo pointer_info(ffi::CUdeviceptr address, SourceLocation where) {
  CUcontext ctx = nullptr;
  unsigned type = 0, managed = 0, mapped = 0;  // the driver writes booleans' low byte
  ffi::CUdeviceptr device_ptr = 0, start = 0;
  void* host_ptr = nullptr;
  unsigned long long buffer_id = 0;
  int ordinal = -1;
  std::size_t size = 0;
  ffi::CUpointer_attribute attrs[] = {
      ffi::CU_POINTER_ATTRIBUTE_CONTEXT,        ffi::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
      ffi::CU_POINTER_ATTRIBUTE_DEVICE_POINTER, ffi::CU_POINTER_ATTRIBUTE_HOST_POINTER,
      ffi::CU_POINTER_ATTRIBUTE_BUFFER_ID,      ffi::CU_POINTER_ATTRIBUTE_IS_MANAGED,
      ffi::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ffi::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
      ffi::CU_POINTER_ATTRIBUTE_RANGE_SIZE,     ffi::CU_POINTER_ATTRIBUTE_MAPPED};
  void* data[] = {&ctx, &type, &device_ptr, &host_ptr, &buffer_id, &managed, &ordinal, &start, &size, &mapped};
  static_assert(sizeof attrs / sizeof attrs[0] == sizeof data / sizeof data[0]);
  detail::check(OXICUDA_DRIVER(PointerGetAttributes, static_cast<unsigned>(sizeof attrs / sizeof attrs[0]), attrs,
                               data, address),
                where);
  PointerInfo info;
  info.type = static_cast<MemoryType>(type);
  if (!info.known()) return info;  // (the driver leaves or sets the rest to its defaults)
  // The device and host addresses are the driver's as seen from the current
  // context (0 with none current, on the H100): ask them again from the
  // memory's own context when another is current.
  CUcontext now = nullptr;
  detail::check(OXICUDA_DRIVER(CtxGetCurrent, &now), where);
  if (ctx && now != ctx) {
    detail::SwitchCurrent current(ctx, where);
    ffi::CUpointer_attribute again[] = {ffi::CU_POINTER_ATTRIBUTE_DEVICE_POINTER, ffi::CU_POINTER_ATTRIBUTE_HOST_POINTER};
    void* into[] = {&device_ptr, &host_ptr};
    detail::check(OXICUDA_DRIVER(PointerGetAttributes, 2u, again, into, address), where);
  }
  info.managed = managed != 0;
  info.mapped = mapped != 0;
  info.device = ordinal;
  info.context = Context::borrow(ctx);
  info.device_ptr = device_ptr;
  info.host_ptr = host_ptr;
  info.range_start = start;
  info.range_size = size;
  info.buffer_id = buffer_id;
  return info;
}

OXICUDA_DETAIL_NAMESPACE_END
