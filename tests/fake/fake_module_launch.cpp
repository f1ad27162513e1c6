// The fake driver's modules, functions and launches (the JIT linker is
// fake_link.cpp). It reads
// the entry declarations of PTX (a cubin loads as a module with no
// kernels), and runs a kernel called `dbl` on the host.
#include "fake_state.hpp"

#include <algorithm>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fake {

namespace {

FakeLaunch last_launch;

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


}  // namespace

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

long live_module() { return count_live(Kind::module); }
long live_library() { return count_live(Kind::library); }

Func* (*kernel_resolver)(CUfunction, CUcontext) = nullptr;

Func* function_in(CUfunction fn, CUcontext ctx) {
  if (alive(fn, Kind::function)) return reinterpret_cast<Func*>(fn);
  return kernel_resolver ? kernel_resolver(fn, ctx) : nullptr;
}
long live_link() { return count_live(Kind::link); }

}  // namespace fake

using namespace fake;

FAKE_EXPORT void fake_last_launch(FakeLaunch* out) {
  std::lock_guard lock(mu);
  *out = last_launch;
}

// --- modules and functions ---------------------------------------------------

namespace fake {

// The image read into a new module of `c` (not yet live), its JIT logs
// and wall time written to `opts` as the driver writes them.
CUresult read_module(CUcontext c, const void* image, std::vector<std::pair<CUjit_option, void*>>& opts, Module*& out) {
  const auto* bytes = static_cast<const unsigned char*>(image);
  auto* m = new Module{c, {}, {}};
  if (bytes[0] == 0x7f && bytes[1] == 'E') {
    // A cubin: the fake cannot read one; it loads as a module with no kernels.
  } else {
    const std::string ptx(static_cast<const char*>(image));
    if (ptx.find(".version") == std::string::npos) {
      delete m;
      write_log(opts, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                "ptxas application ptx input, line 1; fatal   : Missing .version directive at start of file");
      return CUDA_ERROR_INVALID_PTX;
    }
    std::size_t line = 1;
    for (std::size_t i = 0; i < ptx.size(); ++i) {
      if (ptx[i] == '\n') ++line;
      if (ptx.compare(i, 4, "frob") == 0) {
        delete m;
        write_log(opts, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                  "ptxas application ptx input, line " + std::to_string(line) +
                      "; error   : Not a name of any known instruction: 'frob'");
        return CUDA_ERROR_INVALID_PTX;
      }
    }
    std::size_t pos = 0;
    while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
      pos += 6;
      const std::size_t name_begin = ptx.find_first_not_of(" \t\n", pos);
      const std::size_t name_end = ptx.find_first_of(" \t\n(", name_begin);
      const std::size_t lp = ptx.find('(', name_end), rp = ptx.find(')', lp);
      auto* f = new Func{m, ptx.substr(name_begin, name_end - name_begin), {}, 48 * 1024, 0};
      if (lp != std::string::npos && rp != std::string::npos) f->params = parse_params(ptx.substr(lp, rp - lp + 1));
      // Static shared memory: the body's `.shared [.align A] .b8 name[N];`
      // declarations (up to the next entry). As the driver does, the default
      // dynamic limit is 48 KiB less the static part.
      const std::size_t body_end = ptx.find(".entry", rp == std::string::npos ? pos : rp);
      for (std::size_t sh = ptx.find(".shared", rp == std::string::npos ? pos : rp); sh < body_end;
           sh = ptx.find(".shared", sh + 7)) {
        const std::size_t lb = ptx.find('[', sh), semi = ptx.find(';', sh);
        if (lb < semi) f->static_shared += static_cast<int>(std::strtoul(ptx.c_str() + lb + 1, nullptr, 10));
      }
      f->max_dynamic_shared = 48 * 1024 - f->static_shared;
      m->funcs.push_back(f);
    }
    // Module-scope variables: lines `[.visible] .global|.const [.align A] .TYPE name[N]...;`,
    // N elements of the type's size (one without [N]).
    for (std::size_t at = 0; at < ptx.size(); at = ptx.find('\n', at) == std::string::npos ? ptx.size()
                                                                                          : ptx.find('\n', at) + 1) {
      const std::string row = ptx.substr(at, ptx.find('\n', at) - at);
      std::size_t k = row.find_first_not_of(" \t");
      if (k == std::string::npos) continue;
      if (row.compare(k, 9, ".visible ") == 0) k = row.find_first_not_of(" \t", k + 9);
      if (row.compare(k, 8, ".global ") != 0 && row.compare(k, 7, ".const ") != 0) continue;
      const std::size_t dot = row.find(" .", k + 1);
      std::size_t type_at = row.compare(dot + 1, 6, ".align") == 0 ? row.find(" .", dot + 7) + 1 : dot + 1;
      const std::size_t type_end = row.find(' ', type_at);
      const std::string type = row.substr(type_at, type_end - type_at);
      const std::size_t size = std::strtoul(type.c_str() + 2, nullptr, 10) / 8;
      const std::size_t name_at = row.find_first_not_of(' ', type_end);
      const std::size_t name_end = row.find_first_of("[;= ", name_at);
      std::size_t count = 1;
      if (row[name_end] == '[') count = std::strtoul(row.c_str() + name_end + 1, nullptr, 10);
      const std::size_t bytes = (size ? size : 1) * count;
      m->globals.push_back({row.substr(name_at, name_end - name_at),
                            reinterpret_cast<std::uintptr_t>(std::calloc(bytes, 1)), bytes});
    }
    bool verbose = false;
    for (const auto& [k, v] : opts) verbose = verbose || (k == CU_JIT_LOG_VERBOSE && v);
    write_log(opts, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
              "fake ptxas info: " + std::to_string(m->funcs.size()) + " entry function(s)" +
                  (verbose ? "\nfake ptxas info: verbose" : ""));
  }
  // CU_JIT_WALL_TIME: the driver writes a float (milliseconds) into the
  // option's value slot; the fake's JIT always takes 1.5 ms.
  for (auto& [k, v] : opts)
    if (k == CU_JIT_WALL_TIME) {
      const float ms = 1.5f;
      v = nullptr;
      std::memcpy(&v, &ms, sizeof ms);
    }
  out = m;
  return CUDA_SUCCESS;
}

