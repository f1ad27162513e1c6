// oxicuda/graph/node_params.hpp — the driver's parameters of the nodes
// oxicuda makes from a launch's or a copy's arguments (kernel, memcpy,
// memset nodes), with launch()'s, copy()'s and fill()'s checks: Graph's
// add_kernel / add_copy / add_fill and GraphExec's setters share them.
#pragma once

#include <bit>
#include <type_traits>

#include "node_kind.hpp"
#include "../memory/buffer.hpp"
#include "../kernel/launch.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// A copy's parameters: one row of bytes between host and device memory,
// after copy()'s checks.
template <class Dst, class Src>
ffi::CUDA_MEMCPY3D memcpy_params(Dst& dst, Src& src, const char* op, SourceLocation where, CUcontext& ctx) {
  const CopySides c = copy_sides(dst, src, op, where);
  ffi::CUDA_MEMCPY3D p{};
  p.srcMemoryType = device_range<Src> ? ffi::CU_MEMORYTYPE_DEVICE : ffi::CU_MEMORYTYPE_HOST;
  p.srcDevice = c.src_device;
  p.srcHost = c.src_host;
  p.dstMemoryType = device_range<Dst> ? ffi::CU_MEMORYTYPE_DEVICE : ffi::CU_MEMORYTYPE_HOST;
  p.dstDevice = c.dst_device;
  p.dstHost = c.dst_host;
  p.WidthInBytes = c.bytes;
  p.Height = 1;
  p.Depth = 1;
  ctx = c.ctx;
  return p;
}

// A fill's parameters: every element of `dst` set to the bytes of `value`.
template <class Dst>
ffi::CUDA_MEMSET_NODE_PARAMS memset_params(Dst& dst, unsigned value, unsigned element_size, CUcontext& ctx) {
  static_assert(!std::is_const_v<device_element_t<Dst>>, "fill: the destination is const");
  const auto d = dst.device_span();
  ctx = d.context();
  ffi::CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = d.device_ptr();
  p.value = value;
  p.elementSize = element_size;
  p.width = d.size_bytes() / element_size;
  p.height = 1;
  return p;
}

template <class Dst>
ffi::CUDA_MEMSET_NODE_PARAMS fill_params(Dst& dst, device_element_t<Dst> value, CUcontext& ctx) {
  using T = device_element_t<Dst>;
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                "fill node: elements of 1, 2 or 4 bytes; use add_fill_bytes otherwise");
  using U = std::conditional_t<sizeof(T) == 1, unsigned char, std::conditional_t<sizeof(T) == 2, unsigned short, unsigned>>;
  return memset_params(dst, std::bit_cast<U>(std::remove_cv_t<T>(value)), sizeof(T), ctx);
}

// The kernel node parameters of a launch configuration. A node being added
// takes the launch attributes a kernel node has (clusters, cooperative,
// priority, the access-policy window: set on the node after it is added);
// programmatic dependent launch is a stream's, not a node's (in a graph it
// is an edge's). Updating an instantiated node (`attributes` false) changes
// its parameters, not its attributes: a configuration with any is refused.
// A library's kernel of no context runs in `graph_ctx`, the graph's.
inline ffi::CUDA_KERNEL_NODE_PARAMS_v2 kernel_params(const Function& fn, const LaunchConfig& cfg, void** params,
                                                     const char* op, SourceLocation where, CUcontext graph_ctx,
                                                     bool attributes = true) {
  CUfunction f = checked(fn, "oxicuda::Function", op, where);
  if (cfg.programmatic || cfg.programmatic_event.event)
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, op,
                cat({"kernel '", fn.name(),
                     "': programmatic dependent launch is an attribute of a launch on a stream, not of a graph's "
                     "kernel node (in a graph it is a programmatic edge, which oxicuda does not add yet); capture "
                     "the launches into the graph instead (capture.hpp)"}),
                where));
  const bool any = (cfg.cluster.x | cfg.cluster.y | cfg.cluster.z) != 0 || cfg.cooperative ||
                   cfg.priority.has_value() || cfg.access_policy.num_bytes != 0;
  if (!attributes && any)
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, op,
                cat({"kernel '", fn.name(),
                     "': an instantiated graph's kernel node keeps the launch attributes it was added with "
                     "(cluster, cooperative, priority, access-policy window); set_kernel changes its grid, block, "
                     "shared memory and arguments only: pass a configuration without attributes"}),
                where));
  if ((cfg.cluster.x | cfg.cluster.y | cfg.cluster.z) != 0) check_cluster(fn, cfg, op, where);
  if (cfg.access_policy.num_bytes != 0) (void)raw_window(cfg.access_policy, op, where);
  if (cfg.shared_bytes != 0) {
    // The kernel's own limit (the driver's default is 48 KiB less its static
    // shared memory), raised when the node asks for more, as a launch does;
    // a library's kernel of no context, its function's in the graph's context.
    const Function in_ctx = context_free(fn) ? fn.for_context(Context::borrow(graph_ctx), where) : fn;
    unsigned allowed = 0;
    const Outcome known = FunctionAccess::allowed(in_ctx, allowed);
    if (!known.ok()) fail(known, where, cat({"reading kernel '", fn.name(), "''s dynamic shared memory limit"}));
    if (cfg.shared_bytes > allowed) {
      const Outcome raised = FunctionAccess::try_allow(in_ctx, cfg.shared_bytes);
      if (!raised.ok()) launch_failed(raised, fn, cfg, where);
    }
  }
  ffi::CUDA_KERNEL_NODE_PARAMS_v2 p{};
  p.func = f;
  p.gridDimX = cfg.grid.x, p.gridDimY = cfg.grid.y, p.gridDimZ = cfg.grid.z;
  p.blockDimX = cfg.block.x, p.blockDimY = cfg.block.y, p.blockDimZ = cfg.block.z;
  p.sharedMemBytes = cfg.shared_bytes;
  p.kernelParams = params;
  // The kernel's own context (null would mean the calling thread's current
  // one). The H200's driver (580) still needs a context current to add or
  // set a kernel node: with none, cuGraphAddKernelNode_v2 and
  // cuGraph[Exec]KernelNodeSetParams_v2 crash (SIGSEGV) whatever ctx says.
  // Callers make the kernel's context current around the call.
  p.ctx = fn.context().raw();
  if (context_free(fn)) {
    // The driver's way for a library's kernel: `kern`, with `func` null,
    // in `ctx` (which it reads only then).
    p.func = nullptr;
    p.kern = fn.library_kernel();
    p.ctx = graph_ctx;
  }
  return p;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
