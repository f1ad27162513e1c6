// oxicuda/graph/node.hpp — the nodes of a graph as handles: GraphNode (its
// kind, its dependencies and dependents), GraphNodes (a list the driver
// gave), Dependencies (the nodes a new node runs after), EdgeData (what an
// edge carries), and the one table of the names errors give this wing's
// handles.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../driver/handle.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

class GraphNodes;

// A node of a graph: valid while its graph lives. Copies are the same node.
class GraphNode {
 public:
  GraphNode() noexcept = default;
  explicit GraphNode(CUgraphNode raw) noexcept : raw_(raw) {}
  [[nodiscard]] CUgraphNode raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  // The node's kind (cuGraphNodeGetType).
  [[nodiscard]] ffi::CUgraphNodeType type(SourceLocation where = SourceLocation::current()) const;
  // The nodes this one runs after, and the nodes that run after it
  // (cuGraphNodeGetDependencies, cuGraphNodeGetDependentNodes), in the
  // driver's order; for any node, whoever built its graph.
  [[nodiscard]] GraphNodes dependencies(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] GraphNodes dependents(SourceLocation where = SourceLocation::current()) const;
  friend bool operator==(const GraphNode& a, const GraphNode& b) noexcept { return a.raw_ == b.raw_; }

 private:
  CUgraphNode raw_ = nullptr;
};

// Nodes the driver listed (a graph's, a node's dependencies or dependents):
// an array that owns its storage, move-only; iterate it, or copy it into a
// container of your own.
class GraphNodes {
 public:
  GraphNodes() noexcept = default;
  explicit GraphNodes(std::size_t n) : p_(n ? new GraphNode[n] : nullptr), n_(n) {}
  GraphNodes(GraphNodes&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  GraphNodes& operator=(GraphNodes&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  GraphNodes(const GraphNodes&) = delete;
  GraphNodes& operator=(const GraphNodes&) = delete;
  ~GraphNodes() { delete[] p_; }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] bool empty() const noexcept { return n_ == 0; }
  [[nodiscard]] const GraphNode& operator[](std::size_t i) const noexcept { return p_[i]; }
  [[nodiscard]] const GraphNode* begin() const noexcept { return p_; }
  [[nodiscard]] const GraphNode* end() const noexcept { return p_ + n_; }
  [[nodiscard]] GraphNode* data() noexcept { return p_; }
  // Whether `node` is one of them.
  [[nodiscard]] bool contains(GraphNode node) const noexcept {
    for (std::size_t i = 0; i < n_; ++i)
      if (p_[i] == node) return true;
    return false;
  }

 private:
  GraphNode* p_ = nullptr;
  std::size_t n_ = 0;
};

// The nodes a new node depends on, and the caller's source line:
//   g.add_kernel({a, b}, kernel, config, args...)   after a and b
//   g.add_kernel({}, ...)                            a root node
//   g.add_kernel(a, ...)                             after a
// (It carries the source line because a variadic function cannot take a
// defaulted one after its arguments.)
namespace detail {
// An array of node handles on the heap (a plain class: no template to
// instantiate in every translation unit that includes oxicuda).
class NodeArray {
 public:
  NodeArray() noexcept = default;
  explicit NodeArray(std::size_t n) : p_(new CUgraphNode[n]) {}
  void allocate(std::size_t n) {
    delete[] p_;
    p_ = nullptr;
    p_ = new CUgraphNode[n];
  }
  NodeArray(const NodeArray&) = delete;
  NodeArray& operator=(const NodeArray&) = delete;
  ~NodeArray() { delete[] p_; }
  [[nodiscard]] CUgraphNode* get() const noexcept { return p_; }

 private:
  CUgraphNode* p_ = nullptr;
};
}  // namespace detail

class Dependencies {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): converting on purpose
  Dependencies(SourceLocation where = SourceLocation::current()) noexcept : where_(where) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  Dependencies(GraphNode one, SourceLocation where = SourceLocation::current()) noexcept : n_(1), where_(where) {
    inline_[0] = one.raw();
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  Dependencies(std::initializer_list<GraphNode> nodes, SourceLocation where = SourceLocation::current())
      : Dependencies(nodes.begin(), nodes.size(), where) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  Dependencies(std::span<const GraphNode> nodes, SourceLocation where = SourceLocation::current())
      : Dependencies(nodes.data(), nodes.size(), where) {}
  // NOLINTNEXTLINE(google-explicit-constructor): e.g. CaptureInfo::dependencies
  Dependencies(const std::vector<GraphNode>& nodes, SourceLocation where = SourceLocation::current())
      : Dependencies(nodes.data(), nodes.size(), where) {}
  Dependencies(const Dependencies&) = delete;
  Dependencies& operator=(const Dependencies&) = delete;

  // The driver's array of the nodes' handles.
  [[nodiscard]] CUgraphNode* data() noexcept { return heap_.get() ? heap_.get() : inline_; }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] SourceLocation where() const noexcept { return where_; }

 private:
  // (Not std::span's (pointer, size) constructor: its overload resolution
  // checks the standard's iterator concepts, which alone cost more to
  // compile than this whole class.)
  Dependencies(const GraphNode* nodes, std::size_t n, SourceLocation where) : n_(n), where_(where) {
    if (n_ > kInline) heap_.allocate(n_);
    CUgraphNode* out = data();
    for (std::size_t i = 0; i < n; ++i) out[i] = nodes[i].raw();
  }

