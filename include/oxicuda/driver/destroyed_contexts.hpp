// oxicuda/driver/destroyed_contexts.hpp — the created contexts oxicuda has
// destroyed, which its guards never make current again (a context destroyed
// on one thread while current on another stays current there, and making
// it current again crashes the driver), and the spin lock that guards such
// small shared lists without <mutex>.
#pragma once

#include <atomic>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// The created contexts that oxicuda has destroyed, so that a guard never
// makes one current again: a context destroyed while it was current on
// another thread stays that thread's current context (the driver answers
// CUDA_ERROR_CONTEXT_IS_DESTROYED there), and setting it current again
// crashes the driver (a double free, on the H200; a segmentation fault in
// the next call, on driver 580). A handle the driver
// reuses for a new context is taken off the list. A spin lock: the header
// needs no <mutex> (MinGW's win32 thread model has none).
struct DestroyedContexts {
  std::atomic<bool> any{false};
  std::atomic_flag lock;  // clear (C++20)
  CUcontext list[64] = {};  // the latest 64
  unsigned next = 0;
};
inline DestroyedContexts& destroyed_contexts() noexcept {
  static DestroyedContexts* d = new DestroyedContexts;  // never destroyed: used by static destructors
  return *d;
}
// A spin lock's scope over an atomic_flag (no <mutex> in the header): the
// destroyed-context list here, the profiler's depths (profiler.hpp).
class SpinGuard {
 public:
  explicit SpinGuard(std::atomic_flag& f) noexcept : flag_(f) {
    while (flag_.test_and_set(std::memory_order_acquire)) {
    }
  }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;
  ~SpinGuard() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag& flag_;
};
inline void note_context_destroyed(CUcontext c) noexcept {
  DestroyedContexts& d = destroyed_contexts();
  SpinGuard lock(d.lock);
  d.list[d.next++ % 64] = c;
  d.any.store(true, std::memory_order_release);
}
inline void note_context_created(CUcontext c) noexcept {
  DestroyedContexts& d = destroyed_contexts();
  if (!d.any.load(std::memory_order_acquire)) return;
  SpinGuard lock(d.lock);
  for (CUcontext& x : d.list)
    if (x == c) x = nullptr;
}
inline bool context_destroyed_listed(CUcontext c) noexcept {
  DestroyedContexts& d = destroyed_contexts();
  if (OXICUDA_DETAIL_LIKELY(!d.any.load(std::memory_order_acquire)) || c == nullptr) return false;
  SpinGuard lock(d.lock);
  for (CUcontext x : d.list)
    if (x == c) return true;
  return false;
}
// Whether `current`, the calling thread's current context, is one oxicuda
// destroyed. A listed handle is asked of the driver: cuCtxGetId on the
// current context answers CUDA_ERROR_CONTEXT_IS_DESTROYED for a context
// destroyed on another thread while current here (driver 580, measured; its
// cuCtxGetDevice answers CUDA_SUCCESS there, so it cannot tell), and an id
// for a live one: another library, or raw driver calls, may have created a
// context that the driver gave the same handle. That one is taken off the
// list. Without cuCtxGetId (drivers before CUDA 12.0) a listed handle is
// taken as destroyed: an Error rather than the driver's crash. Any other
// answer leaves the guard to go on (the next call reports the problem).
// Only on the cold path: a listed handle.
inline bool context_destroyed(CUcontext current) noexcept {
  if (OXICUDA_DETAIL_LIKELY(!context_destroyed_listed(current))) return false;
  if (missing(ffi::Entry::CtxGetId)) return true;
  unsigned long long id = 0;
  const Outcome r = OXICUDA_DRIVER(CtxGetId, nullptr, &id);
  if (r.result == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED) return true;
  if (r.ok()) note_context_created(current);  // alive: a new context with a reused handle
  return false;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
