// The fake driver's memory pools: each device's default pool, pools made by
// cuMemPoolCreate with their access and attributes, and the stream-ordered
// allocations made from them (cuMemAllocAsync, cuMemFreeAsync), captured as
// graph memory nodes where the driver does.
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

// With `mu` held: a stream-ordered allocation from `pool` (null: the
// default pool of the stream's device), for a stream that is not capturing.
static CUresult pool_allocate(CUdeviceptr* p, std::size_t bytes, Pool* pool, CUstream s) {
  const int dev = std::max(context_device(stream_context(s)), 0);
  if (!pool)
    pool = &pools[dev];
  else if (pool->access[dev] == CU_MEM_ACCESS_FLAGS_PROT_NONE)
    return CUDA_ERROR_INVALID_VALUE;  // the stream's device has no access to the pool
  if (pool->max_size && pool->used + bytes > pool->max_size) return CUDA_ERROR_OUT_OF_MEMORY;
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  pool_allocations[reinterpret_cast<std::uintptr_t>(mem)] = pool;
  pool->used += bytes;
  *p = reinterpret_cast<std::uintptr_t>(mem);
  return CUDA_SUCCESS;
}

CUresult fake_MemAllocAsync(CUdeviceptr* p, std::size_t bytes, CUstream s) {
  FAKE_ENTRY(MemAllocAsync);
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return capture_alloc(s, bytes, *p);  // a mem alloc node
  return pool_allocate(p, bytes, nullptr, s);
}

CUresult fake_MemAllocFromPoolAsync(CUdeviceptr* p, std::size_t bytes, CUmemoryPool pool, CUstream s) {
  FAKE_ENTRY(MemAllocFromPoolAsync);
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  Pool* from = pool_of(pool);
  if (!from) return CUDA_ERROR_INVALID_VALUE;
  if (capturing(s)) return CUDA_ERROR_NOT_SUPPORTED;  // (alloc nodes from a given pool: not modeled)
  return pool_allocate(p, bytes, from, s);
}

CUresult fake_MemFreeAsync(CUdeviceptr p, CUstream s) {
  FAKE_ENTRY(MemFreeAsync);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s) && graph_blocks.count(p)) {  // a mem free node (other frees are not modeled in capture)
    Work w;
    w.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    w.dptr = p;
    bool captured = false;
    return capture_work(s, std::move(w), captured);
  }
  if (!allocations.count(p)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto work = [p] {
    auto it = allocations.find(p);
    if (it == allocations.end()) {
      ++invalid_destroys;
      return;
    }
    pool_free(p, it->second);
    allocations.erase(it);
    // A graph's allocation (live since its graph's launch) is freed, its
    // block kept by its alloc node for the next launch, as cuMemFree does.
    if (!graph_blocks.count(p)) std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
  };
  if (held(s))
    defer(s, std::move(work));
  else
    work();
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  FAKE_ENTRY(DeviceGetDefaultMemPool);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  pools[dev].device = dev;
  pools[dev].access[dev] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  *pool = reinterpret_cast<CUmemoryPool>(&pools[dev]);
  return CUDA_SUCCESS;
}

// Pools of one's own: pinned device memory, no handle types (the fake does
// not export pools), on a device that has one.
CUresult fake_MemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  FAKE_ENTRY(MemPoolCreate);
  if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (props->location.id < 0 || props->location.id >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  auto* pool = new Pool;
  pool->device = props->location.id;
  pool->max_size = props->maxSize;
  pool->access[pool->device] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  own_pools.insert(pool);
  *out = reinterpret_cast<CUmemoryPool>(pool);
  return CUDA_SUCCESS;
}

CUresult fake_MemPoolDestroy(CUmemoryPool p) {
  FAKE_ENTRY(MemPoolDestroy);
  std::lock_guard lock(mu);
  const auto it = own_pools.find(reinterpret_cast<Pool*>(p));
  if (it == own_pools.end() || (*it)->destroyed) {  // (a default pool, or not a pool)
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  Pool* pool = *it;
  if (pool->used != 0) {
    pool->destroyed = true;  // released with its last allocation
    return CUDA_SUCCESS;
  }
  own_pools.erase(it);
  delete pool;
  return CUDA_SUCCESS;
}

// Access from another device needs peer access between the devices; the
// pool's own device keeps read-write access (changing it is
// CUDA_ERROR_INVALID_DEVICE).
CUresult fake_MemPoolSetAccess(CUmemoryPool p, const CUmemAccessDesc* map, std::size_t count) {
  FAKE_ENTRY(MemPoolSetAccess);
  if (!map && count) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Pool* pool = pool_of(p);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& d = map[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d.location.id < 0 || d.location.id >= device_count)
      return CUDA_ERROR_INVALID_DEVICE;
    if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    if (d.location.id == pool->device ? d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                      : !peer_capable_locked(d.location.id, pool->device))
      return CUDA_ERROR_INVALID_DEVICE;
  }
  for (std::size_t i = 0; i < count; ++i) pool->access[map[i].location.id] = map[i].flags;
  return CUDA_SUCCESS;
}

CUresult fake_MemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool p, CUmemLocation* location) {
  FAKE_ENTRY(MemPoolGetAccess);
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Pool* pool = pool_of(p);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id < 0 || location->id >= device_count)
    return CUDA_ERROR_INVALID_DEVICE;
  *flags = pool->access[location->id];
  return CUDA_SUCCESS;
}



CUresult fake_MemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute attr, void* value) {
  FAKE_ENTRY(MemPoolSetAttribute);
  std::lock_guard lock(mu);
  Pool* pool = pool_of(p);
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  if (attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) return CUDA_ERROR_INVALID_VALUE;
  pool->release_threshold = *static_cast<cuuint64_t*>(value);
  return CUDA_SUCCESS;
}

CUresult fake_MemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute attr, void* value) {
  FAKE_ENTRY(MemPoolGetAttribute);
  std::lock_guard lock(mu);
  Pool* pool = pool_of(p);
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = pool->release_threshold; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = pool->used; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = pool->used; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult fake_MemPoolTrimTo(CUmemoryPool p, std::size_t) {
  FAKE_ENTRY(MemPoolTrimTo);
  std::lock_guard lock(mu);
  return pool_of(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
