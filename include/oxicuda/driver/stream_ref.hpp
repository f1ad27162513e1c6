// oxicuda/driver/stream_ref.hpp — StreamRef: a non-owning view of a stream
// (cudax's stream_ref), what the functions that only enqueue take; and the
// enqueue path every stream call goes through (detail::on_stream).
#pragma once

#include <cstdint>
#include <type_traits>

#include "event.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A stream by its raw handle and, beside it, a pointer to the Context it
// lives in: two words, trivially copyable, no count, no allocation. An
// owning Stream converts to one for free (implicitly), and every function
// that only enqueues (record, wait, copy_async, fill_async, launch, ...)
// takes one, so a stream that other code owns can be used for one call
// without making a handle to it:
//   launch(StreamRef(their_stream, ctx), kernel, cfg, args...);
//
// A StreamRef owns nothing: it must not outlive the stream, nor the Context
// object it points to (a Stream's StreamRef points into the Stream's shared
// state, alive while any copy of that Stream is). Keep one for a call or a
// loop; to keep a stream, keep a Stream.
//
// The context matters only for the default streams (CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD), which the driver resolves against the calling
// thread's current context: a call on one makes the StreamRef's context
// current around it (as a Stream's does). An ordinary stream's call is one
// driver call; the driver takes the context from the stream.
class StreamRef {
 public:
  // An empty view: every use is an Error (CUDA_ERROR_INVALID_HANDLE).
  StreamRef() noexcept = default;
  // `raw` in `ctx`, which must outlive the view (a temporary Context is
  // refused at compile time). A null `raw` means the legacy default stream,
  // as in Stream::borrow.
  StreamRef(CUstream raw, const Context& ctx) noexcept : raw_(raw ? raw : ffi::stream_legacy()), context_(&ctx) {}
  StreamRef(CUstream raw, const Context&& ctx) = delete;
  // `raw` with no context known: a default stream's call then goes to the
  // context current on the calling thread (the driver's own rule).
  explicit StreamRef(CUstream raw) noexcept : raw_(raw ? raw : ffi::stream_legacy()) {}

  [[nodiscard]] CUstream raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  // The stream's context as given (an empty Context when none was).
  [[nodiscard]] const Context& context() const noexcept { return context_ ? *context_ : no_context(); }
  // Whether both are the same driver queue (see Stream::is_same_queue).
  [[nodiscard]] bool is_same_queue(StreamRef other) const noexcept {
    const CUstream q = raw_;
    if (q != other.raw_ || q == ffi::stream_per_thread()) return false;
    return q != ffi::stream_legacy() || context().raw() == other.context().raw();
  }

  // As Stream's members of the same names (stream.hpp).
  void synchronize(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] bool ready(SourceLocation where = SourceLocation::current()) const;
  void record(EventRef event, SourceLocation where = SourceLocation::current()) const;
  void wait(EventRef event, SourceLocation where = SourceLocation::current()) const;

 private:
  friend class Stream;
  struct Exact {};
  // A Stream's view: its raw handle as it is (null stays empty).
  StreamRef(CUstream raw, const Context* ctx, Exact) noexcept : raw_(raw), context_(ctx) {}
  static const Context& no_context() noexcept {
    static const Context none;
    return none;
  }
  CUstream raw_ = nullptr;
  const Context* context_ = nullptr;
};

namespace detail {

// Whether a stream's raw handle is empty (0) or a default stream (1, the
// legacy one; 2, the per-thread one): the handles whose calls need the
// stream's context current.
inline bool default_or_empty(CUstream q) noexcept { return reinterpret_cast<std::uintptr_t>(q) <= 2; }

// A default stream's call, with the stream's context current around it.
// (The call is taken by value so that the hot path, which calls it in
// place, need not give its captures an address.)
template <class Call>
OXICUDA_DETAIL_COLD decltype(auto) on_default_stream(StreamRef stream, CUstream q, SourceLocation where, Call call) {
  if (!stream.context()) return call(q);  // no context known: the driver's own rule (the current one)
  SwitchCurrent current(stream.context().raw(), where);
  return call(q);
}

// Every enqueue on a stream goes through here: `call(q)` with the stream's
// driver handle. `stream` is a StreamRef or a Stream (whose context is read
// on the default streams' branch only: one load less on its hot path than
// converting it to a StreamRef first). An empty stream is an Error naming
// `operation`. Raw handles 0 (empty), 1 and 2 (the default streams) share
// one unlikely branch, so an ordinary stream pays one compare, as it did
// for the emptiness check alone.
template <class S, class Call>
inline decltype(auto) on_stream(const S& stream, const char* operation, SourceLocation where, Call&& call) {
  static_assert(std::is_nothrow_convertible_v<const S&, StreamRef>, "on_stream takes a StreamRef or a Stream");
  reclaim();  // (one load when no host function's callable is waiting)
  CUstream q = stream.raw();
  if (OXICUDA_DETAIL_UNLIKELY(default_or_empty(q))) {
    if (q == nullptr) empty_handle("oxicuda::Stream", operation, where);
    return on_default_stream(StreamRef(stream), q, where, call);
  }
  return call(q);
}

// The calls that StreamRef and Stream share, on either.
template <class S>
void synchronize_on(const S& stream, SourceLocation where) {
  on_stream(stream, "oxicuda::Stream::synchronize", where,
            [where](CUstream q) { check(OXICUDA_DRIVER(StreamSynchronize, q), where); });
  reclaim();
}

template <class S>
bool ready_on(const S& stream, SourceLocation where) {
  return on_stream(stream, "oxicuda::Stream::ready", where, [where](CUstream q) {
    const Outcome r = OXICUDA_DRIVER(StreamQuery, q);
    if (OXICUDA_DETAIL_LIKELY(r.ok())) return true;
    if (r.result != ffi::CUDA_ERROR_NOT_READY) fail(r, where);
    return false;
  });
}

template <class S>
void record_on(const S& stream, EventRef event, SourceLocation where) {
  CUevent e = event.raw();
  if (OXICUDA_DETAIL_UNLIKELY(e == nullptr)) empty_handle("oxicuda::Event", "oxicuda::Stream::record", where);
  on_stream(stream, "oxicuda::Stream::record", where,
            [e, where](CUstream q) { check(OXICUDA_DRIVER(EventRecord, e, q), where); });
}

template <class S>
void wait_on(const S& stream, EventRef event, SourceLocation where) {
  CUevent e = event.raw();
  if (OXICUDA_DETAIL_UNLIKELY(e == nullptr)) empty_handle("oxicuda::Event", "oxicuda::Stream::wait", where);
  on_stream(stream, "oxicuda::Stream::wait", where,
            [e, where](CUstream q) { check(OXICUDA_DRIVER(StreamWaitEvent, q, e, 0u), where); });
}

}  // namespace detail

inline void StreamRef::synchronize(SourceLocation where) const { detail::synchronize_on(*this, where); }
inline bool StreamRef::ready(SourceLocation where) const { return detail::ready_on(*this, where); }
inline void StreamRef::record(EventRef event, SourceLocation where) const {
  detail::record_on(*this, event, where);
}
inline void StreamRef::wait(EventRef event, SourceLocation where) const { detail::wait_on(*this, event, where); }

OXICUDA_DETAIL_NAMESPACE_END
