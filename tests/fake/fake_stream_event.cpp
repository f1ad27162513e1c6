// The fake driver's streams and events. Its queues are always drained:
// work enqueued on a stream happens at once.
#include "fake_state.hpp"

#include <cstdint>
#include <mutex>

namespace fake {

namespace {

struct Stream {
  CUcontext ctx;
  unsigned flags;
  int priority;
};
struct Event {
  CUcontext ctx;
  unsigned flags;
  bool recorded;
  double time_ms;
};

double clock_ms = 0;
CUcontext last_enqueue_context = nullptr;

}  // namespace

CUresult use_stream(CUstream s) {
  // As the driver: null and CU_STREAM_LEGACY (1) / CU_STREAM_PER_THREAD (2)
  // are the default streams of the calling thread's current context.
  if (reinterpret_cast<std::uintptr_t>(s) <= 2) {
    if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
    last_enqueue_context = current();
    // The legacy stream synchronizes with every blocking stream: with one
    // that captures, that is a dependency the capture cannot hold.
    if (reinterpret_cast<std::uintptr_t>(s) != 2) return capture_forbids_legacy(current());
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

long live_stream() { return count_live(Kind::stream); }
long live_event() { return count_live(Kind::event); }

}  // namespace fake

using namespace fake;

FAKE_EXPORT const void* fake_last_context() {
  std::lock_guard lock(mu);
  return last_enqueue_context;
}

// --- streams ---------------------------------------------------------------------

static CUresult create_stream(CUstream* ph, unsigned flags, int priority) {
  if (!ph || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (priority > 0) priority = 0;
  if (priority < -5) priority = -5;
  auto* s = new Stream{c, flags, priority};
  std::lock_guard lock(mu);
  live[s] = Kind::stream;
  *ph = reinterpret_cast<CUstream>(s);
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
  if (!alive(s, Kind::stream)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  stream_destroyed(s);
  live.erase(s);
  delete reinterpret_cast<Stream*>(s);
  finish_unlocked(lock);
  return CUDA_SUCCESS;
}

CUresult fake_StreamSynchronize(CUstream s) {
  FAKE_ENTRY(StreamSynchronize);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  return capture_forbids_sync(s);
}

CUresult fake_StreamQuery(CUstream s) {
  FAKE_ENTRY(StreamQuery);
  std::lock_guard lock(mu);
  if (const CUresult r = use_stream(s)) return r;
  return capture_forbids_sync(s);
}

CUresult fake_StreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  FAKE_ENTRY(StreamWaitEvent);
  std::lock_guard lock(mu);
  if (!alive(e, Kind::event)) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = use_stream(s)) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  bool captured = false;
  return capture_wait(s, e, captured);
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
  CUcontext c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  auto* e = new Event{c, flags, false, 0};
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
  mark_recorded(e);  // every record is half a millisecond after the one before
  return CUDA_SUCCESS;
}

CUresult fake_EventSynchronize(CUevent e) {
  FAKE_ENTRY(EventSynchronize);
  std::lock_guard lock(mu);
  return alive(e, Kind::event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_EventQuery(CUevent e) {
  FAKE_ENTRY(EventQuery);
  std::lock_guard lock(mu);
  return alive(e, Kind::event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
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