void add_module(Module* m, Kind kind) {
  live[m] = kind;
  for (Func* f : m->funcs) live[f] = Kind::function;
  for (const Global& g : m->globals) module_variable_add(g.ptr, g.bytes);
}

void remove_module(Module* m) {
  for (Func* f : m->funcs) {
    live.erase(f);
    delete f;
  }
  for (const Global& g : m->globals) {
    module_variable_remove(g.ptr);
    std::free(reinterpret_cast<void*>(g.ptr));
  }
  live.erase(m);
  delete m;
}

}  // namespace fake

CUresult fake_ModuleLoadDataEx(CUmodule* pmod, const void* image, unsigned int n, CUjit_option* keys,
                               void** values) {
  FAKE_ENTRY(ModuleLoadDataEx);
  if (!pmod || !image) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  std::vector<std::pair<CUjit_option, void*>> opts;
  for (unsigned i = 0; i < n; ++i) opts.emplace_back(keys[i], values[i]);
  Module* m = nullptr;
  const CUresult r = read_module(c, image, opts, m);
  for (unsigned i = 0; i < n; ++i) values[i] = opts[i].second;
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(mu);
  add_module(m, Kind::module);
  *pmod = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult fake_ModuleUnload(CUmodule mod) {
  FAKE_ENTRY(ModuleUnload);
  std::lock_guard lock(mu);
  if (!alive(mod, Kind::module)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  remove_module(reinterpret_cast<Module*>(mod));
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

// As the driver: either output may be null; a name the module lacks is
// CUDA_ERROR_NOT_FOUND.
CUresult fake_ModuleGetGlobal(CUdeviceptr* dptr, std::size_t* bytes, CUmodule mod, const char* name) {
  FAKE_ENTRY(ModuleGetGlobal);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!alive(mod, Kind::module)) return CUDA_ERROR_INVALID_HANDLE;
  for (const Global& g : reinterpret_cast<Module*>(mod)->globals)
    if (g.name == name) {
      if (dptr) *dptr = g.ptr;
      if (bytes) *bytes = g.bytes;
      return CUDA_SUCCESS;
    }
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
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = f->static_shared; break;
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
  if (attr == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT && (value < -1 || value > 100))
    return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    // At most what a block may opt in to (the device's 227 KiB) less the
    // kernel's static shared memory.
    if (value < 0 || value > 227 * 1024 - reinterpret_cast<Func*>(fn)->static_shared) return CUDA_ERROR_INVALID_VALUE;
    reinterpret_cast<Func*>(fn)->max_dynamic_shared = value;
  }
  return CUDA_SUCCESS;
}

CUresult fake_FuncSetCacheConfig(CUfunction fn, CUfunc_cache config) {
  FAKE_ENTRY(FuncSetCacheConfig);
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function)) return CUDA_ERROR_INVALID_HANDLE;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// Kernels the fake knows how to run on the host, by name:
//   dbl(float* p, unsigned n)                          p[i] *= 2
//   saxpy(float* y, const float* x, float a, unsigned n)  y[i] += a * x[i]
//   countdown(CUgraphConditionalHandle h, unsigned* c)  --*c (when not 0), then sets h to *c != 0
//   set_handle(CUgraphConditionalHandle h, const unsigned* v)  sets h to *v
static void run_kernel(const Func& f, void** params) {
  if (f.name == "dbl" && f.params.size() == 2) {
    CUdeviceptr p;
    unsigned n;
    std::memcpy(&p, params[0], 8);
    std::memcpy(&n, params[1], 4);
    if (!in_allocation(p, std::size_t{n} * 4)) return;
    auto* x = reinterpret_cast<float*>(static_cast<std::uintptr_t>(p));
    for (unsigned i = 0; i < n; ++i) x[i] *= 2;
  } else if (f.name == "saxpy" && f.params.size() == 4) {
    CUdeviceptr y, x;
    float a;
    unsigned n;
    std::memcpy(&y, params[0], 8);
    std::memcpy(&x, params[1], 8);
    std::memcpy(&a, params[2], 4);
    std::memcpy(&n, params[3], 4);
    if (!in_allocation(y, std::size_t{n} * 4) || !in_allocation(x, std::size_t{n} * 4)) return;
    auto* py = reinterpret_cast<float*>(static_cast<std::uintptr_t>(y));
    const auto* px = reinterpret_cast<const float*>(static_cast<std::uintptr_t>(x));
    for (unsigned i = 0; i < n; ++i) py[i] += a * px[i];
  } else if (f.name == "countdown" && f.params.size() == 2) {
    CUgraphConditionalHandle h;
    CUdeviceptr c;
    std::memcpy(&h, params[0], 8);
    std::memcpy(&c, params[1], 8);
    if (!in_allocation(c, 4)) return;
    auto* counter = reinterpret_cast<unsigned*>(static_cast<std::uintptr_t>(c));
    if (*counter) --*counter;
    set_conditional(h, *counter != 0);
  } else if (f.name == "set_handle" && f.params.size() == 2) {
    CUgraphConditionalHandle h;
    CUdeviceptr v;
    std::memcpy(&h, params[0], 8);
    std::memcpy(&v, params[1], 8);
    if (!in_allocation(v, 4)) return;
    set_conditional(h, *reinterpret_cast<const unsigned*>(static_cast<std::uintptr_t>(v)));
  }
}

