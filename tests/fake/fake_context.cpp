// The fake driver's contexts: a primary context per device (retained and
// released), created contexts, and each thread's stack of current ones.
#include "fake_state.hpp"

#include <iterator>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace fake {

namespace {

// A context's limits (CUlimit order) and cache preference, as the H200's
// defaults: 1 KiB of stack, a 1 MiB printf FIFO, an 8 MiB malloc heap.
struct Limits {
  std::size_t value[10] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0, 0, 0, 0};
  CUfunc_cache cache = CU_FUNC_CACHE_PREFER_NONE;
};

// The ids cuCtxGetId answers: one per context made, never reused.
unsigned long long next_ctx_id = 1;

struct Ctx {
  int device;
  bool primary;
  long retains;  // primary only
  const void* green = nullptr;  // a green context's context: the green context
  unsigned long long id = next_ctx_id++;  // (a primary context's: renewed when retained afresh)
};

// By context; a context's entry is made by its first use (and kept: a
// reused handle starts from where its predecessor left, harmlessly).
std::map<CUcontext, Limits>& limits = *new std::map<CUcontext, Limits>;
// Peer access enabled: (from, to) contexts.
std::map<std::pair<CUcontext, CUcontext>, bool>& peers = *new std::map<std::pair<CUcontext, CUcontext>, bool>;

Ctx primaries[8];
// A destroyed context's storage is kept and given to the next cuCtxCreate,
// most recent first: the driver reuses handles too, and a test of that must
// not hang on the allocator (ASan's quarantine never hands a block back soon).
std::vector<Ctx*> spare_ctx;
FAKE_TLS std::vector<CUcontext> ctx_stack;

bool valid_ctx(CUcontext c) {
  for (auto& p : primaries)
    if (reinterpret_cast<CUcontext>(&p) == c) return p.retains > 0;
  return alive(c, Kind::context) || alive(c, Kind::green_context);
}

}  // namespace

CUcontext current() { return ctx_stack.empty() ? nullptr : ctx_stack.back(); }

int context_device(CUcontext c) { return c ? reinterpret_cast<Ctx*>(c)->device : -1; }

// As the driver: a primary context released by its last holder stays
// current where it was, and calls there answer CUDA_ERROR_CONTEXT_IS_DESTROYED
// (cuMemAlloc on the H200); so do calls on a thread where a created context
// destroyed elsewhere is still current.
CUresult need_current_locked() {
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  return valid_ctx(c) ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult need_current() {
  std::lock_guard lock(mu);
  return need_current_locked();
}

long live_context() { return count_live(Kind::context); }
long live_green() { return count_live(Kind::green); }

// A green context's context is its device's primary context with the green
// context's SMs (cuda.h): a handle of its own here, valid while the green
// context lives. Its storage is never freed (streams made in it may still
// name it after the green context is gone, as on the driver).
// (Kept reachable for LeakSanitizer, as `live`.)
static std::vector<Ctx*>& green_ctxs = *new std::vector<Ctx*>;

CUcontext green_context_new(int device, const void* green) {
  auto* c = new Ctx{device, false, 0, green};
  green_ctxs.push_back(c);
  live[c] = Kind::green_context;
  return reinterpret_cast<CUcontext>(c);
}

void green_context_free(CUcontext c) {
  live.erase(c);
  reinterpret_cast<Ctx*>(c)->green = nullptr;
}

const void* green_of(CUcontext c) { return alive(c, Kind::green_context) ? reinterpret_cast<Ctx*>(c)->green : nullptr; }
long live_primary() {
  long n = 0;
  for (auto& p : primaries) n += p.retains;
  return n;
}

}  // namespace fake

using namespace fake;

CUresult fake_DevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKE_ENTRY(DevicePrimaryCtxRetain);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  primaries[dev].device = dev;
  primaries[dev].primary = true;
  if (primaries[dev].retains++ == 0) {  // a fresh start
    limits.erase(reinterpret_cast<CUcontext>(&primaries[dev]));
    primaries[dev].id = next_ctx_id++;
  }
  *pctx = reinterpret_cast<CUcontext>(&primaries[dev]);
  return CUDA_SUCCESS;
}

