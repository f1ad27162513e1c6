// oxicuda/driver/green_context.hpp — GreenContext: a context that runs its
// work on a share of the device's SMs only (cuGreenCtxCreate), made from a
// group of a split (driver/sm_resource.hpp); its streams are ordinary
// Streams. CUDA 12.4 and newer (its streams: 12.5).
#pragma once

#include <utility>

#include "sm_resource.hpp"
#include "stream.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Whether the loaded driver has green contexts (cuGreenCtxCreate, CUDA 12.4,
// and cuGreenCtxStreamCreate, 12.5). Without them every call here is an
// Error naming the missing entry point and the driver's version.
[[nodiscard]] inline bool green_contexts_available() noexcept {
  return !detail::missing(ffi::Entry::GreenCtxCreate) && !detail::missing(ffi::Entry::GreenCtxStreamCreate);
}

// A green context: the SMs of one SmResource (a group of a split, its
// remainder, or all of a device's), provisioned for the work of its streams
// alone. Copies share it; it is destroyed (one cuGreenCtxDestroy, never
// throwing) when the last of its handles drops: the GreenContext copies,
// its Context (context(), and that Context's copies) and the Streams made
// in it, which keep it alive as a Stream keeps its Context. So a stream is
// always destroyed before its green context, as the driver requires.
//
//   const SmSplit halves = SmResource::of(dev).split(2, dev_sms / 2);
//   GreenContext left(halves.group(0)), right(halves.group(1));
//   Stream s = left.stream();  // launches, events, graphs as on any Stream
//
// Kernels launched in it run on its SMs only (the driver may add SMs under
// MPS, or 2 for a module using dynamic parallelism; never fewer). Disjoint
// green contexts are not promised to run concurrently: other resources
// (CUDA_DEVICE_MAX_CONNECTIONS) may order their work.
//
// One thread at a time: the driver lets a green context be current on only
// one thread at once and does nothing to make calls on it from several
// threads work (cuda.h, cuGreenCtxCreate). oxicuda makes it current around
// each call made through its Context (buffers, modules, streams), so make
// those calls for one green context from one thread at a time; its copies
// may still be handed from thread to thread.
class GreenContext {
 public:
  GreenContext() noexcept = default;
  // A green context of the SMs of `sms` on their device
  // (cuDevResourceGenerateDesc, cuGreenCtxCreate, cuCtxFromGreenCtx). An
  // empty `sms` is an Error.
  explicit GreenContext(const SmResource& sms, SourceLocation where = SourceLocation::current());
  GreenContext(const GreenContext&) noexcept = default;
  GreenContext& operator=(const GreenContext&) noexcept = default;
  // A moved-from GreenContext is empty: using it is an Error.
  GreenContext(GreenContext&& o) noexcept : raw_(std::exchange(o.raw_, nullptr)), context_(std::move(o.context_)) {}
  GreenContext& operator=(GreenContext&& o) noexcept {
    CUgreenCtx raw = std::exchange(o.raw_, nullptr);
    context_ = std::move(o.context_);
    raw_ = raw;
    return *this;
  }

  // The green context of `ctx` (a Context that GreenContext::context gave,
  // or a copy): shares its ownership. Empty when `ctx` is no green context's.
  [[nodiscard]] static GreenContext of(const Context& ctx) noexcept {
    return ctx.green() ? GreenContext(ctx.green(), ctx) : GreenContext();
  }

  // A handle to a green context that other code owns, with its context
  // (cuCtxFromGreenCtx's); oxicuda never destroys it.
  [[nodiscard]] static GreenContext borrow(CUgreenCtx raw, Context ctx) noexcept {
    return GreenContext(raw, std::move(ctx));
  }

  [[nodiscard]] CUgreenCtx raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  // Its context (cuCtxFromGreenCtx), for every call that takes a Context:
  // make it current, allocate, load modules, make Streams (a Stream made
  // with it is the green context's too). It keeps the green context alive.
  // Empty for an empty GreenContext.
  [[nodiscard]] const Context& context() const noexcept { return context_; }
  [[nodiscard]] Device device(SourceLocation where = SourceLocation::current()) const {
    (void)detail::checked(*this, "oxicuda::GreenContext", "oxicuda::GreenContext::device", where);
    return context_.device(where);
  }
  // Its SMs, as the driver has them (cuGreenCtxGetDevResource): they may be
  // split again.
  [[nodiscard]] SmResource sms(SourceLocation where = SourceLocation::current()) const;
  // A new stream in it (cuGreenCtxStreamCreate; always non-blocking, as the
  // driver requires: options.non_blocking = false is an Error). An ordinary
  // Stream, which keeps the green context alive.
  [[nodiscard]] Stream stream(StreamOptions options = {}, SourceLocation where = SourceLocation::current()) const;
  // How many handles share it (GreenContext, Context and Stream alike; 0 when empty).
  [[nodiscard]] long use_count() const noexcept { return raw_ ? context_.use_count() : 0; }

