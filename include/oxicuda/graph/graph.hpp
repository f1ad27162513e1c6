// oxicuda/graph/graph.hpp — Graph: a CUDA graph built node by node (kernels,
// copies, fills, host functions, events, child graphs, allocations,
// conditional nodes), its dependencies, clones and a Graphviz picture.
// Instantiating and replaying it is graph_exec.hpp; capturing a stream's work
// into one is capture.hpp.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "add_node.hpp"
#include "dot.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A conditional node and the graphs it runs (its bodies): add a body's
// nodes through its Graph, which shares the ownership of the graph the node
// belongs to. An if or while node has one body; an if/else node, two
// (then_body, else_body); a switch node, one per value (bodies[i]).
struct ConditionalNode;
struct IfElseNode;
struct SwitchNode;

// A CUDA graph (cuGraphCreate): work and its dependencies, built once and
// instantiated (GraphExec, graph_exec.hpp) to be launched many times.
//
// A shared handle, like Stream: copies are the same graph, destroyed
// (cuGraphDestroy) when the last handle drops; every handle keeps the
// graph's context alive, and the graph keeps alive what its nodes use: the
// module of each kernel node, the events of event nodes, the child graphs,
// and (through driver user objects) each host node's callable. Adding nodes
// is not thread-safe, as in the driver: one thread builds a graph at a time.
class Graph : public detail::GraphHandle<CUgraph, Graph> {
 public:
  // Copies are the same graph; a moved-from Graph is empty, like a
  // default-constructed one (raw(), operator bool, context() and
  // use_count() are GraphHandle's).
  Graph() noexcept = default;
  // An empty graph; `ctx` is the context its copies, fills and conditional
  // handles belong to.
  explicit Graph(const Context& ctx, SourceLocation where = SourceLocation::current());
  // A graph that other code owns; oxicuda never destroys it.
  [[nodiscard]] static Graph borrow(CUgraph raw, Context ctx);
  // Takes ownership of `raw` (destroyed with the last handle), e.g. a graph
  // from cuStreamEndCapture called directly.
  [[nodiscard]] static Graph adopt(CUgraph raw, Context ctx, SourceLocation where = SourceLocation::current());

  // Whether the graph is destroyed when its last handle drops (false:
  // borrowed, or the body of a conditional node, which its node owns).
  [[nodiscard]] bool owns() const noexcept { return state_ && state_->owns && state_->raw == raw_; }
  friend bool operator==(const Graph& a, const Graph& b) noexcept { return a.raw_ == b.raw_; }

  // A copy of the graph (cuGraphClone): its own nodes, the same parameters;
  // it keeps alive what this graph's nodes use.
  [[nodiscard]] Graph clone(SourceLocation where = SourceLocation::current()) const;
  // The number of nodes (not counting those inside child graphs or bodies).
  [[nodiscard]] std::size_t node_count(SourceLocation where = SourceLocation::current()) const;
  // The nodes (cuGraphGetNodes; not those inside child graphs or bodies), in
  // the driver's order, of any graph (built, captured, cloned or borrowed);
  // each GraphNode gives its kind, dependencies and dependents.
  [[nodiscard]] GraphNodes nodes(SourceLocation where = SourceLocation::current()) const;
  // Whether this graph is the body of a conditional node (add_if,
  // add_while, add_if_else, add_switch), where the driver allows only some
  // node kinds (see add_if).
  [[nodiscard]] bool is_conditional_body() const noexcept { return state_ && state_->raw != raw_; }
  // Makes `to` depend on `from` (both nodes of this graph).
  void depend(GraphNode from, GraphNode to, SourceLocation where = SourceLocation::current()) const;

  // A node that does nothing: a point to join and fork dependencies.
  GraphNode add_empty(Dependencies after) const;

