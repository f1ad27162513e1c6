// oxicuda/graph/graph.hpp — Graph: a CUDA graph built node by node (kernels,
// copies, fills, host functions, events, child graphs, allocations,
// conditional nodes), its dependencies, clones and a Graphviz picture.
// Instantiating and replaying it is graph_exec.hpp; capturing a stream's work
// into one is capture.hpp.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "../memory/buffer.hpp"
#include "../kernel/launch.hpp"

OXICUDA_NAMESPACE_BEGIN

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
  GraphNodes(GraphNodes&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
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

// A handle that a conditional node reads and a kernel sets on the device
// (cudaGraphSetConditional(handle, value) in CUDA C++). Passed to a kernel
// as its unsigned long long (CUgraphConditionalHandle) parameter.
struct ConditionalHandle {
  ffi::CUgraphConditionalHandle value = 0;
  // NOLINTNEXTLINE(google-explicit-constructor): a kernel's CUgraphConditionalHandle parameter
  constexpr operator ffi::CUgraphConditionalHandle() const noexcept { return value; }
};

class Graph;
namespace detail {
struct GraphAccess;
}

// A conditional node and the graph it runs (its body): add the body's nodes
// through `body`, which shares the ownership of the graph it belongs to.
struct ConditionalNode;

// Memory allocated by a graph's mem alloc node: its address is fixed when the
// node is added; the memory exists from the node's run until a mem free
// node (or a free after the launch) releases it.
template <class T>
struct GraphAllocation {
  GraphNode node;
  DeviceSpan<T> span;
};

namespace detail {

// What a graph keeps alive for its nodes: each entry holds one handle (a
// kernel's Function, an Event, a child Graph), in a list that the graph's
// state owns. One small allocation per node that needs one; no container.
struct Keep {
  Keep* next = nullptr;
  CUgraphNode node = nullptr;
  Keep() noexcept = default;
  Keep(const Keep&) = delete;
  Keep& operator=(const Keep&) = delete;
  virtual ~Keep() = default;
  // The kernel's name for a kernel node (for error messages), else empty.
  [[nodiscard]] virtual std::string_view kernel_name() const noexcept { return {}; }
  // Another entry holding the same handle.
  [[nodiscard]] virtual Keep* copy() const = 0;
  // The user object of a host node's callable, else null.
  [[nodiscard]] virtual CUuserObject user_object() const noexcept { return nullptr; }
  // Which kind of entry this is (KeepOf<H>::kind for each H).
  [[nodiscard]] virtual const void* kind() const noexcept { return nullptr; }
};

// A host node's user object, which the graph holds a reference to.
struct KeepUserObject final : Keep {
  CUuserObject object;
  explicit KeepUserObject(CUuserObject o) noexcept : object(o) {}
  [[nodiscard]] Keep* copy() const override { return new KeepUserObject(object); }
  [[nodiscard]] CUuserObject user_object() const noexcept override { return object; }
};

template <class H>
struct KeepOf final : Keep {
  H handle;
  static constexpr char tag = 0;
  explicit KeepOf(H h) noexcept : handle(std::move(h)) {}
  [[nodiscard]] Keep* copy() const override { return new KeepOf(handle); }
  [[nodiscard]] const void* kind() const noexcept override { return &tag; }
  [[nodiscard]] std::string_view kernel_name() const noexcept override {
    if constexpr (requires(const H& x) { x.name(); })
      return handle.name();
    else
      return {};
  }
};

// The key an exec's keep list holds the graph it was instantiated from
// under: no node has this address (nodes are aligned pointers).
inline CUgraphNode origin_key() noexcept { return reinterpret_cast<CUgraphNode>(std::uintptr_t{1}); }

struct KeepList {
  Keep* head = nullptr;
  // The entry a per-node setter found or made last (entries live as long
  // as the list): a loop setting one node finds it without a walk.
  Keep* last = nullptr;
  KeepList() noexcept = default;
  KeepList(const KeepList&) = delete;
  KeepList& operator=(const KeepList&) = delete;
  ~KeepList() {
    while (Keep* k = head) {
      head = k->next;
      delete k;
    }
  }
  // Holding a handle for a node, in two steps: what can fail (the entry's
  // allocation) when made, before the driver call that adds or changes the
  // node; commit(node) after it succeeds, which cannot fail. Dropped
  // uncommitted (the call failed, or threw), it holds nothing. So a node
  // never exists, nor uses a new kernel, without what it uses being held.
  template <class H>
  class Pending {
   public:
    // For a node the driver call will add.
    Pending(KeepList& list, const H& handle) : list_(&list), handle_(&handle), fresh_(new KeepOf<H>(handle)) {}
    // For `node`, instead of what the list holds for it now (a per-node
    // setter called in a loop holds one entry per node, not one per call,
    // and allocates only the first time).
    Pending(KeepList& list, const H& handle, CUgraphNode node) : list_(&list), handle_(&handle) {
      if (Keep* k = list.last; k && k->node == node && k->kind() == &KeepOf<H>::tag) {
        existing_ = static_cast<KeepOf<H>*>(k);
        return;
      }
      for (Keep* k = list.head; k; k = k->next)
        if (k->node == node && k->kind() == &KeepOf<H>::tag) {
          existing_ = static_cast<KeepOf<H>*>(k);
          list.last = k;
          return;
        }
      fresh_ = new KeepOf<H>(handle);
    }
    // The entry for the node holds `handle` (a copy of it) already.
    [[nodiscard]] bool holds(const void* identity) const noexcept {
      if constexpr (requires(const H& h) { FunctionAccess::identity(h); })
        return existing_ && FunctionAccess::identity(existing_->handle) == identity;
      else
        return false;
    }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    ~Pending() { delete fresh_; }
    // `handle` must still be alive.
    void commit(CUgraphNode node) noexcept {
      static_assert(std::is_nothrow_copy_assignable_v<H>, "a kept handle is copied without throwing");
      if (existing_) {
        existing_->handle = *handle_;
        return;
      }
      fresh_->node = node;
      fresh_->next = list_->head;
      list_->head = fresh_;
      if (node) list_->last = fresh_;
      fresh_ = nullptr;
    }

   private:
    KeepList* list_;
    const H* handle_;
    KeepOf<H>* existing_ = nullptr;
    KeepOf<H>* fresh_ = nullptr;
  };
  template <class H>
  void add(CUgraphNode node, const H& handle) {
    Pending<H>(*this, handle).commit(node);
  }
  template <class H>
  void replace(CUgraphNode node, const H& handle) {
    Pending<H>(*this, handle, node).commit(node);
  }
  // Takes over what `other` holds (made before the driver call, as Pending).
  void take_all(KeepList& other) noexcept {
    if (!other.head) return;
    Keep* tail = other.head;
    while (tail->next) tail = tail->next;
    tail->next = head;
    head = other.head;
    other.head = nullptr;
  }
  // Holds what `other` holds too (for a graph copied from it, whose nodes differ).
  void copy_from(const KeepList& other) {
    for (const Keep* k = other.head; k; k = k->next) {
      Keep* c = k->copy();
      c->next = head;
      head = c;
    }
  }
  // Makes `graph` hold its own reference to each host callable's user object
  // listed here (a copy of the graph that listed them: a clone, or a child
  // node's copy). The driver's copies may hold references already; one more
  // is released with the graph all the same, so the callable is destroyed
  // once either way, and never before the copy is gone.
  [[nodiscard]] Outcome retain_user_objects(CUgraph graph) const noexcept {
    for (const Keep* k = head; k; k = k->next)
      if (CUuserObject o = k->user_object()) {
        const Outcome r = OXICUDA_DRIVER(GraphRetainUserObject, graph, o, 1u, 0u);
        if (!r.ok()) return r;
      }
    return {ffi::CUDA_SUCCESS, ffi::Entry::GraphRetainUserObject};
  }
  void add_user_object(CUgraphNode node, CUuserObject object) {
    auto* k = new KeepUserObject(object);
    k->node = node;
    k->next = head;
    head = k;
  }
  [[nodiscard]] std::string_view kernel_name(CUgraphNode node) const noexcept {
    for (const Keep* k = head; k; k = k->next)
      if (k->node == node && !k->kernel_name().empty()) return k->kernel_name();
    return {};
  }
};

inline void destroy_graph(CUgraph g) noexcept {
  check_nothrow(OXICUDA_DRIVER(GraphDestroy, g), "destroying an oxicuda::Graph");
  reclaim();
}

inline void destroy_graph_exec(CUgraphExec e) noexcept {
  check_nothrow(OXICUDA_DRIVER(GraphExecDestroy, e), "destroying an oxicuda::GraphExec");
  reclaim();
}

// The state of a graph or of an exec (one type for both, so that the header
// instantiates one Shared<T> for them, not two): the driver's
// handle (destroyed with the state when owned), its context, and what its
// nodes keep alive (for an exec: the graph it was made or last updated
// from, and what per-node setters gave it).
struct GraphState : Owned {
  Context ctx;
  void* raw;  // a CUgraph, or a CUgraphExec when `exec`
  bool owns;
  bool exec;
  KeepList keep;
  GraphState(Context c, void* r, bool o, bool e) noexcept : ctx(std::move(c)), raw(r), owns(o), exec(e) {}
  ~GraphState() {
    if (!owns) return;
    if (exec)
      destroy_graph_exec(static_cast<CUgraphExec>(raw));
    else
      destroy_graph(static_cast<CUgraph>(raw));
  }
};

std::string describe_node(CUgraph graph, CUgraphNode node, const KeepList* keep);

}  // namespace detail

// A CUDA graph (cuGraphCreate): work and its dependencies, built once and
// instantiated (GraphExec, graph_exec.hpp) to be launched many times.
//
// A shared handle, like Stream: copies are the same graph, destroyed
// (cuGraphDestroy) when the last handle drops; every handle keeps the
// graph's context alive, and the graph keeps alive what its nodes use: the
// module of each kernel node, the events of event nodes, the child graphs,
// and (through driver user objects) each host node's callable. Adding nodes
// is not thread-safe, as in the driver: one thread builds a graph at a time.
class Graph {
 public:
  Graph() noexcept = default;
  Graph(const Graph&) noexcept = default;
  Graph& operator=(const Graph&) noexcept = default;
  // A moved-from Graph is empty, like a default-constructed one.
  Graph(Graph&& o) noexcept : state_(std::move(o.state_)), raw_(o.raw_) { o.raw_ = nullptr; }
  Graph& operator=(Graph&& o) noexcept {
    state_ = std::move(o.state_);
    CUgraph raw = o.raw_;
    o.raw_ = nullptr;
    raw_ = raw;
    return *this;
  }
  // An empty graph; `ctx` is the context its copies, fills and conditional
  // handles belong to.
  explicit Graph(const Context& ctx, SourceLocation where = SourceLocation::current());
  // A graph that other code owns; oxicuda never destroys it.
  [[nodiscard]] static Graph borrow(CUgraph raw, Context ctx);
  // Takes ownership of `raw` (destroyed with the last handle), e.g. a graph
  // from cuStreamEndCapture called directly.
  [[nodiscard]] static Graph adopt(CUgraph raw, Context ctx, SourceLocation where = SourceLocation::current());

  [[nodiscard]] CUgraph raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] const Context& context() const noexcept;
  // Whether the graph is destroyed when its last handle drops (false:
  // borrowed, or the body of a conditional node, which its node owns).
  [[nodiscard]] bool owns() const noexcept { return state_ && state_->owns && state_->raw == raw_; }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }
  friend bool operator==(const Graph& a, const Graph& b) noexcept { return a.raw_ == b.raw_; }

  // A copy of the graph (cuGraphClone): its own nodes, the same parameters;
  // it keeps alive what this graph's nodes use.
  [[nodiscard]] Graph clone(SourceLocation where = SourceLocation::current()) const;
  // The number of nodes (not counting those inside child graphs or bodies).
  [[nodiscard]] std::size_t node_count(SourceLocation where = SourceLocation::current()) const;
  // The nodes (cuGraphGetNodes; not those inside child graphs or bodies), in
  // the driver's order: for any graph, built node by node, captured, cloned
  // or borrowed. Their kinds, dependencies and dependents come from each
  // GraphNode.
  [[nodiscard]] GraphNodes nodes(SourceLocation where = SourceLocation::current()) const;
  // Whether this graph is the body of a conditional node (add_if,
  // add_while), where the driver allows only some node kinds (see add_if).
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
  // the nodes after this one. Free it with add_free in the graph (or after a
  // launch, with the instantiate option auto_free_on_launch to relaunch
  // while it is live).
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
  // kernel in the body sets it). Needs a CUDA 12.4 driver.
  // The driver's rule for a body: it may hold only kernel, empty, memset,
  // memcpy, child graph and conditional nodes, and so may a child graph in
  // it, at any depth. The driver accepts other nodes there and refuses the
  // whole graph at instantiation (CUDA_ERROR_INVALID_VALUE, naming no node);
  // oxicuda refuses them when they are added to a body: add_host,
  // add_event_record, add_event_wait, add_alloc and add_free, and add_child
  // of a graph holding such a node, raise an Error naming the rule.
  ConditionalNode add_if(Dependencies after, ConditionalHandle handle) const;
  ConditionalNode add_while(Dependencies after, ConditionalHandle handle) const;

  // The graph as Graphviz DOT (cuGraphDebugDotPrint), written to `path` or
  // returned. `flags`: ffi::CU_GRAPH_DEBUG_DOT_FLAGS_* (0: node kinds and
  // kernel names; ffi::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE: every parameter).
  // Render with `dot -Tsvg graph.dot -o graph.svg`.
  void write_dot(const std::string& path, unsigned flags = 0, SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] std::string dot(unsigned flags = 0, SourceLocation where = SourceLocation::current()) const;

 private:
  friend struct detail::GraphAccess;
  using State = detail::Shared<detail::GraphState>;
  Graph(CUgraph raw, State state) noexcept : state_(std::move(state)), raw_(raw) {}
  [[nodiscard]] CUgraph checked(const char* operation, SourceLocation where) const {
    return detail::checked(*this, "oxicuda::Graph", operation, where);
  }
  [[nodiscard]] GraphNode kernel_node(Dependencies& after, const Function& fn, const LaunchConfig& config,
                                      void** params) const;
  [[nodiscard]] GraphNode host_node(Dependencies& after, detail::HostCall* boxed) const;
  [[nodiscard]] GraphNode copy_node(Dependencies& after, const ffi::CUDA_MEMCPY3D& params, CUcontext ctx,
                                    const char* operation) const;
  [[nodiscard]] GraphNode memset_node(Dependencies& after, const ffi::CUDA_MEMSET_NODE_PARAMS& params,
                                      CUcontext ctx, const char* operation) const;
  [[nodiscard]] GraphNode event_node(Dependencies& after, const Event& event, bool record) const;
  [[nodiscard]] GraphNode alloc_node(Dependencies& after, std::size_t bytes, ffi::CUdeviceptr& out) const;
  [[nodiscard]] GraphNode free_node(Dependencies& after, ffi::CUdeviceptr ptr) const;
  [[nodiscard]] ConditionalNode conditional_node(Dependencies& after, ConditionalHandle handle,
                                                 ffi::CUgraphConditionalNodeType type, const char* operation) const;
  // Raises when this graph is a conditional body, which cannot hold a node of `kind`.
  void allowed_in_body(const char* kind, const char* operation, SourceLocation where) const;

  State state_;
  CUgraph raw_ = nullptr;
};