CUresult fake_DevicePrimaryCtxRelease(CUdevice dev) {
  FAKE_ENTRY(DevicePrimaryCtxRelease);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  if (primaries[dev].retains == 0) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  --primaries[dev].retains;
  return CUDA_SUCCESS;
}

// The fake's contexts hold no state to reset: the call is checked and counted.
CUresult fake_DevicePrimaryCtxReset(CUdevice dev) {
  FAKE_ENTRY(DevicePrimaryCtxReset);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// A driver function that is not in oxicuda's table, for the tests of
// oxicuda::driver_entry_point (found through cuGetProcAddress_v2 only).
FAKE_EXPORT CUresult fake_CtxGetApiVersion(CUcontext ctx, unsigned int* version) __asm__("cuCtxGetApiVersion");
CUresult fake_CtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!ctx) ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;
  return CUDA_SUCCESS;
}

CUresult fake_CtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  FAKE_ENTRY(CtxCreate);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~0x1Fu) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Ctx* c = nullptr;
  if (spare_ctx.empty()) {
    c = new Ctx{dev, false, 0};
  } else {
    c = spare_ctx.back();
    spare_ctx.pop_back();
    *c = Ctx{dev, false, 0};
  }
  limits.erase(reinterpret_cast<CUcontext>(c));  // a reused handle's context starts afresh
  for (auto it = peers.begin(); it != peers.end();)
    it = it->first.first == reinterpret_cast<CUcontext>(c) || it->first.second == reinterpret_cast<CUcontext>(c)
             ? peers.erase(it)
             : std::next(it);
  live[c] = Kind::context;
  *pctx = reinterpret_cast<CUcontext>(c);
  ctx_stack.push_back(*pctx);
  return CUDA_SUCCESS;
}

