// The fake driver's streams and events. Work enqueued on a stream happens
// at once, unless the test holds the stream (fake_hold): then copies, fills,
// frees, event records and host functions wait (fake_state.hpp's defer).
// Kernels always run at once.
#include "fake_state.hpp"

#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fake {

namespace {

struct Stream {
  CUcontext ctx;
  unsigned flags;
  int priority;
  bool held = false;                         // fake_hold: work waits in `pending`
  std::vector<std::function<void()>> pending;
};
struct Event {
  CUcontext ctx;
  unsigned flags;
  bool recorded;
  double time_ms;
  CUstream pending_on = nullptr;  // its last record waits on this held stream
};

double clock_ms = 0;
CUcontext last_enqueue_context = nullptr;
// The pending work of held streams destroyed before it ran. Never destroyed, as `live`.
std::vector<std::function<void()>>& orphans = *new std::vector<std::function<void()>>;
// The cuStreamDestroy calls made on each handle (valid or not), from its
// creation (a new stream at a freed stream's address starts again at 0).
// Never destroyed, as `live`.
std::unordered_map<const void*, long>& destroys_of = *new std::unordered_map<const void*, long>;

// Runs a stream's pending work, in order (work it enqueues runs too).
void drain(Stream* st) {
  while (!st->pending.empty()) {
    std::vector<std::function<void()>> work = std::move(st->pending);
    st->pending.clear();
    for (auto& w : work) w();
  }
}

void drain(CUstream s) {
  if (reinterpret_cast<std::uintptr_t>(s) > 2 && alive(s, Kind::stream)) drain(reinterpret_cast<Stream*>(s));
}

bool has_pending(CUstream s) {
  return reinterpret_cast<std::uintptr_t>(s) > 2 && alive(s, Kind::stream) &&
         !reinterpret_cast<Stream*>(s)->pending.empty();
}

}  // namespace

bool held(CUstream s) {
  return reinterpret_cast<std::uintptr_t>(s) > 2 && alive(s, Kind::stream) && reinterpret_cast<Stream*>(s)->held;
}

void defer(CUstream s, std::function<void()> work) { reinterpret_cast<Stream*>(s)->pending.push_back(std::move(work)); }

void drain_context(CUcontext ctx, bool blocking_only) {
  std::vector<Stream*> streams;
  for (auto& [h, k] : live)
    if (k == Kind::stream) {
      auto* st = static_cast<Stream*>(const_cast<void*>(h));
      if (st->ctx == ctx && (!blocking_only || (st->flags & CU_STREAM_NON_BLOCKING) == 0)) streams.push_back(st);
    }
  for (Stream* st : streams) drain(st);
}

void run_host_function(CUhostFn fn, void* data) {
  std::thread([fn, data] {
    in_host_function = true;
    fn(data);
  }).join();
  ++host_funcs_run;
}

CUresult use_stream(CUstream s) {
  // As the driver: null and CU_STREAM_LEGACY (1) / CU_STREAM_PER_THREAD (2)
  // are the default streams of the calling thread's current context.
  if (reinterpret_cast<std::uintptr_t>(s) <= 2) {
    if (const CUresult r = need_current_locked()) return r;
    last_enqueue_context = current();
    // The legacy stream synchronizes with every blocking stream: with one
    // that captures, that is a dependency the capture cannot hold; work
    // pending on a held one runs first.
    if (reinterpret_cast<std::uintptr_t>(s) != 2) {
      if (const CUresult r = capture_forbids_legacy(current())) return r;
      drain_context(current(), true);
    }
    return CUDA_SUCCESS;
  }
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  last_enqueue_context = reinterpret_cast<Stream*>(s)->ctx;
  return CUDA_SUCCESS;
}

void mark_recorded(CUevent e) {
  if (!alive(e, Kind::event)) return;
  auto* ev = reinterpret_cast<Event*>(e);
  ev->recorded = true;
  clock_ms += 0.5;
  ev->time_ms = clock_ms;
}

