// oxicuda/graph/capture.hpp — stream capture: the work enqueued on a stream (and
// on the streams that join it through events) recorded into a Graph instead
// of run; a scoped form that never leaves a stream capturing; and
// GraphedStep, which turns a function that enqueues work into a graph
// captured once and replayed.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "graph_exec.hpp"

OXICUDA_NAMESPACE_BEGIN

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
// Ends the capture begun on `stream` and returns the graph of its work
// (cuStreamEndCapture). A capture the driver invalidated, one with a stream
// that joined it and was not joined back, or one ended on the wrong stream
// or thread is an Error saying what happened and what to do.
[[nodiscard]] Graph end_capture(const Stream& stream, SourceLocation where = SourceLocation::current());

// A capture that cannot outlive its scope: begun by the constructor; end()
// returns the graph; if the scope is left without end() (an exception
// unwinding), the destructor ends the capture and discards what was
// captured, so the stream is never left capturing.
//   ScopedCapture capture{stream};
//   launch(stream, kernel, cfg, args...);
//   Graph graph = capture.end();
class ScopedCapture {
 public:
  explicit ScopedCapture(const Stream& stream, CaptureMode mode = CaptureMode::global,
                         SourceLocation where = SourceLocation::current());
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
    if (r.ok()) return;
    const bool legacy = reinterpret_cast<std::uintptr_t>(q) <= 1;  // null or CU_STREAM_LEGACY
    detail::fail(r, where,
                 legacy ? "the legacy default stream cannot be captured: capture a Stream of your own (or the "
                          "per-thread default stream)"
                 : r.result == ffi::CUDA_ERROR_ILLEGAL_STATE ? "the stream is capturing already"
                                                             : "");
  });
}