  // A kernel node, its arguments converted and checked exactly as launch()
  // converts them; the driver copies the values when the node is added.
  // Clusters and cooperative launches are not supported in kernel nodes
  // (capture such a launch instead); dynamic shared memory above 48 KiB
  // raises the kernel's limit first, as launch() does.
  // clang-format off
  template <class... Params, class... Args>
    requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
  GraphNode add_kernel(Dependencies after, const Kernel<void(Params...)>& kernel, const LaunchConfig& config,
                       Args&&... args) const;
  // clang-format on
  // An untyped kernel node: each argument's bytes, of exactly the kernel
  // parameter's type, as the untyped launch().
  template <class... Args>
  GraphNode add_kernel(Dependencies after, const Function& fn, const LaunchConfig& config, const Args&... args) const;

  // A copy node between host and device ranges, with copy()'s checks (same
  // element type, same count). The host memory must stay valid while the
  // graph can run: use a PinnedBuffer, and keep it alive.
  template <class Dst, class Src>
    requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
  GraphNode add_copy(Dependencies after, Dst&& dst, Src&& src) const;
  // A memset node setting every element of `dst` to `value` (elements of 1,
  // 2 or 4 bytes), or every byte to `byte`.
  template <class Dst>
    requires detail::device_range<std::remove_cvref_t<Dst>>
  GraphNode add_fill(Dependencies after, Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value) const;
  template <class Dst>
    requires detail::device_range<std::remove_cvref_t<Dst>>
  GraphNode add_fill_bytes(Dependencies after, Dst&& dst, unsigned char byte) const;

  // A host node: runs `fn()` on a driver thread at its place in each
  // launch. As for launch_host_func, `fn` must not call CUDA and may own
  // handles; it lives until the last graph and exec that can run it are
  // gone (clones and execs included), and is destroyed once, never on the
  // driver's thread (see callback.hpp).
  template <class F>
  GraphNode add_host(Dependencies after, F&& fn) const;

  // Records `event` / waits for its last record at this point of the graph.
  GraphNode add_event_record(Dependencies after, const Event& event) const;
  GraphNode add_event_wait(Dependencies after, const Event& event) const;
  // A node that runs a copy of `child` (the driver copies it now; later
  // changes to `child` do not reach the node).
  GraphNode add_child(Dependencies after, const Graph& child) const;

  // Device memory allocated by the graph (cuGraphAddMemAllocNode) on the
  // graph's device: `count` elements of T, at an address fixed now, usable by
  // the nodes after this one. Free it with add_free in the graph, or after a
  // launch: by another graph's add_free, by a DeviceBuffer adopting it
  // (DeviceBuffer::adopt_async), or with auto_free_on_launch on relaunch.
  template <class T>
  GraphAllocation<T> add_alloc(Dependencies after, std::size_t count) const;
  template <class T>
  GraphNode add_free(Dependencies after, DeviceSpan<T> memory) const;

  // A handle for conditional nodes, created in this graph: its value is
  // `default_value` at the start of every launch (when `assign_default`),
  // and whatever a kernel sets it to. Needs a CUDA 12.4 driver.
  [[nodiscard]] ConditionalHandle conditional_handle(unsigned default_value = 0, bool assign_default = true,
                                                     SourceLocation where = SourceLocation::current()) const;
  // `if`: the body runs once when the handle is non-zero. `while`: the body
  // runs as long as the handle is non-zero (checked before each run; a
  // kernel in the body sets it). Needs a CUDA 12.4 driver. A body may hold
  // only kernel, empty, memset, memcpy, child graph and conditional nodes,
  // at any depth (the driver's rule: node_kind.hpp); add_host, add_event_*,
  // add_alloc, add_free and add_child of a graph holding such a node raise
  // an Error naming the rule there (the driver: at instantiation).
  ConditionalNode add_if(Dependencies after, ConditionalHandle handle) const;
  ConditionalNode add_while(Dependencies after, ConditionalHandle handle) const;
  // `if/else`: then_body runs when the handle is non-zero, else_body when
  // it is zero. `switch`: bodies[i] runs when the handle is i, none when it
  // is `n` or more; `n` from 1 (0 is an Error). Both need a CUDA 12.8
  // driver (an older one: an Error naming both versions); bodies as add_if's.
  IfElseNode add_if_else(Dependencies after, ConditionalHandle handle) const;
  SwitchNode add_switch(Dependencies after, ConditionalHandle handle, unsigned n) const;

