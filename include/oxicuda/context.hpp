// oxicuda/context.hpp — Context (a device's primary context, or one created
// explicitly), ScopedCurrent, the "make current, restore on exit" guard, and
// ScopedCurrentNothrow, the same for destructors.
#pragma once

#include <utility>

#include "callback.hpp"
#include "device.hpp"
#include "handle.hpp"

OXICUDA_NAMESPACE_BEGIN

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
// one is destroyed (cuCtxDestroy) when the last copy drops; a borrowed one is
// never released by oxicuda.
class Context {
 public:
  enum class Kind { borrowed, primary, created };

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
  // A handle to a context that other code owns; oxicuda never releases it.
  [[nodiscard]] static Context borrow(CUcontext raw) noexcept { return Context(raw, -1, {}); }
  // The calling thread's current context, borrowed; empty when none is current.
  [[nodiscard]] static Context current(SourceLocation where = SourceLocation::current());

  [[nodiscard]] CUcontext raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] Kind kind() const noexcept { return owner_ ? owner_->kind : Kind::borrowed; }
  [[nodiscard]] Device device(SourceLocation where = SourceLocation::current()) const;

  // Makes this the calling thread's current context (cuCtxSetCurrent).
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
    Owner(CUcontext r, ffi::CUdevice d, Kind k) noexcept : raw(r), device(d), kind(k) {}
    ~Owner() {
      if (kind == Kind::primary)
        detail::check_nothrow(OXICUDA_DRIVER(DevicePrimaryCtxRelease, device),
                              "releasing an oxicuda::Context (primary)");
      else
        detail::check_nothrow(OXICUDA_DRIVER(CtxDestroy, raw),
                              "destroying an oxicuda::Context");
    }
  };

  Context(CUcontext raw, ffi::CUdevice device, detail::Shared<Owner> owner) noexcept
      : raw_(raw), device_(device), owner_(std::move(owner)) {}

  CUcontext raw_ = nullptr;
  ffi::CUdevice device_ = -1;  // -1: not known yet (borrowed)
  detail::Shared<Owner> owner_;
};

// Makes a context current on the calling thread for the guard's lifetime and
// then restores whatever was current before (also when that was nothing).
// When the context is already current it costs one cuCtxGetCurrent. An
// empty Context or a null CUcontext is an Error before any driver call: the
// driver would take cuCtxSetCurrent(NULL) as "pop", and the restore would
// then overwrite the context below the top of the thread's stack.
class ScopedCurrent {
 public:
  explicit ScopedCurrent(const Context& ctx, SourceLocation where = SourceLocation::current())
      : ScopedCurrent(ctx.raw(), where, "oxicuda::Context") {}
  explicit ScopedCurrent(CUcontext ctx, SourceLocation where = SourceLocation::current())
      : ScopedCurrent(ctx, where, "CUcontext (null)") {}
  ScopedCurrent(const ScopedCurrent&) = delete;
  ScopedCurrent& operator=(const ScopedCurrent&) = delete;
  ~ScopedCurrent() {
    if (switched_)
      detail::check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, previous_),
                            "restoring the thread's previous context (oxicuda::ScopedCurrent)");
  }

 private:
  ScopedCurrent(CUcontext ctx, SourceLocation where, const char* empty_type) {
    if (OXICUDA_UNLIKELY(ctx == nullptr)) detail::empty_handle(empty_type, "oxicuda::ScopedCurrent", where);
    detail::check(OXICUDA_DRIVER(CtxGetCurrent, &previous_), where);
    if (previous_ != ctx) {
      detail::check(OXICUDA_DRIVER(CtxSetCurrent, ctx), where);
      switched_ = true;
    }
  }

  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