struct ConditionalNode {
  GraphNode node;
  Graph body;
};

namespace detail {

// What later parts (graph_exec.hpp) need of a Graph's state.
struct GraphAccess {
  static const KeepList* keep(const Graph& g) noexcept { return g.state_ ? &g.state_->keep : nullptr; }
  static KeepList* keep_mutable(const Graph& g) noexcept { return g.state_ ? &g.state_->keep : nullptr; }
};

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

// The kernel node parameters of a launch configuration (no clusters, no
// cooperative launch: those are launch attributes kernel nodes do not take here).
inline ffi::CUDA_KERNEL_NODE_PARAMS_v2 kernel_params(const Function& fn, const LaunchConfig& cfg, void** params,
                                                     const char* op, SourceLocation where) {
  CUfunction f = checked(fn, "oxicuda::Function", op, where);
  if ((cfg.cluster.x | cfg.cluster.y | cfg.cluster.z) != 0 || cfg.cooperative)
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, op,
                cat({"kernel '", fn.name(),
                     "': clusters and cooperative launches are not supported in graph kernel nodes by oxicuda; "
                     "capture such a launch into the graph instead (capture.hpp)"}),
                where));
  if (cfg.shared_bytes != 0) {
    // The kernel's own limit (the driver's default is 48 KiB less its static
    // shared memory), raised when the node asks for more, as a launch does.
    unsigned allowed = 0;
    const Outcome known = FunctionAccess::allowed(fn, allowed);
    if (!known.ok()) fail(known, where, cat({"reading kernel '", fn.name(), "''s dynamic shared memory limit"}));
    if (cfg.shared_bytes > allowed) {
      const Outcome raised = FunctionAccess::try_allow(fn, cfg.shared_bytes);
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
  p.ctx = fn.module().context().raw();
  return p;
}

}  // namespace detail

