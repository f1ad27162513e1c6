// oxicuda/graph/graph_exec.hpp — GraphExec: a graph instantiated to be launched
// (cuGraphInstantiateWithParams), launched and uploaded on streams, updated
// from another graph of the same shape (cuGraphExecUpdate) or node by node.
#pragma once

#include <string>
#include <utility>

#include "graph.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// How to instantiate, taken by designated initializers:
//   GraphExec exec{graph, {.auto_free_on_launch = true}}
struct InstantiateOptions {
  // Graph allocations still live when the exec is launched again are freed
  // first (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH).
  bool auto_free_on_launch = false;
  // Launchable from the device (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  // only with auto_free_on_launch, and the graph must be on one device).
  bool device_launch = false;
  // Run with the per-node priorities of kernel nodes rather than the
  // launch stream's (CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY).
  bool use_node_priority = false;
  // When set, uploaded on this stream as part of instantiation
  // (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD).
  Stream upload{};
};

// Why cuGraphExecUpdate refused an update, and where.
struct UpdateRefusal {
  ffi::CUgraphExecUpdateResult reason = ffi::CU_GRAPH_EXEC_UPDATE_SUCCESS;
  GraphNode node;       // the graph's node that could not be paired (may be empty)
  GraphNode from_node;  // the exec's node it was paired with (may be empty)
  [[nodiscard]] explicit operator bool() const noexcept { return reason != ffi::CU_GRAPH_EXEC_UPDATE_SUCCESS; }
};

namespace detail {

const char* instantiate_result_text(ffi::CUgraphInstantiateResult r) noexcept;
const char* update_result_text(ffi::CUgraphExecUpdateResult r) noexcept;

}  // namespace detail

// An executable graph. A shared handle, like Stream: copies are the same
// exec, destroyed (cuGraphExecDestroy) when the last handle drops. It keeps
// alive the graph it was instantiated (or last updated) from, and so the
// modules of its kernels, its events and its host callables; a raw borrowed
// exec keeps nothing. Not thread-safe, as in the driver ("no API or pair of
// APIs is guaranteed to be safe to call on the same graph object from two
// threads"): calls on one exec (launch, upload, update, the setters) through
// any of its copies are serialized by the caller. Copying and dropping
// handles is safe on any thread.
class GraphExec : public detail::GraphHandle<CUgraphExec, GraphExec> {
 public:
  // Copies are the same exec; a moved-from GraphExec is empty, like a
  // default-constructed one (raw(), operator bool, context() and
  // use_count() are GraphHandle's).
  GraphExec() noexcept = default;
  // Instantiates `graph` (cuGraphInstantiateWithParams). When the driver
  // refuses, the Error names the node that failed (its place in the graph,
  // its kind, the kernel's name) and why.
  explicit GraphExec(const Graph& graph, InstantiateOptions options = {},
                     SourceLocation where = SourceLocation::current());
  // An exec that other code owns; oxicuda never destroys it.
  [[nodiscard]] static GraphExec borrow(CUgraphExec raw, Context ctx);

  [[nodiscard]] bool owns() const noexcept { return state_ && state_->owns; }
  // The graph this exec was made from, or last updated from (empty when borrowed).
  [[nodiscard]] const Graph& graph() const noexcept;
  // The graph this exec was instantiated from, kept for the exec's life:
  // its nodes are the ones the per-node setters take (empty when borrowed).
  [[nodiscard]] const Graph& origin() const noexcept;

  // Enqueues one run of the graph on `stream` (cuGraphLaunch): one driver
  // call. An exec may be launched any number of times, on any stream; runs
  // of one exec are ordered one after another.
  void launch(const Stream& stream, SourceLocation where = SourceLocation::current()) const;
  // Uploads the exec's work to the device ahead of its first launch, so that
  // launch does not pay for it (cuGraphUpload).
  void upload(const Stream& stream, SourceLocation where = SourceLocation::current()) const;

