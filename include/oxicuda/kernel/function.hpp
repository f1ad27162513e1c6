// oxicuda/kernel/function.hpp — Function (a kernel of a Module, which keeps
// its module alive, or of a KernelLibrary, which keeps that), Module::function that
// looks one up, the occupancy queries, and what launches need of it beyond
// its public API.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "../driver/current.hpp"
#include "../driver/limits.hpp"
#include "kernel_names.hpp"
#include "library.hpp"
#include "module.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {
struct FunctionAccess;
struct LibraryKernelAccess;
}  // namespace detail

// A suggestion from the occupancy calculator (cuOccupancyMaxPotentialBlockSize).
struct BlockSizeSuggestion {
  int min_grid_size = 0;  // the smallest grid that reaches full occupancy
  int block_size = 0;     // the block size that maximizes occupancy
};

// A kernel. Copies share it and keep its module (and context) alive, or its
// library. A library's kernel (KernelLibrary::function) belongs to no context:
// launched on a stream, it runs in the stream's context; the occupancy
// queries and attribute() use the calling thread's current context;
// for_context(ctx) gives the kernel's function in one context.
class Function {
 public:
  Function() noexcept = default;
  Function(const Function&) noexcept = default;
  Function& operator=(const Function&) noexcept = default;
  // A moved-from Function is empty, like a default-constructed one.
  Function(Function&& o) noexcept : raw_(o.raw_), state_(std::move(o.state_)) { o.raw_ = nullptr; }
  Function& operator=(Function&& o) noexcept {
    CUfunction raw = o.raw_;
    o.raw_ = nullptr;
    raw_ = raw;
    state_ = std::move(o.state_);
    return *this;
  }

  [[nodiscard]] CUfunction raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] std::string_view name() const noexcept {
    return state_ ? std::string_view(state_->name) : std::string_view();
  }
  // The module, for a module's kernel; else empty.
  [[nodiscard]] const Module& module() const noexcept;
  // The library, for a library's kernel; else empty.
  [[nodiscard]] const KernelLibrary& library() const noexcept;
  // The kernel's context: its module's, or the one for_context gave it;
  // empty for a library's kernel of no context.
  [[nodiscard]] const Context& context() const noexcept;
  // The library's handle of the kernel (CUkernel), for a library's kernel
  // (in a context or not); null for a module's.
  [[nodiscard]] CUkernel library_kernel() const noexcept { return state_ ? state_->kernel : nullptr; }
  // The kernel's function in `ctx` (cuKernelGetFunction, with `ctx`
  // current; the driver loads the library there if it is not yet), as a
  // Function of that context that keeps the library alive. For a module's
  // kernel: itself when `ctx` is its context, else an Error.
  [[nodiscard]] Function for_context(const Context& ctx, SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] int attribute(ffi::CUfunction_attribute attr, SourceLocation where = SourceLocation::current()) const;
  void set_attribute(ffi::CUfunction_attribute attr, int value, SourceLocation where = SourceLocation::current()) const;
  // The kernel's own preferred L1/shared split (cuFuncSetCacheConfig), over
  // its context's (set_cache_config(ctx, ...)). A hint.
  void set_cache_config(CacheConfig config, SourceLocation where = SourceLocation::current()) const;
  // The share of the unified L1/shared memory to carve out as shared memory
  // for this kernel, in percent: 0 (most L1) to 100 (most shared memory),
  // or -1 for the driver's default. A hint, rounded to a split the device
  // has. Another value is an Error.
  void set_shared_memory_carveout(int percent, SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] int num_registers(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_NUM_REGS, where);
  }
  [[nodiscard]] int max_threads_per_block(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, where);
  }
  [[nodiscard]] int static_shared_bytes(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, where);
  }
  [[nodiscard]] int local_bytes(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, where);
  }
  [[nodiscard]] int const_bytes(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, where);
  }
  [[nodiscard]] int ptx_version(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_PTX_VERSION, where);
  }
  [[nodiscard]] int binary_version(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_BINARY_VERSION, where);
  }

  // Occupancy: how many blocks of `block_size` threads (with this much
  // dynamic shared memory) fit on one multiprocessor at once.
  [[nodiscard]] int max_active_blocks_per_multiprocessor(int block_size, std::size_t dynamic_shared_bytes = 0,
                                                         SourceLocation where = SourceLocation::current()) const;
  // The block size that maximizes occupancy, and the grid that fills the device with it.
  [[nodiscard]] BlockSizeSuggestion suggested_block_size(std::size_t dynamic_shared_bytes = 0, int block_size_limit = 0,
                                                         SourceLocation where = SourceLocation::current()) const;

  // Lets launches use up to `bytes` of dynamic shared memory
  // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: by default 48 KiB less
  // the kernel's static shared memory; more is opt-in, up to what the device
  // gives a block less the static part). Launches do this themselves when
  // they ask for more than the kernel allows.
  void allow_dynamic_shared_bytes(unsigned bytes, SourceLocation where = SourceLocation::current()) const;
  // What launches may use now without raising the limit, as the driver says
  // (cuFuncGetAttribute): also after the limit was set through another
  // Function of the same kernel, or through raw().
  [[nodiscard]] unsigned allowed_dynamic_shared_bytes(SourceLocation where = SourceLocation::current()) const {
    return static_cast<unsigned>(attribute(ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, where));
  }

  friend bool operator==(const Function& a, const Function& b) noexcept { return a.raw_ == b.raw_; }

 private:
  friend class Module;
  friend struct detail::FunctionAccess;
  friend struct detail::LibraryKernelAccess;
  struct State : detail::Owned {
    Module module;
    KernelLibrary library;    // (a library's kernel)
    Context ctx;        // (a library's kernel in one context)
    CUkernel kernel = nullptr;  // (a library's kernel)
    std::string name;
    // The kernel's dynamic shared memory limit
    // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) as last read or set
    // through this Function, or unknown_limit until a launch asks for dynamic
    // shared memory: it saves later launches a driver call. The driver's
    // default is 48 KiB less the kernel's static shared memory, not 48 KiB.
    // Another Function of the same kernel, or raw(), may have changed the
    // limit since; a launch refused for it re-reads the limit (launch.hpp).
    static constexpr unsigned unknown_limit = ~0u;
    mutable std::atomic<unsigned> dynamic_shared_allowed{unknown_limit};
    State(Module m, std::string n) noexcept : module(std::move(m)), name(std::move(n)) {}
    State(KernelLibrary l, Context c, CUkernel k, std::string n) noexcept
        : library(std::move(l)), ctx(std::move(c)), kernel(k), name(std::move(n)) {}
  };
  Function(CUfunction raw, detail::Shared<const State> state) noexcept : raw_(raw), state_(std::move(state)) {}

  CUfunction raw_ = nullptr;
  detail::Shared<const State> state_;
};