// --- Graph ----------------------------------------------------------------------

inline ffi::CUgraphNodeType GraphNode::type(SourceLocation where) const {
  ffi::CUgraphNodeType t = ffi::CU_GRAPH_NODE_TYPE_EMPTY;
  detail::check(OXICUDA_DRIVER(GraphNodeGetType, detail::checked(*this, "oxicuda::GraphNode", "oxicuda::GraphNode::type", where), &t),
                where);
  return t;
}

namespace detail {
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

inline GraphNodes GraphNode::dependencies(SourceLocation where) const {
  CUgraphNode n = detail::checked(*this, "oxicuda::GraphNode", "oxicuda::GraphNode::dependencies", where);
  return detail::list_nodes(n, [](CUgraphNode h, CUgraphNode* out, std::size_t* count) {
    return OXICUDA_DRIVER(GraphNodeGetDependencies, h, out, count);
  }, where);
}

inline GraphNodes GraphNode::dependents(SourceLocation where) const {
  CUgraphNode n = detail::checked(*this, "oxicuda::GraphNode", "oxicuda::GraphNode::dependents", where);
  return detail::list_nodes(n, [](CUgraphNode h, CUgraphNode* out, std::size_t* count) {
    return OXICUDA_DRIVER(GraphNodeGetDependentNodes, h, out, count);
  }, where);
}

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

inline const Context& Graph::context() const noexcept {
  static const Context none;
  return state_ ? state_->ctx : none;
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

namespace detail {
inline bool allowed_in_body(ffi::CUgraphNodeType t) noexcept {
  switch (t) {
    case ffi::CU_GRAPH_NODE_TYPE_KERNEL:
    case ffi::CU_GRAPH_NODE_TYPE_EMPTY:
    case ffi::CU_GRAPH_NODE_TYPE_MEMSET:
    case ffi::CU_GRAPH_NODE_TYPE_MEMCPY:
    case ffi::CU_GRAPH_NODE_TYPE_GRAPH:
    case ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL: return true;
    default: return false;
  }
}

inline std::string body_rule(std::string_view what) {
  return cat({"a conditional node's body may hold only kernel, empty, memset, memcpy, child graph and conditional "
              "nodes, and so may a child graph in it (the driver's rule: it would accept the node here and refuse "
              "the whole graph at instantiation with CUDA_ERROR_INVALID_VALUE); ",
              what,
              ". Put that work before or after the conditional node, in the graph that holds it"});
}

// The first node of `g`, or of a child graph in it at any depth, that a
// conditional body cannot hold (null when there is none). The bodies of
// conditional nodes in it were checked when their nodes were added.
inline CUgraphNode refused_in_body(CUgraph g, SourceLocation where, int depth = 0) {
  const GraphNodes all = list_nodes(g, [](CUgraph h, CUgraphNode* out, std::size_t* n) {
    return OXICUDA_DRIVER(GraphGetNodes, h, out, n);
  }, where);
  for (const GraphNode& node : all) {
    ffi::CUgraphNodeType t = ffi::CU_GRAPH_NODE_TYPE_EMPTY;
    check(OXICUDA_DRIVER(GraphNodeGetType, node.raw(), &t), where);
    if (!allowed_in_body(t)) return node.raw();
    if (t == ffi::CU_GRAPH_NODE_TYPE_GRAPH && depth < 64) {
      CUgraph child = nullptr;
      check(OXICUDA_DRIVER(GraphChildGraphNodeGetGraph, node.raw(), &child), where);
      if (CUgraphNode inner = refused_in_body(child, where, depth + 1)) return inner;
    }
  }
  return nullptr;
}
}  // namespace detail

inline void Graph::allowed_in_body(const char* kind, const char* operation, SourceLocation where) const {
  if (!is_conditional_body()) return;
  detail::raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                      detail::body_rule(detail::cat({"this graph is a conditional node's body, so a ", kind,
                                                     " node cannot be added to it"})),
                      where));
}