  // Gives the exec the parameters of `graph`, a graph of the same topology
  // (cuGraphExecUpdate): kernel arguments and configurations, copy and fill
  // addresses, host functions, events. When the driver refuses (the
  // topology, a node's kind, a kernel's context...), the Error says why and
  // names the offending node; the exec is left as it was.
  void update(const Graph& graph, SourceLocation where = SourceLocation::current());
  // The same, reporting a refusal instead of raising it (other failures
  // still raise): an empty UpdateRefusal when the update took.
  [[nodiscard]] UpdateRefusal try_update(const Graph& graph, SourceLocation where = SourceLocation::current());

  // Per-node setters: `node` is a node of the graph the exec was
  // instantiated from (origin()), also after an update: the driver refuses
  // the nodes of the graph it was updated from (CUDA_ERROR_INVALID_VALUE).
  // The kernel's arguments are converted and checked as for launch(); the
  // copy and fill as copy() and fill() check them. set_kernel lets go of the
  // kernel the node held (and update of the graph the exec was made or last
  // updated from): if that was its module's last handle, the module is
  // unloaded, so let the exec's launches that may still run it finish first.
  // clang-format off
  template <class... Params, class... Args>
    requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
  void set_kernel(detail::Located<GraphNode> node, const Kernel<void(Params...)>& kernel, const LaunchConfig& config,
                  Args&&... args);
  // clang-format on
  template <class Dst, class Src>
    requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
  void set_copy(GraphNode node, Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) const;
  template <class Dst>
    requires detail::device_range<std::remove_cvref_t<Dst>>
  void set_fill(GraphNode node, Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
                SourceLocation where = SourceLocation::current()) const;

 private:
  void kernel_setter(GraphNode node, const Function& fn, const LaunchConfig& config, void** params,
                     SourceLocation where);
};

inline GraphExec::GraphExec(const Graph& graph, InstantiateOptions options, SourceLocation where) {
  constexpr const char* op = "oxicuda::GraphExec::GraphExec";
  CUgraph g = detail::checked(graph, op, where);
  ffi::CUDA_GRAPH_INSTANTIATE_PARAMS p{};
  if (options.auto_free_on_launch) p.flags |= ffi::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  if (options.device_launch) p.flags |= ffi::CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  if (options.use_node_priority) p.flags |= ffi::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (options.upload) {
    p.flags |= ffi::CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    p.hUploadStream = options.upload.raw();
  }
  CUgraphExec raw = nullptr;
  // The driver instantiates in the calling thread's current context
  // (CUDA_ERROR_INVALID_CONTEXT when there is none): the graph's.
  const ScopedCurrent current(graph.context(), where);
  const detail::Outcome r = OXICUDA_DRIVER(GraphInstantiateWithParams, &raw, g, &p);
  if (!r.ok())
    detail::fail(r, where,
                 p.result_out == ffi::CUDA_GRAPH_INSTANTIATE_SUCCESS
                     ? std::string()
                     : detail::cat({"instantiating the graph failed: ", detail::instantiate_result_text(p.result_out),
                                    "; at ", detail::describe_node(g, p.hErrNode_out, detail::GraphAccess::keep(graph))}));
  state_ = State::make(graph.context(), raw, true, true);  // (if there is no block, the exec is destroyed)
  state_->keep.replace(nullptr, graph);  // (if this throws, the state destroys the exec)
  state_->keep.add(detail::origin_key(), graph);
  raw_ = raw;
}

inline GraphExec GraphExec::borrow(CUgraphExec raw, Context ctx) {
  GraphExec e;
  e.state_ = State::make(std::move(ctx), raw, false, true);
  e.raw_ = raw;
  return e;
}

