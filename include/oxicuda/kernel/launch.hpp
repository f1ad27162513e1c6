// oxicuda/kernel/launch.hpp — launching kernels on a stream: the untyped variadic
// launch of a Function, and the typed, checked launch of a Kernel<Sig>.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kernel_args.hpp"
#include "../driver/stream.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// An attribute of the kernel's device, or `otherwise` when the driver
// cannot tell (explaining a failure must not fail).
inline int device_attribute_or(const Function& fn, ffi::CUdevice_attribute attr, int otherwise) noexcept {
  ffi::CUdevice dev = 0;
  int v = 0;
  const CUcontext ctx = fn.context().raw();  // (none for a library's kernel of no context)
  if (!ctx) return otherwise;
  const ScopedCurrentNothrow current(ctx, "explaining a launch's failure");
  return current.ok() && OXICUDA_DRIVER(CtxGetDevice, &dev).ok() && OXICUDA_DRIVER(DeviceGetAttribute, &v, attr, dev).ok()
             ? v
             : otherwise;
}

// Why a launch failed, in words, computed only after it has.
[[noreturn]] OXICUDA_DETAIL_COLD inline void launch_failed(Outcome r, const Function& fn, LaunchConfig cfg,
                                                    SourceLocation where) {
  std::string why =
      cat({"kernel '", fn.name(), "', grid ", dims(cfg.grid), ", block ", dims(cfg.block), ", ",
           std::to_string(cfg.shared_bytes), " bytes of dynamic shared memory", cfg.cluster.x ? ", cluster " : "",
           cfg.cluster.x ? dims(cfg.cluster) : std::string(), cfg.cooperative ? ", cooperative" : "",
           cfg.programmatic ? ", programmatic (PDL)" : "", cfg.programmatic_event.event ? ", a programmatic event" : "",
           cfg.priority ? ", priority " + std::to_string(*cfg.priority) : std::string(),
           cfg.access_policy.num_bytes ? ", an access-policy window of " + std::to_string(cfg.access_policy.num_bytes) +
                                             " bytes"
                                       : std::string()});
  // Both figures, where dynamic shared memory is the reason (raising the
  // limit failed, or the launch was refused asking for more than the device
  // can give): what the launch asks for, and what the device can give this
  // kernel (a block's opt-in maximum less the kernel's static part). Empty
  // when the driver cannot tell; `over` says whether the launch asks for more.
  bool over = false;
  auto figures = [&]() -> std::string {
    int optin = 0, static_bytes = 0;
    if (!fn.context()) return {};  // (a library's kernel of no context: which device is not known here)
    const Device device = fn.context().device(where);
    if (!OXICUDA_DRIVER(DeviceGetAttribute, &optin, ffi::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                        device.raw())
             .ok() ||
        !OXICUDA_DRIVER(FuncGetAttribute, &static_bytes, ffi::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn.raw()).ok())
      return {};
    const long long most = static_cast<long long>(optin) - static_bytes;
    over = static_cast<long long>(cfg.shared_bytes) > most;
    return cat({"the device gives a block at most ", std::to_string(optin),
                " bytes of shared memory, and the kernel has ", std::to_string(static_bytes),
                " bytes of static shared memory, so it can have at most ", std::to_string(most > 0 ? most : 0),
                " bytes of dynamic shared memory, not ", std::to_string(cfg.shared_bytes)});
  };
  std::string shared;
  if (r.entry == ffi::Entry::FuncSetAttribute) {
    shared = figures();
    why = cat({why,
               ": raising the kernel's dynamic shared memory limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) "
               "to ",
               std::to_string(cfg.shared_bytes), " bytes failed", shared.empty() ? "" : "; ", shared});
  } else if (r.result == ffi::CUDA_ERROR_INVALID_VALUE && cfg.shared_bytes > 48 * 1024 &&
             !(shared = figures()).empty() && over) {
    why = cat({why, ": ", shared});
  } else if (cfg.grid.volume() == 0 || cfg.block.volume() == 0) {
    why = cat({why, ": a grid or block dimension is zero"});
  } else if ((cfg.programmatic || cfg.programmatic_event.event) &&
             device_attribute_or(fn, ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9) < 9) {
    why = cat({why, ": programmatic dependent launch needs compute capability 9.0 or later"});
  } else if (cfg.access_policy.num_bytes != 0 && r.result == ffi::CUDA_ERROR_INVALID_VALUE &&
             device_attribute_or(fn, ffi::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, -1) >= 0) {
    why = cat({why, ": the device takes an access-policy window of at most ",
               std::to_string(device_attribute_or(fn, ffi::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, -1)),
               " bytes"});
  } else if (r.result == ffi::CUDA_ERROR_INVALID_CONTEXT) {
    why = cat({why, ": the kernel's module and the stream belong to different contexts, or the context is gone"});
  }
  fail(r, where, std::move(why));
}