inline void Graph::depend(GraphNode from, GraphNode to, SourceLocation where) const {
  CUgraph g = checked("oxicuda::Graph::depend", where);
  const CUgraphNode f = from.raw(), t = to.raw();
  if (!f || !t) detail::empty_handle("oxicuda::GraphNode", "oxicuda::Graph::depend", where);
  detail::check(OXICUDA_DRIVER(GraphAddDependencies, g, &f, &t, std::size_t{1}), where);
}

inline GraphNode Graph::add_empty(Dependencies after) const {
  CUgraph g = checked("oxicuda::Graph::add_empty", after.where());
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddEmptyNode, &node, g, after.data(), after.size()), after.where());
  return GraphNode(node);
}

inline GraphNode Graph::kernel_node(Dependencies& after, const Function& fn, const LaunchConfig& config,
                                    void** params) const {
  constexpr const char* op = "oxicuda::Graph::add_kernel";
  CUgraph g = checked(op, after.where());
  const ffi::CUDA_KERNEL_NODE_PARAMS_v2 p = detail::kernel_params(fn, config, params, op, after.where());
  const ScopedCurrent current(fn.module().context(), after.where());  // (see kernel_params)
  detail::KeepList::Pending<Function> keep(state_->keep, fn);
  CUgraphNode node = nullptr;
  const detail::Outcome r = OXICUDA_DRIVER(GraphAddKernelNode, &node, g, after.data(), after.size(), &p);
  if (!r.ok()) detail::launch_failed(r, fn, config, after.where());
  keep.commit(node);
  return GraphNode(node);
}