namespace detail {
// The graph an exec keeps under `key` in its keep list (none for an exec
// without one): nullptr for the one it was last made or updated from,
// origin_key() for the one it was instantiated from.
inline const Graph& kept_graph(const KeepList* keep, CUgraphNode key) noexcept {
  static const Graph none;
  for (const Keep* k = keep ? keep->head : nullptr; k; k = k->next)
    if (k->node == key && k->kind() == &KeepOf<Graph>::tag) return static_cast<const KeepOf<Graph>*>(k)->handle;
  return none;
}
}  // namespace detail

inline const Graph& GraphExec::graph() const noexcept {
  return detail::kept_graph(state_ ? &state_->keep : nullptr, nullptr);
}

inline const Graph& GraphExec::origin() const noexcept {
  return detail::kept_graph(state_ ? &state_->keep : nullptr, detail::origin_key());
}

inline void GraphExec::launch(const Stream& stream, SourceLocation where) const {
  CUgraphExec e = checked("oxicuda::GraphExec::launch", where);
  detail::on_stream(stream, "oxicuda::GraphExec::launch", where,
                    [e, where](CUstream q) { detail::check(OXICUDA_DRIVER(GraphLaunch, e, q), where); });
}

inline void GraphExec::upload(const Stream& stream, SourceLocation where) const {
  CUgraphExec e = checked("oxicuda::GraphExec::upload", where);
  detail::on_stream(stream, "oxicuda::GraphExec::upload", where,
                    [e, where](CUstream q) { detail::check(OXICUDA_DRIVER(GraphUpload, e, q), where); });
}