// One launch call: cuLaunchKernel on the plain path, cuLaunchKernelEx for
// clusters and cooperative launches. Returns the driver's answer.
// A configuration's launch attributes (at most 6), in `attrs`; how many.
// The access-policy window was checked when the launch began (check_attributes).
inline unsigned launch_attributes(const LaunchConfig& cfg, ffi::CUlaunchAttribute (&attrs)[6]) noexcept {
  unsigned n = 0;
  if (cfg.cluster.x) {
    attrs[n].id = ffi::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim = {cfg.cluster.x, cfg.cluster.y, cfg.cluster.z};
    ++n;
  }
  if (cfg.cooperative) {
    attrs[n].id = ffi::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n].value.cooperative = 1;
    ++n;
  }
  if (cfg.programmatic) {
    attrs[n].id = ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cfg.programmatic_event.event) {
    attrs[n].id = ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT;
    attrs[n].value.programmaticEvent = {cfg.programmatic_event.event.raw(), 0,
                                        cfg.programmatic_event.trigger_at_block_start ? 1 : 0};
    ++n;
  }
  if (cfg.priority) {
    attrs[n].id = ffi::CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[n].value.priority = *cfg.priority;
    ++n;
  }
  if (cfg.access_policy.num_bytes != 0) {
    const AccessPolicyWindow& w = cfg.access_policy;
    attrs[n].id = ffi::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    attrs[n].value.accessPolicyWindow = {reinterpret_cast<void*>(static_cast<std::uintptr_t>(w.base)), w.num_bytes,
                                         w.hit_ratio, static_cast<ffi::CUaccessProperty>(w.hit),
                                         static_cast<ffi::CUaccessProperty>(w.miss)};
    ++n;
  }
  return n;
}

inline Outcome launch_once(CUstream s, CUfunction f, const LaunchConfig& cfg, void** params) noexcept {
  if (OXICUDA_DETAIL_LIKELY(cfg.cluster.x == 0 && !cfg.cooperative && !has_extra_attributes(cfg)))
    return OXICUDA_DRIVER(LaunchKernel, f, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z,
                          cfg.shared_bytes, s, params, nullptr);
  ffi::CUlaunchAttribute attrs[6] = {};
  const unsigned n = launch_attributes(cfg, attrs);
  const ffi::CUlaunchConfig config{cfg.grid.x,  cfg.grid.y,       cfg.grid.z, cfg.block.x, cfg.block.y,
                                   cfg.block.z, cfg.shared_bytes, s,          attrs,       n};
  return OXICUDA_DRIVER(LaunchKernelEx, &config, f, params, nullptr);
}

