// oxicuda/driver/event.hpp — Event: a marker in a stream's work. It is recorded
// through the stream (stream.record(event), see stream.hpp); here are its
// creation flags, synchronize, query, the time between two events, and its
// IPC handle (ipc_export, opened by Event(ctx, handle) in another process).
#pragma once

#include <chrono>

#include "in_context.hpp"
#include "ipc_handle.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Options for an Event, taken by designated initializers:
//   Event e{ctx, {.timing = false}}
struct EventOptions {
  bool timing = true;          // false: CU_EVENT_DISABLE_TIMING (cheaper record and wait)
  bool blocking_sync = false;  // true: synchronize() sleeps instead of spinning
  // true: CU_EVENT_INTERPROCESS, for ipc_export. The driver requires such
  // an event not to record time: ask for {.timing = false} with it (else an
  // Error: oxicuda does not turn timing off behind your back).
  bool interprocess = false;
};

// Time between two events, as the driver measures it (about 0.5 µs resolution).
using Milliseconds = std::chrono::duration<float, std::milli>;

namespace detail {
inline void destroy_event(CUevent_st* e) noexcept {
  check_nothrow(OXICUDA_DRIVER(EventDestroy, e), "destroying an oxicuda::Event");
  reclaim();
}
}  // namespace detail

// A CUDA event. Copies share one driver event, destroyed (cuEventDestroy_v2)
// once, when the last copy drops; every copy keeps the event's context alive.
class Event {
 public:
  Event() noexcept = default;
  explicit Event(const Context& ctx, EventOptions options = {}, SourceLocation where = SourceLocation::current());
  // Opens, in `ctx`, an event another process exported (ipc_export;
  // cuIpcOpenEventHandle): records there are waited for here, and the
  // other way round. It does not record time, and is destroyed
  // (cuEventDestroy_v2, as the driver asks) when its last copy drops; the
  // exporter's event must outlive it. A handle this process exported is
  // an Error: use the Event itself here.
  Event(const Context& ctx, const IpcEventHandle& handle, SourceLocation where = SourceLocation::current());

  [[nodiscard]] CUevent raw() const noexcept { return event_.get(); }
  [[nodiscard]] explicit operator bool() const noexcept { return event_.get() != nullptr; }
  [[nodiscard]] const Context& context() const noexcept { return event_.context(); }
  // Whether the event records time (created with {.timing = true}).
  [[nodiscard]] bool timing() const noexcept { return (event_.extra() & ffi::CU_EVENT_DISABLE_TIMING) == 0 && *this; }
  // Whether it may be shared with another process (created with
  // {.interprocess = true}, or opened from an IPC handle).
  [[nodiscard]] bool interprocess() const noexcept { return (event_.extra() & ffi::CU_EVENT_INTERPROCESS) != 0; }
  [[nodiscard]] long use_count() const noexcept { return event_.use_count(); }

  // Blocks until the work before the event's last record has completed.
  void synchronize(SourceLocation where = SourceLocation::current()) const;
  // True when that work has completed (or the event was never recorded).
  [[nodiscard]] bool ready(SourceLocation where = SourceLocation::current()) const;
  // The time from `start` to `end`; both must have timing enabled and both
  // must have completed.
  [[nodiscard]] static Milliseconds elapsed(const Event& start, const Event& end,
                                            SourceLocation where = SourceLocation::current());

  friend bool operator==(const Event& a, const Event& b) noexcept { return a.raw() == b.raw(); }

 private:

  detail::SharedHandle<CUevent_st, detail::destroy_event, unsigned> event_;  // extra: the CUevent_flags
};

// A non-owning view of an event, as StreamRef is of a stream: what
// Stream::record and Stream::wait take. An Event converts to it for free;
// EventRef(raw) views an event other code owns (another library's
// CUevent), allocating nothing and never destroying it. It must not outlive
// the event it views. An empty view (a moved-from Event's) is an Error where
// it is used.
class EventRef {
 public:
  constexpr EventRef() noexcept = default;
  constexpr explicit EventRef(CUevent raw) noexcept : raw_(raw) {}
  // NOLINTNEXTLINE(google-explicit-constructor): converting on purpose
  EventRef(const Event& event) noexcept : raw_(event.raw()) {}
  [[nodiscard]] constexpr CUevent raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr explicit operator bool() const noexcept { return raw_ != nullptr; }
  friend constexpr bool operator==(EventRef a, EventRef b) noexcept { return a.raw_ == b.raw_; }

 private:
  CUevent raw_ = nullptr;
};