inline UpdateRefusal GraphExec::try_update(const Graph& graph, SourceLocation where) {
  constexpr const char* op = "oxicuda::GraphExec::update";
  CUgraphExec e = checked(op, where);
  CUgraph g = detail::checked(graph, op, where);
  ffi::CUgraphExecUpdateResultInfo info{};
  detail::KeepList::Pending<Graph> keep(state_->keep, graph, nullptr);
  const detail::Outcome r = OXICUDA_DRIVER(GraphExecUpdate, e, g, &info);
  if (r.result == ffi::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
    return {info.result == ffi::CU_GRAPH_EXEC_UPDATE_SUCCESS ? ffi::CU_GRAPH_EXEC_UPDATE_ERROR : info.result,
            GraphNode(info.errorNode), GraphNode(info.errorFromNode)};
  detail::check(r, where);
  keep.commit(nullptr);  // what the exec's nodes use now
  return {};
}

inline void GraphExec::update(const Graph& graph, SourceLocation where) {
  const UpdateRefusal refused = try_update(graph, where);
  if (!refused) return;
  detail::fail({ffi::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, ffi::Entry::GraphExecUpdate}, where,
               detail::cat({"the driver refused to update the exec from the graph: ",
                            detail::update_result_text(refused.reason), "; offending node: ",
                            detail::describe_node(graph.raw(), refused.node.raw(), detail::GraphAccess::keep(graph)),
                            ". Instantiate the graph anew (GraphExec{graph}) when its shape has changed"}));
}

inline void GraphExec::kernel_setter(GraphNode node, const Function& fn, const LaunchConfig& config, void** params,
                                     SourceLocation where) {
  constexpr const char* op = "oxicuda::GraphExec::set_kernel";
  CUgraphExec e = checked(op, where);
  if (!node) detail::empty_handle(detail::graph_handle_name<CUgraphNode>(), op, where);
  const ffi::CUDA_KERNEL_NODE_PARAMS_v2 p = detail::kernel_params(fn, config, params, op, where, state_->ctx.raw(), false);
  // The node's entry in the keep list (found without a walk when this node
  // was the last one set); when it holds this Function already (a loop
  // giving one node new arguments), nothing is copied or counted.
  detail::KeepList::Pending<Function> keep(state_->keep, fn, node.raw());
  const ScopedCurrent current(p.ctx, where);  // the kernel's context (see kernel_params)
  const detail::Outcome r = OXICUDA_DRIVER(GraphExecKernelNodeSetParams, e, node.raw(), &p);
  if (!r.ok()) detail::launch_failed(r, fn, config, where);
  if (!keep.holds(detail::FunctionAccess::identity(fn))) keep.commit(node.raw());
}

// clang-format off
template <class... Params, class... Args>
  requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
void GraphExec::set_kernel(detail::Located<GraphNode> node, const Kernel<void(Params...)>& kernel,
                           const LaunchConfig& config, Args&&... args) {
  // clang-format on
  detail::check_arguments(kernel.function(), "oxicuda::GraphExec::set_kernel", node.where, args...);
  detail::PackedArgs<Params...> packed(std::forward<Args>(args)...);
  kernel_setter(node.value, kernel.function(), config, packed.get(), node.where);
}

template <class Dst, class Src>
  requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void GraphExec::set_copy(GraphNode node, Dst&& dst, Src&& src, SourceLocation where) const {
  constexpr const char* op = "oxicuda::GraphExec::set_copy";
  CUgraphExec e = checked(op, where);
  if (!node) detail::empty_handle(detail::graph_handle_name<CUgraphNode>(), op, where);
  CUcontext ctx = nullptr;
  const ffi::CUDA_MEMCPY3D p = detail::memcpy_params(dst, src, op, where, ctx);
  detail::check(OXICUDA_DRIVER(GraphExecMemcpyNodeSetParams, e, node.raw(), &p, ctx ? ctx : state_->ctx.raw()), where);
}

template <class Dst>
  requires detail::device_range<std::remove_cvref_t<Dst>>
void GraphExec::set_fill(GraphNode node, Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
                         SourceLocation where) const {
  constexpr const char* op = "oxicuda::GraphExec::set_fill";
  CUgraphExec e = checked(op, where);
  if (!node) detail::empty_handle(detail::graph_handle_name<CUgraphNode>(), op, where);
  CUcontext ctx = nullptr;
  const ffi::CUDA_MEMSET_NODE_PARAMS p = detail::fill_params(dst, value, ctx);
  detail::check(OXICUDA_DRIVER(GraphExecMemsetNodeSetParams, e, node.raw(), &p, ctx ? ctx : state_->ctx.raw()), where);
}

namespace detail {

inline const char* instantiate_result_text(ffi::CUgraphInstantiateResult r) noexcept {
  switch (r) {
    case ffi::CUDA_GRAPH_INSTANTIATE_SUCCESS: return "CUDA_GRAPH_INSTANTIATE_SUCCESS";
    case ffi::CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE:
      return "CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE (the graph's structure is invalid: a cycle in its "
             "dependencies, or an allocation freed twice or used after its free)";
    case ffi::CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
      return "CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED (a node's operation is not supported with "
             "these instantiate options, e.g. a host node in a device-launchable graph)";
    case ffi::CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
      return "CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED (the graph's kernels are in more than one "
             "context, or on more than one device for a device-launchable graph)";
    case ffi::CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED:
      return "CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED (a conditional handle was created but no "
             "conditional node uses it)";
    default: return "CUDA_GRAPH_INSTANTIATE_ERROR (the driver gave no more precise reason)";
  }
}

inline const char* update_result_text(ffi::CUgraphExecUpdateResult r) noexcept {
  switch (r) {
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED (the graph's nodes or dependencies differ from the exec's)";
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED (a node's kind differs)";
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED (a kernel node's function changed in a way the driver "
             "cannot update)";
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED (a node's parameters changed in a way the driver "
             "cannot update, e.g. a copy between other kinds of memory)";
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED (a node of a kind whose update is not supported: memory "
             "allocation, free, or a changed child graph or conditional)";
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE (a kernel node's function moved to another "
             "context or device)";
    case ffi::CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED (a kernel node's launch attributes changed)";
    default: return "CU_GRAPH_EXEC_UPDATE_ERROR (the driver gave no more precise reason)";
  }
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
