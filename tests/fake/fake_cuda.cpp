// The fake driver: every entry point of oxicuda's table except those in
// fake_getproc.cpp and fake_optional.cpp. See fake_cuda.hpp.
#include "fake_cuda.hpp"

#include "fake_control.h"
#include "fake_state.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fake {

constexpr std::size_t N = entry_count;

std::atomic<long> calls[N];
std::atomic<long> total_calls{0};
std::atomic<long> fail_countdown[N];
std::atomic<int> fail_result[N];
std::atomic<bool> fail_sticky[N];

// FAKE_CUDA_FAIL="cuInit:1:100" injects a failure before the first call
// (for the entry points only the loader calls, in a process of their own).
const bool env_faults = [] {
  if (const char* spec = std::getenv("FAKE_CUDA_FAIL")) {
    const char* c1 = std::strchr(spec, ':');
    const char* c2 = c1 ? std::strchr(c1 + 1, ':') : nullptr;
    if (c2) {
      const std::string name(spec, c1);
      for (std::size_t i = 0; i < N; ++i)
        if (name == entries[i].name) {
          fail_countdown[i] = std::atol(c1 + 1);
          fail_result[i] = std::atoi(c2 + 1);
        }
    }
  }
  return true;
}();

CUresult enter(Entry e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  calls[i].fetch_add(1, std::memory_order_relaxed);
  total_calls.fetch_add(1, std::memory_order_relaxed);
  if (fail_sticky[i].load(std::memory_order_relaxed)) return static_cast<CUresult>(fail_result[i].load());
  if (fail_countdown[i].load(std::memory_order_relaxed) > 0 && fail_countdown[i].fetch_sub(1) == 1)
    return static_cast<CUresult>(fail_result[i].load());
  return CUDA_SUCCESS;
}

std::mutex mu;
std::unordered_map<const void*, Kind>& live = *new std::unordered_map<const void*, Kind>;
std::map<std::uintptr_t, std::size_t>& allocations = *new std::map<std::uintptr_t, std::size_t>;
std::map<std::uintptr_t, std::size_t>& host_allocations = *new std::map<std::uintptr_t, std::size_t>;
long invalid_destroys = 0;
long host_funcs_run = 0;
int device_count = [] {
  const char* e = std::getenv("FAKE_CUDA_DEVICES");
  return e ? std::atoi(e) : 1;
}();
Ctx primaries[8];
Pool pools[8];
double clock_ms = 0;
FakeLaunch last_launch;
thread_local std::vector<CUcontext> ctx_stack;

bool alive(const void* h, Kind k) {
  auto it = live.find(h);
  return it != live.end() && it->second == k;
}

bool valid_stream(CUstream s) {
  const auto v = reinterpret_cast<std::uintptr_t>(s);
  return v <= 2 || alive(s, Kind::stream);
}

CUcontext current() { return ctx_stack.empty() ? nullptr : ctx_stack.back(); }

bool valid_ctx(CUcontext c) {
  for (auto& p : primaries)
    if (reinterpret_cast<CUcontext>(&p) == c) return p.retains > 0;
  return alive(c, Kind::context);
}

// [ptr, ptr + bytes) inside one allocation?
bool in_allocation(CUdeviceptr ptr, std::size_t bytes) {
  auto it = allocations.upper_bound(ptr);
  if (it == allocations.begin()) return false;
  --it;
  return ptr >= it->first && ptr + bytes <= it->first + it->second;
}

std::size_t entry_index(const char* name) {
  for (std::size_t i = 0; i < N; ++i)
    if (std::strcmp(entries[i].name, name) == 0) return i;
  return N;
}

// --- PTX, as much as the tests need ---------------------------------------

