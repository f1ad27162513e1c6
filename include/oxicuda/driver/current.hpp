// oxicuda/driver/current.hpp — the calling thread's current context, made and
// restored: ScopedCurrent, the "make current, restore on exit" guard, and
// ScopedCurrentNothrow, the same for destructors.
#pragma once

#include <utility>

#include "context.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Makes a context current on the calling thread for the guard's lifetime and
// then restores whatever was current before, in every case: also when that
// was nothing, and also when the context was current already and the scope
// made another one current (with make_current(); a direct cuCtxSetCurrent
// of your own inside such a scope is yours to undo). The guard keeps its
// Context alive (a copy: one atomic increment), so `ScopedCurrent
// guard{Context::create(dev)}` keeps the new context for the guard's scope;
// a guard of a raw CUcontext keeps nothing alive. It costs one
// cuCtxGetCurrent, and a cuCtxSetCurrent at each end when the context was
// not current. An empty Context
// or a null CUcontext is an Error before any driver call: the driver would
// take cuCtxSetCurrent(NULL) as "pop", and the restore would then overwrite
// the context below the top of the thread's stack. A current context that
// oxicuda destroyed (its last handle dropped while it was current here) is
// an Error (CUDA_ERROR_CONTEXT_IS_DESTROYED), not restored.
class ScopedCurrent {
 public:
  explicit ScopedCurrent(const Context& ctx, SourceLocation where = SourceLocation::current())
      : keep_(ctx), previous_(enter(ctx.raw(), where, "oxicuda::Context")) {}
  explicit ScopedCurrent(Context&& ctx, SourceLocation where = SourceLocation::current())
      : keep_(std::move(ctx)), previous_(enter(keep_.raw(), where, "oxicuda::Context")) {}
  explicit ScopedCurrent(CUcontext ctx, SourceLocation where = SourceLocation::current())
      : previous_(enter(ctx, where, "CUcontext (null)")) {}
  ScopedCurrent(const ScopedCurrent&) = delete;
  ScopedCurrent& operator=(const ScopedCurrent&) = delete;
  ~ScopedCurrent() {
    if (switched_ || detail::make_current_count != made_)
      detail::check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, previous_),
                            "restoring the thread's previous context (oxicuda::ScopedCurrent)");
  }

 private:
  CUcontext enter(CUcontext ctx, SourceLocation where, const char* empty_type) {
    if (OXICUDA_DETAIL_UNLIKELY(ctx == nullptr)) detail::empty_handle(empty_type, "oxicuda::ScopedCurrent", where);
    made_ = detail::make_current_count;
    return detail::switch_current(ctx, switched_, where);
  }

  Context keep_;  // (destroyed after the restore)
  unsigned long made_ = 0;
  bool switched_ = false;
  CUcontext previous_ = nullptr;
};

namespace detail {

// ScopedCurrent for destructors: never throws; failures go to the diagnostic
// hook, saying what was being done. A null context changes nothing. A
// previous context that oxicuda destroyed is not made current again: the
// thread is left with none.
class ScopedCurrentNothrow {
 public:
  ScopedCurrentNothrow(CUcontext ctx, const char* during) noexcept : during_(during) {
    if (ctx && check_nothrow(OXICUDA_DRIVER(CtxGetCurrent, &previous_), during)) {
      if (previous_ == ctx) {
        ok_ = true;
        return;
      }
      if (context_destroyed(previous_)) previous_ = nullptr;
      ok_ = switched_ = check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, ctx), during);
    }
  }
  // Whether `ctx` is current (a failure was reported to the hook if not).
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  ScopedCurrentNothrow(const ScopedCurrentNothrow&) = delete;
  ScopedCurrentNothrow& operator=(const ScopedCurrentNothrow&) = delete;
  ~ScopedCurrentNothrow() {
    if (switched_) check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, previous_), during_);
  }

 private:
  const char* during_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
  bool ok_ = false;
};

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
