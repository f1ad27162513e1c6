// oxicuda/graph/capture_into.hpp — what capturing into a graph of the
// caller's needs (begin_capture_to in capture.hpp): the list of such
// captures not ended yet, each holding the caller's Graph, so that ending
// one gives that Graph back (never a second owner of its CUgraph) and the
// graph outlives the capture; the check that nodes belong to a graph; and
// the begin itself.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// What a capture is known by: its stream, and for the per-thread default
// stream (another stream on each thread and in each context) the thread
// and the context.
struct CaptureKey {
  CUstream stream = nullptr;
  const void* thread = nullptr;
  CUcontext ctx = nullptr;
  friend bool operator==(const CaptureKey&, const CaptureKey&) = default;
};

inline const void* this_thread_tag() noexcept {
  static thread_local const char tag = 0;
  return &tag;
}

inline CaptureKey capture_key(CUstream q, const Context& ctx) noexcept {
  if (q == ffi::stream_per_thread()) return {q, this_thread_tag(), ctx.raw()};
  return {q, nullptr, nullptr};
}

// The captures into a graph of the caller's that have not ended. A spin
// lock, as destroyed_contexts (no <mutex> in the header); never destroyed
// (an entry may outlive static destructors).
struct CaptureInto {
  CaptureKey key;
  std::uint64_t ticket;
  Graph graph;
};
struct CapturesInto {
  std::atomic_flag lock;  // clear (C++20)
  std::uint64_t next = 1;
  std::vector<CaptureInto> list;
};
inline CapturesInto& captures_into() noexcept {
  static CapturesInto* c = new CapturesInto;
  return *c;
}

// A stream destroyed while it captured into a graph ended that capture:
// its entry goes (detail::stream_destroyed_hook).
inline void stream_destroyed(CUstream q) noexcept;

// Holds `graph` for a capture about to begin on `key` (before the driver
// call: this is what can fail); its ticket.
inline std::uint64_t hold_capture_into(CaptureKey key, const Graph& graph) {
  stream_destroyed_hook.store(&stream_destroyed, std::memory_order_release);
  CapturesInto& c = captures_into();
  const SpinGuard lock(c.lock);
  c.list.push_back({key, c.next, graph});
  return c.next++;
}

// Takes off the list the first entry that `match(entry)` selects: its
// Graph, or an empty one when none matched (an entry's Graph is never
// empty). Nothing allocates; the caller drops it outside the lock (the
// last Graph handle destroys its graph).
template <class Match>
Graph take_capture_into_if(Match match) noexcept {
  Graph out;
  CapturesInto& c = captures_into();
  const SpinGuard lock(c.lock);
  for (auto it = c.list.begin(); it != c.list.end(); ++it)
    if (match(*it)) {
      out = std::move(it->graph);
      c.list.erase(it);
      break;
    }
  return out;
}

// A capture on `key` began (`ticket`: the entry of a capture into a graph;
// 0 for a new graph): any other entry of `key` is stale (its stream was
// destroyed while it captured, or the capture was ended by a direct driver
// call), and is forgotten.
inline void began_capture(CaptureKey key, std::uint64_t ticket) noexcept {
  while (take_capture_into_if([&](const CaptureInto& e) { return e.key == key && e.ticket != ticket; })) {
  }
}

inline void stream_destroyed(CUstream q) noexcept {
  while (take_capture_into_if([&](const CaptureInto& e) { return e.key.stream == q; })) {
  }
}

// The entry of a capture that did not begin.
inline void forget_capture_into(std::uint64_t ticket) noexcept {
  (void)take_capture_into_if([&](const CaptureInto& e) { return e.ticket == ticket; });
}

// The Graph captured into on `key`, taken off the list (the capture is
// over); empty when the capture on `key` made its own graph.
inline Graph take_capture_into(CaptureKey key) noexcept {
  return take_capture_into_if([&](const CaptureInto& e) { return e.key == key; });
}

// The Graph captured into on `key` (a copy), or empty.
inline Graph find_capture_into(CaptureKey key) noexcept {
  CapturesInto& c = captures_into();
  const SpinGuard lock(c.lock);
  for (const CaptureInto& e : c.list)
    if (e.key == key) return e.graph;
  return {};
}

inline bool capturing_into(CaptureKey key) noexcept { return static_cast<bool>(find_capture_into(key)); }