std::size_t type_size(const std::string& t) {
  if (t == ".u64" || t == ".s64" || t == ".b64" || t == ".f64") return 8;
  if (t == ".u32" || t == ".s32" || t == ".b32" || t == ".f32") return 4;
  if (t == ".u16" || t == ".s16" || t == ".b16" || t == ".f16") return 2;
  if (t == ".u8" || t == ".s8" || t == ".b8") return 1;
  return 0;
}

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '(' || c == ')') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Parses `.param [.align A] .type name[N]` declarations into offsets/sizes.
std::vector<Param> parse_params(const std::string& list) {
  std::vector<Param> params;
  std::size_t offset = 0, pos = 0;
  while ((pos = list.find(".param", pos)) != std::string::npos) {
    std::size_t end = list.find_first_of(",)", pos);
    std::string decl = list.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos += 6;
    auto t = tokens(decl);
    std::size_t align = 0, size = 0, i = 1;
    if (i < t.size() && t[i] == ".align") align = std::strtoul(t[i + 1].c_str(), nullptr, 10), i += 2;
    if (i >= t.size()) break;
    size = type_size(t[i]);
    const std::size_t elem = size;
    if (i + 1 < t.size()) {
      auto lb = t[i + 1].find('[');
      if (lb != std::string::npos) size *= std::strtoul(t[i + 1].c_str() + lb + 1, nullptr, 10);
    }
    if (!align) align = elem ? elem : 1;
    offset = (offset + align - 1) / align * align;
    params.push_back({offset, size});
    offset += size;
  }
  return params;
}

void write_log(std::vector<std::pair<CUjit_option, void*>>& opts, CUjit_option buf_key, CUjit_option size_key,
               const std::string& text) {
  char* buf = nullptr;
  void** size_slot = nullptr;
  for (auto& [k, v] : opts) {
    if (k == buf_key) buf = static_cast<char*>(v);
    if (k == size_key) size_slot = &v;
  }
  if (!buf || !size_slot) return;
  const std::size_t cap = reinterpret_cast<std::uintptr_t>(*size_slot);
  const std::size_t n = text.size() < cap ? text.size() : (cap ? cap - 1 : 0);
  std::memcpy(buf, text.data(), n);
  if (cap) buf[n] = '\0';
  *size_slot = reinterpret_cast<void*>(static_cast<std::uintptr_t>(n));
}

}  // namespace fake

using namespace fake;

// --- controls ----------------------------------------------------------------

FAKE_EXPORT void fake_reset() {
  for (std::size_t i = 0; i < N; ++i) {
    calls[i] = 0;
    fail_countdown[i] = 0;
    fail_sticky[i] = false;
    fail_result[i] = 0;
  }
  total_calls = 0;
  std::lock_guard lock(mu);
  invalid_destroys = 0;
  host_funcs_run = 0;
}

FAKE_EXPORT long fake_calls(const char* name) {
  if (std::strcmp(name, "*") == 0) return total_calls.load();
  const std::size_t i = entry_index(name);
  return i < N ? calls[i].load() : -1;
}

FAKE_EXPORT int fake_fail(const char* name, long nth, int result) {
  const std::size_t i = entry_index(name);
  if (i >= N) return -1;
  fail_result[i] = result;
  if (nth == 0)
    fail_sticky[i] = true;
  else
    fail_countdown[i] = nth;
  return 0;
}

FAKE_EXPORT long fake_live(const char* kind) {
  std::lock_guard lock(mu);
  if (std::strcmp(kind, "memory") == 0) return static_cast<long>(allocations.size());
  if (std::strcmp(kind, "pinned") == 0) return static_cast<long>(host_allocations.size());
  if (std::strcmp(kind, "primary") == 0) {
    long n = 0;
    for (auto& p : primaries) n += p.retains;
    return n;
  }
  Kind k;
  if (std::strcmp(kind, "context") == 0) k = Kind::context;
  else if (std::strcmp(kind, "stream") == 0) k = Kind::stream;
  else if (std::strcmp(kind, "event") == 0) k = Kind::event;
  else if (std::strcmp(kind, "module") == 0) k = Kind::module;
  else return -1;
  long n = 0;
  for (auto& [h, kk] : live) n += kk == k;
  return n;
}

FAKE_EXPORT long fake_invalid_destroys() {
  std::lock_guard lock(mu);
  return invalid_destroys;
}