namespace detail {
// Ends the capture on `stream`: the graph, or an Error saying why not.
// `over` tells whether the capture is over (ended, or ended by the driver
// as invalidated or unjoined), which a failure from the wrong thread, say,
// is not.
inline Graph end_capture(const Stream& stream, const char* operation, bool& over, SourceLocation where) {
  CUgraph raw = nullptr;
  on_stream(stream, operation, where, [&](CUstream q) {
    const Outcome r = OXICUDA_DRIVER(StreamEndCapture, q, &raw);
    over = r.ok() || r.result == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
           r.result == ffi::CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    if (!r.ok()) {
      if (raw) destroy_graph(raw);
      fail(r, where, capture_end_reason(r.result));
    }
  });
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
  if (r.result != ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && r.result != ffi::CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
    detail::check_nothrow(r, "ending an abandoned capture (oxicuda::ScopedCapture)");
  if (graph) detail::destroy_graph(graph);
}

// --- GraphedStep -------------------------------------------------------------------

struct StepOptions {
  CaptureMode mode = CaptureMode::global;
  InstantiateOptions instantiate{};
};

// What a GraphedStep has done so far.
struct StepStats {
  long captures = 0;        // the callable was run under capture
  long instantiations = 0;  // a new exec was made (first call, or the topology changed)
  long updates = 0;         // the exec was updated in place (cuGraphExecUpdate)
  long launches = 0;        // the exec was launched
};

namespace detail {

// The part of GraphedStep that does not depend on the callable's type.
class StepCore {
 public:
  explicit StepCore(StepOptions options) noexcept : options_(std::move(options)) {}
  // Moved, the exec goes with the step; the step moved from is empty.
  StepCore(StepCore&& o) noexcept
      : graph_(std::move(o.graph_)), exec_(std::move(o.exec_)), stats_(o.stats_), options_(std::move(o.options_)),
        key_(std::move(o.key_)), captured_(o.captured_), live_(o.live_) {
    o.captured_ = false;
    o.live_ = false;
  }
  StepCore& operator=(StepCore&& o) noexcept {
    if (this == &o) return *this;
    graph_ = std::move(o.graph_);
    exec_ = std::move(o.exec_);
    stats_ = o.stats_;
    options_ = std::move(o.options_);
    key_ = std::move(o.key_);
    captured_ = o.captured_;
    live_ = o.live_;
    o.captured_ = false;
    o.live_ = false;
    return *this;
  }
  StepCore(const StepCore&) = delete;
  StepCore& operator=(const StepCore&) = delete;
  ~StepCore() = default;
  using Enqueue = void (*)(void* callable, const Stream& stream);
  void run(const Stream& stream, const unsigned char* key, std::size_t key_size, Enqueue enqueue, void* callable,
           SourceLocation where);
  void reset() noexcept { captured_ = false; }
  Graph graph_;
  GraphExec exec_;
  StepStats stats_;

 private:
  StepOptions options_;
  std::string key_;
  bool captured_ = false;
  bool live_ = true;  // false once moved from
};

// A tag whose address names the list of a step's argument types: the first
// bytes of its key, so that arguments of other types with the same bytes
// (1.0f and 0x3f800000) are another key.
template <class... A>
struct StepArgTypes {
  static constexpr char tag = 0;
};

inline void StepCore::run(const Stream& stream, const unsigned char* key, std::size_t key_size, Enqueue enqueue,
                          void* callable, SourceLocation where) {
  if (!live_) empty_handle("oxicuda::GraphedStep", "oxicuda::GraphedStep::operator()", where);
  const bool same = captured_ && key_.size() == key_size && (key_size == 0 || std::memcmp(key_.data(), key, key_size) == 0);
  if (!same) {
    Graph graph;
    {
      ScopedCapture scope(stream, options_.mode, where);
      enqueue(callable, stream);
      graph = scope.end(where);
    }
    ++stats_.captures;
    if (exec_ && !exec_.try_update(graph, where)) {
      ++stats_.updates;
    } else {
      exec_ = GraphExec(graph, options_.instantiate, where);
      ++stats_.instantiations;
    }
    graph_ = std::move(graph);
    key_.assign(reinterpret_cast<const char*>(key), key_size);
    captured_ = true;
  }
  exec_.launch(stream, where);
  ++stats_.launches;
}

}  // namespace detail

// A step of work graphed with one line: `enqueue(stream, args...)` is
// captured into a graph on the first call, and later calls launch that
// graph — one cuGraphLaunch for the whole step — instead of running the
// callable again:
//   GraphedStep step{[&](const Stream& s, float a) { launch(s, k1, cfg, x, a); launch(s, k2, cfg, x); }};
//   for (...) step(stream, a);
//
// What may change between calls, exactly:
// - The contents of device memory: always (the graph reads it when it runs).
// - `args...` (trivially copyable values, compared by their types and
//   bytes, so zero the padding of a struct): when they differ from the last capture's, the
//   callable is captured again with the new ones; a graph of the same
//   topology updates the exec in place (cuGraphExecUpdate), another topology
//   (other kernels, more or fewer nodes, other dependencies) is instantiated
//   anew.
// - The stream: each call launches on the stream it is given.
// Everything else the callable reads — sizes, pointers, buffers, scalars it
// captured by reference, which branch it takes — is fixed in the graph when
// it is captured: a change of it without a change of `args...` has no
// effect until reset() makes the next call capture again. Host functions
// the callable enqueues run on every launch (their callables live as long
// as the graph or exec that can run them).
template <class F>
class GraphedStep {
 public:
  explicit GraphedStep(F fn, StepOptions options = {}) : fn_(std::move(fn)), core_(std::move(options)) {}
  // Move-only: the step owns its exec, which an update rewrites in place,
  // so two copies would replay each other's arguments. A moved-from step is
  // empty (calling it is an Error); to run one step from two places, share
  // a reference to it, or make two steps (each captures for itself).
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;
  GraphedStep(GraphedStep&&) noexcept(std::is_nothrow_move_constructible_v<F>) = default;
  GraphedStep& operator=(GraphedStep&&) = default;  // (deleted when F cannot be assigned: a lambda)
  ~GraphedStep() = default;

  template <class... A>
  void operator()(detail::Located<const Stream&> stream, const A&... args) {
    static_assert((std::is_trivially_copyable_v<A> && ...),
                  "GraphedStep: its arguments are compared by their bytes, so they must be trivially copyable");
    // The key: which types (a tag's address), then their bytes; every byte written.
    const void* const types = &detail::StepArgTypes<A...>::tag;
    unsigned char key[sizeof(types) + (sizeof(A) + ... + 0)];
    std::memcpy(key, &types, sizeof(types));
    std::size_t at = sizeof(types);
    ((std::memcpy(key + at, &args, sizeof(A)), at += sizeof(A)), ...);
    auto enqueue = [&](const Stream& s) { fn_(s, args...); };
    core_.run(
        stream.value, key, at,
        [](void* e, const Stream& s) { (*static_cast<decltype(enqueue)*>(e))(s); }, &enqueue, stream.where);
  }

  // The last captured graph and its exec (empty before the first call).
  [[nodiscard]] const Graph& graph() const noexcept { return core_.graph_; }
  [[nodiscard]] const GraphExec& exec() const noexcept { return core_.exec_; }
  [[nodiscard]] const StepStats& stats() const noexcept { return core_.stats_; }
  // The next call captures again (and updates the exec, or makes a new one).
  void reset() noexcept { core_.reset(); }

 private:
  F fn_;
  detail::StepCore core_;
};

OXICUDA_NAMESPACE_END