CUresult fake_CtxDestroy(CUcontext ctx) {
  FAKE_ENTRY(CtxDestroy);
  std::lock_guard lock(mu);
  if (!alive(ctx, Kind::context)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  live.erase(ctx);
  if (!ctx_stack.empty() && ctx_stack.back() == ctx) ctx_stack.pop_back();
  spare_ctx.push_back(reinterpret_cast<Ctx*>(ctx));
  return CUDA_SUCCESS;
}

CUresult fake_CtxGetCurrent(CUcontext* pctx) {
  FAKE_ENTRY(CtxGetCurrent);
  *pctx = current();
  return CUDA_SUCCESS;
}

CUresult fake_CtxSetCurrent(CUcontext ctx) {
  FAKE_ENTRY(CtxSetCurrent);
  std::lock_guard lock(mu);
  if (ctx == nullptr) {
    if (!ctx_stack.empty()) ctx_stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_stack.empty())
    ctx_stack.push_back(ctx);
  else
    ctx_stack.back() = ctx;
  return CUDA_SUCCESS;
}

CUresult fake_CtxPopCurrent(CUcontext* pctx) {
  FAKE_ENTRY(CtxPopCurrent);
  if (ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = ctx_stack.back();
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult fake_CtxSynchronize() {
  FAKE_ENTRY(CtxSynchronize);
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (const CUresult r = capture_forbids_unsafe()) return r;
  drain_context(current(), false);
  return CUDA_SUCCESS;
}

// As driver 580 (H100, measured): the device even when the current context
// was destroyed on another thread (cuCtxGetId tells that case).
CUresult fake_CtxGetDevice(CUdevice* d) {
  FAKE_ENTRY(CtxGetDevice);
  std::lock_guard lock(mu);
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *d = reinterpret_cast<Ctx*>(c)->device;
  return CUDA_SUCCESS;
}

// A null context asks for the current one's; a created context destroyed
// on another thread and still current here answers
// CUDA_ERROR_CONTEXT_IS_DESTROYED (driver 580, measured).
CUresult fake_CtxGetId(CUcontext ctx, unsigned long long* id) {
  FAKE_ENTRY(CtxGetId);
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  CUcontext c = ctx ? ctx : current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_ctx(c)) return ctx ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *id = reinterpret_cast<Ctx*>(c)->id;
  return CUDA_SUCCESS;
}

CUresult fake_CtxGetStreamPriorityRange(int* least, int* greatest) {
  FAKE_ENTRY(CtxGetStreamPriorityRange);
  if (const CUresult r = need_current()) return r;
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

// The profiler's switch: the driver answers CUDA_ERROR_INVALID_CONTEXT
// without a current context; with one, a start or stop is a no-op without a
// profiler attached. The fake counts the calls (fake.calls) and checks the
// context.
CUresult fake_ProfilerStart() {
  FAKE_ENTRY(ProfilerStart);
  return need_current();
}

CUresult fake_ProfilerStop() {
  FAKE_ENTRY(ProfilerStop);
  return need_current();
}

// The limits: the device runtime's sync depth is unsupported on compute
// capability 9.0 (the H100's answer); the read-only ones (CU_LIMIT_SHMEM_SIZE, CU_LIMIT_CIG_ENABLED)
// and CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED (a CIG context's, which the fake
// has none of) are CUDA_ERROR_UNSUPPORTED_LIMIT to set; a value outside
// CUlimit is CUDA_ERROR_INVALID_VALUE. The stack size is rounded up to 16.
CUresult fake_CtxSetLimit(CUlimit limit, std::size_t value) {
  FAKE_ENTRY(CtxSetLimit);
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (limit < 0 || limit > CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED) return CUDA_ERROR_INVALID_VALUE;
  if (limit >= CU_LIMIT_SHMEM_SIZE || limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128) return CUDA_ERROR_INVALID_VALUE;
  if (limit == CU_LIMIT_STACK_SIZE) value = (value + 15) / 16 * 16;
  limits[current()].value[limit] = value;
  return CUDA_SUCCESS;
}

CUresult fake_CtxGetLimit(std::size_t* value, CUlimit limit) {
  FAKE_ENTRY(CtxGetLimit);
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (!value || limit < 0 || limit > CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED) return CUDA_ERROR_INVALID_VALUE;
  // Gone on compute capability 9.0 (the H100 answers this, reading or setting).
  if (limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  *value = limits[current()].value[limit];
  return CUDA_SUCCESS;
}

CUresult fake_CtxSetCacheConfig(CUfunc_cache config) {
  FAKE_ENTRY(CtxSetCacheConfig);
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  limits[current()].cache = config;
  return CUDA_SUCCESS;
}

CUresult fake_CtxGetCacheConfig(CUfunc_cache* config) {
  FAKE_ENTRY(CtxGetCacheConfig);
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  *config = limits[current()].cache;
  return CUDA_SUCCESS;
}

// Peer access from the current context to `peer`'s memory, as the driver:
// the same device is CUDA_ERROR_INVALID_DEVICE, devices that cannot reach
// each other CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, twice
// CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED; disabling what is not enabled
// CUDA_ERROR_PEER_ACCESS_NOT_ENABLED.
CUresult fake_CtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  FAKE_ENTRY(CtxEnablePeerAccess);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (!valid_ctx(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  const int from = reinterpret_cast<Ctx*>(current())->device, to = reinterpret_cast<Ctx*>(peer)->device;
  if (from == to) return CUDA_ERROR_INVALID_DEVICE;
  if (!peer_capable_locked(from, to)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (!peers.emplace(std::pair{current(), peer}, true).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

CUresult fake_CtxDisablePeerAccess(CUcontext peer) {
  FAKE_ENTRY(CtxDisablePeerAccess);
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (!valid_ctx(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  if (peers.erase(std::pair{current(), peer}) == 0) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  return CUDA_SUCCESS;
}