  friend bool operator==(const GreenContext& a, const GreenContext& b) noexcept { return a.raw_ == b.raw_; }

 private:
  GreenContext(CUgreenCtx raw, Context ctx) noexcept : raw_(raw), context_(std::move(ctx)) {}
  CUgreenCtx raw_ = nullptr;
  Context context_;  // Kind::green: owns raw_
};

// The green context that `stream` runs on (cuStreamGetGreenCtx), or an
// empty GreenContext for a stream of an ordinary context. When the stream's
// Context is that green context's (a stream made by GreenContext::stream,
// or with its context()), the result shares its ownership; otherwise (a
// borrowed stream) it borrows the green context, which its owner keeps.
[[nodiscard]] GreenContext green_context_of(StreamRef stream, SourceLocation where = SourceLocation::current());

namespace detail {
[[noreturn]] OXICUDA_DETAIL_COLD inline void green_stream_blocking(SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::GreenContext::stream",
              "a green context's streams are non-blocking (cuGreenCtxStreamCreate requires CU_STREAM_NON_BLOCKING): "
              "options.non_blocking = false is refused",
              where));
}
}  // namespace detail

inline GreenContext::GreenContext(const SmResource& sms, SourceLocation where) {
  if (!sms) detail::empty_handle("oxicuda::SmResource", "oxicuda::GreenContext::GreenContext", where);
  detail::reclaim();
  ffi::CUdevResource resource = sms.raw();
  CUdevResourceDesc desc = nullptr;
  detail::check(OXICUDA_DRIVER(DevResourceGenerateDesc, &desc, &resource, 1u), where);
  CUgreenCtx raw = nullptr;
  detail::check(OXICUDA_DRIVER(GreenCtxCreate, &raw, desc, sms.device().raw(), ffi::CU_GREEN_CTX_DEFAULT_STREAM),
                where);
  context_ = Context::adopt_green(raw, sms.device(), where);  // (destroys `raw` if it throws)
  raw_ = raw;
}

inline SmResource GreenContext::sms(SourceLocation where) const {
  CUgreenCtx raw = detail::checked(*this, "oxicuda::GreenContext", "oxicuda::GreenContext::sms", where);
  ffi::CUdevResource resource{};
  detail::check(OXICUDA_DRIVER(GreenCtxGetDevResource, raw, &resource, ffi::CU_DEV_RESOURCE_TYPE_SM), where);
  return SmResource::from_raw(resource, context_.device(where));
}

inline Stream GreenContext::stream(StreamOptions options, SourceLocation where) const {
  CUgreenCtx raw = detail::checked(*this, "oxicuda::GreenContext", "oxicuda::GreenContext::stream", where);
  if (!options.non_blocking) detail::green_stream_blocking(where);
  detail::reclaim();
  CUstream q = nullptr;
  detail::check(OXICUDA_DRIVER(GreenCtxStreamCreate, &q, raw, ffi::CU_STREAM_NON_BLOCKING, options.priority), where);
  return Stream::own(q, context_, where);
}

inline GreenContext green_context_of(StreamRef stream, SourceLocation where) {
  CUgreenCtx green = nullptr;
  detail::on_stream(stream, "oxicuda::green_context_of", where,
                    [&](CUstream q) { detail::check(OXICUDA_DRIVER(StreamGetGreenCtx, q, &green), where); });
  if (!green) return {};
  if (stream.context().green() == green) return GreenContext::of(stream.context());
  CUcontext ctx = nullptr;
  detail::check(OXICUDA_DRIVER(CtxFromGreenCtx, &ctx, green), where);
  return GreenContext::borrow(green, Context::borrow(ctx));
}

OXICUDA_DETAIL_NAMESPACE_END
