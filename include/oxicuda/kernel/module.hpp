// oxicuda/kernel/module.hpp — Module (PTX, cubin or fatbin loaded into a context)
// and the driver's JIT options. Its kernels (Function, Module::function) are
// function.hpp; its variables (Module::global) global.hpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../driver/current.hpp"
#include "image.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Options for the driver's JIT, taken by designated initializers:
//   Module::from_ptx(ctx, ptx, {.max_registers = 64, .line_info = true})
struct JitOptions {
  int max_registers = 0;              // 0: no limit
  int optimization_level = -1;        // 0..4; -1: the driver's default (4)
  bool line_info = false;             // -lineinfo
  bool debug_info = false;            // -G
  bool log_verbose = false;           // CU_JIT_LOG_VERBOSE: a more detailed info log
  bool wall_time = false;             // CU_JIT_WALL_TIME: Module::jit_wall_time_ms() after the load
  // Room for each of the info and error logs. The driver takes the size as
  // a 32-bit unsigned: at most max_log_bytes (more is an Error).
  std::size_t log_bytes = 16 * 1024;
  static constexpr std::size_t max_log_bytes = 0xFFFFFFFEu;
};

// One kernel of a module (Module::kernel_names): its symbol, as the driver
// names it (mangled for a C++ kernel not declared extern "C"), and that name
// demangled ("void saxpy<float>(float*, float)"; the symbol itself when it
// is not mangled or the C++ library cannot demangle).
struct KernelName {
  std::string symbol;
  std::string demangled;
};

class Function;
template <class Signature>
class Kernel;
template <class T>
class DeviceSpan;
namespace detail {
struct ModuleAccess;

// JitOptions as the driver takes them (cuModuleLoadDataEx, cuLinkCreate):
// parallel arrays of keys and values, with room for the info and error logs.
struct JitOptionList {
  std::string info, error;  // each log_bytes and a NUL; the driver is told log_bytes
  ffi::CUjit_option keys[10];
  void* values[10];
  unsigned count = 0;

  JitOptionList(const JitOptions& options, const char* operation, SourceLocation where) {
    if (options.log_bytes > JitOptions::max_log_bytes)
      raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                  cat({"JitOptions::log_bytes is ", std::to_string(options.log_bytes),
                       "; the driver takes a log size as a 32-bit unsigned, so at most ",
                       std::to_string(JitOptions::max_log_bytes), " (16 KiB is the default)"}),
                  where));
    info.assign(options.log_bytes + 1, '\0');
    error.assign(options.log_bytes + 1, '\0');
    add(ffi::CU_JIT_INFO_LOG_BUFFER, info.data());
    add(ffi::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, value(options.log_bytes));
    add(ffi::CU_JIT_ERROR_LOG_BUFFER, error.data());
    add(ffi::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, value(options.log_bytes));
    if (options.max_registers > 0) add(ffi::CU_JIT_MAX_REGISTERS, value(static_cast<std::size_t>(options.max_registers)));
    if (options.optimization_level >= 0)
      add(ffi::CU_JIT_OPTIMIZATION_LEVEL, value(static_cast<std::size_t>(options.optimization_level)));
    if (options.line_info) add(ffi::CU_JIT_GENERATE_LINE_INFO, value(1));
    if (options.debug_info) add(ffi::CU_JIT_GENERATE_DEBUG_INFO, value(1));
    if (options.log_verbose) add(ffi::CU_JIT_LOG_VERBOSE, value(1));
    if (options.wall_time) add(ffi::CU_JIT_WALL_TIME, nullptr);
  }
  JitOptionList(const JitOptionList&) = delete;  // the values point into the logs
  JitOptionList& operator=(const JitOptionList&) = delete;

  void add(ffi::CUjit_option key, void* v) noexcept {
    keys[count] = key;
    values[count] = v;
    ++count;
  }
  static void* value(std::size_t v) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(v)); }
  // The JIT's wall time in milliseconds, which the driver writes as a float
  // into the option's value slot (0 when not asked for).
  [[nodiscard]] float wall_time_ms() const noexcept {
    float ms = 0;
    for (unsigned i = 0; i < count; ++i)
      if (keys[i] == ffi::CU_JIT_WALL_TIME) std::memcpy(&ms, &values[i], sizeof ms);
    return ms;
  }
  // "; JIT error log:\n<the log>", or empty when the JIT wrote none.
  [[nodiscard]] std::string error_log() const {
    return error[0] != '\0' ? cat({"; JIT error log:\n", error.c_str()}) : std::string();
  }
  // The info log without its trailing blank lines.
  [[nodiscard]] std::string info_log() const {
    std::string log(info.c_str());
    while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
    return log;
  }
  // What a loaded module or library keeps as its log: `before` (its
  // compiler's), then the JIT's. Never throws: it runs between the load
  // and the owning handle, where an exception would leak what was loaded;
  // when memory runs out the log is left empty instead.
  [[nodiscard]] std::string loaded_log(std::string_view before) const noexcept {
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
    try {
#endif
      std::string log = info_log();
      if (before.empty()) return log;
      return log.empty() ? std::string(before) : cat({before, "\n", log});
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
    } catch (...) {
      return {};
    }
#endif
  }
};
}  // namespace detail

