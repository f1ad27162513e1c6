// oxicuda/driver/profiler.hpp — ProfilerRange: the profiler's collection
// (cuProfilerStart, cuProfilerStop) over a scope, in one context, safe to
// nest (the seed crate's ProfilerGuard).
#pragma once

#include <atomic>
#include <utility>

#include "current.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// How many ProfilerRanges are open per context, across threads: the driver
// keeps one on/off switch per context, so only the first range to open
// starts it and only the last to close stops it. A spin lock (no <mutex> in
// the header), held across the one driver call, so that a stop and a start
// of two threads cannot cross. At most 64 contexts with a range open at once.
struct ProfilerDepths {
  std::atomic_flag lock;  // clear (C++20)
  CUcontext ctx[64] = {};
  int depth[64] = {};
};
inline ProfilerDepths& profiler_depths() noexcept {
  static ProfilerDepths* d = new ProfilerDepths;  // never destroyed: a range may close in a static destructor
  return *d;
}
// The slot of `c` (or a free one when `c` has none and `claim`); -1: none.
inline int profiler_slot(ProfilerDepths& d, CUcontext c, bool claim) noexcept {
  int free_slot = -1;
  for (int i = 0; i < 64; ++i) {
    if (d.ctx[i] == c) return i;
    if (free_slot < 0 && d.ctx[i] == nullptr) free_slot = i;
  }
  return claim ? free_slot : -1;
}

}  // namespace detail

// Profile collection on for `ctx` while the range is open:
//   { oxicuda::ProfilerRange range(ctx); step(); }   // nsys --capture-range=cudaProfilerApi
// The first open range of a context calls cuProfilerStart (with the
// context current, as the driver requires) and the last one to close calls
// cuProfilerStop; ranges inside it, on any thread, only count. A failed
// start is an Error and opens nothing; a failed stop, in the destructor, goes
// to the diagnostic hook. Without a profiler attached both calls do nothing
// and cost a few hundred nanoseconds. Move-only; a moved-from range closes
// nothing. An empty Context is an Error.
class ProfilerRange {
 public:
  explicit ProfilerRange(const Context& ctx, SourceLocation where = SourceLocation::current()) : ctx_(ctx) {
    constexpr const char* op = "oxicuda::ProfilerRange";
    if (!ctx_) detail::empty_handle("oxicuda::Context", op, where);
    detail::ProfilerDepths& d = detail::profiler_depths();
    const detail::SpinGuard lock(d.lock);
    const int i = detail::profiler_slot(d, ctx_.raw(), true);
    if (i < 0)
      detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                          "64 contexts have a profiler range open already; close one first", where));
    if (d.depth[i] == 0) {
      const ScopedCurrent current(ctx_, where);
      detail::check(OXICUDA_DRIVER(ProfilerStart), where);
      d.ctx[i] = ctx_.raw();
    }
    ++d.depth[i];
  }
  ProfilerRange(ProfilerRange&& other) noexcept : ctx_(std::move(other.ctx_)) {}
  ProfilerRange& operator=(ProfilerRange&& other) noexcept {
    if (this != &other) {
      close();
      ctx_ = std::move(other.ctx_);
    }
    return *this;
  }
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;
  ~ProfilerRange() { close(); }

  // Whether this range is open (not moved from).
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(ctx_); }
  // How many ranges are open over `ctx` now (0: collection is off, as far
  // as oxicuda turned it on).
  [[nodiscard]] static int open_in(const Context& ctx) noexcept {
    detail::ProfilerDepths& d = detail::profiler_depths();
    const detail::SpinGuard lock(d.lock);
    const int i = detail::profiler_slot(d, ctx.raw(), false);
    return ctx && i >= 0 ? d.depth[i] : 0;
  }

 private:
  void close() noexcept {
    if (!ctx_) return;
    {
      detail::ProfilerDepths& d = detail::profiler_depths();
      const detail::SpinGuard lock(d.lock);
      const int i = detail::profiler_slot(d, ctx_.raw(), false);
      if (i >= 0 && --d.depth[i] == 0) {
        d.ctx[i] = nullptr;
        constexpr const char* during = "stopping the profiler (oxicuda::ProfilerRange)";
        const detail::ScopedCurrentNothrow current(ctx_.raw(), during);
        if (current.ok()) detail::check_nothrow(OXICUDA_DRIVER(ProfilerStop), during);
      }
    }
    ctx_ = Context();
  }

  Context ctx_;
};

OXICUDA_DETAIL_NAMESPACE_END
