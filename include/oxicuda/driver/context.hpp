// oxicuda/driver/context.hpp — Context (a device's primary context, or one created
// explicitly), and oxicuda's own guard that makes it current around one call
// (detail::SwitchCurrent). The guards for users and destructors are current.hpp.
#pragma once

#include <atomic>
#include <utility>

#include "callback.hpp"
#include "destroyed_contexts.hpp"
#include "device.hpp"
#include "handle.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

enum class Schedule : unsigned {
  automatic = ffi::CU_CTX_SCHED_AUTO,
  spin = ffi::CU_CTX_SCHED_SPIN,
  yield = ffi::CU_CTX_SCHED_YIELD,
  blocking_sync = ffi::CU_CTX_SCHED_BLOCKING_SYNC,
};

// Options for Context::create, taken by designated initializers:
//   Context::create(dev, {.schedule = Schedule::blocking_sync})
struct ContextOptions {
  Schedule schedule = Schedule::automatic;
  bool keep_local_memory = false;  // CU_CTX_LMEM_RESIZE_TO_MAX
};

struct StreamPriorityRange {
  int least = 0;     // the numerically largest (lowest) priority, usually 0
  int greatest = 0;  // the numerically smallest (highest) priority, e.g. -5
};

struct MemoryInfo {
  std::size_t free = 0;
  std::size_t total = 0;
};

// A CUDA context. Copies share it: a primary context is retained once and
// released (cuDevicePrimaryCtxRelease) when the last copy drops; a created
// one is destroyed (cuCtxDestroy) when the last copy drops, a green one's
// green context (cuGreenCtxDestroy) likewise; a borrowed one is never
// released by oxicuda.
class Context {
 public:
  enum class Kind { borrowed, primary, created, green };

  Context() noexcept = default;
  Context(const Context&) noexcept = default;
  Context& operator=(const Context&) noexcept = default;
  // A moved-from Context is empty, like a default-constructed one.
  Context(Context&& o) noexcept
      : raw_(o.raw_), device_(o.device_), owner_(std::move(o.owner_)) {
    o.raw_ = nullptr;
    o.device_ = -1;
  }
  Context& operator=(Context&& o) noexcept {
    CUcontext raw = o.raw_;
    ffi::CUdevice device = o.device_;
    o.raw_ = nullptr;
    o.device_ = -1;
    raw_ = raw;
    device_ = device;
    owner_ = std::move(o.owner_);
    return *this;
  }

  // The device's primary context, the one the CUDA runtime and the libraries
  // built on it use. This is what to use unless you need isolation.
  [[nodiscard]] static Context primary(const Device& device, SourceLocation where = SourceLocation::current());
  // A new context of its own (cuCtxCreate). The calling thread's current
  // context is left as it was.
  [[nodiscard]] static Context create(const Device& device, ContextOptions options = {},
                                      SourceLocation where = SourceLocation::current());
  // Resets the device's primary context (cuDevicePrimaryCtxReset): every
  // allocation and all state in it are destroyed, and the next use
  // initializes it afresh. The way back from a sticky error (a device-side
  // assert, an illegal address): drop every handle of the objects that lived
  // in it first (buffers, streams, events, modules), as they are gone; the
  // Context handles themselves stay valid.
  static void reset_primary(const Device& device, SourceLocation where = SourceLocation::current());
  // A handle to a context that other code owns; oxicuda never releases it.
  [[nodiscard]] static Context borrow(CUcontext raw) noexcept { return Context(raw, -1, {}); }
  // The context of green context `green` (cuCtxFromGreenCtx), which it takes
  // over: destroyed (cuGreenCtxDestroy) when the last handle drops, or here on
  // failure. GreenContext (green_context.hpp) is the way to make one.
  [[nodiscard]] static Context adopt_green(CUgreenCtx green, const Device& device,
                                           SourceLocation where = SourceLocation::current());
  // The calling thread's current context, borrowed; empty when none is current.
  [[nodiscard]] static Context current(SourceLocation where = SourceLocation::current());

