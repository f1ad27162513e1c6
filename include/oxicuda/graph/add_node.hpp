// oxicuda/graph/add_node.hpp — adding a node of each kind to a graph: the
// driver call, and what the graph's state keeps alive for the node (made
// before the call, committed after it succeeds). Graph's add_* (graph.hpp)
// check the graph and a conditional body's rule, then call these.
#pragma once

#include <cstddef>
#include <string>

#include "node_params.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A handle that a conditional node reads and a kernel sets on the device
// (cudaGraphSetConditional(handle, value) in CUDA C++). Passed to a kernel
// as its unsigned long long (CUgraphConditionalHandle) parameter.
struct ConditionalHandle {
  ffi::CUgraphConditionalHandle value = 0;
  // NOLINTNEXTLINE(google-explicit-constructor): a kernel's CUgraphConditionalHandle parameter
  constexpr operator ffi::CUgraphConditionalHandle() const noexcept { return value; }
};

// Memory allocated by a graph's mem alloc node: its address is fixed when the
// node is added; the memory exists from the node's run until a mem free
// node (or a free after the launch) releases it.
template <class T>
struct GraphAllocation {
  GraphNode node;
  DeviceSpan<T> span;
};

namespace detail {

// Each takes the graph's state `s` and its raw handle `g` (the state's own
// graph, or a conditional body that shares the state), checked already
// (`g` first: `s` is not read when the graph is empty).

inline GraphNode add_empty_node(CUgraph g, Dependencies& after) {
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddEmptyNode, &node, g, after.data(), after.size()), after.where());
  return GraphNode(node);
}

inline GraphNode add_kernel_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after, const Function& fn,
                                 const LaunchConfig& config, void** params) {
  const ffi::CUDA_KERNEL_NODE_PARAMS_v2 p =
      kernel_params(fn, config, params, "oxicuda::Graph::add_kernel", after.where(), s->ctx.raw());
  const ScopedCurrent current(p.ctx, after.where());  // (see kernel_params)
  KeepList::Pending<Function> keep(s->keep, fn);
  CUgraphNode node = nullptr;
  const Outcome r = OXICUDA_DRIVER(GraphAddKernelNode, &node, g, after.data(), after.size(), &p);
  if (!r.ok()) launch_failed(r, fn, config, after.where());
  keep.commit(node);
  // The node's launch attributes (a node the driver refuses one for stays
  // in the graph, without it: the Error says which).
  ffi::CUlaunchAttribute attrs[6] = {};
  const unsigned n = launch_attributes(config, attrs);
  for (unsigned i = 0; i < n; ++i) {
    const Outcome set = OXICUDA_DRIVER(GraphKernelNodeSetAttribute, node, attrs[i].id, &attrs[i].value);
    if (!set.ok()) launch_failed(set, fn, config, after.where());
  }
  return GraphNode(node);
}

inline GraphNode add_copy_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after,
                               const ffi::CUDA_MEMCPY3D& params, CUcontext ctx) {
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddMemcpyNode, &node, g, after.data(), after.size(), &params, ctx ? ctx : s->ctx.raw()),
        after.where());
  return GraphNode(node);
}

// A copy node between `dst` and `src`, with copy()'s checks.
template <class Dst, class Src>
GraphNode add_copy_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after, Dst& dst, Src& src) {
  CUcontext ctx = nullptr;
  const ffi::CUDA_MEMCPY3D p = memcpy_params(dst, src, "oxicuda::Graph::add_copy", after.where(), ctx);
  return add_copy_node(s, g, after, p, ctx);
}

inline GraphNode add_memset_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after,
                                 const ffi::CUDA_MEMSET_NODE_PARAMS& params, CUcontext ctx) {
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddMemsetNode, &node, g, after.data(), after.size(), &params, ctx ? ctx : s->ctx.raw()),
        after.where());
  return GraphNode(node);
}

inline GraphNode add_host_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after, HostCall* boxed) {
  // The graph owns the callable from here (destroyed through the user object, or now).
  CUuserObject object = nullptr;
  const Outcome owned = give_to_graph(g, boxed, &object);
  if (!owned.ok()) fail(owned, after.where());
  s->keep.add_user_object(nullptr, object);
  const ffi::CUDA_HOST_NODE_PARAMS p{&run_host_call_many, boxed};
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddHostNode, &node, g, after.data(), after.size(), &p), after.where());
  return GraphNode(node);
}

inline GraphNode add_event_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after,
                                const Event& event, bool record, const char* operation) {
  CUevent e = checked(event, "oxicuda::Event", operation, after.where());
  KeepList::Pending<Event> keep(s->keep, event);
  CUgraphNode node = nullptr;
  if (record)
    check(OXICUDA_DRIVER(GraphAddEventRecordNode, &node, g, after.data(), after.size(), e), after.where());
  else
    check(OXICUDA_DRIVER(GraphAddEventWaitNode, &node, g, after.data(), after.size(), e), after.where());
  keep.commit(node);
  return GraphNode(node);
}

