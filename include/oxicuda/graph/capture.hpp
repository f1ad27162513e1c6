// oxicuda/graph/capture.hpp — stream capture: the work enqueued on a stream (and
// on the streams that join it through events) recorded into a Graph instead
// of run, into a new graph or into one of the caller's after given nodes
// (begin_capture_to), and a scoped form that never leaves a stream
// capturing. GraphedStep (graphed_step.hpp) builds on it; capture_info.hpp
// reads and changes a capture while it runs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "capture_into.hpp"
#include "graph_exec.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Which calls of other code a capture forbids (cuStreamBeginCapture's mode).
enum class CaptureMode {
  // Calls that could synchronize with the captured work (cuMemAlloc,
  // cuCtxSynchronize, a synchronous copy...) are refused on every thread
  // while the capture runs (CU_STREAM_CAPTURE_MODE_GLOBAL).
  global = ffi::CU_STREAM_CAPTURE_MODE_GLOBAL,
  // ... only on the thread that began the capture (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).
  per_thread = ffi::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
  // ... nowhere: such calls are allowed, at the caller's risk (CU_STREAM_CAPTURE_MODE_RELAXED).
  relaxed = ffi::CU_STREAM_CAPTURE_MODE_RELAXED,
};

enum class CaptureStatus {
  none = ffi::CU_STREAM_CAPTURE_STATUS_NONE,            // not capturing
  active = ffi::CU_STREAM_CAPTURE_STATUS_ACTIVE,        // capturing
  invalidated = ffi::CU_STREAM_CAPTURE_STATUS_INVALIDATED,  // capturing, but the capture can only fail now
};

// Whether `stream` is capturing (cuStreamIsCapturing).
[[nodiscard]] CaptureStatus capture_status(const Stream& stream, SourceLocation where = SourceLocation::current());

// Begins capturing the work enqueued on `stream` (cuStreamBeginCapture): it
// is recorded, not run, until end_capture. Prefer ScopedCapture or capture().
void begin_capture(const Stream& stream, CaptureMode mode = CaptureMode::global,
                   SourceLocation where = SourceLocation::current());
// Begins capturing the work enqueued on `stream` into `graph`, a graph of
// yours, which may hold nodes already (cuStreamBeginCaptureToGraph, a CUDA
// 12.3 driver): the captured work becomes nodes of `graph`, the first of
// them after `after` (nodes of `graph`; `{}`: the first are roots), each
// edge from `after[i]` carrying `edges[i]` when given. end_capture (or
// ScopedCapture::end) returns `graph` itself: the same Graph, sharing its
// copies' state, never a second owner of the driver's graph (the driver
// gives the same CUgraph back from cuStreamEndCapture). Until the capture
// ends, oxicuda holds a copy of `graph`, so dropping yours cannot destroy it
// mid-capture (the driver forbids that). A capture that fails (invalidated,
// unjoined) leaves `graph` yours, with the nodes it had and any captured
// before the failure. `graph` may be a conditional node's body: captured
// work there must be of the kinds a body allows (see Graph::add_if), which
// the driver checks only at instantiation. Bad input is an Error before the
// driver is called: an empty stream or graph, a graph of another context
// than the stream's, a node of `after` that is empty, repeated or not a node
// of `graph`, `edges` not one per node of `after`.
void begin_capture_to(const Stream& stream, const Graph& graph, Dependencies after,
                      CaptureMode mode = CaptureMode::global, SourceLocation where = SourceLocation::current());
void begin_capture_to(const Stream& stream, const Graph& graph, Dependencies after, std::span<const EdgeData> edges,
                      CaptureMode mode = CaptureMode::global, SourceLocation where = SourceLocation::current());
// Ends the capture begun on `stream` and returns the graph of its work
// (cuStreamEndCapture): a new graph, or the one begin_capture_to captured
// into. A capture the driver invalidated, one with a stream that joined it
// and was not joined back, or one ended on the wrong stream or thread is an
// Error saying what happened and what to do.
[[nodiscard]] Graph end_capture(const Stream& stream, SourceLocation where = SourceLocation::current());