  [[nodiscard]] CUcontext raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] Kind kind() const noexcept { return owner_ ? owner_->kind : Kind::borrowed; }
  // The green context whose context this is (Kind::green), else null.
  [[nodiscard]] CUgreenCtx green() const noexcept { return owner_ ? owner_->green : nullptr; }
  [[nodiscard]] Device device(SourceLocation where = SourceLocation::current()) const;
  // The driver's id of this context (cuCtxGetId, CUDA 12.0): unique in the
  // process and never reused, unlike the handle, which the driver may give
  // a later context.
  [[nodiscard]] unsigned long long id(SourceLocation where = SourceLocation::current()) const;

  // Makes this the calling thread's current context (cuCtxSetCurrent). It
  // keeps no reference: keep a Context handle for as long as the context is
  // current on the thread. A created context destroyed while current on a
  // thread (its last handle dropped elsewhere) is unusable there: the
  // driver's calls answer CUDA_ERROR_CONTEXT_IS_DESTROYED, and oxicuda's
  // guards raise that Error instead of making it current again.
  void make_current(SourceLocation where = SourceLocation::current()) const;
  // Waits for all work in the context (cuCtxSynchronize with it current).
  void synchronize(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] StreamPriorityRange stream_priority_range(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] MemoryInfo memory_info(SourceLocation where = SourceLocation::current()) const;
  // How many Context handles share this one (0 for a borrowed or empty one).
  [[nodiscard]] long use_count() const noexcept { return owner_.use_count(); }

  friend bool operator==(const Context& a, const Context& b) noexcept { return a.raw_ == b.raw_; }

 private:
  struct Owner : detail::Owned {
    CUcontext raw;
    ffi::CUdevice device;
    Kind kind;
    CUgreenCtx green;
    Owner(CUcontext r, ffi::CUdevice d, Kind k, CUgreenCtx g = nullptr) noexcept
        : raw(r), device(d), kind(k), green(g) {}
    ~Owner() {
      if (kind == Kind::primary)
        detail::check_nothrow(OXICUDA_DRIVER(DevicePrimaryCtxRelease, device),
                              "releasing an oxicuda::Context (primary)");
      else if (kind == Kind::green
                   ? detail::check_nothrow(OXICUDA_DRIVER(GreenCtxDestroy, green), "destroying a GreenContext")
                   : detail::check_nothrow(OXICUDA_DRIVER(CtxDestroy, raw), "destroying an oxicuda::Context"))
        detail::note_context_destroyed(raw);
    }
  };

  Context(CUcontext raw, ffi::CUdevice device, detail::Shared<Owner> owner) noexcept
      : raw_(raw), device_(device), owner_(std::move(owner)) {}

  CUcontext raw_ = nullptr;
  ffi::CUdevice device_ = -1;  // -1: not known yet (borrowed)
  detail::Shared<Owner> owner_;
};

namespace detail {

[[noreturn]] OXICUDA_DETAIL_COLD inline void current_context_destroyed(SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED, "oxicuda::ScopedCurrent",
              "the calling thread's current context was destroyed while it was current here: its last "
              "oxicuda::Context handle was dropped (on another thread, or after make_current(), which keeps no "
              "reference). Make a live context current (Context::make_current) before this call, and keep a "
              "Context handle for as long as its context is current on any thread",
              where));
}

// Makes `ctx` current and returns what was current before; `switched` says
// whether a cuCtxSetCurrent was made. An Error when the current context is
// one oxicuda has destroyed (see DestroyedContexts).
inline CUcontext switch_current(CUcontext ctx, bool& switched, SourceLocation where) {
  CUcontext previous = nullptr;
  check(OXICUDA_DRIVER(CtxGetCurrent, &previous), where);
  switched = false;
  if (previous != ctx) {
    if (OXICUDA_DETAIL_UNLIKELY(context_destroyed(previous))) current_context_destroyed(where);
    check(OXICUDA_DRIVER(CtxSetCurrent, ctx), where);
    switched = true;
  }
  return previous;
}

// oxicuda's own guard around one call: `ctx` current for the call (its
// caller holds the Context), the previous one restored when it switched.
class SwitchCurrent {
 public:
  SwitchCurrent(CUcontext ctx, SourceLocation where) : previous_(switch_current(ctx, switched_, where)) {}
  SwitchCurrent(const SwitchCurrent&) = delete;
  SwitchCurrent& operator=(const SwitchCurrent&) = delete;
  ~SwitchCurrent() {
    if (switched_)
      check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, previous_), "restoring the thread's previous context");
  }

 private:
  bool switched_ = false;
  CUcontext previous_;
};

// How many times make_current() has run on this thread: a guard whose
// context was current already restores it at its end when this changed.
inline thread_local unsigned long make_current_count = 0;
}  // namespace detail

