// The fake driver's memory: device allocations are host memory (so copies,
// fills and the `dbl` kernel really move and change bytes), pinned host
// allocations, and each device's default memory pool.
#include "fake_memory_state.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace fake {

namespace mem {

// Never destroyed, as `live` (fake_state.hpp).
std::map<std::uintptr_t, std::size_t>& allocations = *new std::map<std::uintptr_t, std::size_t>;
std::map<std::uintptr_t, std::size_t>& host_allocations = *new std::map<std::uintptr_t, std::size_t>;
std::map<std::uintptr_t, std::size_t>& mapped_allocations = *new std::map<std::uintptr_t, std::size_t>;
Pool pools[8];
std::set<Pool*>& own_pools = *new std::set<Pool*>;
std::map<std::uintptr_t, Pool*>& pool_allocations = *new std::map<std::uintptr_t, Pool*>;
std::map<std::uintptr_t, Owner>& owners = *new std::map<std::uintptr_t, Owner>;
unsigned long long next_buffer_id = 1;
std::map<std::uintptr_t, std::size_t>& managed_allocations = *new std::map<std::uintptr_t, std::size_t>;
std::map<std::uintptr_t, Registration>& registrations = *new std::map<std::uintptr_t, Registration>;

void own(std::uintptr_t p, CUmemorytype type, bool managed) {
  const int device = context_device(current());
  owners[p] = Owner{current(), type, managed, device < 0 ? 0 : device, next_buffer_id++};
}

void pool_free(std::uintptr_t p, std::size_t bytes) {
  const auto it = pool_allocations.find(p);
  if (it == pool_allocations.end()) return;
  Pool* pool = it->second;
  pool->used -= bytes;
  pool_allocations.erase(it);
  if (pool->destroyed && pool->used == 0) {  // the driver releases a destroyed pool with its last allocation
    own_pools.erase(pool);
    delete pool;
  }
}

Pool* pool_of(CUmemoryPool p) {
  for (auto& pool : pools)
    if (reinterpret_cast<CUmemoryPool>(&pool) == p) return &pool;
  const auto it = own_pools.find(reinterpret_cast<Pool*>(p));
  return it != own_pools.end() && !(*it)->destroyed ? *it : nullptr;
}

bool in_block(const std::map<std::uintptr_t, std::size_t>& blocks, CUdeviceptr ptr, std::size_t bytes) {
  auto it = blocks.upper_bound(ptr);
  if (it == blocks.begin()) return false;
  --it;
  return ptr >= it->first && ptr + bytes <= it->first + it->second;
}

}  // namespace mem

using namespace mem;

// Modules' variables (.global, .const), by address: device memory that is
// the module's, not an allocation (fake_live("memory") does not count them).
std::map<std::uintptr_t, std::size_t>& module_variables = *new std::map<std::uintptr_t, std::size_t>;

void module_variable_add(CUdeviceptr ptr, std::size_t bytes) { module_variables[ptr] = bytes; }
void module_variable_remove(CUdeviceptr ptr) { module_variables.erase(ptr); }

// [ptr, ptr + bytes) inside one allocation or one module variable, or
// mapped memory open to a device (fake_vmm.cpp)?
bool in_allocation(CUdeviceptr ptr, std::size_t bytes) {
  if (bytes == 0) return true;  // as the driver: a zero-size copy or memset succeeds, whatever the pointer
  return in_block(allocations, ptr, bytes) || in_block(module_variables, ptr, bytes) || in_vmm_mapping(ptr, bytes);
}

// The blocks of mem alloc nodes (owned by their nodes), by address.
std::map<std::uintptr_t, std::size_t>& graph_blocks = *new std::map<std::uintptr_t, std::size_t>;

void graph_memory_reserve(CUdeviceptr ptr, std::size_t bytes) { graph_blocks[ptr] = bytes; }

bool graph_memory_alloc(CUdeviceptr ptr, std::size_t bytes) {
  return allocations.emplace(ptr, bytes).second;
}

bool graph_memory_free(CUdeviceptr ptr) { return allocations.erase(ptr) == 1; }

bool graph_memory_forget(CUdeviceptr ptr) {
  graph_blocks.erase(ptr);
  return allocations.count(ptr) == 1;
}

