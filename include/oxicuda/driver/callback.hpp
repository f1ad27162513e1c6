// oxicuda/driver/callback.hpp — host callables that the driver runs on its own
// thread (a stream's host function, a graph's host node): the box that
// carries one, the entry the driver calls, and the deferred destruction that
// keeps their destructors off that thread.
//
// The driver refuses every CUDA call made on its callback thread
// (CUDA_ERROR_NOT_PERMITTED). A callable that owns oxicuda handles — the
// idiom `s.launch_host_func([buf = std::move(buf)] {})`, which keeps a buffer
// alive until the work before it has run — would free them there, and the
// frees would fail and leak. So a finished callable is not destroyed where it
// ran: it is left in a lock-free list, and reclaim() destroys everything in
// that list on the next thread that may call CUDA. oxicuda calls reclaim()
// after every synchronize (stream, event, context), before every
// launch_host_func, and when a stream is destroyed.
#pragma once

#include <atomic>
#include <exception>
#include <type_traits>
#include <utility>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN
namespace detail {

// A boxed callable, linked into the list of finished ones once it is done.
struct HostCall {
  HostCall* next = nullptr;
  void (*run)(HostCall*) noexcept = nullptr;
  void (*destroy)(HostCall*) noexcept = nullptr;
  const char* operation = "";  // what enqueued it, for the diagnostic hook
};

template <class F>
struct HostCallOf final : HostCall {
  F fn;
  template <class G>
  HostCallOf(G&& g, const char* op) : fn(std::forward<G>(g)) {
    run = &run_it;
    destroy = &destroy_it;
    operation = op;
  }
  // A callable that throws goes to the diagnostic hook, and the driver's
  // thread carries on (where the compiler has exceptions at all).
  static void run_it(HostCall* c) noexcept {
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
    try {
      static_cast<HostCallOf*>(c)->fn();
    } catch (const std::exception& e) {
      report(ffi::CUDA_ERROR_LAUNCH_FAILED, c->operation, "running a host function",
             cat({"the host function threw: ", e.what()}));
    } catch (...) {
      report(ffi::CUDA_ERROR_LAUNCH_FAILED, c->operation, "running a host function",
             "the host function threw a non-std exception");
    }
#else
    static_cast<HostCallOf*>(c)->fn();
#endif
  }
  static void destroy_it(HostCall* c) noexcept { delete static_cast<HostCallOf*>(c); }
};

// Boxes `fn` for the driver (the caller owns the box until the driver has it).
template <class F>
[[nodiscard]] HostCall* box_host_call(F&& fn, const char* operation) {
  return new HostCallOf<std::decay_t<F>>(std::forward<F>(fn), operation);
}

// Finished callables, waiting for a thread where CUDA calls are allowed.
inline constinit std::atomic<HostCall*> finished_host_calls{nullptr};

// Leaves a callable for reclaim(). Lock-free; makes no CUDA call.
inline void retire(HostCall* c) noexcept {
  HostCall* head = finished_host_calls.load(std::memory_order_relaxed);
  do {
    c->next = head;
  } while (!finished_host_calls.compare_exchange_weak(head, c, std::memory_order_release, std::memory_order_relaxed));
}

// A callable may own device memory, and cuMemFree is an unsafe call while
// a stream captures in global mode (on this thread, or on any thread for a
// global capture): the driver refuses it and invalidates the capture. So
// the callables are destroyed with this thread's capture interaction mode
// relaxed (cuThreadExchangeStreamCaptureMode, the driver's way for a
// library to free during someone's capture), and the mode restored. Where
// the driver will not relax it, the callables wait for the next reclaim.
OXICUDA_DETAIL_COLD inline void reclaim_all() noexcept {
  ffi::CUstreamCaptureMode mode = ffi::CU_STREAM_CAPTURE_MODE_RELAXED;
  if (!OXICUDA_DRIVER(ThreadExchangeStreamCaptureMode, &mode).ok()) return;
  HostCall* c = finished_host_calls.exchange(nullptr, std::memory_order_acquire);
  while (c != nullptr) {
    HostCall* next = c->next;
    c->destroy(c);  // may drop handles, and so reach reclaim() again: that takes a list of its own
    c = next;
  }
  check_nothrow(OXICUDA_DRIVER(ThreadExchangeStreamCaptureMode, &mode),
                "restoring the thread's stream-capture mode after destroying finished host callables");
}

// Destroys every finished callable, here and now: on a thread where CUDA
// calls are allowed (never inside a host function). One load when there are none.
inline void reclaim() noexcept {
  if (OXICUDA_DETAIL_UNLIKELY(finished_host_calls.load(std::memory_order_relaxed) != nullptr) && !in_host_function)
    reclaim_all();
}

// Runs a boxed callable on the driver's thread: the entry given to the
// driver with the box as its user data.
inline void run_host_call(HostCall* c) noexcept {
  in_host_function = true;
  c->run(c);
  in_host_function = false;
}

// For work that runs once (cuLaunchHostFunc): run, then retire the box.
inline void OXICUDA_DETAIL_CUDAAPI run_host_call_once(void* data) noexcept {
  auto* c = static_cast<HostCall*>(data);
  run_host_call(c);
  retire(c);
}

// For work that may run many times (a graph's host node, a host function
// captured into a graph): run, and keep the box. A driver user object owns
// it; its destructor, which the driver runs on its own thread once the last
// graph and exec holding the object are gone, retires the box.
inline void OXICUDA_DETAIL_CUDAAPI run_host_call_many(void* data) noexcept { run_host_call(static_cast<HostCall*>(data)); }
inline void OXICUDA_DETAIL_CUDAAPI retire_host_call(void* data) noexcept { retire(static_cast<HostCall*>(data)); }

// Gives `graph` the ownership of `boxed`: a user object whose destructor
// retires the box, retained by the graph (and so by its clones and execs).
// On failure the box is destroyed (now, or through the user object) and the
// failure returned.
// `object_out`, when given, receives the user object (valid while the graph
// holds it).
inline Outcome give_to_graph(CUgraph graph, HostCall* boxed, CUuserObject* object_out = nullptr) noexcept {
  CUuserObject object = nullptr;
  Outcome r = OXICUDA_DRIVER(UserObjectCreate, &object, boxed, &retire_host_call, 1u,
                             static_cast<unsigned>(ffi::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  if (!r.ok()) {
    boxed->destroy(boxed);
    return r;
  }
  r = OXICUDA_DRIVER(GraphRetainUserObject, graph, object, 1u, 0u);
  // Our own reference goes either way: the graph's keeps the box alive, or,
  // when the graph took none, this release destroys it (through retire).
  check_nothrow(OXICUDA_DRIVER(UserObjectRelease, object, 1u), "releasing a host function's user object");
  if (r.ok() && object_out) *object_out = object;
  return r;
}

}  // namespace detail
OXICUDA_DETAIL_NAMESPACE_END