inline Function Module::function(std::string_view name, SourceLocation where) const {
  (void)detail::checked(*this, "oxicuda::Module", "oxicuda::Module::function", where);
  // A name expression compiled with the module stands for its lowered name.
  std::string n = symbol_name(lowered(name), "kernel", "oxicuda::Module::function", where);
  CUfunction raw = nullptr;
  detail::Outcome r;
  {
    ScopedCurrent current(state_->ctx, where);
    r = OXICUDA_DRIVER(ModuleGetFunction, &raw, state_->raw, n.c_str());
  }
  if (OXICUDA_DETAIL_UNLIKELY(r.result == ffi::CUDA_ERROR_NOT_FOUND)) {
    // No symbol by that name: a kernel whose C++ name or signature it is
    // (an nvcc image's "saxpy<float>"), through the driver's list.
    detail::FoundKernel k = detail::kernel_by_cpp_name(*this, n, r, where);
    return Function(k.raw, detail::Shared<const Function::State>::make(*this, std::move(k.symbol)));
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::fail(r, where, detail::cat({"looking up kernel '", n, "'"}));
  return Function(raw, detail::Shared<const Function::State>::make(*this, std::move(n)));
}

inline const Module& Function::module() const noexcept {
  static const Module empty;
  return state_ ? state_->module : empty;
}

inline const KernelLibrary& Function::library() const noexcept {
  static const KernelLibrary empty;
  return state_ ? state_->library : empty;
}

inline const Context& Function::context() const noexcept {
  static const Context empty;
  return !state_ ? empty : state_->module ? state_->module.context() : state_->ctx;
}

inline Function Function::for_context(const Context& ctx, SourceLocation where) const {
  constexpr const char* op = "oxicuda::Function::for_context";
  (void)detail::checked(*this, "oxicuda::Function", op, where);
  if (!ctx) detail::empty_handle("oxicuda::Context", op, where);
  if (!state_->kernel) {
    if (OXICUDA_DETAIL_UNLIKELY(ctx.raw() != context().raw()))
      detail::raise(Error(ffi::CUDA_ERROR_INVALID_CONTEXT, op,
                          detail::cat({"kernel '", name(), "' is a module's, loaded in one context, and this is "
                                       "another; a KernelLibrary's kernel has a function in every context"}),
                          where));
    return *this;
  }
  CUfunction raw = nullptr;
  {
    const ScopedCurrent current(ctx, where);
    const detail::Outcome r = OXICUDA_DRIVER(KernelGetFunction, &raw, state_->kernel);
    if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
      detail::fail(r, where, detail::cat({"the function of library kernel '", name(), "' in a context"}));
  }
  std::string n = state_->name;
  return Function(raw, detail::Shared<const State>::make(state_->library, ctx, state_->kernel, std::move(n)));
}

namespace detail {
// A library's kernel of no context (its raw() is the CUkernel, which the
// driver takes as a function in launches and occupancy queries).
inline bool context_free(const Function& fn) noexcept { return fn.library_kernel() && !fn.context(); }
// The context `fn` is used in: its own, or for a library's kernel of no
// context, the calling thread's current one (an Error when none is).
inline CUcontext kernel_context(const Function& fn, const char* op, SourceLocation where) {
  if (OXICUDA_DETAIL_LIKELY(!context_free(fn))) return fn.context().raw();
  CUcontext current = nullptr;
  check(OXICUDA_DRIVER(CtxGetCurrent, &current), where);
  if (!current)
    raise(Error(ffi::CUDA_ERROR_INVALID_CONTEXT, op,
                cat({"kernel '", fn.name(), "' is a library's, of no context: here it is used in the calling "
                     "thread's current context, and none is current (make one current, or use for_context(ctx))"}),
                where));
  return current;
}
// The function that attribute queries and setters act on: `fn` itself, or
// for a library's kernel of no context, its function in the current context.
OXICUDA_DETAIL_COLD inline Function attribute_target(const Function& fn, const char* op, SourceLocation where) {
  return fn.for_context(Context::borrow(kernel_context(fn, op, where)), where);
}
}  // namespace detail

inline int Function::attribute(ffi::CUfunction_attribute attr, SourceLocation where) const {
  if (OXICUDA_DETAIL_UNLIKELY(detail::context_free(*this)))
    return detail::attribute_target(*this, "oxicuda::Function::attribute", where).attribute(attr, where);
  CUfunction f = detail::checked(*this, "oxicuda::Function", "oxicuda::Function::attribute", where);
  int v = 0;
  detail::check(OXICUDA_DRIVER(FuncGetAttribute, &v, attr, f), where);
  return v;
}

inline void Function::set_attribute(ffi::CUfunction_attribute attr, int value, SourceLocation where) const {
  if (OXICUDA_DETAIL_UNLIKELY(detail::context_free(*this)))
    return detail::attribute_target(*this, "oxicuda::Function::set_attribute", where).set_attribute(attr, value, where);
  detail::check(OXICUDA_DRIVER(FuncSetAttribute, detail::checked(*this, "oxicuda::Function", "oxicuda::Function::set_attribute", where), attr, value), where);
  if (attr == ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    state_->dynamic_shared_allowed.store(static_cast<unsigned>(value), std::memory_order_relaxed);
}

inline void Function::set_cache_config(CacheConfig config, SourceLocation where) const {
  if (OXICUDA_DETAIL_UNLIKELY(detail::context_free(*this)))
    return detail::attribute_target(*this, "oxicuda::Function::set_cache_config", where).set_cache_config(config, where);
  detail::check(OXICUDA_DRIVER(FuncSetCacheConfig,
                               detail::checked(*this, "oxicuda::Function", "oxicuda::Function::set_cache_config", where),
                               static_cast<ffi::CUfunc_cache>(config)),
                where);
}

inline void Function::set_shared_memory_carveout(int percent, SourceLocation where) const {
  if (OXICUDA_DETAIL_UNLIKELY(percent < -1 || percent > 100))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::Function::set_shared_memory_carveout",
                        detail::cat({"the carveout is a percentage of the unified L1/shared memory, 0 to 100, or -1 for "
                                     "the driver's default; got ", std::to_string(percent)}),
                        where));
  set_attribute(ffi::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent, where);
}