// A loaded module. Copies share it; it is unloaded (cuModuleUnload) when the
// last Module or Function that uses it drops. The driver does not promise to
// wait for kernels of the module still running then: synchronize the work
// that uses them before the last handle goes (a Graph or GraphExec holds
// its kernel nodes' modules; set_kernel and update let go of the ones they
// replace). Driver 580 on an H200 was seen to wait: the drop blocked until
// the kernel finished (1 s for a kernel of 1 s), which is its own reason
// not to drop a module whose kernels still run.
class Module {
 public:
  Module() noexcept = default;

  // Loads PTX text. On failure the Error's detail holds the JIT's error log
  // (ptxas's "line 4; error : ..."); on success info_log() holds its info log.
  [[nodiscard]] static Module from_ptx(const Context& ctx, std::string_view ptx, JitOptions options = {},
                                       SourceLocation where = SourceLocation::current());
  // Loads a cubin (ELF) or fatbin image, or PTX text, from memory. Images
  // are checked against `size` before the driver reads them, so a truncated
  // file is an error, not a read past the end.
  [[nodiscard]] static Module from_image(const Context& ctx, const void* data, std::size_t size,
                                         JitOptions options = {}, SourceLocation where = SourceLocation::current());
  // Loads a .ptx, .cubin or .fatbin file (the kind is read from its content).
  [[nodiscard]] static Module from_file(const Context& ctx, const std::string& path, JitOptions options = {},
                                        SourceLocation where = SourceLocation::current());

  // The kernel called `name`: its symbol (the mangled name of a C++ kernel
  // not declared extern "C"); for a module compiled from source, a name
  // expression given to the compiler ("saxpy<float>"); else, for any image
  // (nvcc's cubin or fatbin), its C++ name or signature, demangled from the
  // driver's list of the module's kernels (kernel_names.hpp: "saxpy<float>",
  // "ns::scale", "saxpy<float>(float*, float const*, float, unsigned int)";
  // white space and a leading "void" ignored). An unknown name is an Error
  // that lists the module's kernels; one that names overloads, an Error
  // that lists them.
  // (Defined in function.hpp, with Function, which holds its Module.)
  [[nodiscard]] Function function(std::string_view name, SourceLocation where = SourceLocation::current()) const;
  // The kernel called `name`, typed by its signature, e.g.
  // module.kernel<void(float*, unsigned)>("scale"). Where the driver has
  // cuFuncGetParamInfo (CUDA 12.4+), the kernel's parameter count, sizes and
  // offsets are checked against the signature here, and a mismatch is an
  // Error naming the kernel and both layouts; older drivers skip the check.
  template <class Signature>
  [[nodiscard]] Kernel<Signature> kernel(std::string_view name, SourceLocation where = SourceLocation::current()) const;