// clang-format off
template <class... Params, class... Args>
  requires(sizeof...(Args) == sizeof...(Params) && (detail::passable_as<Params, Args&&> && ...))
GraphNode Graph::add_kernel(Dependencies after, const Kernel<void(Params...)>& kernel, const LaunchConfig& config,
                            Args&&... args) const {
  // clang-format on
  detail::check_arguments(kernel.function(), "oxicuda::Graph::add_kernel", after.where(), args...);
  detail::PackedArgs<Params...> packed(std::forward<Args>(args)...);
  return kernel_node(after, kernel.function(), config, packed.get());
}

template <class... Args>
GraphNode Graph::add_kernel(Dependencies after, const Function& fn, const LaunchConfig& config,
                            const Args&... args) const {
  static_assert((detail::untyped_argument_v<Args> && ...),
                "oxicuda::Graph::add_kernel (untyped Function): every argument is passed as its bytes, so it must "
                "be a trivially copyable value and not a DeviceBuffer or DeviceSpan (pass .data(), or use a "
                "Kernel<Sig>, which converts buffers to their pointer)");
  void* params[sizeof...(Args) > 0 ? sizeof...(Args) : 1] = {const_cast<void*>(static_cast<const void*>(&args))...};
  return kernel_node(after, fn, config, sizeof...(Args) > 0 ? params : nullptr);
}

