// oxicuda/driver/stream.hpp — Stream: a queue of work on the GPU. Copies are
// handles to one queue; record/wait tie queues together through events.
#pragma once

#include <cstdint>
#include <utility>

#include "event.hpp"

OXICUDA_NAMESPACE_BEGIN

namespace detail {
inline void destroy_stream(CUstream_st* s) noexcept {
  check_nothrow(OXICUDA_DRIVER(StreamDestroy, s), "destroying an oxicuda::Stream");
  reclaim();
}
}  // namespace detail

// Options for a new stream, taken by designated initializers:
//   Stream s{ctx, {.priority = -1}}
struct StreamOptions {
  // Lower is more urgent. 0 is the default priority; the context's range is
  // ctx.stream_priority_range() and the driver clamps values outside it.
  int priority = 0;
  // true: CU_STREAM_NON_BLOCKING, no implicit synchronization with the legacy
  // default stream (the seed's default). false: a blocking stream.
  bool non_blocking = true;
};

// A CUDA stream (a GPU command queue).
//
// A Stream is a shared handle, not a unique owner: a copy is another handle
// to the same queue (raw() is equal, is_same_queue() is true), and the queue
// is destroyed — one cuStreamDestroy_v2 — when the last handle drops. So two
// subsystems that each hold "their" stream can be given one queue, and their
// work is ordered by stream order alone. Every handle keeps the stream's
// context alive. The handle is a pointer to a counted state (handle.hpp)
// that owns the queue and its context, and the raw CUstream beside it: a
// copy costs one atomic increment, raw() reads no indirection.
//
// Enqueueing (record, wait, query, synchronize, a launch) is one driver call
// with no context switch: the driver takes the context from the stream, so
// no context need be current on the calling thread (checked on a real
// driver by the GPU suite). The default streams are the exception: the
// driver resolves CU_STREAM_LEGACY and CU_STREAM_PER_THREAD against the
// calling thread's current context, so a default-stream handle makes its
// own context current around each call (see detail::on_stream).
class Stream {
 public:
  Stream() noexcept = default;
  // A new stream in `ctx`. The context is made current for the creation and
  // the thread's previous context restored.
  explicit Stream(const Context& ctx, StreamOptions options = {}, SourceLocation where = SourceLocation::current());

  // A handle to a stream that other code owns; oxicuda never destroys it.
  // The first form asks the driver for the stream's context
  // (cuStreamGetCtx; for a default stream, the context current now); the
  // second takes your word for it. A null handle means the legacy default
  // stream.
  [[nodiscard]] static Stream borrow(CUstream raw, SourceLocation where = SourceLocation::current());
  [[nodiscard]] static Stream borrow(CUstream raw, Context ctx);
  // The legacy default stream (CU_STREAM_LEGACY) and the per-thread default
  // stream (CU_STREAM_PER_THREAD) of `ctx`, borrowed. Work enqueued through
  // them goes to `ctx` whatever context is current on the calling thread:
  // each call makes `ctx` current for its duration (about 20-50 ns more than
  // the same call on an ordinary stream, which pays nothing for this).
  [[nodiscard]] static Stream legacy_default(Context ctx) { return borrow(ffi::stream_legacy(), std::move(ctx)); }
  [[nodiscard]] static Stream per_thread_default(Context ctx) {
    return borrow(ffi::stream_per_thread(), std::move(ctx));
  }

  [[nodiscard]] CUstream raw() const noexcept { return queue_.get(); }
  [[nodiscard]] explicit operator bool() const noexcept { return queue_.get() != nullptr; }
  [[nodiscard]] const Context& context() const noexcept { return queue_.context(); }
  // Whether the queue is destroyed when its last handle drops (false: borrowed).
  [[nodiscard]] bool owns() const noexcept { return queue_.owns(); }
  // How many handles share the queue (0 for an empty stream).
  [[nodiscard]] long use_count() const noexcept { return queue_.use_count(); }
  // Whether both handles are the same driver queue: work on one queue is
  // ordered by stream order; across two it needs an event. The legacy
  // default stream is one queue per context. The per-thread default stream
  // is a different queue on every thread that uses a handle to it, so it is
  // never called the same queue as another (or itself): an event orders it.
  [[nodiscard]] bool is_same_queue(const Stream& other) const noexcept {
    const CUstream q = raw();
    if (q != other.raw() || q == ffi::stream_per_thread()) return false;
    return q != ffi::stream_legacy() || context().raw() == other.context().raw();
  }