  // The __device__ or __constant__ variable called `name` (cuModuleGetGlobal)
  // as a span of T over all its bytes: `__device__ float table[64]` is
  // global<float>("table"), 64 elements; a scalar is a span of one. Copy to
  // and from it, fill it and pass it to kernels like any DeviceSpan (its
  // context is the module's); it must not outlive the module. A name
  // expression compiled with the module stands for its lowered name, as in
  // function(). An Error names a variable that is not there, and a size
  // that is not a whole number of T or an address not aligned for T.
  // (Defined in global.hpp.)
  template <class T>
  [[nodiscard]] DeviceSpan<T> global(std::string_view name, SourceLocation where = SourceLocation::current()) const;

  // The module's kernels: each symbol and its demangled C++ name
  // (cuModuleEnumerateFunctions and cuFuncGetName, CUDA 12.4). (Defined in
  // kernel_names.hpp.)
  [[nodiscard]] std::vector<KernelName> kernel_names(SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] CUmodule raw() const noexcept { return state_ ? state_->raw : nullptr; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(state_); }
  [[nodiscard]] const Context& context() const noexcept;
  // The JIT's info log from loading (empty for a cubin or when it said nothing).
  [[nodiscard]] std::string_view info_log() const noexcept {
    return state_ ? std::string_view(state_->info_log) : std::string_view();
  }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }
  // How long the driver's JIT took to load it, in milliseconds, when it was
  // loaded with JitOptions::wall_time (CU_JIT_WALL_TIME); else 0.
  [[nodiscard]] float jit_wall_time_ms() const noexcept { return state_ ? state_->wall_time_ms : 0.0f; }

  friend bool operator==(const Module& a, const Module& b) noexcept { return a.raw() == b.raw(); }

 private:
  struct State : detail::Owned {
    Context ctx;
    CUmodule raw = nullptr;
    std::string info_log;
    std::string names;  // name expressions and their lowered names: "expr\0lowered\0..." (from source)
    float wall_time_ms = 0;
    State(Context c, CUmodule r, std::string log, std::string n, float ms = 0) noexcept
        : ctx(std::move(c)), raw(r), info_log(std::move(log)), names(std::move(n)), wall_time_ms(ms) {}
    ~State() {
      detail::check_nothrow(OXICUDA_DRIVER(ModuleUnload, raw), "unloading an oxicuda::Module");
    }
  };
  friend class Function;
  friend class KernelLibrary;  // (library.hpp: the same names, looked up the same way)
  friend struct detail::ModuleAccess;

  // `names` and `log` (put before the JIT's info log) come with a module
  // compiled from source.
  static Module load(const Context& ctx, const void* image, std::size_t size, bool is_text, const JitOptions& options,
                     SourceLocation where, std::string names = {}, std::string_view log = {});
  // PTX text of n bytes, checked, then loaded (from_ptx and from_image's PTX).
  static Module load_ptx(const Context& ctx, const char* ptx, std::size_t n, const JitOptions& options,
                         SourceLocation where);

  // The lowered name of `name` when it is a name expression compiled with
  // the module, else `name`.
  [[nodiscard]] std::string_view lowered(std::string_view name) const noexcept {
    return lowered_in(state_ ? std::string_view(state_->names) : std::string_view(), name);
  }
  // The same in `names` ("expr\0lowered\0...": a Module's or a KernelLibrary's).
  static std::string_view lowered_in(std::string_view names, std::string_view name) noexcept {
    for (std::string_view rest = names; !rest.empty();) {
      const std::string_view expr = rest.substr(0, rest.find('\0'));
      rest.remove_prefix(expr.size() + 1);
      const std::string_view low = rest.substr(0, rest.find('\0'));
      rest.remove_prefix(low.size() + (low.size() < rest.size()));
      if (expr == name) return low;
    }
    return name;
  }
  // `name` with the operation `op` as the driver must get it: an Error when
  // it has a NUL byte (the driver would look up only the part before it).
  static std::string symbol_name(std::string_view name, std::string_view what, const char* op, SourceLocation where);

  detail::Shared<const State> state_;
};

