// The fake driver's memory: device allocations are host memory (so copies,
// fills and the `dbl` kernel really move and change bytes), pinned host
// allocations, and each device's default memory pool.
#include "fake_state.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace fake {

namespace {

struct Pool {
  std::uint64_t release_threshold = 0;
  std::uint64_t used = 0;
};

// Never destroyed, as `live` (fake_state.hpp).
std::map<std::uintptr_t, std::size_t>& allocations = *new std::map<std::uintptr_t, std::size_t>;
std::map<std::uintptr_t, std::size_t>& host_allocations = *new std::map<std::uintptr_t, std::size_t>;
// The pinned allocations made with CU_MEMHOSTALLOC_DEVICEMAP (mapped at the
// same address, as under unified addressing).
std::map<std::uintptr_t, std::size_t>& mapped_allocations = *new std::map<std::uintptr_t, std::size_t>;
Pool pools[8];

}  // namespace

// Modules' variables (.global, .const), by address: device memory that is
// the module's, not an allocation (fake_live("memory") does not count them).
std::map<std::uintptr_t, std::size_t>& module_variables = *new std::map<std::uintptr_t, std::size_t>;

void module_variable_add(CUdeviceptr ptr, std::size_t bytes) { module_variables[ptr] = bytes; }
void module_variable_remove(CUdeviceptr ptr) { module_variables.erase(ptr); }

// [ptr, ptr + bytes) inside one block of `blocks`?
static bool in_block(const std::map<std::uintptr_t, std::size_t>& blocks, CUdeviceptr ptr, std::size_t bytes) {
  auto it = blocks.upper_bound(ptr);
  if (it == blocks.begin()) return false;
  --it;
  return ptr >= it->first && ptr + bytes <= it->first + it->second;
}

// [ptr, ptr + bytes) inside one allocation or one module variable?
bool in_allocation(CUdeviceptr ptr, std::size_t bytes) {
  if (bytes == 0) return true;  // as the driver: a zero-size copy or memset succeeds, whatever the pointer
  return in_block(allocations, ptr, bytes) || in_block(module_variables, ptr, bytes);
}

// The blocks of mem alloc nodes (owned by their nodes), by address.
std::map<std::uintptr_t, std::size_t>& graph_blocks = *new std::map<std::uintptr_t, std::size_t>;

void graph_memory_reserve(CUdeviceptr ptr, std::size_t bytes) { graph_blocks[ptr] = bytes; }

bool graph_memory_alloc(CUdeviceptr ptr, std::size_t bytes) {
  return allocations.emplace(ptr, bytes).second;
}

bool graph_memory_free(CUdeviceptr ptr) { return allocations.erase(ptr) == 1; }

void graph_memory_forget(CUdeviceptr ptr) {
  graph_blocks.erase(ptr);
  allocations.erase(ptr);
}

bool in_graph_block(CUdeviceptr ptr, std::size_t bytes) { return in_block(graph_blocks, ptr, bytes); }

long live_memory() { return static_cast<long>(allocations.size()); }
long live_pinned() { return static_cast<long>(host_allocations.size()); }

}  // namespace fake

using namespace fake;

CUresult fake_MemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  FAKE_ENTRY(MemGetInfo);
  if (const CUresult r = need_current()) return r;
  std::lock_guard lock(mu);
  std::size_t used = 0;
  for (auto& [p, n] : allocations) used += n;
  *total = std::size_t{80} << 30;
  *free_bytes = *total - used;
  return CUDA_SUCCESS;
}

CUresult fake_MemAlloc(CUdeviceptr* p, std::size_t bytes) {
  FAKE_ENTRY(MemAlloc);
  if (const CUresult r = need_current()) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (std::size_t{1} << 36)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(mu);
  if (const CUresult r = capture_forbids_unsafe()) return r;
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  *p = reinterpret_cast<std::uintptr_t>(mem);
  return CUDA_SUCCESS;
}

CUresult fake_MemFree(CUdeviceptr p) {
  FAKE_ENTRY(MemFree);
  std::lock_guard lock(mu);
  // As on the H200: refused (and the capture invalidated) during a global
  // capture, unless this thread's capture mode is relaxed; nothing freed.
  if (const CUresult r = capture_forbids_unsafe()) return r;
  auto it = allocations.find(p);
  if (it == allocations.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  allocations.erase(it);
  if (!graph_blocks.count(p)) std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
  return CUDA_SUCCESS;
}

// A copy enqueued on a capturing stream becomes a memcpy node.
static CUresult capture_copy(CUstream s, std::uintptr_t dst, bool dst_device, std::uintptr_t src, bool src_device,
                             std::size_t n) {
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  w.dst = dst, w.dst_device = dst_device, w.src = src, w.src_device = src_device, w.bytes = n;
  bool captured = false;
  return capture_work(s, std::move(w), captured);
}

// Async work happens at once, unless the stream is held (defer): a copy
// from host memory then takes its bytes now (the driver stages pageable
// memory), and writes them when the stream's work runs. A zero-size copy
// succeeds whatever its pointers (as the driver), without passing a null
// pointer to memcpy.
CUresult fake_MemcpyHtoDAsync(CUdeviceptr dst, const void* src, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemcpyHtoDAsync);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return capture_copy(s, dst, true, reinterpret_cast<std::uintptr_t>(src), false, n);
  if (!in_allocation(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  if (!held(s)) {
    std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)), src, n);
    return CUDA_SUCCESS;
  }
  std::vector<unsigned char> bytes(static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + n);
  defer(s, [dst, bytes = std::move(bytes)] {
    if (in_allocation(dst, bytes.size()))
      std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)), bytes.data(), bytes.size());
  });
  return CUDA_SUCCESS;
}