namespace fake {

CUresult check_launch(const Func& f, const unsigned grid[3], const unsigned block[3], unsigned shared,
                      const unsigned cluster[3], int cooperative, void** params, void** extra) {
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
  return CUDA_SUCCESS;
}

void run_launch(CUfunction fn, CUstream s, const unsigned grid[3], const unsigned block[3], unsigned shared,
                const unsigned cluster[3], int cooperative, int via_ex, void** params) {
  const Func& f = *reinterpret_cast<Func*>(fn);
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
}

std::vector<unsigned char> pack_args(const Func& f, void** params) {
  std::size_t end = 0;
  for (const Param& p : f.params) end = p.offset + p.size > end ? p.offset + p.size : end;
  std::vector<unsigned char> bytes(end);
  for (std::size_t i = 0; i < f.params.size(); ++i)
    std::memcpy(bytes.data() + f.params[i].offset, params[i], f.params[i].size);
  return bytes;
}

}  // namespace fake

static CUresult launch(CUfunction fn, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream s,
                       void** params, void** extra, const unsigned cluster[3], int cooperative, int via_ex) {
  std::lock_guard lock(mu);
  if (!alive(fn, Kind::function) && !alive(fn, Kind::kernel)) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = use_stream(s)) return r;
  // A library's kernel (CUkernel) launches as its function in the stream's context.
  Func* resolved = function_in(fn, stream_context(s));
  if (!resolved) return CUDA_ERROR_INVALID_CONTEXT;
  fn = reinterpret_cast<CUfunction>(resolved);
  Func& f = *resolved;
  if (const CUresult r = check_launch(f, grid, block, shared, cluster, cooperative, params, extra)) return r;
  Work w;
  w.type = CU_GRAPH_NODE_TYPE_KERNEL;
  w.func = &f;
  for (int i = 0; i < 3; ++i) w.grid[i] = grid[i], w.block[i] = block[i], w.cluster[i] = cluster[i];
  w.shared = shared;
  w.cooperative = cooperative;
  bool captured = false;
  if (capturing(s)) w.args = pack_args(f, params);
  if (const CUresult r = capture_work(s, std::move(w), captured); captured) return r;
  run_launch(fn, s, grid, block, shared, cluster, cooperative, via_ex, params);
  return CUDA_SUCCESS;
}