  // Blocks until all work enqueued so far has completed; then destroys the
  // host functions' callables that have run (see callback.hpp).
  void synchronize(SourceLocation where = SourceLocation::current()) const;
  // True when all work enqueued so far has completed (cuStreamQuery).
  [[nodiscard]] bool ready(SourceLocation where = SourceLocation::current()) const;
  // Records `event` at this point of the queue (cuEventRecord).
  void record(const Event& event, SourceLocation where = SourceLocation::current()) const;
  // Makes later work on this queue wait for `event`'s last record (cuStreamWaitEvent).
  void wait(const Event& event, SourceLocation where = SourceLocation::current()) const;
  // Runs `fn()` on a driver thread once the work before it has completed
  // (cuLaunchHostFunc). `fn` must not call CUDA; an exception it throws goes
  // to the diagnostic hook. The callable is not destroyed on the driver's
  // thread (where CUDA calls fail) but after it has run, on the next
  // synchronize() of a stream, event or context, the next launch_host_func,
  // or when a stream is destroyed: so it may own buffers and handles
  // (`[buf = std::move(buf)] {}` keeps a buffer until the work is done).
  // While the stream is capturing (capture.hpp), the host function becomes a
  // node of the captured graph: the callable then lives until the last
  // graph and exec that can run it are gone, and runs on every replay.
  template <class F>
  void launch_host_func(F&& fn, SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] int priority(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] bool non_blocking(SourceLocation where = SourceLocation::current()) const;

 private:
  detail::SharedHandle<CUstream_st, detail::destroy_stream> queue_;
};

namespace detail {
// A new driver stream in `ctx` (made current around the call, as
// cuStreamCreate creates in the current context).
inline CUstream create_stream(const Context& ctx, StreamOptions options, SourceLocation where) {
  if (!ctx) empty_handle("oxicuda::Context", "oxicuda::Stream::Stream", where);
  reclaim();
  const unsigned flags = options.non_blocking ? ffi::CU_STREAM_NON_BLOCKING : ffi::CU_STREAM_DEFAULT;
  CUstream raw = nullptr;
  SwitchCurrent current(ctx.raw(), where);
  if (options.priority == 0)
    check(OXICUDA_DRIVER(StreamCreate, &raw, flags), where);
  else
    check(OXICUDA_DRIVER(StreamCreateWithPriority, &raw, flags, options.priority), where);
  return raw;
}
}  // namespace detail

// (The handle is built in place: no temporary handle moved into it.)
inline Stream::Stream(const Context& ctx, StreamOptions options, SourceLocation where)
    : queue_(ctx, detail::create_stream(ctx, options, where), true) {}

namespace detail {

// Whether a stream's raw handle is empty (0) or a default stream (1, the
// legacy one; 2, the per-thread one): the handles whose calls need the
// stream's context current.
inline bool default_or_empty(CUstream q) noexcept { return reinterpret_cast<std::uintptr_t>(q) <= 2; }

// A default stream's call, with the stream's context current around it.
// (The call is taken by value so that the hot path, which calls it in
// place, need not give its captures an address.)
template <class Call>
OXICUDA_COLD decltype(auto) on_default_stream(const Stream& stream, CUstream q, SourceLocation where, Call call) {
  if (!stream.context()) return call(q);  // no context known: the driver's own rule (the current one)
  SwitchCurrent current(stream.context().raw(), where);
  return call(q);
}

// Every enqueue on a stream goes through here: `call(q)` with the stream's
// driver handle. An empty stream is an Error naming `operation`. Raw
// handles 0 (empty), 1 and 2 (the default streams) share one unlikely
// branch, so an ordinary stream pays one compare, as it did for the
// emptiness check alone.
template <class Call>
decltype(auto) on_stream(const Stream& stream, const char* operation, SourceLocation where, Call&& call) {
  reclaim();  // (one load when no host function's callable is waiting)
  CUstream q = stream.raw();
  if (OXICUDA_UNLIKELY(default_or_empty(q))) {
    if (q == nullptr) empty_handle("oxicuda::Stream", operation, where);
    return on_default_stream(stream, q, where, call);
  }
  return call(q);
}

}  // namespace detail

inline Stream Stream::borrow(CUstream raw, Context ctx) {
  Stream s;
  s.queue_ = {ctx, raw ? raw : ffi::stream_legacy(), false};
  return s;
}

inline Stream Stream::borrow(CUstream raw, SourceLocation where) {
  CUcontext ctx = nullptr;
  detail::check(OXICUDA_DRIVER(StreamGetCtx, raw, &ctx), where);
  return borrow(raw, Context::borrow(ctx));
}