  // The graph as Graphviz DOT (cuGraphDebugDotPrint), written to `path` or
  // returned. `flags`: ffi::CU_GRAPH_DEBUG_DOT_FLAGS_* (0: node kinds and
  // kernel names; ffi::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE: every parameter).
  // Render with `dot -Tsvg graph.dot -o graph.svg`.
  void write_dot(const std::string& path, unsigned flags = 0, SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] std::string dot(unsigned flags = 0, SourceLocation where = SourceLocation::current()) const;

 private:
  Graph(CUgraph raw, State state) noexcept : GraphHandle(raw, std::move(state)) {}
  // Adds a conditional node of `size` bodies, their handles put in `bodies`.
  GraphNode conditional_node(Dependencies& after, ConditionalHandle handle, ffi::CUgraphConditionalNodeType type,
                             unsigned size, Graph* bodies, const char* operation) const;
  // checked(), and an Error when this graph is a conditional body, which
  // cannot hold a node of kind `t`.
  [[nodiscard]] CUgraph checked_for(ffi::CUgraphNodeType t, const char* operation, SourceLocation where) const {
    CUgraph g = checked(operation, where);
    if (is_conditional_body()) detail::refuse_in_body(t, operation, where);
    return g;
  }
};

// clang-format off
struct ConditionalNode { GraphNode node; Graph body; };
struct IfElseNode { GraphNode node; Graph then_body; Graph else_body; };
struct SwitchNode { GraphNode node; std::vector<Graph> bodies; };
// clang-format on

inline Graph::Graph(const Context& ctx, SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::Graph::Graph", where);
  CUgraph raw = nullptr;
  detail::check(OXICUDA_DRIVER(GraphCreate, &raw, 0u), where);
  *this = adopt(raw, ctx, where);
}
inline Graph Graph::borrow(CUgraph raw, Context ctx) {
  return Graph(raw, State::make(std::move(ctx), raw, false, false));
}
inline Graph Graph::adopt(CUgraph raw, Context ctx, SourceLocation where) {
  if (!raw) detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::Graph::adopt", "a null CUgraph", where));
  return Graph(raw, State::make(std::move(ctx), raw, true, false));
}
inline Graph Graph::clone(SourceLocation where) const {
  CUgraph g = checked("oxicuda::Graph::clone", where);
  CUgraph copy = nullptr;
  detail::check(OXICUDA_DRIVER(GraphClone, &copy, g), where);
  Graph c = adopt(copy, state_->ctx, where);
  c.state_->keep.copy_from(state_->keep);  // the clone's nodes use what this graph's nodes use
  detail::check(state_->keep.retain_user_objects(copy), where);
  return c;
}
inline std::size_t Graph::node_count(SourceLocation where) const {
  std::size_t n = 0;
  detail::check(OXICUDA_DRIVER(GraphGetNodes, checked("oxicuda::Graph::node_count", where), nullptr, &n), where);
  return n;
}
inline GraphNodes Graph::nodes(SourceLocation where) const {
  return detail::list_nodes(checked("oxicuda::Graph::nodes", where), [](CUgraph g, CUgraphNode* out, std::size_t* n) {
    return OXICUDA_DRIVER(GraphGetNodes, g, out, n);
  }, where);
}
inline void Graph::depend(GraphNode from, GraphNode to, SourceLocation where) const {
  CUgraph g = checked("oxicuda::Graph::depend", where);
  const CUgraphNode f = from.raw(), t = to.raw();
  if (!f || !t) detail::empty_handle(detail::graph_handle_name<CUgraphNode>(), "oxicuda::Graph::depend", where);
  detail::check(OXICUDA_DRIVER(GraphAddDependencies, g, &f, &t, std::size_t{1}), where);
}
inline GraphNode Graph::add_empty(Dependencies after) const {
  return detail::add_empty_node(checked("oxicuda::Graph::add_empty", after.where()), after);
}