// A launch that asks for dynamic shared memory. The driver allows a kernel
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (by default 48 KiB less
// its static shared memory): read once per Function and cached. When the
// launch asks for more, the limit is raised first; and when the driver
// refuses the launch because the limit was lowered since (through another
// Function of the kernel, or raw()), the limit is read again, raised, and
// the launch made once more.
inline void launch_with_shared(CUstream s, const Function& fn, const LaunchConfig& cfg, void** params,
                               SourceLocation where) {
  const CUfunction f = fn.raw();
  unsigned allowed = 0;
  if (const Outcome read = FunctionAccess::allowed(fn, allowed); OXICUDA_DETAIL_UNLIKELY(!read.ok()))
    fail(read, where, cat({"reading the dynamic shared memory limit of kernel '", fn.name(), "'"}));
  auto raise_limit = [&] {
    const Outcome raised = FunctionAccess::try_allow(fn, cfg.shared_bytes);
    if (!raised.ok()) launch_failed(raised, fn, cfg, where);
  };
  if (OXICUDA_DETAIL_UNLIKELY(cfg.shared_bytes > allowed)) raise_limit();
  Outcome r = launch_once(s, f, cfg, params);
  if (OXICUDA_DETAIL_UNLIKELY(r.result == ffi::CUDA_ERROR_INVALID_VALUE)) {
    unsigned limit = 0;
    if (FunctionAccess::read_allowed(fn, limit).ok() && limit < cfg.shared_bytes) {
      raise_limit();
      r = launch_once(s, f, cfg, params);
    }
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) launch_failed(r, fn, cfg, where);
}

// Enqueues the kernel with its packed arguments: one driver call on the
// plain path. `params` points to the arguments, in parameter order.
// `stream` is a StreamRef or a Stream (see on_stream).
// A launch with a cluster, cooperative, or dynamic shared memory: the
// checks and the attribute path, out of line (COLD places it apart, so the
// plain launch stays short: 7 instructions fewer per launch, bench/overhead).
OXICUDA_DETAIL_COLD inline void launch_special(CUstream s, const Function& fn, const LaunchConfig& cfg, void** params,
                           SourceLocation where) {
  if ((cfg.cluster.x | cfg.cluster.y | cfg.cluster.z) != 0) check_cluster(fn, cfg, "oxicuda::launch", where);
  if (cfg.access_policy.num_bytes != 0) (void)raw_window(cfg.access_policy, "oxicuda::launch", where);
  if (cfg.shared_bytes != 0) {
    if (OXICUDA_DETAIL_UNLIKELY(context_free(fn))) {
      // A library's kernel: its limit is its function's in the stream's context.
      CUcontext ctx = nullptr;
      check(OXICUDA_DRIVER(StreamGetCtx, s, &ctx), where);
      return launch_with_shared(s, fn.for_context(Context::borrow(ctx), where), cfg, params, where);
    }
    return launch_with_shared(s, fn, cfg, params, where);
  }
  const Outcome r = launch_once(s, fn.raw(), cfg, params);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) launch_failed(r, fn, cfg, where);
}

// Every launch that is not plain, or whose stream or function needs a
// look: the stream checked and resolved as every enqueue's (on_stream), the
// function checked, then launch_special. Out of line.
OXICUDA_DETAIL_COLD inline void enqueue_special(StreamRef stream, const Function& fn, LaunchConfig cfg,
                                                void** params, SourceLocation where) {
  on_stream(stream, "oxicuda::launch", where, [&fn, &cfg, params, where](CUstream s) {
    (void)checked(fn, "oxicuda::Function", "oxicuda::launch", where);
    launch_special(s, fn, cfg, params, where);
  });
}

// The plain launch: an ordinary stream, a function, and nothing beyond
// grid, block and arguments (no cluster, not cooperative, no dynamic shared
// memory, no attribute), tested in one branch; then one cuLaunchKernel.
// Everything else goes to enqueue_special. No closure is built on this
// path, so it inlines into the caller's loop as a few loads and compares.
template <class S>
OXICUDA_DETAIL_ALWAYS_INLINE void enqueue(const S& stream, const Function& fn, const LaunchConfig& cfg, void** params,
                                          SourceLocation where) {
  // The configuration first: a constant one (the usual) folds away before
  // reclaim's atomic load, which the compiler does not read memory across.
  if (OXICUDA_DETAIL_UNLIKELY(special_launch(cfg))) return enqueue_special(stream, fn, cfg, params, where);
  reclaim();  // as on_stream: one load when no host function's callable is waiting
  const CUstream s = stream.raw();
  const CUfunction f = fn.raw();
  if (OXICUDA_DETAIL_UNLIKELY(default_or_empty(s) || f == nullptr)) return enqueue_special(stream, fn, cfg, params, where);
  // The result alone, tested before it becomes an Outcome (which names the
  // entry point: built only on failure).
  const ffi::CUresult r = api().LaunchKernel(f, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y,
                                             cfg.block.z, 0u, s, params, nullptr);
  if (OXICUDA_DETAIL_UNLIKELY(r != ffi::CUDA_SUCCESS)) launch_failed({r, ffi::Entry::LaunchKernel}, fn, cfg, where);
}

}  // namespace detail