bool in_graph_block(CUdeviceptr ptr, std::size_t bytes) { return in_block(graph_blocks, ptr, bytes); }
bool graph_block_start(CUdeviceptr ptr) { return graph_blocks.count(ptr) == 1; }

bool ipc_allocation(CUdeviceptr ptr, std::size_t& bytes, unsigned long long& id) {
  auto a = allocations.find(ptr);
  auto o = owners.find(ptr);
  if (a == allocations.end() || o == owners.end() || o->second.managed || o->second.type != CU_MEMORYTYPE_DEVICE)
    return false;  // (cuMemAllocAsync's blocks have no owner: a pool's)
  bytes = a->second;
  id = o->second.id;
  return true;
}

bool ipc_allocation_live(CUdeviceptr ptr, unsigned long long id) {
  auto o = owners.find(ptr);
  return allocations.count(ptr) && o != owners.end() && o->second.id == id;
}

long live_memory() { return static_cast<long>(allocations.size()); }
long live_pinned() { return static_cast<long>(host_allocations.size()); }
long live_registered() { return static_cast<long>(registrations.size()); }
long live_pool() { return static_cast<long>(own_pools.size()); }

}  // namespace fake

using namespace fake;
using namespace fake::mem;

CUresult fake_MemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  FAKE_ENTRY(MemGetInfo);
  if (const CUresult r = need_current()) return r;
  std::lock_guard lock(mu);
  // The current context's device's: an allocation counts where its
  // context's device is (device 0 when it has no recorded owner).
  const int device = context_device(current());
  std::size_t used = 0;
  for (auto& [p, n] : allocations) {
    auto o = owners.find(p);
    if ((o == owners.end() ? 0 : context_device(o->second.ctx)) == device) used += n;
  }
  *total = std::size_t{80} << 30;
  *free_bytes = *total - used;
  return CUDA_SUCCESS;
}

// cuMemAlloc's body (and cuMemAllocPitch's).
static CUresult allocate(CUdeviceptr* p, std::size_t bytes) {
  if (const CUresult r = need_current()) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (std::size_t{1} << 36)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(mu);
  if (const CUresult r = capture_forbids_unsafe()) return r;
  // Aligned to 256 bytes, as the driver's allocations are (TMA needs 16 or 32).
  void* mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  own(reinterpret_cast<std::uintptr_t>(mem), CU_MEMORYTYPE_DEVICE, false);
  *p = reinterpret_cast<std::uintptr_t>(mem);
  return CUDA_SUCCESS;
}

CUresult fake_MemAlloc(CUdeviceptr* p, std::size_t bytes) {
  FAKE_ENTRY(MemAlloc);
  return allocate(p, bytes);
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
  pool_free(p, it->second);
  allocations.erase(it);
  owners.erase(p);
  managed_allocations.erase(p);
  if (!graph_blocks.count(p) && !external_buffer_free(p)) std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
  return CUDA_SUCCESS;
}

