// oxicuda/driver/stream.hpp — Stream: a queue of work on the GPU. Copies are
// handles to one queue; record/wait tie queues together through events.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "stream_ref.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

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

namespace detail {
// Told of each stream oxicuda destroys, after the destroy; null until a part
// needs it (capture_into.hpp: a capture into a graph ends with its stream).
inline std::atomic<void (*)(CUstream) noexcept> stream_destroyed_hook{nullptr};
}  // namespace detail

// The deleter of every Stream's std::shared_ptr<CUstream_st> (reach it with
// std::get_deleter<StreamDeleter>(stream.shared())). It keeps the stream's
// context alive for as long as the stream lives, and when the last handle
// drops (on whichever thread) it destroys the stream once, with one
// cuStreamDestroy_v2, if the stream is oxicuda's own; a failure there goes to
// the diagnostic hook (check_nothrow), never out as an exception. A borrowed
// stream's deleter destroys nothing, and an adopted one's (Stream::adopt)
// drops its hold on the shared_ptr it was given, whose own deleter runs when
// that pointer's last copy is gone. The context and that hold are released
// by the call itself, not when the control block goes: a std::weak_ptr kept
// to the stream keeps neither alive.
class StreamDeleter {
 public:
  StreamDeleter(Context ctx, bool owns, std::shared_ptr<CUstream_st> adopted = {}) noexcept
      : context_(std::move(ctx)), adopted_(std::move(adopted)), owns_(owns) {}
  // The std::shared_ptr constructor copies or moves the deleter into its
  // control block; while a Stream is being made, each copy reports where it
  // now stands, so the Stream learns where its deleter settled without
  // std::get_deleter (which needs RTTI: oxicuda builds with -fno-rtti).
  StreamDeleter(StreamDeleter&& o) noexcept
      : context_(std::move(o.context_)), adopted_(std::move(o.adopted_)), owns_(o.owns_), settled_(o.settled_) {
    if (settled_) *settled_ = this;
  }
  StreamDeleter(const StreamDeleter& o) noexcept
      : context_(o.context_), adopted_(o.adopted_), owns_(o.owns_), settled_(o.settled_) {
    if (settled_) *settled_ = this;
  }
  StreamDeleter& operator=(const StreamDeleter&) = delete;
  StreamDeleter& operator=(StreamDeleter&&) = delete;
  ~StreamDeleter() = default;

  void operator()(CUstream_st* s) noexcept {
    if (owns_) {
      detail::check_nothrow(OXICUDA_DRIVER(StreamDestroy, s), "destroying an oxicuda::Stream");
      if (auto* hook = detail::stream_destroyed_hook.load(std::memory_order_acquire)) hook(s);
      detail::reclaim();
    }
    adopted_.reset();
    context_ = Context();
  }

  [[nodiscard]] const Context& context() const noexcept { return context_; }
  // Whether the call destroys the stream (false: borrowed or adopted).
  [[nodiscard]] bool owns() const noexcept { return owns_; }

 private:
  friend class Stream;
  Context context_;  // first: a Stream's StreamRef points here
  std::shared_ptr<CUstream_st> adopted_;  // Stream::adopt's pointer, else empty
  bool owns_;
  StreamDeleter** settled_ = nullptr;  // only while a Stream is being made
};