// Whether a capture (begun by oxicuda) is capturing into `g`.
inline bool captured_into(CUgraph g) noexcept {
  CapturesInto& c = captures_into();
  const SpinGuard lock(c.lock);
  for (const CaptureInto& e : c.list)
    if (e.graph.raw() == g) return true;
  return false;
}

// Checks `nodes` against the nodes of `g` (listed once): each one set, none
// twice, each a node of `g` (`whose`: how errors name that graph), and
// `edges` empty or one per node.
inline void check_nodes_of(CUgraph g, Dependencies& nodes, std::span<const EdgeData> edges, const char* whose,
                           const char* operation, SourceLocation where) {
  const std::size_t n = nodes.size();
  if (!edges.empty() && edges.size() != n)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                cat({std::to_string(edges.size()), " edge data for ", std::to_string(n),
                     " dependencies: give one per dependency (the edge from dependency i carries edges[i]), or none"}),
                where));
  if (n == 0) return;
  const CUgraphNode* raw = nodes.data();
  for (std::size_t i = 0; i < n; ++i) {
    if (!raw[i]) empty_handle(graph_handle_name<CUgraphNode>(), operation, where);
    for (std::size_t j = 0; j < i; ++j)
      if (raw[j] == raw[i])
        raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                    cat({"dependency ", std::to_string(i), " repeats dependency ", std::to_string(j),
                         ": name each node once"}),
                    where));
  }
  const GraphNodes all = list_nodes(g, [](CUgraph h, CUgraphNode* out, std::size_t* count) {
    return OXICUDA_DRIVER(GraphGetNodes, h, out, count);
  }, where);
  for (std::size_t i = 0; i < n; ++i)
    if (!all.contains(GraphNode(raw[i])))
      raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                  cat({"dependency ", std::to_string(i), " is not a node of ", whose,
                       " (a node of another graph, or of a child graph or body inside it)"}),
                  where));
}

// The driver's edge data for `edges` (none when empty).
inline std::vector<ffi::CUgraphEdgeData> edges_to_driver(std::span<const EdgeData> edges) {
  std::vector<ffi::CUgraphEdgeData> out;
  out.reserve(edges.size());
  for (const EdgeData& e : edges) out.push_back(edge_to_driver(e));
  return out;
}

// A refused begin of a capture on `q`: why.
[[noreturn]] inline void begin_failed(const Outcome& r, CUstream q, SourceLocation where) {
  const bool legacy = reinterpret_cast<std::uintptr_t>(q) <= 1;  // null or CU_STREAM_LEGACY
  fail(r, where,
       legacy ? "the legacy default stream cannot be captured: capture a Stream of your own (or the per-thread "
                "default stream)"
       : r.result == ffi::CUDA_ERROR_ILLEGAL_STATE ? "the stream is capturing already"
                                                   : "");
}

// begin_capture_to, and ScopedCapture's constructor that captures into a graph.
inline void begin_capture_to(const Stream& stream, const Graph& graph, Dependencies& after,
                             std::span<const EdgeData> edges, ffi::CUstreamCaptureMode mode, const char* operation,
                             SourceLocation where) {
  on_stream(stream, operation, where, [&](CUstream q) {
    CUgraph g = checked(graph, operation, where);
    const Context& sc = stream.context();
    if (sc && graph.context() && sc != graph.context())
      raise(Error(ffi::CUDA_ERROR_INVALID_CONTEXT, operation,
                  "the graph belongs to another context than the stream: capture into a graph made in the "
                  "stream's context",
                  where));
    if (captured_into(g))
      raise(Error(ffi::CUDA_ERROR_ILLEGAL_STATE, operation,
                  "another capture is capturing into this graph: end it first (one capture into a graph at a time)",
                  where));
    check_nodes_of(g, after, edges, "the graph to capture into", operation, where);
    const std::vector<ffi::CUgraphEdgeData> data = edges_to_driver(edges);
    const CaptureKey key = capture_key(q, sc);
    const std::uint64_t ticket = hold_capture_into(key, graph);
    const Outcome r = OXICUDA_DRIVER(StreamBeginCaptureToGraph, q, g, after.data(),
                                     data.empty() ? nullptr : data.data(), after.size(), mode);
    if (!r.ok()) {
      forget_capture_into(ticket);
      begin_failed(r, q, where);
    }
    began_capture(key, ticket);
  });
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
