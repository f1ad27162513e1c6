// The fake driver's memory beyond plain allocations: managed memory and its
// prefetch and advice, registered host ranges, what cuPointerGetAttributes
// tells of a pointer, and copies between two contexts' memory.
#include "fake_memory_state.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

using namespace fake;
using namespace fake::mem;

// Managed memory: host memory here as all the fake's device memory is, in
// `allocations` too (copies, fills and kernels reach it; cuMemFree frees it).
CUresult fake_MemAllocManaged(CUdeviceptr* p, std::size_t bytes, unsigned int flags) {
  FAKE_ENTRY(MemAllocManaged);
  if (const CUresult r = need_current()) return r;
  if (!p || bytes == 0 || (flags != mem_attach_global && flags != mem_attach_host)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = capture_forbids_unsafe()) return r;
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto a = reinterpret_cast<std::uintptr_t>(mem);
  allocations[a] = bytes;
  managed_allocations[a] = bytes;
  own(a, CU_MEMORYTYPE_DEVICE, true);
  *p = a;
  return CUDA_SUCCESS;
}

// As the driver: a range that is not inside one managed allocation is
// CUDA_ERROR_INVALID_VALUE; a device without concurrent managed access
// (fake_set_device_attribute) is CUDA_ERROR_INVALID_DEVICE.
CUresult fake::check_managed(CUdeviceptr p, std::size_t bytes, CUmemLocation to, bool prefetch) {
  if (!in_block(managed_allocations, p, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (to.type == CU_MEM_LOCATION_TYPE_HOST) return CUDA_SUCCESS;
  if (to.type != CU_MEM_LOCATION_TYPE_DEVICE || to.id < 0 || to.id >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (prefetch && !device_attribute_locked(to.id, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS))
    return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

CUresult fake_MemPrefetchAsync(CUdeviceptr p, std::size_t bytes, CUmemLocation to, unsigned int flags, CUstream s) {
  FAKE_ENTRY(MemPrefetchAsync);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  return check_managed(p, bytes, to, true);  // (the bytes are where they are: host memory)
}

CUresult fake_MemAdvise(CUdeviceptr p, std::size_t bytes, CUmem_advise advice, CUmemLocation to) {
  FAKE_ENTRY(MemAdvise);
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;  // (the H100 answers CUDA_ERROR_INVALID_CONTEXT without one)
  if (advice == CU_MEM_ADVISE_SET_READ_MOSTLY || advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY)
    to = CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0};  // (ignored)
  return check_managed(p, bytes, to, false);
}

// Registration: a range overlapping one registered already is
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED; so is the memory of a pinned
// allocation (page-locked already). Mapped ranges answer
// cuMemHostGetDevicePointer at their own address.
CUresult fake_MemHostRegister(void* p, std::size_t bytes, unsigned int flags) {
  FAKE_ENTRY(MemHostRegister);
  if (const CUresult r = need_current()) return r;
  if (!p || bytes == 0 || (flags & ~0xFu)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (auto& [start, r] : registrations)
    if (a < start + r.bytes && start < a + bytes) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (in_block(host_allocations, a, 1)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  registrations[a] = Registration{bytes, flags};
  if (flags & memhostregister_devicemap) mapped_allocations[a] = bytes;
  own(a, CU_MEMORYTYPE_HOST, false);
  return CUDA_SUCCESS;
}

CUresult fake_MemHostUnregister(void* p) {
  FAKE_ENTRY(MemHostUnregister);
  std::lock_guard lock(mu);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (registrations.erase(a) == 0) {
    ++invalid_destroys;
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  mapped_allocations.erase(a);
  owners.erase(a);
  return CUDA_SUCCESS;
}

// As the driver: memory it does not know is an answer, not an error (type
// 0, the rest zero; the device ordinal -2, as the H200 answers).
CUresult fake_PointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  FAKE_ENTRY(PointerGetAttributes);
  if (n == 0 || !attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  // The allocation or registration that holds ptr: its start and size.
  std::uintptr_t start = 0;
  std::size_t size = 0;
  const Owner* owner = nullptr;
  auto it = owners.upper_bound(ptr);
  if (it != owners.begin()) {
    --it;
    std::size_t bytes = 0;
    if (auto a = allocations.find(it->first); a != allocations.end()) bytes = a->second;
    if (auto h = host_allocations.find(it->first); h != host_allocations.end()) bytes = h->second;
    if (auto r = registrations.find(it->first); r != registrations.end()) bytes = r->second.bytes;
    if (ptr < it->first + bytes) start = it->first, size = bytes, owner = &it->second;
  }
  // VMM memory (fake_vmm.cpp), as the driver tells it: device memory whose
  // range is the whole reservation; its mapping is one physical allocation.
  VmmExtent vmm{};
  const bool in_vmm = owner == nullptr && vmm_extent(ptr, vmm);
  if (in_vmm) start = vmm.range_base, size = vmm.range_size;
  const std::uintptr_t mapping_base = in_vmm ? vmm.mapping_base : start;
  const std::size_t mapping_size = in_vmm ? vmm.mapping_size : size;
  const bool host_reachable = owner && (owner->managed || owner->type == CU_MEMORYTYPE_HOST);
  const bool device_reachable = in_vmm || (owner && (owner->type == CU_MEMORYTYPE_DEVICE ||
                                                     in_block(mapped_allocations, ptr, 1) || owner->managed));
  for (unsigned i = 0; i < n; ++i) {
    void* d = data[i];
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(d) = owner ? owner->ctx : nullptr; break;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(d) = owner ? static_cast<unsigned>(owner->type) : in_vmm ? unsigned{CU_MEMORYTYPE_DEVICE} : 0u;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:  // (0 with no context current, as the H100 answers)
        *static_cast<CUdeviceptr*>(d) = device_reachable && current() ? ptr : 0;
        break;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *static_cast<void**>(d) = host_reachable ? reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr)) : nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(d) = owner ? owner->id : 0; break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned char*>(d) = owner && owner->managed; break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(d) = owner ? owner->device : in_vmm ? vmm.device : -2;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(d) = start; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<std::size_t*>(d) = size; break;
      case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<unsigned char*>(d) = owner != nullptr || in_vmm; break;
      case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *static_cast<CUdeviceptr*>(d) = mapping_base; break;
      case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *static_cast<std::size_t*>(d) = mapping_size; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

// A copy between two contexts' memory: the fake's memory is one host
// memory, so the same as cuMemcpyDtoDAsync once both contexts are named.
CUresult fake_MemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, std::size_t n,
                              CUstream s) {
  FAKE_ENTRY(MemcpyPeerAsync);
  if (!dst_ctx || !src_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  return enqueue_device_copy(dst, src, n, s);
}