FAKE_EXPORT void fake_set_device_count(int n) { device_count = n; }

FAKE_EXPORT void fake_last_launch(FakeLaunch* out) {
  std::lock_guard lock(mu);
  *out = last_launch;
}

FAKE_EXPORT long fake_host_funcs_run() {
  std::lock_guard lock(mu);
  return host_funcs_run;
}

// --- initialization and errors -----------------------------------------------

CUresult fake_Init(unsigned int flags) {
  FAKE_ENTRY(Init);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (const char* r = std::getenv("FAKE_CUDA_INIT_RESULT")) return static_cast<CUresult>(std::atoi(r));
  return CUDA_SUCCESS;
}

CUresult fake_DriverGetVersion(int* v) {
  FAKE_ENTRY(DriverGetVersion);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

CUresult fake_GetErrorString(CUresult error, const char** s) {
  FAKE_ENTRY(GetErrorString);
  static const auto texts = [] {
    std::map<int, std::string> m;
    for (const auto& t : result_texts) m[t.code] = std::string(t.text) + " [fake driver]";
    return m;
  }();
  auto it = texts.find(error);
  if (it == texts.end()) return CUDA_ERROR_INVALID_VALUE;
  *s = it->second.c_str();
  return CUDA_SUCCESS;
}

// --- devices ---------------------------------------------------------------------

CUresult fake_DeviceGetCount(int* n) {
  FAKE_ENTRY(DeviceGetCount);
  *n = device_count;
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGet(CUdevice* d, int ordinal) {
  FAKE_ENTRY(DeviceGet);
  if (ordinal < 0 || ordinal >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTRY(DeviceGetName);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::string n = "oxicuda fake GPU " + std::to_string(dev);
  std::strncpy(name, n.c_str(), static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetAttribute(int* pi, CUdevice_attribute attr, CUdevice dev) {
  FAKE_ENTRY(DeviceGetAttribute);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 227 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult fake_DeviceTotalMem(std::size_t* bytes, CUdevice dev) {
  FAKE_ENTRY(DeviceTotalMem);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = std::size_t{80} << 30;
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  FAKE_ENTRY(DeviceGetUuid);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(0xa0 + i + dev);
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetPCIBusId(char* id, int len, CUdevice dev) {
  FAKE_ENTRY(DeviceGetPCIBusId);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  char text[16];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x18 + dev);
  if (!id || len < static_cast<int>(std::strlen(text)) + 1) return CUDA_ERROR_INVALID_VALUE;
  std::strcpy(id, text);
  return CUDA_SUCCESS;
}

// --- contexts --------------------------------------------------------------------

CUresult fake_DevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKE_ENTRY(DevicePrimaryCtxRetain);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  primaries[dev].device = dev;
  primaries[dev].primary = true;
  ++primaries[dev].retains;
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

CUresult fake_CtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  FAKE_ENTRY(CtxCreate);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~0x1Fu) return CUDA_ERROR_INVALID_VALUE;
  auto* c = new Ctx{dev, false, 0};
  std::lock_guard lock(mu);
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
  delete reinterpret_cast<Ctx*>(ctx);
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
  return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult fake_CtxGetDevice(CUdevice* d) {
  FAKE_ENTRY(CtxGetDevice);
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *d = reinterpret_cast<Ctx*>(c)->device;
  return CUDA_SUCCESS;
}

CUresult fake_CtxGetStreamPriorityRange(int* least, int* greatest) {
  FAKE_ENTRY(CtxGetStreamPriorityRange);
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

// --- streams ---------------------------------------------------------------------

static CUresult create_stream(CUstream* ph, unsigned flags, int priority) {
  if (!ph || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (priority > 0) priority = 0;
  if (priority < -5) priority = -5;
  auto* s = new Stream{c, flags, priority};
  std::lock_guard lock(mu);
  live[s] = Kind::stream;
  *ph = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult fake_StreamCreate(CUstream* ph, unsigned int flags) {
  FAKE_ENTRY(StreamCreate);
  return create_stream(ph, flags, 0);
}

CUresult fake_StreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  FAKE_ENTRY(StreamCreateWithPriority);
  return create_stream(ph, flags, priority);
}

CUresult fake_StreamDestroy(CUstream s) {
  FAKE_ENTRY(StreamDestroy);
  std::lock_guard lock(mu);
  if (!alive(s, Kind::stream)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  live.erase(s);
  delete reinterpret_cast<Stream*>(s);
  return CUDA_SUCCESS;
}

CUresult fake_StreamSynchronize(CUstream s) {
  FAKE_ENTRY(StreamSynchronize);
  std::lock_guard lock(mu);
  return valid_stream(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_StreamQuery(CUstream s) {
  FAKE_ENTRY(StreamQuery);
  std::lock_guard lock(mu);
  return valid_stream(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_StreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  FAKE_ENTRY(StreamWaitEvent);
  std::lock_guard lock(mu);
  if (!valid_stream(s) || !alive(e, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_StreamGetPriority(CUstream s, int* p) {
  FAKE_ENTRY(StreamGetPriority);
  std::lock_guard lock(mu);
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  *p = reinterpret_cast<Stream*>(s)->priority;
  return CUDA_SUCCESS;
}

CUresult fake_StreamGetFlags(CUstream s, unsigned int* f) {
  FAKE_ENTRY(StreamGetFlags);
  std::lock_guard lock(mu);
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<Stream*>(s)->flags;
  return CUDA_SUCCESS;
}

CUresult fake_StreamGetCtx(CUstream s, CUcontext* pctx) {
  FAKE_ENTRY(StreamGetCtx);
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) <= 2) {
    if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
    *pctx = current();
    return CUDA_SUCCESS;
  }
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  *pctx = reinterpret_cast<Stream*>(s)->ctx;
  return CUDA_SUCCESS;
}

// --- events ----------------------------------------------------------------------

CUresult fake_EventCreate(CUevent* ph, unsigned int flags) {
  FAKE_ENTRY(EventCreate);
  if (flags & ~0x7u) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  auto* e = new Event{c, flags, false, 0};
  std::lock_guard lock(mu);
  live[e] = Kind::event;
  *ph = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult fake_EventDestroy(CUevent e) {
  FAKE_ENTRY(EventDestroy);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  live.erase(e);
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}

CUresult fake_EventRecord(CUevent e, CUstream s) {
  FAKE_ENTRY(EventRecord);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event) || !valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  auto* ev = reinterpret_cast<Event*>(e);
  ev->recorded = true;
  clock_ms += 0.5;  // every record is half a millisecond after the one before
  ev->time_ms = clock_ms;
  return CUDA_SUCCESS;
}

CUresult fake_EventSynchronize(CUevent e) {
  FAKE_ENTRY(EventSynchronize);
  std::lock_guard lock(mu);
  return alive(e, Kind::event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_EventQuery(CUevent e) {
  FAKE_ENTRY(EventQuery);
  std::lock_guard lock(mu);
  return alive(e, Kind::event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_EventElapsedTime(float* ms, CUevent start, CUevent end) {
  FAKE_ENTRY(EventElapsedTime);
  std::lock_guard lock(mu);
  if (!alive(start, Kind::event) || !alive(end, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  auto* a = reinterpret_cast<Event*>(start);
  auto* b = reinterpret_cast<Event*>(end);
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(b->time_ms - a->time_ms);
  return CUDA_SUCCESS;
}

// --- modules and functions ---------------------------------------------------

CUresult fake_ModuleLoadDataEx(CUmodule* pmod, const void* image, unsigned int n, CUjit_option* keys,
                               void** values) {
  FAKE_ENTRY(ModuleLoadDataEx);
  if (!pmod || !image) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  std::vector<std::pair<CUjit_option, void*>> opts;
  for (unsigned i = 0; i < n; ++i) opts.emplace_back(keys[i], values[i]);
  auto finish = [&](CUresult r) {
    for (unsigned i = 0; i < n; ++i) values[i] = opts[i].second;
    return r;
  };
  const auto* bytes = static_cast<const unsigned char*>(image);
  auto* m = new Module{c, {}};
  if (bytes[0] == 0x7f && bytes[1] == 'E') {
    // A cubin: the fake cannot read one; it loads as a module with no kernels.
  } else {
    const std::string ptx(static_cast<const char*>(image));
    if (ptx.find(".version") == std::string::npos) {
      delete m;
      write_log(opts, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                "ptxas application ptx input, line 1; fatal   : Missing .version directive at start of file");
      return finish(CUDA_ERROR_INVALID_PTX);
    }
    std::size_t line = 1;
    for (std::size_t i = 0; i < ptx.size(); ++i) {
      if (ptx[i] == '\n') ++line;
      if (ptx.compare(i, 4, "frob") == 0) {
        delete m;
        write_log(opts, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                  "ptxas application ptx input, line " + std::to_string(line) +
                      "; error   : Not a name of any known instruction: 'frob'");
        return finish(CUDA_ERROR_INVALID_PTX);
      }
    }
    std::size_t pos = 0;
    while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
      pos += 6;
      const std::size_t name_begin = ptx.find_first_not_of(" \t\n", pos);
      const std::size_t name_end = ptx.find_first_of(" \t\n(", name_begin);
      const std::size_t lp = ptx.find('(', name_end), rp = ptx.find(')', lp);
      auto* f = new Func{m, ptx.substr(name_begin, name_end - name_begin), {}, 48 * 1024};
      if (lp != std::string::npos && rp != std::string::npos) f->params = parse_params(ptx.substr(lp, rp - lp + 1));
      m->funcs.push_back(f);
    }
    write_log(opts, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
              "fake ptxas info: " + std::to_string(m->funcs.size()) + " entry function(s)");
  }
  std::lock_guard lock(mu);
  live[m] = Kind::module;
  for (Func* f : m->funcs) live[f] = Kind::function;
  *pmod = reinterpret_cast<CUmodule>(m);
  return finish(CUDA_SUCCESS);
}

CUresult fake_ModuleUnload(CUmodule mod) {
  FAKE_ENTRY(ModuleUnload);
  std::lock_guard lock(mu);
  if (!alive(mod, Kind::module)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  auto* m = reinterpret_cast<Module*>(mod);
  for (Func* f : m->funcs) {
    live.erase(f);
    delete f;
  }
  live.erase(m);
  delete m;
  return CUDA_SUCCESS;
}

CUresult fake_ModuleGetFunction(CUfunction* pf, CUmodule mod, const char* name) {
  FAKE_ENTRY(ModuleGetFunction);
  std::lock_guard lock(mu);
  if (!alive(mod, Kind::module)) return CUDA_ERROR_INVALID_HANDLE;
  for (Func* f : reinterpret_cast<Module*>(mod)->funcs)
    if (f->name == name) return *pf = reinterpret_cast<CUfunction>(f), CUDA_SUCCESS;
  return CUDA_ERROR_NOT_FOUND;
}

CUresult fake_FuncGetAttribute(int* pi, CUfunction_attribute attr, CUfunction fn) {
  FAKE_ENTRY(FuncGetAttribute);
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function)) return CUDA_ERROR_INVALID_HANDLE;
  auto* f = reinterpret_cast<Func*>(fn);
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 16; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 70; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = f->max_dynamic_shared; break;
    default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult fake_FuncSetAttribute(CUfunction fn, CUfunction_attribute attr, int value) {
  FAKE_ENTRY(FuncSetAttribute);
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function)) return CUDA_ERROR_INVALID_HANDLE;
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > 227 * 1024) return CUDA_ERROR_INVALID_VALUE;
    reinterpret_cast<Func*>(fn)->max_dynamic_shared = value;
  }
  return CUDA_SUCCESS;
}

// Kernels the fake knows how to run on the host, by name.
static void run_kernel(const Func& f, void** params) {
  if (f.name == "dbl" && f.params.size() == 2) {
    CUdeviceptr p;
    unsigned n;
    std::memcpy(&p, params[0], 8);
    std::memcpy(&n, params[1], 4);
    if (!in_allocation(p, std::size_t{n} * 4)) return;
    auto* x = reinterpret_cast<float*>(static_cast<std::uintptr_t>(p));
    for (unsigned i = 0; i < n; ++i) x[i] *= 2;
  }
}

static CUresult launch(CUfunction fn, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream s,
                       void** params, void** extra, const unsigned cluster[3], int cooperative, int via_ex) {
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function) || !valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  const Func& f = *reinterpret_cast<Func*>(fn);
  for (int i = 0; i < 3; ++i)
    if (!grid[i] || !block[i]) return CUDA_ERROR_INVALID_VALUE;
  if (std::uint64_t{block[0]} * block[1] * block[2] > 1024 || block[2] > 64) return CUDA_ERROR_INVALID_VALUE;
  if (shared > static_cast<unsigned>(f.max_dynamic_shared)) return CUDA_ERROR_INVALID_VALUE;
  if (extra) return CUDA_ERROR_NOT_SUPPORTED;
  if (!f.params.empty() && !params) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 3; ++i)
    if (cluster[i] && grid[i] % cluster[i]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  if (std::uint64_t{cluster[0]} * cluster[1] * cluster[2] > 8) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  if (cooperative && std::uint64_t{grid[0]} * grid[1] * grid[2] > 132 * 2) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  FakeLaunch& l = last_launch;
  l.function = fn;
  l.stream = s;
  for (int i = 0; i < 3; ++i) l.grid[i] = grid[i], l.block[i] = block[i], l.cluster[i] = cluster[i];
  l.shared_bytes = shared;
  l.cooperative = cooperative;
  l.via_ex = via_ex;
  l.param_count = f.params.size();
  for (std::size_t i = 0; i < f.params.size() && i < 32; ++i) {
    l.param_offsets[i] = f.params[i].offset;
    l.param_sizes[i] = f.params[i].size;
    if (f.params[i].offset + f.params[i].size <= sizeof l.params)
      std::memcpy(l.params + f.params[i].offset, params[i], f.params[i].size);
  }
  run_kernel(f, params);
  return CUDA_SUCCESS;
}

CUresult fake_LaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params,
                           void** extra) {
  FAKE_ENTRY(LaunchKernel);
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz}, none[3] = {0, 0, 0};
  return launch(fn, grid, block, shared, s, params, extra, none, 0, 0);
}

CUresult fake_LaunchKernelEx(const CUlaunchConfig* c, CUfunction fn, void** params, void** extra) {
  FAKE_ENTRY(LaunchKernelEx);
  if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
  unsigned cluster[3] = {0, 0, 0};
  int cooperative = 0;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    const CUlaunchAttribute& a = c->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = a.value.clusterDim.x, cluster[1] = a.value.clusterDim.y, cluster[2] = a.value.clusterDim.z;
      if (!cluster[0] || !cluster[1] || !cluster[2]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      cooperative = a.value.cooperative;
    } else if (a.id != CU_LAUNCH_ATTRIBUTE_IGNORE) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
  const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
  return launch(fn, grid, block, c->sharedMemBytes, c->hStream, params, extra, cluster, cooperative, 1);
}

// The fake's occupancy model: 2048 threads, 32 blocks and 228 KiB of shared
// memory per multiprocessor; 16 registers per thread never limit.
static int blocks_per_sm(int block_size, std::size_t shared) {
  if (block_size <= 0 || block_size > 1024) return 0;
  int blocks = 2048 / block_size;
  if (blocks > 32) blocks = 32;
  if (shared) {
    const auto by_shared = static_cast<int>((228u * 1024u) / shared);
    if (by_shared < blocks) blocks = by_shared;
  }
  return blocks;
}

CUresult fake_OccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction fn, int block_size, std::size_t shared) {
  FAKE_ENTRY(OccupancyMaxActiveBlocksPerMultiprocessor);
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function) || !n) return CUDA_ERROR_INVALID_HANDLE;
  *n = blocks_per_sm(block_size, shared);
  return CUDA_SUCCESS;
}

CUresult fake_OccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction fn, CUoccupancyB2DSize to_shared,
                                             std::size_t shared, int limit) {
  FAKE_ENTRY(OccupancyMaxPotentialBlockSize);
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function) || !min_grid || !block) return CUDA_ERROR_INVALID_HANDLE;
  int best = 0, best_threads = -1;
  for (int b = 32; b <= 1024 && (limit <= 0 || b <= limit); b += 32) {
    const int threads = b * blocks_per_sm(b, to_shared ? to_shared(b) : shared);
    if (threads > best_threads) best = b, best_threads = threads;
  }
  *block = best;
  *min_grid = 132 * blocks_per_sm(best, to_shared ? to_shared(best) : shared);
  return CUDA_SUCCESS;
}

// --- memory ----------------------------------------------------------------------

CUresult fake_MemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  FAKE_ENTRY(MemGetInfo);
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard lock(mu);
  std::size_t used = 0;
  for (auto& [p, n] : allocations) used += n;
  *total = std::size_t{80} << 30;
  *free_bytes = *total - used;
  return CUDA_SUCCESS;
}

CUresult fake_MemAlloc(CUdeviceptr* p, std::size_t bytes) {
  FAKE_ENTRY(MemAlloc);
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (std::size_t{1} << 36)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(mu);
  allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
  *p = reinterpret_cast<std::uintptr_t>(mem);
  return CUDA_SUCCESS;
}

CUresult fake_MemFree(CUdeviceptr p) {
  FAKE_ENTRY(MemFree);
  std::lock_guard lock(mu);
  auto it = allocations.find(p);
  if (it == allocations.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  allocations.erase(it);
  std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
  return CUDA_SUCCESS;
}

// The fake's streams are always drained: async work happens at once.
CUresult fake_MemcpyHtoDAsync(CUdeviceptr dst, const void* src, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemcpyHtoDAsync);
  std::lock_guard lock(mu);
  if (!valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!in_allocation(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)), src, n);
  return CUDA_SUCCESS;
}

CUresult fake_MemcpyDtoHAsync(void* dst, CUdeviceptr src, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemcpyDtoHAsync);
  std::lock_guard lock(mu);
  if (!valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!in_allocation(src, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), n);
  return CUDA_SUCCESS;
}

CUresult fake_MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemcpyDtoDAsync);
  std::lock_guard lock(mu);
  if (!valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!in_allocation(dst, n) || !in_allocation(src, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)),
               reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), n);
  return CUDA_SUCCESS;
}