CUresult fake_MemcpyDtoHAsync(void* dst, CUdeviceptr src, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemcpyDtoHAsync);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return capture_copy(s, reinterpret_cast<std::uintptr_t>(dst), false, src, true, n);
  if (!in_allocation(src, n)) return CUDA_ERROR_INVALID_VALUE;
  auto work = [dst, src, n] {
    if (n && in_allocation(src, n)) std::memcpy(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), n);
  };
  if (held(s))
    defer(s, std::move(work));
  else
    work();
  return CUDA_SUCCESS;
}

CUresult fake_MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemcpyDtoDAsync);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return capture_copy(s, dst, true, src, true, n);
  if (!in_allocation(dst, n) || !in_allocation(src, n)) return CUDA_ERROR_INVALID_VALUE;
  auto work = [dst, src, n] {
    if (n && in_allocation(dst, n) && in_allocation(src, n))
      std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)),
                   reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), n);
  };
  if (held(s))
    defer(s, std::move(work));
  else
    work();
  return CUDA_SUCCESS;
}

// `height` rows of `width` elements of T, `pitch` bytes apart (one row: the
// pitch is not read), as the driver checks them: the destination aligned to
// the element, a pitch of at least a row in bytes and a multiple of the
// element, every row inside one allocation.
template <class T>
static CUresult memset(CUdeviceptr dst, T value, std::size_t width, CUstream s, std::size_t height = 1,
                       std::size_t pitch = 0) {
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (height == 1) pitch = width * sizeof(T);
  if (height > 1 && (pitch < width * sizeof(T) || pitch % sizeof(T))) return CUDA_ERROR_INVALID_VALUE;
  if (capturing(s)) {
    Work w;
    w.type = CU_GRAPH_NODE_TYPE_MEMSET;
    w.dst = dst, w.value = static_cast<unsigned>(value), w.element_size = sizeof(T), w.width = width;
    w.height = height, w.pitch = pitch;
    bool captured = false;
    return capture_work(s, std::move(w), captured);
  }
  if (dst % sizeof(T)) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t row = 0; row < height; ++row)
    if (!in_allocation(dst + row * pitch, width * sizeof(T))) return CUDA_ERROR_INVALID_VALUE;
  auto work = [dst, value, width, height, pitch] {
    for (std::size_t row = 0; row < height; ++row) {
      if (!in_allocation(dst + row * pitch, width * sizeof(T))) return;
      auto* p = reinterpret_cast<T*>(static_cast<std::uintptr_t>(dst + row * pitch));
      for (std::size_t i = 0; i < width; ++i) p[i] = value;
    }
  };
  if (held(s))
    defer(s, std::move(work));
  else
    work();
  return CUDA_SUCCESS;
}

CUresult fake_MemsetD8Async(CUdeviceptr dst, unsigned char v, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemsetD8Async);
  return memset(dst, v, n, s);
}
CUresult fake_MemsetD16Async(CUdeviceptr dst, unsigned short v, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemsetD16Async);
  return memset(dst, v, n, s);
}
CUresult fake_MemsetD32Async(CUdeviceptr dst, unsigned int v, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemsetD32Async);
  return memset(dst, v, n, s);
}
CUresult fake_MemsetD2D32Async(CUdeviceptr dst, std::size_t pitch, unsigned int v, std::size_t width,
                               std::size_t height, CUstream s) {
  FAKE_ENTRY(MemsetD2D32Async);
  return memset(dst, v, width, s, height, pitch);
}

CUresult fake_MemHostAlloc(void** pp, std::size_t bytes, unsigned int flags) {
  FAKE_ENTRY(MemHostAlloc);
  if (const CUresult r = need_current()) return r;
  if (!pp || bytes == 0 || flags > 7) return CUDA_ERROR_INVALID_VALUE;
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(mu);
  host_allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  if (flags & oxicuda::ffi::memhostalloc_devicemap) mapped_allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  *pp = mem;
  return CUDA_SUCCESS;
}

CUresult fake_MemFreeHost(void* p) {
  FAKE_ENTRY(MemFreeHost);
  std::lock_guard lock(mu);
  auto it = host_allocations.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == host_allocations.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  host_allocations.erase(it);
  mapped_allocations.erase(reinterpret_cast<std::uintptr_t>(p));
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult fake_MemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  FAKE_ENTRY(MemHostGetDevicePointer);
  if (!pdptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = need_current()) return r;
  std::lock_guard lock(mu);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = mapped_allocations.upper_bound(a);
  if (it == mapped_allocations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (a >= it->first + it->second) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = a;
  return CUDA_SUCCESS;
}

CUresult fake_MemAllocAsync(CUdeviceptr* p, std::size_t bytes, CUstream s) {
  FAKE_ENTRY(MemAllocAsync);
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return capture_alloc(s, bytes, *p);  // a mem alloc node
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  pools[0].used += bytes;
  *p = reinterpret_cast<std::uintptr_t>(mem);
  return CUDA_SUCCESS;
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
    pools[0].used -= it->second;
    allocations.erase(it);
    std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
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
  *pool = reinterpret_cast<CUmemoryPool>(&pools[dev]);
  return CUDA_SUCCESS;
}

static Pool* pool_of(CUmemoryPool p) {
  for (auto& pool : pools)
    if (reinterpret_cast<CUmemoryPool>(&pool) == p) return &pool;
  return nullptr;
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