CUcontext stream_context(CUstream s) {
  if (reinterpret_cast<std::uintptr_t>(s) <= 2) return current();
  return alive(s, Kind::stream) ? reinterpret_cast<Stream*>(s)->ctx : nullptr;
}

bool blocking_stream(CUstream s) {
  return alive(s, Kind::stream) && (reinterpret_cast<Stream*>(s)->flags & CU_STREAM_NON_BLOCKING) == 0;
}

long event_flags(CUevent e) { return alive(e, Kind::event) ? reinterpret_cast<Event*>(e)->flags : -1; }

CUevent new_event(CUcontext ctx, unsigned flags) {
  auto* e = new Event{ctx, flags, false, 0, nullptr};
  live[e] = Kind::event;
  return reinterpret_cast<CUevent>(e);
}

long live_stream() { return count_live(Kind::stream); }
long live_event() { return count_live(Kind::event); }

}  // namespace fake

using namespace fake;

FAKE_EXPORT void fake_hold(const void* stream, int hold) {
  std::lock_guard lock(mu);
  if (stream == nullptr) {  // every stream, and the work of destroyed ones
    for (auto& [h, k] : live)
      if (k == Kind::stream) static_cast<Stream*>(const_cast<void*>(h))->held = hold != 0;
    if (hold) return;
    for (auto& [h, k] : live)
      if (k == Kind::stream) drain(static_cast<Stream*>(const_cast<void*>(h)));
    while (!orphans.empty()) {
      std::vector<std::function<void()>> work = std::move(orphans);
      orphans.clear();
      for (auto& w : work) w();
    }
    return;
  }
  if (!alive(stream, Kind::stream)) return;
  auto* st = static_cast<Stream*>(const_cast<void*>(stream));
  st->held = hold != 0;
  if (!hold) drain(st);
}

FAKE_EXPORT long fake_pending(const void* stream) {
  std::lock_guard lock(mu);
  if (stream == nullptr) return static_cast<long>(orphans.size());
  return alive(stream, Kind::stream) ? static_cast<long>(static_cast<const Stream*>(stream)->pending.size()) : -1;
}

FAKE_EXPORT long fake_stream_destroys(const void* stream) {
  std::lock_guard lock(mu);
  const auto it = destroys_of.find(stream);
  return it == destroys_of.end() ? 0 : it->second;
}

FAKE_EXPORT const void* fake_last_context() {
  std::lock_guard lock(mu);
  return last_enqueue_context;
}

// --- streams ---------------------------------------------------------------------

CUstream fake::new_stream(CUcontext c, unsigned flags, int priority) {
  if (priority > 0) priority = 0;
  if (priority < -5) priority = -5;
  auto* s = new Stream{c, flags, priority, false, {}};
  live[s] = Kind::stream;
  destroys_of[s] = 0;
  return reinterpret_cast<CUstream>(s);
}

static CUresult create_stream(CUstream* ph, unsigned flags, int priority) {
  if (!ph || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  *ph = new_stream(current(), flags, priority);
  return CUDA_SUCCESS;
}

CUresult fake_StreamCreate(CUstream* ph, unsigned int flags) {
  FAKE_ENTRY(StreamCreate);
  return create_stream(ph, flags, 0);
}

CUresult fake_StreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  FAKE_ENTRY(StreamCreateWithPriority);
  return create_stream(ph, flags, priority);
}