// A node running a copy of `child`, whose state keeps `child_keep`; in a
// conditional body (`in_body`), only when the child holds what a body may.
inline GraphNode add_child_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after, CUgraph child,
                                const KeepList& child_keep, bool in_body, const char* operation) {
  if (in_body) refuse_child_in_body(child, &child_keep, operation, after.where());
  KeepList copies;
  copies.copy_from(child_keep);  // the copy's nodes use what the child's use
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddChildGraphNode, &node, g, after.data(), after.size(), child), after.where());
  s->keep.take_all(copies);
  check(child_keep.retain_user_objects(g), after.where());
  return GraphNode(node);
}

template <class T>
GraphAllocation<T> add_alloc_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after, std::size_t bytes,
                                  std::size_t count) {
  const Device device = s->ctx.device(after.where());
  ffi::CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = ffi::CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.handleTypes = ffi::CU_MEM_HANDLE_TYPE_NONE;
  p.poolProps.location = {ffi::CU_MEM_LOCATION_TYPE_DEVICE, device.raw()};
  p.bytesize = bytes;
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddMemAllocNode, &node, g, after.data(), after.size(), &p), after.where());
  return {GraphNode(node), DeviceSpan<T>(p.dptr, count, s->ctx.raw())};
}

inline GraphNode add_free_node(CUgraph g, Dependencies& after, ffi::CUdeviceptr ptr) {
  CUgraphNode node = nullptr;
  check(OXICUDA_DRIVER(GraphAddMemFreeNode, &node, g, after.data(), after.size(), ptr), after.where());
  return GraphNode(node);
}

// Conditional nodes need CUDA 12.4 (cuGraphConditionalHandleCreate is
// 12.3, but if/while nodes made through cuGraphAddNode are 12.4's); an
// if/else node (an if of two bodies) and a switch node, CUDA 12.8
// (`version`, `what`: what needs it).
inline void need_conditionals(const char* operation, SourceLocation where, int version = 12040,
                              const char* what = "conditional nodes") {
  const int v = driver_version(where);
  if (v < version)
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                cat({what, " need a CUDA ", std::to_string(version / 1000), ".", std::to_string(version % 1000 / 10),
                     " driver or newer; the loaded driver is CUDA ", std::to_string(v / 1000), ".",
                     std::to_string(v % 1000 / 10)}),
                where));
}

// The driver's count of bodies for each type (an if of 1 or 2, a while of
// 1, a switch of 1 or more), and the version each needs: an Error before
// the driver is called (which may accept a count it cannot run).
inline void check_bodies(ffi::CUgraphConditionalNodeType type, unsigned size, const char* operation,
                         SourceLocation where) {
  const bool is_switch = type == ffi::CU_GRAPH_COND_TYPE_SWITCH;
  if (is_switch && size == 0)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                "a switch node needs at least one body (body i runs when the handle is i); 0 were asked for",
                where));
  if (is_switch || size == 2)
    need_conditionals(operation, where, 12080, is_switch ? "switch nodes" : "if/else nodes (an if with two bodies)");
  else
    need_conditionals(operation, where);
}

inline ConditionalHandle make_conditional_handle(const Shared<GraphState>& s, CUgraph g, unsigned default_value,
                                                 bool assign_default, SourceLocation where) {
  need_conditionals("oxicuda::Graph::conditional_handle", where);
  ConditionalHandle h;
  check(OXICUDA_DRIVER(GraphConditionalHandleCreate, &h.value, g, s->ctx.raw(), default_value,
                       assign_default ? ffi::graph_cond_assign_default : 0u),
        where);
  return h;
}

// Adds the conditional node (to `node`) with `size` bodies, after
// check_bodies, and returns the driver's array of its bodies, which belong
// to the node.
inline CUgraph* add_conditional_node(const Shared<GraphState>& s, CUgraph g, Dependencies& after,
                                     ConditionalHandle handle, ffi::CUgraphConditionalNodeType type, unsigned size,
                                     const char* operation, CUgraphNode& node) {
  check_bodies(type, size, operation, after.where());
  ffi::CUgraphNodeParams p{};
  p.type = ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = handle.value;
  p.conditional.type = type;
  p.conditional.size = size;
  p.conditional.ctx = s->ctx.raw();
  // Made current as for kernel nodes (kernel_params), whose bodies hold them.
  const ScopedCurrent current(s->ctx, after.where());
  check(OXICUDA_DRIVER(GraphAddNode, &node, g, after.data(), after.size(), &p), after.where());
  // The driver points phGraph_out at its own array of the node's bodies.
  CUgraph* bodies = p.conditional.phGraph_out;
  for (unsigned i = 0; bodies && i < size; ++i)
    if (!bodies[i]) bodies = nullptr;
  if (!bodies)
    raise(Error(ffi::CUDA_ERROR_UNKNOWN, operation, "the driver gave the conditional node no body graph",
                after.where()));
  return bodies;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