// A capture that cannot outlive its scope: begun by the constructor; end()
// returns the graph; if the scope is left without end() (an exception
// unwinding), the destructor ends the capture and discards what was
// captured, so the stream is never left capturing.
//   ScopedCapture capture{stream};
//   launch(stream, kernel, cfg, args...);
//   Graph graph = capture.end();
// Given a graph (and the nodes to start after), it captures into that graph
// (begin_capture_to); end() returns it, and an abandoned capture leaves it
// to its owner, with what was captured into it.
class ScopedCapture {
 public:
  explicit ScopedCapture(const Stream& stream, CaptureMode mode = CaptureMode::global,
                         SourceLocation where = SourceLocation::current());
  ScopedCapture(const Stream& stream, const Graph& graph, Dependencies after, CaptureMode mode = CaptureMode::global,
                SourceLocation where = SourceLocation::current());
  ScopedCapture(const Stream& stream, const Graph& graph, Dependencies after, std::span<const EdgeData> edges,
                CaptureMode mode = CaptureMode::global, SourceLocation where = SourceLocation::current());
  ScopedCapture(const ScopedCapture&) = delete;
  ScopedCapture& operator=(const ScopedCapture&) = delete;
  ~ScopedCapture();
  // Ends the capture (as end_capture). Once only; the capture is over
  // after it, even when it raises.
  [[nodiscard]] Graph end(SourceLocation where = SourceLocation::current());

 private:
  Stream stream_;
  bool active_ = false;
};

// The graph of the work that `enqueue(stream)` (or `enqueue()`) puts on
// `stream`, captured in a ScopedCapture.
template <class F>
[[nodiscard]] Graph capture(const Stream& stream, F&& enqueue, CaptureMode mode = CaptureMode::global,
                            SourceLocation where = SourceLocation::current()) {
  ScopedCapture scope(stream, mode, where);
  if constexpr (std::is_invocable_v<F&, const Stream&>)
    enqueue(stream);
  else
    enqueue();
  return scope.end(where);
}

namespace detail {

inline std::string capture_end_reason(ffi::CUresult r) {
  switch (r) {
    case ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
      return "the capture was invalidated before it ended, so no graph was made: during the capture a call was "
             "made that is not permitted while a stream captures (a synchronize or query of the capturing "
             "stream, a synchronous copy, fill or allocation in global mode, work on the legacy default stream "
             "while a blocking stream captured), and failed with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED or "
             "_IMPLICIT, or an enqueue into the capture failed. Capture again without that call (or with "
             "CaptureMode::relaxed for calls that are only unsafe)";
    case ffi::CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
      return "a stream joined the capture (it waited on an event recorded in it) and was not joined back, so no "
             "graph was made: record an event on that stream after its last captured work, and make the "
             "capturing stream wait on it before ending the capture";
    case ffi::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
      return "this stream did not begin the capture it is in (it joined a capture begun on another stream): end "
             "the capture on the stream that began it";
    case ffi::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return "the capture began on another thread (in global or per-thread mode a capture ends on the thread "
             "that began it); end it there, or capture with CaptureMode::relaxed";
    case ffi::CUDA_ERROR_ILLEGAL_STATE:
      return "the stream is not capturing (no capture was begun on it, or it has ended)";
    default:
      return {};
  }
}

}  // namespace detail

inline CaptureStatus capture_status(const Stream& stream, SourceLocation where) {
  ffi::CUstreamCaptureStatus s = ffi::CU_STREAM_CAPTURE_STATUS_NONE;
  detail::on_stream(stream, "oxicuda::capture_status", where, [&](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamIsCapturing, q, &s), where);
  });
  return static_cast<CaptureStatus>(s);
}

inline void begin_capture(const Stream& stream, CaptureMode mode, SourceLocation where) {
  detail::on_stream(stream, "oxicuda::begin_capture", where, [&](CUstream q) {
    const detail::Outcome r = OXICUDA_DRIVER(StreamBeginCapture, q, static_cast<ffi::CUstreamCaptureMode>(mode));
    if (!r.ok()) detail::begin_failed(r, q, where);
    detail::began_capture(detail::capture_key(q, stream.context()), 0);  // (a stale capture into a graph is forgotten)
  });
}

inline void begin_capture_to(const Stream& stream, const Graph& graph, Dependencies after, CaptureMode mode,
                             SourceLocation where) {
  detail::begin_capture_to(stream, graph, after, {}, static_cast<ffi::CUstreamCaptureMode>(mode),
                           "oxicuda::begin_capture_to", where);
}

inline void begin_capture_to(const Stream& stream, const Graph& graph, Dependencies after,
                             std::span<const EdgeData> edges, CaptureMode mode, SourceLocation where) {
  detail::begin_capture_to(stream, graph, after, edges, static_cast<ffi::CUstreamCaptureMode>(mode),
                           "oxicuda::begin_capture_to", where);
}