// A CUDA stream (a GPU command queue).
//
// A Stream is a shared handle, not a unique owner: a copy is another handle
// to the same queue (raw() is equal, is_same_queue() is true), and the queue
// is destroyed — one cuStreamDestroy_v2 — when the last handle drops. So two
// subsystems that each hold "their" stream can be given one queue, and their
// work is ordered by stream order alone. The handle is a
// std::shared_ptr<CUstream_st> (shared(): keep a std::weak_ptr to it, or
// hand it to code that takes one) whose deleter, a StreamDeleter, destroys
// the queue and keeps its context alive; beside it, a pointer to that
// deleter (inside the control block), so that context() reads no further. A
// copy costs the shared_ptr's atomic increment; raw() is the shared_ptr's
// stored pointer, a plain load.
//
// Enqueueing (record, wait, query, synchronize, a launch) is one driver call
// with no context switch: the driver takes the context from the stream, so
// no context need be current on the calling thread (checked on a real
// driver by the GPU suite). The default streams are the exception: the
// driver resolves CU_STREAM_LEGACY and CU_STREAM_PER_THREAD against the
// calling thread's current context, so a default-stream handle makes its
// own context current around each call (see detail::on_stream). A Stream
// converts to a StreamRef (stream_ref.hpp) for free: what the functions that
// only enqueue take.
class Stream {
 public:
  Stream() noexcept = default;
  // A new stream in `ctx`. The context is made current for the creation and
  // the thread's previous context restored.
  explicit Stream(const Context& ctx, StreamOptions options = {}, SourceLocation where = SourceLocation::current());
  Stream(const Stream&) noexcept = default;
  Stream& operator=(const Stream&) noexcept = default;
  // A moved-from Stream is empty: using it is an Error.
  Stream(Stream&& o) noexcept : queue_(std::move(o.queue_)), deleter_(std::exchange(o.deleter_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    queue_ = std::move(o.queue_);
    deleter_ = std::exchange(o.deleter_, nullptr);
    return *this;
  }

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
  // A handle to a stream you already hold in a std::shared_ptr with a
  // deleter of your own: the Stream keeps a copy of `queue` (and the
  // context) until its last handle drops, and your deleter runs, as ever,
  // when the last copy of your pointer is gone; oxicuda never destroys the
  // stream itself. The first form takes your word for the context; the
  // second asks the driver (cuStreamGetCtx). An empty `queue` is an Error.
  // (The Stream's shared() is a pointer of its own, sharing your
  // pointer's stream but not its count.)
  [[nodiscard]] static Stream adopt(std::shared_ptr<CUstream_st> queue, Context ctx,
                                    SourceLocation where = SourceLocation::current());
  [[nodiscard]] static Stream adopt(std::shared_ptr<CUstream_st> queue,
                                    SourceLocation where = SourceLocation::current());
  // A handle that owns `raw`, a stream of `ctx` made by other means
  // (cuGreenCtxStreamCreate): one cuStreamDestroy_v2 when the last handle
  // drops, as a Stream made by the constructor. A null `raw` is an Error.
  [[nodiscard]] static Stream own(CUstream raw, Context ctx, SourceLocation where = SourceLocation::current()) {
    if (!raw) detail::empty_handle("CUstream", "oxicuda::Stream::own", where);
    return Stream(raw, StreamDeleter(std::move(ctx), true));
  }

  [[nodiscard]] CUstream raw() const noexcept { return queue_.get(); }
  [[nodiscard]] explicit operator bool() const noexcept { return queue_.get() != nullptr; }
  [[nodiscard]] const Context& context() const noexcept { return StreamRef(*this).context(); }
  // The shared pointer behind the handle (empty for an empty Stream): keep a
  // std::weak_ptr<CUstream_st> to watch the queue without keeping it, or
  // std::get_deleter<StreamDeleter> on it. A copy of it keeps the queue
  // alive as a Stream does.
  [[nodiscard]] const std::shared_ptr<CUstream_st>& shared() const noexcept { return queue_; }
  // Whether the queue is destroyed when its last handle drops (false: borrowed or adopted).
  [[nodiscard]] bool owns() const noexcept { return deleter_ && deleter_->owns(); }
  // How many handles share the queue (0 for an empty stream); copies of
  // shared() count too.
  [[nodiscard]] long use_count() const noexcept { return queue_.use_count(); }
  // Whether both handles are the same driver queue: work on one queue is
  // ordered by stream order; across two it needs an event. The legacy
  // default stream is one queue per context. The per-thread default stream
  // is a different queue on every thread that uses a handle to it, so it is
  // never called the same queue as another (or itself): an event orders it.
  [[nodiscard]] bool is_same_queue(StreamRef other) const noexcept { return StreamRef(*this).is_same_queue(other); }

  // The non-owning view, for free: valid while this stream (any copy) lives.
  // NOLINTNEXTLINE(google-explicit-constructor): converting on purpose
  operator StreamRef() const noexcept {
    return {queue_.get(), deleter_ ? &deleter_->context_ : nullptr, StreamRef::Exact{}};
  }

  // Blocks until all work enqueued so far has completed; then destroys the
  // host functions' callables that have run (see callback.hpp).
  void synchronize(SourceLocation where = SourceLocation::current()) const { detail::synchronize_on(*this, where); }
  // True when all work enqueued so far has completed (cuStreamQuery).
  [[nodiscard]] bool ready(SourceLocation where = SourceLocation::current()) const {
    return detail::ready_on(*this, where);
  }
  // Records `event` at this point of the queue (cuEventRecord).
  void record(EventRef event, SourceLocation where = SourceLocation::current()) const {
    detail::record_on(*this, event, where);
  }
  // Makes later work on this queue wait for `event`'s last record (cuStreamWaitEvent).
  void wait(EventRef event, SourceLocation where = SourceLocation::current()) const {
    detail::wait_on(*this, event, where);
  }
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
  // The handle over `raw` with `deleter`, and where the deleter settled. If
  // the control block cannot be allocated, the shared_ptr constructor runs
  // the deleter (an owned stream is destroyed) and rethrows.
  Stream(CUstream_st* raw, StreamDeleter deleter) {
    StreamDeleter* settled = nullptr;
    deleter.settled_ = &settled;
    queue_ = std::shared_ptr<CUstream_st>(raw, std::move(deleter));
    settled->settled_ = nullptr;
    deleter_ = settled;
  }
  std::shared_ptr<CUstream_st> queue_;
  // queue_'s deleter, in its control block: alive as long as queue_ is.
  const StreamDeleter* deleter_ = nullptr;
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

// (If the shared_ptr's control block cannot be allocated, its constructor
// calls the deleter: the new stream is destroyed before the error leaves.)
inline Stream::Stream(const Context& ctx, StreamOptions options, SourceLocation where)
    : Stream(detail::create_stream(ctx, options, where), StreamDeleter(ctx, true)) {}

inline Stream Stream::borrow(CUstream raw, Context ctx) {
  return Stream(raw ? raw : ffi::stream_legacy(), StreamDeleter(std::move(ctx), false));
}

inline Stream Stream::borrow(CUstream raw, SourceLocation where) {
  CUcontext ctx = nullptr;
  detail::check(OXICUDA_DRIVER(StreamGetCtx, raw, &ctx), where);
  return borrow(raw, Context::borrow(ctx));
}

inline Stream Stream::adopt(std::shared_ptr<CUstream_st> queue, Context ctx, SourceLocation where) {
  if (!queue) detail::empty_handle("std::shared_ptr<CUstream_st>", "oxicuda::Stream::adopt", where);
  CUstream raw = queue.get();
  return Stream(raw, StreamDeleter(std::move(ctx), false, std::move(queue)));
}

inline Stream Stream::adopt(std::shared_ptr<CUstream_st> queue, SourceLocation where) {
  if (!queue) detail::empty_handle("std::shared_ptr<CUstream_st>", "oxicuda::Stream::adopt", where);
  CUcontext ctx = nullptr;
  detail::check(OXICUDA_DRIVER(StreamGetCtx, queue.get(), &ctx), where);
  return adopt(std::move(queue), Context::borrow(ctx), where);
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
  if (OXICUDA_DETAIL_UNLIKELY(missing(ffi::Entry::StreamGetCaptureInfo))) {
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
    if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
      boxed->destroy(boxed);
      detail::fail(r, where);
    }
  });
}

OXICUDA_DETAIL_NAMESPACE_END