// Rows padded to 512 bytes (the H200's texture pitch alignment is 32, but
// cuMemAllocPitch pads further; 512 keeps tests honest about the pitch).
CUresult fake_MemAllocPitch(CUdeviceptr* p, std::size_t* pitch, std::size_t width, std::size_t height,
                            unsigned int element_size) {
  FAKE_ENTRY(MemAllocPitch);
  if (!p || !pitch || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t padded = (width + 511) / 512 * 512;
  if (padded < width || height > (std::size_t{1} << 36) / padded) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr mem = 0;
  if (const CUresult r = allocate(&mem, padded * height)) return r;
  *p = mem;
  *pitch = padded;
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

// As driver 580 (measured on an H100, tools/probes/vmm_async_copy.cpp): a
// stream-ordered copy on a stream of the user's (blocking or not), with no
// context current, whose device side runs from one VMM mapping into the
// next, is refused with CUDA_ERROR_INVALID_VALUE; the same bytes a mapping
// at a time, or with a context current, are not. (A memset is not refused.)
static bool refused_over_mappings(CUstream s, CUdeviceptr a, CUdeviceptr b, std::size_t n) {
  if (reinterpret_cast<std::uintptr_t>(s) <= 2 || current() != nullptr) return false;
  return (a && spans_vmm_mappings(a, n)) || (b && spans_vmm_mappings(b, n));
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
  if (!in_allocation(dst, n) || refused_over_mappings(s, dst, 0, n)) return CUDA_ERROR_INVALID_VALUE;
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
  if (!in_allocation(src, n) || refused_over_mappings(s, 0, src, n)) return CUDA_ERROR_INVALID_VALUE;
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
  if (refused_over_mappings(s, dst, src, n)) return CUDA_ERROR_INVALID_VALUE;
  return mem::enqueue_device_copy(dst, src, n, s);
}

namespace fake::mem {
CUresult enqueue_device_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
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
}  // namespace fake::mem

// A 2D copy: host and device (or unified) sides, rows checked as the driver
// does (a pitch of at least the width, every device row inside one
// allocation); host rows are read when it is enqueued (staged, as pageable
// memory is) and written when it runs. Arrays, and 2D copies on a capturing
// stream, are not modeled: CUDA_ERROR_NOT_SUPPORTED.
CUresult fake_Memcpy2DAsync(const CUDA_MEMCPY2D* c, CUstream s) {
  FAKE_ENTRY(Memcpy2DAsync);
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (capturing(s)) return CUDA_ERROR_NOT_SUPPORTED;
  const auto device_side = [](CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; };
  for (const CUmemorytype t : {c->srcMemoryType, c->dstMemoryType})
    if (t != CU_MEMORYTYPE_HOST && !device_side(t)) return t == CU_MEMORYTYPE_ARRAY ? CUDA_ERROR_NOT_SUPPORTED
                                                                                     : CUDA_ERROR_INVALID_VALUE;
  const std::size_t w = c->WidthInBytes, h = c->Height;
  if (w == 0 || h == 0) return CUDA_SUCCESS;
  if (c->srcXInBytes + w > c->srcPitch || c->dstXInBytes + w > c->dstPitch) return CUDA_ERROR_INVALID_VALUE;
  const std::uintptr_t src0 = (c->srcMemoryType == CU_MEMORYTYPE_HOST ? reinterpret_cast<std::uintptr_t>(c->srcHost)
                                                                       : c->srcDevice) +
                              c->srcXInBytes + c->srcY * c->srcPitch;
  const std::uintptr_t dst0 = (c->dstMemoryType == CU_MEMORYTYPE_HOST ? reinterpret_cast<std::uintptr_t>(c->dstHost)
                                                                       : c->dstDevice) +
                              c->dstXInBytes + c->dstY * c->dstPitch;
  if (!src0 || !dst0) return CUDA_ERROR_INVALID_VALUE;
  const bool src_device = device_side(c->srcMemoryType), dst_device = device_side(c->dstMemoryType);
  const std::size_t sp = c->srcPitch, dp = c->dstPitch;
  for (std::size_t y = 0; y < h; ++y)
    if ((src_device && !in_allocation(src0 + y * sp, w)) || (dst_device && !in_allocation(dst0 + y * dp, w)))
      return CUDA_ERROR_INVALID_VALUE;
  // The rows, read now: from host memory as the driver stages it; from
  // device memory when the work runs (below).
  std::vector<unsigned char> staged;
  if (!src_device && held(s)) {
    staged.resize(w * h);
    for (std::size_t y = 0; y < h; ++y)
      std::memcpy(staged.data() + y * w, reinterpret_cast<const void*>(src0 + y * sp), w);
  }
  auto work = [=, staged = std::move(staged)] {
    for (std::size_t y = 0; y < h; ++y) {
      if ((src_device && !in_allocation(src0 + y * sp, w)) || (dst_device && !in_allocation(dst0 + y * dp, w))) return;
      const void* from = staged.empty() ? reinterpret_cast<const void*>(src0 + y * sp) : staged.data() + y * w;
      std::memmove(reinterpret_cast<void*>(dst0 + y * dp), from, w);
    }
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
  own(reinterpret_cast<std::uintptr_t>(mem), CU_MEMORYTYPE_HOST, false);
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
  owners.erase(reinterpret_cast<std::uintptr_t>(p));
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