namespace detail {
// A new driver event in `ctx` (made current around the call, as
// cuEventCreate creates in the current context).
inline unsigned event_flags(EventOptions options) noexcept {
  unsigned flags = ffi::CU_EVENT_DEFAULT;
  if (!options.timing) flags |= ffi::CU_EVENT_DISABLE_TIMING;
  if (options.blocking_sync) flags |= ffi::CU_EVENT_BLOCKING_SYNC;
  if (options.interprocess) flags |= ffi::CU_EVENT_INTERPROCESS;
  return flags;
}

inline CUevent create_event(const Context& ctx, EventOptions options, SourceLocation where) {
  const unsigned flags = event_flags(options);
  if (!ctx) empty_handle("oxicuda::Context", "oxicuda::Event::Event", where);
  if (OXICUDA_DETAIL_UNLIKELY(options.interprocess && options.timing))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::Event::Event",
                "an interprocess event cannot record time (the driver requires CU_EVENT_DISABLE_TIMING with "
                "CU_EVENT_INTERPROCESS): create it with {.timing = false, .interprocess = true}",
                where));
  reclaim();
  CUevent raw = nullptr;
  SwitchCurrent current(ctx.raw(), where);
  check(OXICUDA_DRIVER(EventCreate, &raw, flags), where);
  return raw;
}
}  // namespace detail

// (The handle is built in place: no temporary handle moved into it.)
inline Event::Event(const Context& ctx, EventOptions options, SourceLocation where)
    : event_(ctx, detail::create_event(ctx, options, where), true, detail::event_flags(options)) {}

namespace detail {
inline CUevent open_ipc_event(const Context& ctx, const IpcEventHandle& handle, SourceLocation where) {
  constexpr const char* operation = "oxicuda::Event::Event";
  if (!ctx) empty_handle("oxicuda::Context", operation, where);
  if (!handle) empty_handle("oxicuda::IpcEventHandle", operation, where);
  refuse_own_handle(handle.stamp(), operation, "use the Event itself here", where);
  reclaim();
  CUevent raw = nullptr;
  SwitchCurrent current(ctx.raw(), where);
  const Outcome r = OXICUDA_DRIVER(IpcOpenEventHandle, &raw, handle.raw());
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) fail(r, where, own_handle_hint(handle.stamp()));
  return raw;
}
}  // namespace detail

inline Event::Event(const Context& ctx, const IpcEventHandle& handle, SourceLocation where)
    : event_(ctx, detail::open_ipc_event(ctx, handle, where), true,
             ffi::CU_EVENT_DISABLE_TIMING | ffi::CU_EVENT_INTERPROCESS) {}

// The IPC handle of an event created with {.timing = false, .interprocess =
// true} (cuIpcGetEventHandle), for another process to open with
// Event(ctx, handle). Another event is an Error saying how to create it.
[[nodiscard]] inline IpcEventHandle ipc_export(const Event& event, SourceLocation where = SourceLocation::current()) {
  CUevent raw = detail::checked(event, "oxicuda::Event", "oxicuda::ipc_export", where);
  if (OXICUDA_DETAIL_UNLIKELY(!event.interprocess()))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::ipc_export",
                        "this event was not created for interprocess use: create it with {.timing = false, "
                        ".interprocess = true}",
                        where));
  ffi::CUipcEventHandle h{};
  detail::SwitchCurrent current(event.context().raw(), where);
  detail::check(OXICUDA_DRIVER(IpcGetEventHandle, &h, raw), where);
  return IpcEventHandle(detail::IpcExported{}, h);
}

inline void Event::synchronize(SourceLocation where) const {
  detail::check(OXICUDA_DRIVER(EventSynchronize, detail::checked(*this, "oxicuda::Event", "oxicuda::Event::synchronize", where)), where);
  detail::reclaim();
}

inline bool Event::ready(SourceLocation where) const {
  const detail::Outcome r = OXICUDA_DRIVER(EventQuery, detail::checked(*this, "oxicuda::Event", "oxicuda::Event::ready", where));
  if (OXICUDA_DETAIL_LIKELY(r.ok())) return true;
  if (r.result == ffi::CUDA_ERROR_NOT_READY) return false;
  detail::fail(r, where);
}

inline Milliseconds Event::elapsed(const Event& start, const Event& end, SourceLocation where) {
  CUevent s = detail::checked(start, "oxicuda::Event", "oxicuda::Event::elapsed", where);
  CUevent e = detail::checked(end, "oxicuda::Event", "oxicuda::Event::elapsed", where);
  float ms = 0.0f;
  const detail::Outcome r = OXICUDA_DRIVER(EventElapsedTime, &ms, s, e);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
    const char* why = "";
    if (!start.timing())
      why = "the start event was created with {.timing = false}; elapsed time needs timing on both events";
    else if (!end.timing())
      why = "the end event was created with {.timing = false}; elapsed time needs timing on both events";
    else if (r.result == ffi::CUDA_ERROR_NOT_READY)
      why = "an event has not completed yet; synchronize the end event first";
    else if (r.result == ffi::CUDA_ERROR_INVALID_HANDLE)
      why = "both events must have been recorded on a stream before their elapsed time is asked";
    detail::fail(r, where, detail::cat({why}));
  }
  return Milliseconds(ms);
}

OXICUDA_DETAIL_NAMESPACE_END