CUresult fake_StreamDestroy(CUstream s) {
  FAKE_ENTRY(StreamDestroy);
  std::unique_lock lock(mu);
  ++destroys_of[s];
  if (!alive(s, Kind::stream)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  stream_destroyed(s);
  forget_stream_attributes(s);
  live.erase(s);
  auto* st = reinterpret_cast<Stream*>(s);
  // As the driver: cuStreamDestroy returns at once; pending work runs later.
  for (auto& w : st->pending) orphans.push_back(std::move(w));
  delete st;
  finish_unlocked(lock);
  return CUDA_SUCCESS;
}

CUresult fake_StreamSynchronize(CUstream s) {
  FAKE_ENTRY(StreamSynchronize);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (const CUresult r = capture_forbids_sync(s)) return r;
  drain(s);
  return CUDA_SUCCESS;
}

CUresult fake_StreamQuery(CUstream s) {
  FAKE_ENTRY(StreamQuery);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  if (const CUresult r = capture_forbids_sync(s)) return r;
  return has_pending(s) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult fake_StreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  FAKE_ENTRY(StreamWaitEvent);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = use_stream(s)) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  bool captured = false;
  const CUresult r = capture_wait(s, e, captured);
  if (!captured) drain(reinterpret_cast<Event*>(e)->pending_on);  // the waited-for work, done first
  return r;
}

CUresult fake_StreamGetPriority(CUstream s, int* p) {
  FAKE_ENTRY(StreamGetPriority);
  std::lock_guard lock(mu);
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  *p = reinterpret_cast<Stream*>(s)->priority;
  return CUDA_SUCCESS;
}

CUresult fake_StreamGetFlags(CUstream s, unsigned int* f) {
  FAKE_ENTRY(StreamGetFlags);
  std::lock_guard lock(mu);
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<Stream*>(s)->flags;
  return CUDA_SUCCESS;
}

CUresult fake_StreamGetCtx(CUstream s, CUcontext* pctx) {
  FAKE_ENTRY(StreamGetCtx);
  std::lock_guard lock(mu);
  if (reinterpret_cast<std::uintptr_t>(s) <= 2) {
    if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
    *pctx = current();
    return CUDA_SUCCESS;
  }
  if (!alive(s, Kind::stream)) return CUDA_ERROR_INVALID_HANDLE;
  *pctx = reinterpret_cast<Stream*>(s)->ctx;
  return CUDA_SUCCESS;
}

// --- events ----------------------------------------------------------------------

CUresult fake_EventCreate(CUevent* ph, unsigned int flags) {
  FAKE_ENTRY(EventCreate);
  if (flags & ~0x7u) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = need_current()) return r;
  CUcontext c = current();
  auto* e = new Event{c, flags, false, 0, nullptr};
  std::lock_guard lock(mu);
  live[e] = Kind::event;
  *ph = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult fake_EventDestroy(CUevent e) {
  FAKE_ENTRY(EventDestroy);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  live.erase(e);
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}

CUresult fake_EventRecord(CUevent e, CUstream s) {
  FAKE_ENTRY(EventRecord);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = use_stream(s)) return r;
  if (capture_record(e, s)) return CUDA_SUCCESS;  // a record inside a capture: a point to fork and join at
  auto* ev = reinterpret_cast<Event*>(e);
  if (held(s)) {
    defer(s, [e, s] {
      if (alive(e, Kind::event) && reinterpret_cast<Event*>(e)->pending_on == s) {
        reinterpret_cast<Event*>(e)->pending_on = nullptr;
        mark_recorded(e);
      }
    });
    ev->pending_on = s;
    return CUDA_SUCCESS;
  }
  ev->pending_on = nullptr;
  mark_recorded(e);  // every record is half a millisecond after the one before
  return CUDA_SUCCESS;
}

CUresult fake_EventSynchronize(CUevent e) {
  FAKE_ENTRY(EventSynchronize);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  drain(reinterpret_cast<Event*>(e)->pending_on);
  return CUDA_SUCCESS;
}

CUresult fake_EventQuery(CUevent e) {
  FAKE_ENTRY(EventQuery);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  return reinterpret_cast<Event*>(e)->pending_on ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult fake_EventElapsedTime(float* ms, CUevent start, CUevent end) {
  FAKE_ENTRY(EventElapsedTime);
  std::lock_guard lock(mu);
  if (!alive(start, Kind::event) || !alive(end, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  auto* a = reinterpret_cast<Event*>(start);
  auto* b = reinterpret_cast<Event*>(end);
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(b->time_ms - a->time_ms);
  return CUDA_SUCCESS;
}