inline void Stream::synchronize(SourceLocation where) const {
  detail::on_stream(*this, "oxicuda::Stream::synchronize", where, [where](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamSynchronize, q), where);
  });
  detail::reclaim();
}

inline bool Stream::ready(SourceLocation where) const {
  return detail::on_stream(*this, "oxicuda::Stream::ready", where, [where](CUstream q) {
    const detail::Outcome r = OXICUDA_DRIVER(StreamQuery, q);
    if (OXICUDA_LIKELY(r.ok())) return true;
    if (r.result != ffi::CUDA_ERROR_NOT_READY) detail::fail(r, where);
    return false;
  });
}

inline void Stream::record(const Event& event, SourceLocation where) const {
  CUevent e = event.raw();
  if (OXICUDA_UNLIKELY(e == nullptr)) detail::empty_handle("oxicuda::Event", "oxicuda::Stream::record", where);
  detail::on_stream(*this, "oxicuda::Stream::record", where, [e, where](CUstream q) {
    detail::check(OXICUDA_DRIVER(EventRecord, e, q), where);
  });
}

inline void Stream::wait(const Event& event, SourceLocation where) const {
  CUevent e = event.raw();
  if (OXICUDA_UNLIKELY(e == nullptr)) detail::empty_handle("oxicuda::Event", "oxicuda::Stream::wait", where);
  detail::on_stream(*this, "oxicuda::Stream::wait", where, [e, where](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamWaitEvent, q, e, 0u), where);
  });
}

inline int Stream::priority(SourceLocation where) const {
  int p = 0;
  detail::on_stream(*this, "oxicuda::Stream::priority", where, [&](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamGetPriority, q, &p), where);
  });
  return p;
}

inline bool Stream::non_blocking(SourceLocation where) const {
  unsigned flags = 0;
  detail::on_stream(*this, "oxicuda::Stream::non_blocking", where, [&](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamGetFlags, q, &flags), where);
  });
  return (flags & ffi::CU_STREAM_NON_BLOCKING) != 0;
}

namespace detail {
// The graph that `q` is capturing into, or null when it is not capturing
// (one cuStreamGetCaptureInfo; a driver older than CUDA 12.3, without it,
// answers through cuStreamIsCapturing, and a capture there is an Error).
inline CUgraph capture_graph(CUstream q, const char* operation, SourceLocation where) {
  ffi::CUstreamCaptureStatus status = ffi::CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  if (OXICUDA_UNLIKELY(missing(ffi::Entry::StreamGetCaptureInfo))) {
    check(OXICUDA_DRIVER(StreamIsCapturing, q, &status), where);
    if (status != ffi::CU_STREAM_CAPTURE_STATUS_NONE)
      raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                  "the stream is capturing, and keeping a host function's callable alive for every replay of the "
                  "graph needs cuStreamGetCaptureInfo (a CUDA 12.3 driver or newer)",
                  where));
    return nullptr;
  }
  check(OXICUDA_DRIVER(StreamGetCaptureInfo, q, &status, nullptr, &graph, nullptr, nullptr, nullptr), where);
  return status == ffi::CU_STREAM_CAPTURE_STATUS_NONE ? nullptr : graph;
}
}  // namespace detail

template <class F>
void Stream::launch_host_func(F&& fn, SourceLocation where) const {
  constexpr const char* op = "oxicuda::Stream::launch_host_func";
  detail::reclaim();
  detail::on_stream(*this, op, where, [&](CUstream q) {
    // While the stream captures, the host function becomes a node of the
    // graph, run by every replay of every exec made from it: the graph owns
    // the callable then (a user object), not the one run.
    CUgraph graph = detail::capture_graph(q, op, where);
    detail::HostCall* boxed = detail::box_host_call(std::forward<F>(fn), op);
    if (graph) {
      const detail::Outcome owned = detail::give_to_graph(graph, boxed);
      if (!owned.ok()) detail::fail(owned, where);
      // From here the graph owns the box, whatever the launch's answer.
      detail::check(OXICUDA_DRIVER(LaunchHostFunc, q, &detail::run_host_call_many, boxed), where);
      return;
    }
    const detail::Outcome r = OXICUDA_DRIVER(LaunchHostFunc, q, &detail::run_host_call_once, boxed);
    if (OXICUDA_UNLIKELY(!r.ok())) {
      boxed->destroy(boxed);
      detail::fail(r, where);
    }
  });
}

OXICUDA_NAMESPACE_END