inline GraphNode Graph::copy_node(Dependencies& after, const ffi::CUDA_MEMCPY3D& params, CUcontext ctx,
                                  const char* operation) const {
  CUgraph g = checked(operation, after.where());
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddMemcpyNode, &node, g, after.data(), after.size(), &params,
                               ctx ? ctx : state_->ctx.raw()),
                after.where());
  return GraphNode(node);
}

template <class Dst, class Src>
  requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
GraphNode Graph::add_copy(Dependencies after, Dst&& dst, Src&& src) const {
  constexpr const char* op = "oxicuda::Graph::add_copy";
  CUcontext ctx = nullptr;
  const ffi::CUDA_MEMCPY3D p = detail::memcpy_params(dst, src, op, after.where(), ctx);
  return copy_node(after, p, ctx, op);
}

inline GraphNode Graph::memset_node(Dependencies& after, const ffi::CUDA_MEMSET_NODE_PARAMS& params,
                                    CUcontext ctx, const char* operation) const {
  CUgraph g = checked(operation, after.where());
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddMemsetNode, &node, g, after.data(), after.size(), &params,
                               ctx ? ctx : state_->ctx.raw()),
                after.where());
  return GraphNode(node);
}

template <class Dst>
  requires detail::device_range<std::remove_cvref_t<Dst>>
GraphNode Graph::add_fill(Dependencies after, Dst&& dst,
                          detail::device_element_t<std::remove_cvref_t<Dst>> value) const {
  CUcontext ctx = nullptr;
  const ffi::CUDA_MEMSET_NODE_PARAMS p = detail::fill_params(dst, value, ctx);
  return memset_node(after, p, ctx, "oxicuda::Graph::add_fill");
}

template <class Dst>
  requires detail::device_range<std::remove_cvref_t<Dst>>
GraphNode Graph::add_fill_bytes(Dependencies after, Dst&& dst, unsigned char byte) const {
  CUcontext ctx = nullptr;
  const ffi::CUDA_MEMSET_NODE_PARAMS p = detail::memset_params(dst, byte, 1, ctx);
  return memset_node(after, p, ctx, "oxicuda::Graph::add_fill_bytes");
}

inline GraphNode Graph::host_node(Dependencies& after, detail::HostCall* boxed) const {
  // The graph owns the callable from here (destroyed through the user object, or now).
  CUuserObject object = nullptr;
  const detail::Outcome owned = detail::give_to_graph(raw_, boxed, &object);
  if (!owned.ok()) detail::fail(owned, after.where());
  state_->keep.add_user_object(nullptr, object);
  const ffi::CUDA_HOST_NODE_PARAMS p{&detail::run_host_call_many, boxed};
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddHostNode, &node, raw_, after.data(), after.size(), &p), after.where());
  return GraphNode(node);
}

template <class F>
GraphNode Graph::add_host(Dependencies after, F&& fn) const {
  (void)checked("oxicuda::Graph::add_host", after.where());
  allowed_in_body("host function", "oxicuda::Graph::add_host", after.where());
  return host_node(after, detail::box_host_call(std::forward<F>(fn), "oxicuda::Graph::add_host"));
}

inline GraphNode Graph::event_node(Dependencies& after, const Event& event, bool record) const {
  const char* op = record ? "oxicuda::Graph::add_event_record" : "oxicuda::Graph::add_event_wait";
  CUgraph g = checked(op, after.where());
  allowed_in_body(record ? "event record" : "event wait", op, after.where());
  CUevent e = detail::checked(event, "oxicuda::Event", op, after.where());
  detail::KeepList::Pending<Event> keep(state_->keep, event);
  CUgraphNode node = nullptr;
  if (record)
    detail::check(OXICUDA_DRIVER(GraphAddEventRecordNode, &node, g, after.data(), after.size(), e), after.where());
  else
    detail::check(OXICUDA_DRIVER(GraphAddEventWaitNode, &node, g, after.data(), after.size(), e), after.where());
  keep.commit(node);
  return GraphNode(node);
}