CUresult fake_LaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params,
                           void** extra) {
  FAKE_ENTRY(LaunchKernel);
  {
    std::lock_guard lock(mu);
    note_launch_attribute(nullptr);
  }
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz}, none[3] = {0, 0, 0};
  return launch(fn, grid, block, shared, s, params, extra, none, 0, 0);
}

CUresult fake_LaunchKernelEx(const CUlaunchConfig* c, CUfunction fn, void** params, void** extra) {
  FAKE_ENTRY(LaunchKernelEx);
  if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
  unsigned cluster[3] = {0, 0, 0};
  int cooperative = 0;
  {
    std::lock_guard lock(mu);
    const int dev = std::max(context_device(stream_context(c->hStream)), 0);
    for (unsigned i = 0; i < c->numAttrs; ++i) {
      const CUlaunchAttribute& a = c->attrs[i];
      if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        cluster[0] = a.value.clusterDim.x, cluster[1] = a.value.clusterDim.y, cluster[2] = a.value.clusterDim.z;
        if (!cluster[0] || !cluster[1] || !cluster[2]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
        cooperative = a.value.cooperative;
      } else if (const CUresult r = check_attribute(a, dev, false)) {
        return r;
      }
    }
    note_launch_attribute(nullptr);
    for (unsigned i = 0; i < c->numAttrs; ++i) note_launch_attribute(&c->attrs[i]);
  }
  const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
  const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
  return launch(fn, grid, block, c->sharedMemBytes, c->hStream, params, extra, cluster, cooperative, 1);
}