inline Context Context::primary(const Device& device, SourceLocation where) {
  detail::reclaim();
  CUcontext raw = nullptr;
  detail::check(OXICUDA_DRIVER(DevicePrimaryCtxRetain, &raw, device.raw()), where);
  return Context(raw, device.raw(), detail::Shared<Owner>::make(raw, device.raw(), Kind::primary));
}

inline void Context::reset_primary(const Device& device, SourceLocation where) {
  detail::reclaim();
  detail::check(OXICUDA_DRIVER(DevicePrimaryCtxReset, device.raw()), where);
}

inline Context Context::create(const Device& device, ContextOptions options, SourceLocation where) {
  unsigned flags = static_cast<unsigned>(options.schedule);
  if (options.keep_local_memory) flags |= ffi::CU_CTX_LMEM_RESIZE_TO_MAX;
  // cuCtxCreate pushes the new context on the calling thread's stack; pop it
  // so the thread's current context is what it was.
  detail::reclaim();
  CUcontext raw = nullptr;
  detail::check(OXICUDA_DRIVER(CtxCreate, &raw, flags, device.raw()), where);
  detail::note_context_created(raw);
  CUcontext popped = nullptr;
  const detail::Outcome pop = OXICUDA_DRIVER(CtxPopCurrent, &popped);
  if (OXICUDA_DETAIL_UNLIKELY(!pop.ok())) {
    detail::check_nothrow(OXICUDA_DRIVER(CtxDestroy, raw),
                          "destroying the context of a failed oxicuda::Context::create");
    detail::fail(pop, where);
  }
  return Context(raw, device.raw(), detail::Shared<Owner>::make(raw, device.raw(), Kind::created));
}

inline Context Context::adopt_green(CUgreenCtx green, const Device& device, SourceLocation where) {
  CUcontext raw = nullptr;
  const detail::Outcome r = OXICUDA_DRIVER(CtxFromGreenCtx, &raw, green);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
    detail::check_nothrow(OXICUDA_DRIVER(GreenCtxDestroy, green), "destroying an unconverted green context");
    detail::fail(r, where);
  }
  detail::note_context_created(raw);
  return Context(raw, device.raw(), detail::Shared<Owner>::make(raw, device.raw(), Kind::green, green));
}

inline Context Context::current(SourceLocation where) {
  CUcontext raw = nullptr;
  detail::check(OXICUDA_DRIVER(CtxGetCurrent, &raw), where);
  return borrow(raw);
}

inline Device Context::device(SourceLocation where) const {
  CUcontext raw = detail::checked(*this, "oxicuda::Context", "oxicuda::Context::device", where);
  if (device_ >= 0) return Device::from_raw(device_);
  detail::SwitchCurrent current(raw, where);
  ffi::CUdevice d = 0;
  detail::check(OXICUDA_DRIVER(CtxGetDevice, &d), where);
  return Device::from_raw(d);
}

inline unsigned long long Context::id(SourceLocation where) const {
  unsigned long long id = 0;
  detail::check(OXICUDA_DRIVER(CtxGetId, detail::checked(*this, "oxicuda::Context", "oxicuda::Context::id", where), &id),
                where);
  return id;
}

inline void Context::make_current(SourceLocation where) const {
  detail::check(OXICUDA_DRIVER(CtxSetCurrent, detail::checked(*this, "oxicuda::Context", "oxicuda::Context::make_current", where)), where);
  ++detail::make_current_count;
}

inline void Context::synchronize(SourceLocation where) const {
  {
    detail::SwitchCurrent current(detail::checked(*this, "oxicuda::Context", "oxicuda::Context::synchronize", where),
                                  where);
    detail::check(OXICUDA_DRIVER(CtxSynchronize), where);
  }
  detail::reclaim();
}

inline StreamPriorityRange Context::stream_priority_range(SourceLocation where) const {
  detail::SwitchCurrent current(
      detail::checked(*this, "oxicuda::Context", "oxicuda::Context::stream_priority_range", where), where);
  StreamPriorityRange r;
  detail::check(OXICUDA_DRIVER(CtxGetStreamPriorityRange, &r.least, &r.greatest),
                where);
  return r;
}

inline MemoryInfo Context::memory_info(SourceLocation where) const {
  detail::reclaim();  // (the memory that finished host functions' callables own is freed first)
  detail::SwitchCurrent current(detail::checked(*this, "oxicuda::Context", "oxicuda::Context::memory_info", where),
                                where);
  MemoryInfo m;
  detail::check(OXICUDA_DRIVER(MemGetInfo, &m.free, &m.total), where);
  return m;
}

OXICUDA_DETAIL_NAMESPACE_END