inline std::string Module::symbol_name(std::string_view name, std::string_view what, const char* op,
                                       SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(name.find('\0') != std::string_view::npos))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                        detail::cat({"the ", what, " name of ", std::to_string(name.size()),
                                     " bytes has a NUL byte at offset ", std::to_string(name.find('\0')),
                                     "; the driver would look up only the name before it"}),
                        where));
  return std::string(name);
}

inline Module Module::load(const Context& ctx, const void* image, std::size_t size, bool is_text,
                           const JitOptions& options, SourceLocation where, std::string names, std::string_view log_before) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::Module::load", where);
  detail::JitOptionList jit(options, "oxicuda::Module::load", where);
  CUmodule raw = nullptr;
  detail::Outcome r;
  {
    ScopedCurrent current(ctx, where);
    r = OXICUDA_DRIVER(ModuleLoadDataEx, &raw, image, jit.count, jit.keys, jit.values);
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
    detail::fail(r, where,
                 detail::cat({is_text ? "PTX source" : "binary image", " of ", std::to_string(size), " bytes",
                              jit.error_log()}));
  Module m;
  m.state_ = detail::Shared<const State>::make(ctx, raw, jit.loaded_log(log_before), std::move(names), jit.wall_time_ms());
  return m;
}

inline Module Module::from_ptx(const Context& ctx, std::string_view ptx, JitOptions options, SourceLocation where) {
  return load_ptx(ctx, ptx.data(), ptx.size(), options, where);
}

// (Pointer and size rather than a std::string_view made from them: that
// constructor's overload resolution checks the standard's iterator concepts,
// a large share of this header's compile time.)
inline Module Module::load_ptx(const Context& ctx, const char* ptx, std::size_t n, const JitOptions& options,
                               SourceLocation where) {
  const std::string copy = detail::ptx_text(ptx, n, ffi::CUDA_ERROR_INVALID_PTX, "oxicuda::Module::from_ptx",
                                            "the PTX source", "the driver", where);
  return load(ctx, copy.c_str(), copy.size(), true, options, where);
}

inline Module Module::from_image(const Context& ctx, const void* data, std::size_t size, JitOptions options,
                                 SourceLocation where) {
  if (detail::checked_image(data, size, "oxicuda::Module::from_image", where) == detail::ImageKind::ptx)
    return load_ptx(ctx, static_cast<const char*>(data), size, options, where);
  return load(ctx, data, size, false, options, where);
}

inline Module Module::from_file(const Context& ctx, const std::string& path, JitOptions options, SourceLocation where) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    detail::raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, "oxicuda::Module::from_file",
                        detail::cat({"cannot open '", path, "'"}), where));
  std::string bytes;
  char chunk[1 << 14];
  std::size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) bytes.append(static_cast<const char*>(chunk), got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed)
    detail::raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, "oxicuda::Module::from_file",
                        detail::cat({"cannot read '", path, "'"}), where));
  if (bytes.empty())
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, "oxicuda::Module::from_file",
                        detail::cat({"'", path, "' is empty"}), where));
  return from_image(ctx, bytes.data(), bytes.size(), options, where);
}

inline const Context& Module::context() const noexcept {
  static const Context empty;
  return state_ ? state_->ctx : empty;
}

namespace detail {

// Loading a module with the name expressions and log of its compilation
// (runtime compilation, above this part).
struct ModuleAccess {
  static Module load(const Context& ctx, const void* image, std::size_t size, bool is_text, const JitOptions& options,
                     SourceLocation where, std::string names, std::string_view log) {
    return Module::load(ctx, image, size, is_text, options, where, std::move(names), log);
  }
  // A Module owning `raw`, which the caller loaded into `ctx` (a cache hit,
  // which inspects the driver's result itself).
  static Module adopt(const Context& ctx, CUmodule raw, std::string log, std::string names) {
    Module m;
    m.state_ = Shared<const Module::State>::make(ctx, raw, std::move(log), std::move(names));
    return m;
  }
};

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