// clang-format off
template <class... Params, class... Args>
  requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
GraphNode Graph::add_kernel(Dependencies after, const Kernel<void(Params...)>& kernel, const LaunchConfig& config,
                            Args&&... args) const {
  // clang-format on
  detail::check_arguments(kernel.function(), "oxicuda::Graph::add_kernel", after.where(), args...);
  detail::PackedArgs<Params...> packed(std::forward<Args>(args)...);
  return detail::add_kernel_node(state_, checked("oxicuda::Graph::add_kernel", after.where()), after, kernel.function(),
                                 config, packed.get());
}
template <class... Args>
GraphNode Graph::add_kernel(Dependencies after, const Function& fn, const LaunchConfig& config,
                            const Args&... args) const {
  static_assert((detail::untyped_argument_v<Args> && ...),
                "oxicuda::Graph::add_kernel (untyped Function): every argument is passed as its bytes, so it must "
                "be a trivially copyable value and not a DeviceBuffer or DeviceSpan (pass .data(), or use a "
                "Kernel<Sig>, which converts buffers to their pointer)");
  void* params[sizeof...(Args) > 0 ? sizeof...(Args) : 1] = {const_cast<void*>(static_cast<const void*>(&args))...};
  return detail::add_kernel_node(state_, checked("oxicuda::Graph::add_kernel", after.where()), after, fn, config,
                                 sizeof...(Args) > 0 ? params : nullptr);
}

template <class Dst, class Src>
  requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
GraphNode Graph::add_copy(Dependencies after, Dst&& dst, Src&& src) const {
  return detail::add_copy_node(state_, checked("oxicuda::Graph::add_copy", after.where()), after, dst, src);
}
template <class Dst>
  requires detail::device_range<std::remove_cvref_t<Dst>>
GraphNode Graph::add_fill(Dependencies after, Dst&& dst,
                          detail::device_element_t<std::remove_cvref_t<Dst>> value) const {
  CUgraph g = checked("oxicuda::Graph::add_fill", after.where());
  CUcontext ctx = nullptr;
  return detail::add_memset_node(state_, g, after, detail::fill_params(dst, value, ctx), ctx);
}
template <class Dst>
  requires detail::device_range<std::remove_cvref_t<Dst>>
GraphNode Graph::add_fill_bytes(Dependencies after, Dst&& dst, unsigned char byte) const {
  CUgraph g = checked("oxicuda::Graph::add_fill_bytes", after.where());
  CUcontext ctx = nullptr;
  return detail::add_memset_node(state_, g, after, detail::memset_params(dst, byte, 1, ctx), ctx);
}

template <class F>
GraphNode Graph::add_host(Dependencies after, F&& fn) const {
  constexpr const char* op = "oxicuda::Graph::add_host";
  CUgraph g = checked_for(ffi::CU_GRAPH_NODE_TYPE_HOST, op, after.where());  // (before the callable is boxed)
  return detail::add_host_node(state_, g, after, detail::box_host_call(std::forward<F>(fn), op));
}

inline GraphNode Graph::add_event_record(Dependencies after, const Event& event) const {
  constexpr const char* op = "oxicuda::Graph::add_event_record";
  return detail::add_event_node(state_, checked_for(ffi::CU_GRAPH_NODE_TYPE_EVENT_RECORD, op, after.where()), after,
                                event, true, op);
}
inline GraphNode Graph::add_event_wait(Dependencies after, const Event& event) const {
  constexpr const char* op = "oxicuda::Graph::add_event_wait";
  return detail::add_event_node(state_, checked_for(ffi::CU_GRAPH_NODE_TYPE_WAIT_EVENT, op, after.where()), after,
                                event, false, op);
}