template <class T>
static CUresult memset(CUdeviceptr dst, T value, std::size_t n, CUstream s) {
  std::lock_guard lock(mu);
  if (!valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!in_allocation(dst, n * sizeof(T)) || dst % sizeof(T)) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<T*>(static_cast<std::uintptr_t>(dst));
  for (std::size_t i = 0; i < n; ++i) p[i] = value;
  return CUDA_SUCCESS;
}

CUresult fake_MemsetD8Async(CUdeviceptr dst, unsigned char v, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemsetD8Async);
  return memset(dst, v, n, s);
}
CUresult fake_MemsetD32Async(CUdeviceptr dst, unsigned int v, std::size_t n, CUstream s) {
  FAKE_ENTRY(MemsetD32Async);
  return memset(dst, v, n, s);
}

CUresult fake_MemHostAlloc(void** pp, std::size_t bytes, unsigned int flags) {
  FAKE_ENTRY(MemHostAlloc);
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!pp || bytes == 0 || flags > 7) return CUDA_ERROR_INVALID_VALUE;
  void* mem = std::malloc(bytes);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(mu);
  host_allocations[reinterpret_cast<std::uintptr_t>(mem)] = bytes;
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
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult fake_MemAllocAsync(CUdeviceptr* p, std::size_t bytes, CUstream s) {
  FAKE_ENTRY(MemAllocAsync);
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
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
  if (!valid_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  auto it = allocations.find(p);
  if (it == allocations.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  pools[0].used -= it->second;
  allocations.erase(it);
  std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
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