namespace detail {
// Ends the capture on `stream`: the graph, or an Error saying why not.
// `over` tells whether the capture is over (ended, or ended by the driver
// as invalidated or unjoined), which a failure from the wrong thread, say,
// is not.
// A capture into a graph of the caller's (begin_capture_to) gives back that
// Graph, never destroyed here.
inline Graph end_capture(const Stream& stream, const char* operation, bool& over, SourceLocation where) {
  CUgraph raw = nullptr;
  Graph into;
  on_stream(stream, operation, where, [&](CUstream q) {
    const Outcome r = OXICUDA_DRIVER(StreamEndCapture, q, &raw);
    over = r.ok() || r.result == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
           r.result == ffi::CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    const CaptureKey key = capture_key(q, stream.context());
    if (over) into = take_capture_into(key);
    if (!r.ok()) {
      if (raw && !into && !capturing_into(key)) destroy_graph(raw);
      if (into) {
        GraphAccess::lost(into);
        fail(r, where,
             cat({capture_end_reason(r.result),
                  ". The capture was into a graph of yours: the driver destroyed that graph with the failed capture "
                  "(driver 580), so its Graph handles name a graph that is gone; build it again"}));
      }
      fail(r, where, capture_end_reason(r.result));
    }
  });
  if (into && (!raw || raw == into.raw())) return into;
  return Graph::adopt(raw, stream.context(), where);
}
}  // namespace detail

inline Graph end_capture(const Stream& stream, SourceLocation where) {
  bool over = false;
  return detail::end_capture(stream, "oxicuda::end_capture", over, where);
}

inline ScopedCapture::ScopedCapture(const Stream& stream, CaptureMode mode, SourceLocation where) : stream_(stream) {
  begin_capture(stream_, mode, where);
  active_ = true;
}

inline ScopedCapture::ScopedCapture(const Stream& stream, const Graph& graph, Dependencies after, CaptureMode mode,
                                    SourceLocation where)
    : stream_(stream) {
  detail::begin_capture_to(stream_, graph, after, {}, static_cast<ffi::CUstreamCaptureMode>(mode),
                           "oxicuda::ScopedCapture::ScopedCapture", where);
  active_ = true;
}

inline ScopedCapture::ScopedCapture(const Stream& stream, const Graph& graph, Dependencies after,
                                    std::span<const EdgeData> edges, CaptureMode mode, SourceLocation where)
    : stream_(stream) {
  detail::begin_capture_to(stream_, graph, after, edges, static_cast<ffi::CUstreamCaptureMode>(mode),
                           "oxicuda::ScopedCapture::ScopedCapture", where);
  active_ = true;
}

inline Graph ScopedCapture::end(SourceLocation where) {
  if (!active_)
    detail::raise(Error(ffi::CUDA_ERROR_ILLEGAL_STATE, "oxicuda::ScopedCapture::end",
                        "this capture has ended already", where));
  // Still active when the driver did not end it (from the wrong thread):
  // then the destructor tries again.
  bool over = false;
  struct Mark {
    bool& active;
    bool& over;
    ~Mark() {
      if (over) active = false;
    }
  } mark{active_, over};
  return detail::end_capture(stream_, "oxicuda::ScopedCapture::end", over, where);
}

inline ScopedCapture::~ScopedCapture() {
  if (!active_) return;
  // Never throws: the capture ends, its graph (if the driver made one) is
  // destroyed. An invalidated or unjoined capture is over all the same.
  CUstream q = stream_.raw();
  // A default-stream handle's context must be current (the driver answers
  // CUDA_ERROR_INVALID_CONTEXT otherwise, as it does for the per-thread one).
  const detail::ScopedCurrentNothrow current(detail::default_or_empty(q) ? stream_.context().raw() : nullptr,
                                             "ending an abandoned capture (oxicuda::ScopedCapture)");
  CUgraph graph = nullptr;
  const detail::Outcome r = OXICUDA_DRIVER(StreamEndCapture, q, &graph);
  const bool over = r.ok() || r.result == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
                    r.result == ffi::CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  if (!over) detail::check_nothrow(r, "ending an abandoned capture (oxicuda::ScopedCapture)");
  // A graph of the caller's (begin_capture_to) stays theirs, with what was captured into it.
  const detail::CaptureKey key = detail::capture_key(q, stream_.context());
  const Graph into = over ? detail::take_capture_into(key) : Graph();
  if (into && !r.ok()) detail::GraphAccess::lost(into);  // (the driver destroyed it with the failed capture)
  if (graph && !into && !detail::capturing_into(key)) detail::destroy_graph(graph);
}

OXICUDA_DETAIL_NAMESPACE_END