inline GraphNode Graph::add_event_record(Dependencies after, const Event& event) const {
  return event_node(after, event, true);
}
inline GraphNode Graph::add_event_wait(Dependencies after, const Event& event) const {
  return event_node(after, event, false);
}

inline GraphNode Graph::add_child(Dependencies after, const Graph& child) const {
  CUgraph g = checked("oxicuda::Graph::add_child", after.where());
  CUgraph c = child.checked("oxicuda::Graph::add_child", after.where());
  if (is_conditional_body())
    if (CUgraphNode refused = detail::refused_in_body(c, after.where()))
      detail::raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, "oxicuda::Graph::add_child",
                          detail::body_rule(detail::cat(
                              {"this graph is a conditional node's body, and the child graph holds ",
                               detail::describe_node(nullptr, refused, detail::GraphAccess::keep(child)),
                               ", directly or in a child graph of its own"})),
                          after.where()));
  detail::KeepList copies;
  copies.copy_from(child.state_->keep);  // the copy's nodes use what the child's use
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddChildGraphNode, &node, g, after.data(), after.size(), c), after.where());
  state_->keep.take_all(copies);
  detail::check(child.state_->keep.retain_user_objects(g), after.where());
  return GraphNode(node);
}

inline GraphNode Graph::alloc_node(Dependencies& after, std::size_t bytes, ffi::CUdeviceptr& out) const {
  constexpr const char* op = "oxicuda::Graph::add_alloc";
  CUgraph g = checked(op, after.where());
  allowed_in_body("mem alloc", op, after.where());
  const Device device = state_->ctx.device(after.where());
  ffi::CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = ffi::CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.handleTypes = ffi::CU_MEM_HANDLE_TYPE_NONE;
  p.poolProps.location = {ffi::CU_MEM_LOCATION_TYPE_DEVICE, device.raw()};
  p.bytesize = bytes;
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddMemAllocNode, &node, g, after.data(), after.size(), &p), after.where());
  out = p.dptr;
  return GraphNode(node);
}

template <class T>
GraphAllocation<T> Graph::add_alloc(Dependencies after, std::size_t count) const {
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::Graph::add_alloc", after.where());
  ffi::CUdeviceptr ptr = 0;
  const GraphNode node = alloc_node(after, bytes, ptr);
  return {node, DeviceSpan<T>(ptr, count, state_->ctx.raw())};
}

inline GraphNode Graph::free_node(Dependencies& after, ffi::CUdeviceptr ptr) const {
  CUgraph g = checked("oxicuda::Graph::add_free", after.where());
  allowed_in_body("mem free", "oxicuda::Graph::add_free", after.where());
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddMemFreeNode, &node, g, after.data(), after.size(), ptr), after.where());
  return GraphNode(node);
}

template <class T>
GraphNode Graph::add_free(Dependencies after, DeviceSpan<T> memory) const {
  return free_node(after, memory.device_ptr());
}

namespace detail {
// Conditional nodes need CUDA 12.4 (cuGraphConditionalHandleCreate is
// 12.3, but if/while nodes made through cuGraphAddNode are 12.4's).
inline void need_conditionals(const char* operation, SourceLocation where) {
  const int v = driver_version(where);
  if (v < 12040)
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                cat({"conditional nodes need a CUDA 12.4 driver or newer; the loaded driver is CUDA ",
                     std::to_string(v / 1000), ".", std::to_string(v % 1000 / 10)}),
                where));
}
}  // namespace detail

inline ConditionalHandle Graph::conditional_handle(unsigned default_value, bool assign_default,
                                                   SourceLocation where) const {
  constexpr const char* op = "oxicuda::Graph::conditional_handle";
  CUgraph g = checked(op, where);
  detail::need_conditionals(op, where);
  ConditionalHandle h;
  detail::check(OXICUDA_DRIVER(GraphConditionalHandleCreate, &h.value, g, state_->ctx.raw(), default_value,
                               assign_default ? ffi::graph_cond_assign_default : 0u),
                where);
  return h;
}

inline ConditionalNode Graph::conditional_node(Dependencies& after, ConditionalHandle handle,
                                               ffi::CUgraphConditionalNodeType type, const char* operation) const {
  CUgraph g = checked(operation, after.where());
  detail::need_conditionals(operation, after.where());
  ffi::CUgraphNodeParams p{};
  p.type = ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = handle.value;
  p.conditional.type = type;
  p.conditional.size = 1;
  p.conditional.ctx = state_->ctx.raw();
  // Made current as for kernel nodes (kernel_params), whose bodies hold them.
  const ScopedCurrent current(state_->ctx, after.where());
  CUgraphNode node = nullptr;
  detail::check(OXICUDA_DRIVER(GraphAddNode, &node, g, after.data(), after.size(), &p), after.where());
  // The driver points phGraph_out at its own array of the node's bodies.
  CUgraph body = p.conditional.phGraph_out ? p.conditional.phGraph_out[0] : nullptr;
  if (!body)
    detail::raise(Error(ffi::CUDA_ERROR_UNKNOWN, operation, "the driver gave the conditional node no body graph",
                        after.where()));
  // The body belongs to the node: a handle that shares this graph's state
  // (what its nodes keep alive is kept by this graph) and never destroys it.
  return {GraphNode(node), Graph(body, state_)};
}