inline int Function::max_active_blocks_per_multiprocessor(int block_size, std::size_t dynamic_shared_bytes,
                                                          SourceLocation where) const {
  CUfunction f = detail::checked(*this, "oxicuda::Function", "oxicuda::Function::max_active_blocks_per_multiprocessor", where);
  // (A library's kernel of no context: in the current context, as the driver computes it then.)
  ScopedCurrent current(detail::kernel_context(*this, "oxicuda::Function::max_active_blocks_per_multiprocessor", where), where);
  int blocks = 0;
  detail::check(OXICUDA_DRIVER(OccupancyMaxActiveBlocksPerMultiprocessor, &blocks, f, block_size, dynamic_shared_bytes), where);
  return blocks;
}

inline BlockSizeSuggestion Function::suggested_block_size(std::size_t dynamic_shared_bytes, int block_size_limit,
                                                          SourceLocation where) const {
  CUfunction f = detail::checked(*this, "oxicuda::Function", "oxicuda::Function::suggested_block_size", where);
  ScopedCurrent current(detail::kernel_context(*this, "oxicuda::Function::suggested_block_size", where), where);
  BlockSizeSuggestion s;
  detail::check(OXICUDA_DRIVER(OccupancyMaxPotentialBlockSize, &s.min_grid_size, &s.block_size, f, nullptr,
                                                             dynamic_shared_bytes, block_size_limit), where);
  return s;
}