namespace detail {
template <class S, class... Args>
inline void launch_function(const S& stream, const Function& fn, const LaunchConfig& cfg, SourceLocation where,
                     const Args&... args) {
  static_assert((untyped_argument_v<Args> && ...),
                "oxicuda::launch (untyped Function): every argument is passed as its bytes, so it must be a "
                "trivially copyable value and not a DeviceBuffer or DeviceSpan (pass .data(), or launch a "
                "Kernel<Sig>, which converts buffers to their pointer)");
  void* params[sizeof...(Args) > 0 ? sizeof...(Args) : 1] = {const_cast<void*>(static_cast<const void*>(&args))...};
  enqueue(stream, fn, cfg, sizeof...(Args) > 0 ? params : nullptr, where);
}

}  // namespace detail

// Each launch below takes the stream as a StreamRef (a view: a stream that
// other code owns, for this call) or as a Stream. The Stream forms are the
// same launch; they exist so that a Stream's context pointer is read only
// on the default streams' branch, not converted to a view on every launch.

// Launches an untyped Function: each argument is passed by address and must
// have exactly the type of the kernel's parameter (a device pointer, an
// unsigned, ...); nothing is converted or checked. One cuLaunchKernel on the
// plain path; no allocation, no context switch. An argument whose bytes
// cannot be a kernel parameter does not compile: one that is not trivially
// copyable (an oxicuda handle, a std::vector), and a DeviceBuffer or
// DeviceSpan (pass buffer.data(): the untyped path converts nothing; a
// Kernel<Sig> converts buffers to their pointer).
template <class... Args>
inline void launch(detail::Located<StreamRef> stream, const Function& fn, const LaunchConfig& cfg,
                   const Args&... args) {
  detail::launch_function(stream.value, fn, cfg, stream.where, args...);
}
template <class... Args>
inline void launch(detail::Located<const Stream&> stream, const Function& fn, const LaunchConfig& cfg,
                   const Args&... args) {
  detail::launch_function(stream.value, fn, cfg, stream.where, args...);
}

// The same with grid, block and dynamic shared memory spelled out.
template <class... Args>
inline void launch(detail::Located<StreamRef> stream, const Function& fn, Dim3 grid, Dim3 block,
                   unsigned shared_bytes, const Args&... args) {
  detail::launch_function(stream.value, fn, LaunchConfig{grid, block, shared_bytes}, stream.where, args...);
}
template <class... Args>
inline void launch(detail::Located<const Stream&> stream, const Function& fn, Dim3 grid, Dim3 block,
                   unsigned shared_bytes, const Args&... args) {
  detail::launch_function(stream.value, fn, LaunchConfig{grid, block, shared_bytes}, stream.where, args...);
}

// Launches a typed Kernel: each argument is converted to its parameter type
// (an int literal where an unsigned is declared; a DeviceBuffer<T> or
// DeviceSpan<T> where a T* is declared). An argument that cannot convert,
// or the wrong number of them, does not compile. One cuLaunchKernel on the
// plain path; no allocation, no context switch.
// clang-format off
template <class... Params, class... Args>
  requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
OXICUDA_DETAIL_ALWAYS_INLINE void launch(detail::Located<StreamRef> stream, const Kernel<void(Params...)>& kernel,
                   const LaunchConfig& cfg, Args&&... args) {
  detail::check_arguments(kernel.function(), "oxicuda::launch", stream.where, args...);
  detail::PackedArgs<Params...> packed(std::forward<Args>(args)...);
  detail::enqueue(stream.value, kernel.function(), cfg, packed.get(), stream.where);
}
template <class... Params, class... Args>
  requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
OXICUDA_DETAIL_ALWAYS_INLINE void launch(detail::Located<const Stream&> stream, const Kernel<void(Params...)>& kernel,
                   const LaunchConfig& cfg, Args&&... args) {
  // clang-format on
  detail::check_arguments(kernel.function(), "oxicuda::launch", stream.where, args...);
  detail::PackedArgs<Params...> packed(std::forward<Args>(args)...);
  detail::enqueue(stream.value, kernel.function(), cfg, packed.get(), stream.where);
}

OXICUDA_DETAIL_NAMESPACE_END
