// oxicuda/graph/capture_info.hpp — a capture while it runs: its state (status,
// id, the graph it captures into, the nodes the next captured work will
// depend on and their edge data: cuStreamGetCaptureInfo), and changing those
// dependencies (cuStreamUpdateCaptureDependencies), so that code can add
// nodes to the graph by hand in the middle of a capture and go on capturing
// after them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "capture.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A stream's capture, as cuStreamGetCaptureInfo tells it.
struct CaptureInfo {
  CaptureStatus status = CaptureStatus::none;
  // Unique to the capture in this process (0 when the stream is not
  // capturing); the same for every query within one capture.
  std::uint64_t id = 0;
  // The graph being captured into: the Graph given to begin_capture_to (the
  // same handle, so what nodes added through it use is kept alive with it),
  // or the capture's own graph, borrowed (end_capture gives it an owner;
  // a kernel node added through this handle does not keep its module alive:
  // keep it alive while the graph can run, as for captured launches).
  // Nodes may be added to it while it is captured into; it may not be
  // destroyed, nor nodes removed, before the capture ends.
  Graph graph;
  // The nodes the next work captured on the stream will depend on (none
  // before the first, unless begin_capture_to started after some), and the
  // edge data of each (all default unless given).
  std::vector<GraphNode> dependencies;
  std::vector<EdgeData> edges;
};

// How update_capture_dependencies changes a capturing stream's dependencies.
enum class CaptureDependencies : unsigned {
  add = ffi::CU_STREAM_ADD_CAPTURE_DEPENDENCIES,  // the nodes join those there are
  set = ffi::CU_STREAM_SET_CAPTURE_DEPENDENCIES,  // the nodes replace them
};

// The capture on `stream` (one cuStreamGetCaptureInfo). Not capturing:
// status none and nothing else; invalidated: the status alone (the driver
// tells nothing more).
[[nodiscard]] CaptureInfo capture_info(const Stream& stream, SourceLocation where = SourceLocation::current());

// Changes the nodes the next work captured on `stream` depends on
// (cuStreamUpdateCaptureDependencies, a CUDA 12.3 driver): adds `nodes` to
// them, or sets them to `nodes` (`{}`: none, so the next captured node is a
// root), with the edge data `edges[i]` on the edge from `nodes[i]` when
// given. The way to add a node by hand in the middle of a capture:
//   CaptureInfo info = capture_info(stream);
//   GraphNode mine = info.graph.add_host(info.dependencies, [] { ... });
//   update_capture_dependencies(stream, mine, CaptureDependencies::set);
// Nodes taken out of the dependencies this way do not make ending the
// capture fail as unjoined. Bad input is an Error before the driver is
// called: an empty stream, a stream that is not capturing (or whose capture
// was invalidated), a node that is empty, repeated or not a node of the
// graph being captured into, `edges` not one per node.
void update_capture_dependencies(const Stream& stream, Dependencies nodes, CaptureDependencies mode,
                                 SourceLocation where = SourceLocation::current());
void update_capture_dependencies(const Stream& stream, Dependencies nodes, std::span<const EdgeData> edges,
                                 CaptureDependencies mode, SourceLocation where = SourceLocation::current());

namespace detail {

// One cuStreamGetCaptureInfo on `q` (made by on_stream): the status, and
// when active, the rest.
inline CaptureInfo capture_info(const Stream& stream, CUstream q, SourceLocation where) {
  ffi::CUstreamCaptureStatus status = ffi::CU_STREAM_CAPTURE_STATUS_NONE;
  ffi::cuuint64_t id = 0;
  CUgraph graph = nullptr;
  const CUgraphNode* deps = nullptr;
  const ffi::CUgraphEdgeData* edges = nullptr;
  std::size_t n = 0;
  check(OXICUDA_DRIVER(StreamGetCaptureInfo, q, &status, &id, &graph, &deps, &edges, &n), where);
  CaptureInfo info;
  info.status = static_cast<CaptureStatus>(status);
  if (status != ffi::CU_STREAM_CAPTURE_STATUS_ACTIVE) return info;
  info.id = id;
  info.dependencies.reserve(n);
  info.edges.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    info.dependencies.emplace_back(deps[i]);
    info.edges.push_back(edges ? edge_from_driver(edges[i]) : EdgeData{});  // (no array: all default)
  }
  info.graph = find_capture_into(capture_key(q, stream.context()));
  if (info.graph.raw() != graph) info.graph = Graph::borrow(graph, stream.context());
  return info;
}

inline void update_capture_dependencies(const Stream& stream, Dependencies& nodes, std::span<const EdgeData> edges,
                                        CaptureDependencies mode, SourceLocation where) {
  constexpr const char* op = "oxicuda::update_capture_dependencies";
  on_stream(stream, op, where, [&](CUstream q) {
    const CaptureInfo info = capture_info(stream, q, where);
    if (info.status == CaptureStatus::none)
      raise(Error(ffi::CUDA_ERROR_ILLEGAL_STATE, op,
                  "the stream is not capturing: its capture dependencies exist only between begin_capture (or "
                  "begin_capture_to) and end_capture",
                  where));
    if (info.status == CaptureStatus::invalidated)
      raise(Error(ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, op,
                  "the stream's capture was invalidated (by a call not permitted while it captures): end it, which "
                  "fails and makes no graph, and capture again",
                  where));
    check_nodes_of(info.graph.raw(), nodes, edges, "the graph being captured into", op, where);
    const std::vector<ffi::CUgraphEdgeData> data = edges_to_driver(edges);
    check(OXICUDA_DRIVER(StreamUpdateCaptureDependencies, q, nodes.data(), data.empty() ? nullptr : data.data(),
                         nodes.size(), static_cast<unsigned>(mode)),
          where);
  });
}

}  // namespace detail

inline CaptureInfo capture_info(const Stream& stream, SourceLocation where) {
  return detail::on_stream(stream, "oxicuda::capture_info", where,
                           [&](CUstream q) { return detail::capture_info(stream, q, where); });
}

inline void update_capture_dependencies(const Stream& stream, Dependencies nodes, CaptureDependencies mode,
                                        SourceLocation where) {
  detail::update_capture_dependencies(stream, nodes, {}, mode, where);
}

inline void update_capture_dependencies(const Stream& stream, Dependencies nodes, std::span<const EdgeData> edges,
                                        CaptureDependencies mode, SourceLocation where) {
  detail::update_capture_dependencies(stream, nodes, edges, mode, where);
}

OXICUDA_DETAIL_NAMESPACE_END