inline GraphNode Graph::add_child(Dependencies after, const Graph& child) const {
  constexpr const char* op = "oxicuda::Graph::add_child";
  CUgraph g = checked(op, after.where());
  CUgraph c = child.checked(op, after.where());  // before child.state_ is read: an empty child has none
  return detail::add_child_node(state_, g, after, c, child.state_->keep, is_conditional_body(), op);
}

template <class T>
GraphAllocation<T> Graph::add_alloc(Dependencies after, std::size_t count) const {
  constexpr const char* op = "oxicuda::Graph::add_alloc";
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), op, after.where());
  return detail::add_alloc_node<T>(state_, checked_for(ffi::CU_GRAPH_NODE_TYPE_MEM_ALLOC, op, after.where()), after,
                                   bytes, count);
}
template <class T>
GraphNode Graph::add_free(Dependencies after, DeviceSpan<T> memory) const {
  constexpr const char* op = "oxicuda::Graph::add_free";
  return detail::add_free_node(checked_for(ffi::CU_GRAPH_NODE_TYPE_MEM_FREE, op, after.where()), after,
                               memory.device_ptr());
}

inline ConditionalHandle Graph::conditional_handle(unsigned default_value, bool assign_default,
                                                   SourceLocation where) const {
  return detail::make_conditional_handle(state_, checked("oxicuda::Graph::conditional_handle", where), default_value,
                                         assign_default, where);
}
inline GraphNode Graph::conditional_node(Dependencies& after, ConditionalHandle handle,
                                         ffi::CUgraphConditionalNodeType type, unsigned size, Graph* bodies,
                                         const char* operation) const {
  CUgraphNode node = nullptr;
  CUgraph g = checked(operation, after.where());
  CUgraph* raw = detail::add_conditional_node(state_, g, after, handle, type, size, operation, node);
  // The bodies belong to the node: handles that share this graph's state
  // (what their nodes keep alive, this graph keeps) and never destroy it.
  for (unsigned i = 0; i < size; ++i) bodies[i] = Graph(raw[i], state_);
  return GraphNode(node);
}
inline ConditionalNode Graph::add_if(Dependencies after, ConditionalHandle handle) const {
  ConditionalNode c;
  c.node = conditional_node(after, handle, ffi::CU_GRAPH_COND_TYPE_IF, 1, &c.body, "oxicuda::Graph::add_if");
  return c;
}
inline ConditionalNode Graph::add_while(Dependencies after, ConditionalHandle handle) const {
  ConditionalNode c;
  c.node = conditional_node(after, handle, ffi::CU_GRAPH_COND_TYPE_WHILE, 1, &c.body, "oxicuda::Graph::add_while");
  return c;
}
inline IfElseNode Graph::add_if_else(Dependencies after, ConditionalHandle handle) const {
  Graph b[2];
  const GraphNode n = conditional_node(after, handle, ffi::CU_GRAPH_COND_TYPE_IF, 2, b, "oxicuda::Graph::add_if_else");
  return {n, std::move(b[0]), std::move(b[1])};
}
inline SwitchNode Graph::add_switch(Dependencies after, ConditionalHandle handle, unsigned n) const {
  constexpr const char* op = "oxicuda::Graph::add_switch";
  (void)checked(op, after.where());
  detail::check_bodies(ffi::CU_GRAPH_COND_TYPE_SWITCH, n, op, after.where());  // before n handles are made
  SwitchNode sw{GraphNode(), std::vector<Graph>(n)};
  sw.node = conditional_node(after, handle, ffi::CU_GRAPH_COND_TYPE_SWITCH, n, sw.bodies.data(), op);
  return sw;
}
inline void Graph::write_dot(const std::string& path, unsigned flags, SourceLocation where) const {
  detail::write_dot(checked("oxicuda::Graph::write_dot", where), path, flags, where);
}
inline std::string Graph::dot(unsigned flags, SourceLocation where) const {
  return detail::dot(checked("oxicuda::Graph::dot", where), flags, where);
}

OXICUDA_DETAIL_NAMESPACE_END