inline ConditionalNode Graph::add_if(Dependencies after, ConditionalHandle handle) const {
  return conditional_node(after, handle, ffi::CU_GRAPH_COND_TYPE_IF, "oxicuda::Graph::add_if");
}
inline ConditionalNode Graph::add_while(Dependencies after, ConditionalHandle handle) const {
  return conditional_node(after, handle, ffi::CU_GRAPH_COND_TYPE_WHILE, "oxicuda::Graph::add_while");
}

inline void Graph::write_dot(const std::string& path, unsigned flags, SourceLocation where) const {
  CUgraph g = checked("oxicuda::Graph::write_dot", where);
  const detail::Outcome r = OXICUDA_DRIVER(GraphDebugDotPrint, g, path.c_str(), flags);
  if (!r.ok()) detail::fail(r, where, detail::cat({"writing the graph's DOT to '", path, "'"}));
}

namespace detail {
// A file name for a temporary file, made and closed (empty when none could be).
inline std::string temporary_file() {
#if defined(_WIN32)
  char dir[MAX_PATH + 1] = {}, name[MAX_PATH + 1] = {};
  if (!::GetTempPathA(MAX_PATH, dir) || !::GetTempFileNameA(dir, "oxi", 0, name)) return {};
  return name;
#else
  const char* tmp = std::getenv("TMPDIR");
  std::string name = cat({tmp && *tmp ? tmp : "/tmp", "/oxicuda-graph-XXXXXX"});
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return {};
  ::close(fd);
  return name;
#endif
}

inline std::string read_file(const std::string& path) {
  std::string text;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(static_cast<const char*>(buf), n);
    std::fclose(f);
  }
  return text;
}
}  // namespace detail

inline std::string Graph::dot(unsigned flags, SourceLocation where) const {
  (void)checked("oxicuda::Graph::dot", where);
  const std::string path = detail::temporary_file();
  if (path.empty())
    detail::raise(Error(ffi::CUDA_ERROR_OPERATING_SYSTEM, "oxicuda::Graph::dot",
                        "no temporary file could be made for the driver to write the DOT into", where));
  struct Remove {
    const std::string& path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};
  write_dot(path, flags, where);
  return detail::read_file(path);
}

namespace detail {

inline const char* node_type_name(ffi::CUgraphNodeType t) noexcept {
  switch (t) {
    case ffi::CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case ffi::CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case ffi::CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case ffi::CU_GRAPH_NODE_TYPE_HOST: return "host function";
    case ffi::CU_GRAPH_NODE_TYPE_GRAPH: return "child graph";
    case ffi::CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    case ffi::CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    case ffi::CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case ffi::CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "mem alloc";
    case ffi::CU_GRAPH_NODE_TYPE_MEM_FREE: return "mem free";
    case ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "other";
  }
}

// "node 3 of 7 (kernel 'saxpy')": where a node is in its graph and what it
// is, as far as the driver (and the graph's own records) can tell. Never
// throws for a driver failure: it is a part of another error's text.
inline std::string describe_node(CUgraph graph, CUgraphNode node, const KeepList* keep) {
  if (!node) return "no node named by the driver";
  ffi::CUgraphNodeType type = ffi::CU_GRAPH_NODE_TYPE_EMPTY;
  const bool typed = OXICUDA_DRIVER(GraphNodeGetType, node, &type).ok();
  std::string what = typed ? node_type_name(type) : "of unknown kind";
  if (keep && !keep->kernel_name(node).empty()) what = cat({what, " '", keep->kernel_name(node), "'"});
  std::size_t n = 0;
  std::string at;
  if (graph && OXICUDA_DRIVER(GraphGetNodes, graph, nullptr, &n).ok() && n > 0) {
    const NodeArray all(n);
    if (OXICUDA_DRIVER(GraphGetNodes, graph, all.get(), &n).ok())
      for (std::size_t i = 0; i < n; ++i)
        if (all.get()[i] == node) at = cat({"node ", std::to_string(i), " of ", std::to_string(n), " "});
  }
  return cat({at.empty() ? "a node " : at, "(", what, ")"});
}

}  // namespace detail

OXICUDA_NAMESPACE_END
