// oxicuda/memory/peer_copy.hpp — copies between the memory of two contexts,
// as between two GPUs (cuMemcpyPeerAsync): over the link when peer access
// is enabled, staged by the driver otherwise.
#pragma once

#include "copy.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// Both sides' contexts, which cuMemcpyPeer names: a span of a DeviceBuffer
// knows its own; a span made from a raw pointer must be given one.
struct PeerSides {
  CopySides sides;
  CUcontext dst_ctx = nullptr;
  CUcontext src_ctx = nullptr;
};

template <class Dst, class Src>
PeerSides peer_sides(Dst& dst, Src& src, const char* op, SourceLocation where) {
  PeerSides p{copy_sides(dst, src, op, where), dst.device_span().context(), src.device_span().context()};
  if (OXICUDA_DETAIL_UNLIKELY(!p.dst_ctx || !p.src_ctx))
    raise(Error(ffi::CUDA_ERROR_INVALID_CONTEXT, op,
                cat({"a peer copy names the context of each side, and the ", !p.dst_ctx ? "destination" : "source",
                     "'s span has none: use a DeviceBuffer's span, or make the span with its context "
                     "(DeviceSpan<T>(ptr, count, ctx.raw()))"}),
                where));
  return p;
}

template <class Dst, class Src>
void copy_peer_on(CUstream q, Dst& dst, Src& src, const char* op, SourceLocation where) {
  const PeerSides p = peer_sides(dst, src, op, where);
  check(OXICUDA_DRIVER(MemcpyPeerAsync, p.sides.dst_device, p.dst_ctx, p.sides.src_device, p.src_ctx, p.sides.bytes, q),
        where);
}

}  // namespace detail

// Stream-ordered copy between device memory of two contexts (two devices),
// element type and count checked as copy()'s: one cuMemcpyPeerAsync on
// `stream` (a stream of either side's device).
template <class Dst, class Src>
  requires detail::device_range<std::remove_cvref_t<Dst>> && detail::device_range<std::remove_cvref_t<Src>>
void copy_peer_async(StreamRef stream, Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::copy_peer_async", where,
                    [&](CUstream q) { detail::copy_peer_on(q, dst, src, "oxicuda::copy_peer_async", where); });
}

// Synchronous: the bytes are in place when it returns (copy()'s ordering
// rule, with the destination's context current).
template <class Dst, class Src>
  requires detail::device_range<std::remove_cvref_t<Dst>> && detail::device_range<std::remove_cvref_t<Src>>
void copy_peer(Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  const CUstream on = detail::stream_of(dst) ? detail::stream_of(dst) : detail::stream_of(src);
  detail::synchronously(detail::context_of(dst), on, detail::stream_of(src), where,
                        [&](CUstream q) { detail::copy_peer_on(q, dst, src, "oxicuda::copy_peer", where); });
}

OXICUDA_DETAIL_NAMESPACE_END