namespace detail {

// ScopedCurrent for destructors: never throws; failures go to the diagnostic
// hook, saying what was being done. A null context changes nothing.
class ScopedCurrentNothrow {
 public:
  ScopedCurrentNothrow(CUcontext ctx, const char* during) noexcept : during_(during) {
    if (ctx && check_nothrow(OXICUDA_DRIVER(CtxGetCurrent, &previous_), during) && previous_ != ctx)
      switched_ = check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, ctx), during);
  }
  ScopedCurrentNothrow(const ScopedCurrentNothrow&) = delete;
  ScopedCurrentNothrow& operator=(const ScopedCurrentNothrow&) = delete;
  ~ScopedCurrentNothrow() {
    if (switched_) check_nothrow(OXICUDA_DRIVER(CtxSetCurrent, previous_), during_);
  }

 private:
  const char* during_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace detail

inline Context Context::primary(const Device& device, SourceLocation where) {
  CUcontext raw = nullptr;
  detail::check(OXICUDA_DRIVER(DevicePrimaryCtxRetain, &raw, device.raw()), where);
  return Context(raw, device.raw(), detail::Shared<Owner>::make(raw, device.raw(), Kind::primary));
}

inline Context Context::create(const Device& device, ContextOptions options, SourceLocation where) {
  unsigned flags = static_cast<unsigned>(options.schedule);
  if (options.keep_local_memory) flags |= ffi::CU_CTX_LMEM_RESIZE_TO_MAX;
  // cuCtxCreate pushes the new context on the calling thread's stack; pop it
  // so the thread's current context is what it was.
  CUcontext raw = nullptr;
  detail::check(OXICUDA_DRIVER(CtxCreate, &raw, flags, device.raw()), where);
  CUcontext popped = nullptr;
  const detail::Outcome pop = OXICUDA_DRIVER(CtxPopCurrent, &popped);
  if (OXICUDA_UNLIKELY(!pop.ok())) {
    detail::check_nothrow(OXICUDA_DRIVER(CtxDestroy, raw),
                          "destroying the context of a failed oxicuda::Context::create");
    detail::fail(pop, where);
  }
  return Context(raw, device.raw(), detail::Shared<Owner>::make(raw, device.raw(), Kind::created));
}

inline Context Context::current(SourceLocation where) {
  CUcontext raw = nullptr;
  detail::check(OXICUDA_DRIVER(CtxGetCurrent, &raw), where);
  return borrow(raw);
}

inline Device Context::device(SourceLocation where) const {
  CUcontext raw = detail::checked(*this, "oxicuda::Context", "oxicuda::Context::device", where);
  if (device_ >= 0) return Device::from_raw(device_);
  ScopedCurrent current(raw, where);
  ffi::CUdevice d = 0;
  detail::check(OXICUDA_DRIVER(CtxGetDevice, &d), where);
  return Device::from_raw(d);
}

inline void Context::make_current(SourceLocation where) const {
  detail::check(OXICUDA_DRIVER(CtxSetCurrent, detail::checked(*this, "oxicuda::Context", "oxicuda::Context::make_current", where)), where);
}

inline void Context::synchronize(SourceLocation where) const {
  {
    ScopedCurrent current(detail::checked(*this, "oxicuda::Context", "oxicuda::Context::synchronize", where), where);
    detail::check(OXICUDA_DRIVER(CtxSynchronize), where);
  }
  detail::reclaim();
}

inline StreamPriorityRange Context::stream_priority_range(SourceLocation where) const {
  ScopedCurrent current(detail::checked(*this, "oxicuda::Context", "oxicuda::Context::stream_priority_range", where), where);
  StreamPriorityRange r;
  detail::check(OXICUDA_DRIVER(CtxGetStreamPriorityRange, &r.least, &r.greatest),
                where);
  return r;
}

inline MemoryInfo Context::memory_info(SourceLocation where) const {
  ScopedCurrent current(detail::checked(*this, "oxicuda::Context", "oxicuda::Context::memory_info", where), where);
  MemoryInfo m;
  detail::check(OXICUDA_DRIVER(MemGetInfo, &m.free, &m.total), where);
  return m;
}


OXICUDA_NAMESPACE_END
