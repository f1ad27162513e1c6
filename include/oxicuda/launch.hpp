// oxicuda/launch.hpp — launching kernels on a stream: the untyped variadic
// launch of a Function, and the typed, checked launch of a Kernel<Sig>.
#pragma once

#include <utility>

#include "kernel_args.hpp"
#include "stream.hpp"

OXICUDA_NAMESPACE_BEGIN

namespace detail {

// Why a launch failed, in words, computed only after it has.
[[noreturn]] OXICUDA_COLD inline void launch_failed(Outcome r, const Function& fn, const LaunchConfig& cfg,
                                                    SourceLocation where) {
  auto dims = [](Dim3 d) { return cat({std::to_string(d.x), "x", std::to_string(d.y), "x", std::to_string(d.z)}); };
  std::string why =
      cat({"kernel '", fn.name(), "', grid ", dims(cfg.grid), ", block ", dims(cfg.block), ", ",
           std::to_string(cfg.shared_bytes), " bytes of dynamic shared memory", cfg.cluster.x ? ", cluster " : "",
           cfg.cluster.x ? dims(cfg.cluster) : std::string(), cfg.cooperative ? ", cooperative" : ""});
  if (r.entry == ffi::Entry::FuncSetAttribute) {
    int optin = 0;
    const Device device = fn.module().context().device(where);
    const bool known =
        OXICUDA_DRIVER(DeviceGetAttribute, &optin, ffi::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                       device.raw())
            .ok();
    why = cat({why,
               ": raising the kernel's dynamic shared memory limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) "
               "failed",
               known ? "; this device allows at most " : "", known ? std::to_string(optin) : std::string(),
               known ? " bytes per block" : ""});
  } else if (cfg.grid.volume() == 0 || cfg.block.volume() == 0) {
    why = cat({why, ": a grid or block dimension is zero"});
  } else if (r.result == ffi::CUDA_ERROR_INVALID_CONTEXT) {
    why = cat({why, ": the kernel's module and the stream belong to different contexts, or the context is gone"});
  }
  fail(r, where, std::move(why));
}

// One launch call: cuLaunchKernel on the plain path, cuLaunchKernelEx for
// clusters and cooperative launches. Returns the driver's answer.
inline Outcome launch_once(CUstream s, CUfunction f, const LaunchConfig& cfg, void** params) noexcept {
  if (OXICUDA_LIKELY(cfg.cluster.x == 0 && !cfg.cooperative))
    return OXICUDA_DRIVER(LaunchKernel, f, cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z,
                          cfg.shared_bytes, s, params, nullptr);
  ffi::CUlaunchAttribute attrs[2] = {};
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
  const ffi::CUlaunchConfig config{cfg.grid.x,  cfg.grid.y,       cfg.grid.z, cfg.block.x, cfg.block.y,
                                   cfg.block.z, cfg.shared_bytes, s,          attrs,       n};
  return OXICUDA_DRIVER(LaunchKernelEx, &config, f, params, nullptr);
}

// A launch that asks for more than 48 KiB of dynamic shared memory. The
// kernel's limit is raised first when this Function has not raised it that
// far; and when the driver refuses the launch because the limit was lowered
// since (through another Function of the kernel, or raw()), the limit is
// read again, raised, and the launch made once more.
OXICUDA_COLD inline void launch_large_shared(CUstream s, const Function& fn, const LaunchConfig& cfg, void** params,
                                             SourceLocation where) {
  const CUfunction f = fn.raw();
  auto raise_limit = [&] {
    const Outcome raised = FunctionAccess::try_allow(fn, cfg.shared_bytes);
    if (!raised.ok()) launch_failed(raised, fn, cfg, where);
  };
  if (cfg.shared_bytes > FunctionAccess::allowed_hint(fn)) raise_limit();
  Outcome r = launch_once(s, f, cfg, params);
  if (r.result == ffi::CUDA_ERROR_INVALID_VALUE) {
    int limit = 0;
    if (OXICUDA_DRIVER(FuncGetAttribute, &limit, ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f).ok() &&
        static_cast<unsigned>(limit) < cfg.shared_bytes) {
      raise_limit();
      r = launch_once(s, f, cfg, params);
    }
  }
  if (OXICUDA_UNLIKELY(!r.ok())) launch_failed(r, fn, cfg, where);
}

// Enqueues the kernel with its packed arguments: one driver call on the
// plain path. `params` points to the arguments, in parameter order.
inline void enqueue(const Stream& stream, const Function& fn, const LaunchConfig& cfg, void** params,
                    SourceLocation where) {
  on_stream(stream, "oxicuda::launch", where, [&fn, &cfg, params, where](CUstream s) {
    CUfunction f = checked(fn, "oxicuda::Function", "oxicuda::launch", where);
    if (OXICUDA_UNLIKELY(cfg.shared_bytes > 48 * 1024)) return launch_large_shared(s, fn, cfg, params, where);
    const Outcome r = launch_once(s, f, cfg, params);
    if (OXICUDA_UNLIKELY(!r.ok())) launch_failed(r, fn, cfg, where);
  });
}

}  // namespace detail

// Launches an untyped Function: each argument is passed by address and must
// have exactly the type of the kernel's parameter (a device pointer, an
// unsigned, ...); nothing is converted or checked. One cuLaunchKernel on the
// plain path; no allocation, no context switch. An argument whose bytes
// cannot be a kernel parameter does not compile: one that is not trivially
// copyable (an oxicuda handle, a std::vector), and a DeviceBuffer or
// DeviceSpan (pass buffer.data(): the untyped path converts nothing; a
// Kernel<Sig> converts buffers to their pointer).
template <class... Args>
inline void launch(detail::Located<const Stream&> stream, const Function& fn, const LaunchConfig& cfg,
                   const Args&... args) {
  static_assert((detail::untyped_argument_v<Args> && ...),
                "oxicuda::launch (untyped Function): every argument is passed as its bytes, so it must be a "
                "trivially copyable value and not a DeviceBuffer or DeviceSpan (pass .data(), or launch a "
                "Kernel<Sig>, which converts buffers to their pointer)");
  void* params[sizeof...(Args) > 0 ? sizeof...(Args) : 1] = {const_cast<void*>(static_cast<const void*>(&args))...};
  detail::enqueue(stream.value, fn, cfg, sizeof...(Args) > 0 ? params : nullptr, stream.where);
}

// The same with grid, block and dynamic shared memory spelled out.
template <class... Args>
inline void launch(detail::Located<const Stream&> stream, const Function& fn, Dim3 grid, Dim3 block,
                   unsigned shared_bytes, const Args&... args) {
  launch(stream, fn, LaunchConfig{grid, block, shared_bytes}, args...);
}

// Launches a typed Kernel: each argument is converted to its parameter type
// (an int literal where an unsigned is declared; a DeviceBuffer<T> or
// DeviceSpan<T> where a T* is declared). An argument that cannot convert,
// or the wrong number of them, does not compile. One cuLaunchKernel on the
// plain path; no allocation, no context switch.
// clang-format off
template <class... Params, class... Args>
  requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
inline void launch(detail::Located<const Stream&> stream, const Kernel<void(Params...)>& kernel,
                   const LaunchConfig& cfg, Args&&... args) {
  // clang-format on
  detail::PackedArgs<Params...> packed(std::forward<Args>(args)...);
  detail::enqueue(stream.value, kernel.function(), cfg, packed.get(), stream.where);
}

OXICUDA_NAMESPACE_END