namespace detail {

// What launches need of a Function beyond its public API.
struct FunctionAccess {
  // The same for copies of one Function (one state), and only for them.
  static const void* identity(const Function& fn) noexcept { return fn.state_.get(); }
  // The limit last read or set through `fn` (a hint; see Function::State),
  // 48 KiB while unknown.
  static unsigned allowed_hint(const Function& fn) noexcept {
    const unsigned v = fn.state_->dynamic_shared_allowed.load(std::memory_order_relaxed);
    return v == Function::State::unknown_limit ? 48 * 1024 : v;
  }
  // The kernel's limit: the cached one, or (the first time) the driver's,
  // read and cached. The driver's answer when reading fails.
  static Outcome allowed(const Function& fn, unsigned& bytes) noexcept {
    bytes = fn.state_->dynamic_shared_allowed.load(std::memory_order_relaxed);
    if (OXICUDA_DETAIL_LIKELY(bytes != Function::State::unknown_limit)) return Outcome{ffi::CUDA_SUCCESS, ffi::Entry{}};
    return read_allowed(fn, bytes);
  }
  // Reads the kernel's limit from the driver, and caches it.
  static Outcome read_allowed(const Function& fn, unsigned& bytes) noexcept {
    int v = 0;
    const Outcome r = OXICUDA_DRIVER(FuncGetAttribute, &v, ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn.raw_);
    bytes = r.ok() && v >= 0 ? static_cast<unsigned>(v) : 0;
    if (r.ok()) fn.state_->dynamic_shared_allowed.store(bytes, std::memory_order_relaxed);
    return r;
  }
  // Raises the limit to `bytes`; the driver's answer, not thrown.
  static Outcome try_allow(const Function& fn, unsigned bytes) noexcept {
    const Outcome r =
        OXICUDA_DRIVER(FuncSetAttribute, fn.raw_, ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes));
    if (r.ok()) fn.state_->dynamic_shared_allowed.store(bytes, std::memory_order_relaxed);
    return r;
  }
};

}  // namespace detail

inline void Function::allow_dynamic_shared_bytes(unsigned bytes, SourceLocation where) const {
  (void)detail::checked(*this, "oxicuda::Function", "oxicuda::Function::allow_dynamic_shared_bytes", where);
  if (OXICUDA_DETAIL_UNLIKELY(detail::context_free(*this)))
    return detail::attribute_target(*this, "oxicuda::Function::allow_dynamic_shared_bytes", where)
        .allow_dynamic_shared_bytes(bytes, where);
  const detail::Outcome r = detail::FunctionAccess::try_allow(*this, bytes);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::fail(r, where);
}

OXICUDA_DETAIL_NAMESPACE_END
