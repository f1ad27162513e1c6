// oxicuda/graph/keep.hpp — the keep list: what a graph (or an exec) keeps
// alive for its nodes (a kernel's Function, an Event, a child Graph, a host
// callable's user object), held in two steps around the driver call that
// adds or changes a node, so that a node never uses what nobody holds; and
// the state of a graph or exec that owns the list with the driver's handle,
// and the handle boilerplate Graph and GraphExec share.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "node.hpp"
#include "../kernel/function.hpp"
#include "../driver/callback.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

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

struct GraphAccess;

// What Graph and GraphExec have in common, written once: the driver's
// handle (a CUgraph, or a CUgraphExec), the state its copies share, and
// what every handle has (raw(), the emptiness test, the context, the count
// of handles), and checked(). Copies share the state; a moved-from handle
// is empty, like a default-constructed one. `Self`: Graph or GraphExec.
template <class Raw, class Self>
class GraphHandle {
 public:
  friend struct GraphAccess;
  [[nodiscard]] Raw raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] const Context& context() const noexcept {
    static const Context none;
    return state_ ? state_->ctx : none;
  }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }

 protected:
  using State = Shared<GraphState>;
  GraphHandle() noexcept = default;
  GraphHandle(Raw raw, State state) noexcept : state_(std::move(state)), raw_(raw) {}
  GraphHandle(const GraphHandle&) noexcept = default;
  GraphHandle& operator=(const GraphHandle&) noexcept = default;
  GraphHandle(GraphHandle&& o) noexcept : state_(std::move(o.state_)), raw_(std::exchange(o.raw_, nullptr)) {}
  GraphHandle& operator=(GraphHandle&& o) noexcept {
    state_ = std::move(o.state_);
    raw_ = std::exchange(o.raw_, nullptr);
    return *this;
  }
  ~GraphHandle() = default;
  // The raw handle, or the Error naming the empty handle and `operation`.
  [[nodiscard]] Raw checked(const char* operation, SourceLocation where) const {
    return detail::checked(static_cast<const Self&>(*this), operation, where);
  }

  State state_;
  Raw raw_ = nullptr;
};

// What other parts need of a handle's state: graph_exec.hpp names a
// Graph's nodes (by the kernels its keep list holds).
struct GraphAccess {
  template <class H>
  static const KeepList* keep(const H& h) noexcept {
    return h.state_ ? &h.state_->keep : nullptr;
  }
  // The driver destroyed the graph (a capture into it failed): no handle
  // destroys it again.
  template <class H>
  static void lost(const H& h) noexcept {
    if (h.state_) h.state_->owns = false;
  }
};

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