  static constexpr std::size_t kInline = 8;
  std::size_t n_ = 0;
  CUgraphNode inline_[kInline] = {};
  detail::NodeArray heap_;
  SourceLocation where_;
};

// What an edge carries (cuda.h's CUgraphEdgeData, CUDA 12.3): where it
// leaves the node before it, and its type. The default, all zero, is a full
// dependency: the node after it runs when the node before it has finished,
// and sees its memory. Only kernel nodes have other ports.
enum class EdgePort : unsigned char {
  // The node has finished (CU_GRAPH_KERNEL_NODE_PORT_DEFAULT).
  completion = ffi::graph_kernel_node_port_default,
  // Every block of the kernel has called cudaTriggerProgrammaticLaunchCompletion()
  // or ended; only with EdgeType::programmatic (CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC).
  programmatic = ffi::graph_kernel_node_port_programmatic,
  // Every block of the kernel has begun (CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER).
  launch_order = ffi::graph_kernel_node_port_launch_order,
};
enum class EdgeType : unsigned char {
  full = ffi::CU_GRAPH_DEPENDENCY_TYPE_DEFAULT,  // an ordinary dependency
  // The kernel after it may use cudaGridDependencySynchronize(); between
  // kernel nodes only, from port programmatic or launch_order
  // (CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC).
  programmatic = ffi::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
};
struct EdgeData {
  EdgePort from_port = EdgePort::completion;
  EdgeType type = EdgeType::full;
  unsigned char to_port = 0;  // no node kind defines one yet: 0
  friend bool operator==(const EdgeData&, const EdgeData&) = default;
};

namespace detail {

inline ffi::CUgraphEdgeData edge_to_driver(const EdgeData& e) noexcept {
  ffi::CUgraphEdgeData d{};
  d.from_port = static_cast<unsigned char>(e.from_port);
  d.to_port = e.to_port;
  d.type = static_cast<unsigned char>(e.type);
  return d;
}

inline EdgeData edge_from_driver(const ffi::CUgraphEdgeData& d) noexcept {
  return {static_cast<EdgePort>(d.from_port), static_cast<EdgeType>(d.type), d.to_port};
}

// The name an error gives each handle of this wing (empty_handle's `type`),
// by the driver handle it holds: one table, so that every check of a handle
// says the same.
template <class Raw>
[[nodiscard]] constexpr const char* graph_handle_name() noexcept {
  if constexpr (std::is_same_v<Raw, CUgraphNode>)
    return "oxicuda::GraphNode";
  else if constexpr (std::is_same_v<Raw, CUgraph>)
    return "oxicuda::Graph";
  else {
    static_assert(std::is_same_v<Raw, CUgraphExec>, "a handle of the graph wing");
    return "oxicuda::GraphExec";
  }
}

// The raw handle of `handle` (a GraphNode, Graph or GraphExec), or the Error
// naming its type and `operation` when it is empty.
template <class H>
[[nodiscard]] auto checked(const H& handle, const char* operation, SourceLocation where) {
  return checked(handle, graph_handle_name<decltype(handle.raw())>(), operation, where);
}

// The nodes the driver lists with `list(handle, out, &n)`: asked for the
// count, then for the nodes (again while the count grew in between).
template <class H, class List>
GraphNodes list_nodes(H handle, List list, SourceLocation where) {
  for (;;) {
    std::size_t n = 0;
    check(list(handle, nullptr, &n), where);
    if (n == 0) return {};
    const NodeArray raw(n);
    std::size_t got = n;
    check(list(handle, raw.get(), &got), where);
    if (got > n) continue;
    GraphNodes out(got);
    for (std::size_t i = 0; i < got; ++i) out.data()[i] = GraphNode(raw.get()[i]);
    return out;
  }
}
}  // namespace detail

inline ffi::CUgraphNodeType GraphNode::type(SourceLocation where) const {
  ffi::CUgraphNodeType t = ffi::CU_GRAPH_NODE_TYPE_EMPTY;
  detail::check(OXICUDA_DRIVER(GraphNodeGetType, detail::checked(*this, "oxicuda::GraphNode::type", where), &t),
                where);
  return t;
}

inline GraphNodes GraphNode::dependencies(SourceLocation where) const {
  CUgraphNode n = detail::checked(*this, "oxicuda::GraphNode::dependencies", where);
  return detail::list_nodes(n, [](CUgraphNode h, CUgraphNode* out, std::size_t* count) {
    return OXICUDA_DRIVER(GraphNodeGetDependencies, h, out, count);
  }, where);
}

inline GraphNodes GraphNode::dependents(SourceLocation where) const {
  CUgraphNode n = detail::checked(*this, "oxicuda::GraphNode::dependents", where);
  return detail::list_nodes(n, [](CUgraphNode h, CUgraphNode* out, std::size_t* count) {
    return OXICUDA_DRIVER(GraphNodeGetDependentNodes, h, out, count);
  }, where);
}

OXICUDA_DETAIL_NAMESPACE_END
