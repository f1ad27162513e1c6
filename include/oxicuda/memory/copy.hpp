// oxicuda/memory/copy.hpp — copies between host and device memory,
// synchronous and stream-ordered, over any host range and any device range;
// the ordering rule that the synchronous copies and fills (fill.hpp) share;
// element counts checked as bytes; the per-thread stream refused for
// stream-ordered memory.
#pragma once

#include <concepts>
#include <cstddef>
#include <iterator>
#include <type_traits>

#include "span.hpp"
#include "../driver/current.hpp"
#include "../driver/stream.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// copy(dst, src) and copy_async(stream, dst, src) copy between host memory
// (any contiguous range: std::vector, std::array, std::span, PinnedBuffer)
// and device memory (DeviceBuffer, DeviceSpan), in any direction, after
// checking that both sides have the same element type and count. The async
// forms are one driver call each, with no allocation and no context switch;
// from pageable host memory the driver stages the copy, so it may return
// before or after the copy is done — use a PinnedBuffer for truly async copies.


namespace detail {

inline std::size_t checked_bytes(std::size_t count, std::size_t element_size, const char* operation,
                                 SourceLocation where) {
  if (count > static_cast<std::size_t>(-1) / element_size)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                cat({std::to_string(count), " elements of ", std::to_string(element_size), " bytes overflow size_t"}),
                where));
  return count * element_size;
}

// The per-thread default stream names the calling thread's queue: a
// stream-ordered buffer's stream must be one queue for every thread.
inline void refuse_per_thread(const Stream& stream, const char* operation, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(stream.raw() == ffi::stream_per_thread()))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                "the per-thread default stream is a different queue on every thread: a stream-ordered buffer on it "
                "would be freed on the queue of whichever thread drops it, not after the work of the thread that "
                "used it. Use a Stream of your own (or Stream::legacy_default(ctx))",
                where));
}

template <class R>
concept host_range = !device_range<R> && requires(R & r) {
  {std::data(r)};
  { std::size(r) } -> std::convertible_to<std::size_t>;
};

template <class R>
using host_element_t = std::remove_pointer_t<decltype(std::data(std::declval<R&>()))>;

template <class A, class B>
inline constexpr bool same_element_v = std::is_same_v<std::remove_cv_t<A>, std::remove_cv_t<B>>;

[[noreturn]] OXICUDA_DETAIL_COLD inline void size_mismatch(const char* operation, std::size_t dst, std::size_t src,
                                                    std::size_t element_size, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
              cat({"size mismatch: the destination has ", std::to_string(dst), " elements, the source ",
                   std::to_string(src), " (element size ", std::to_string(element_size), " bytes)",
                   dst == 0 || src == 0 ? "; an empty device buffer is default-constructed or moved-from" : ""}),
              where));
}

inline void check_sizes(const char* operation, std::size_t dst, std::size_t src, std::size_t element_size,
                        SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(dst != src)) size_mismatch(operation, dst, src, element_size, where);
}

}  // namespace detail

namespace detail {

// A DeviceBuffer (an owning buffer: it knows its Context), as opposed to a
// span. A default-constructed or moved-from one has no context.
template <class R>
concept owning_device_buffer = device_range<R> && requires(const R& r) {
  { r.context() } -> std::same_as<const Context&>;
  r.stream_ordered();
};

// A moved-from or default-constructed DeviceBuffer is an Error naming the
// type (an empty one of a context, DeviceBuffer(ctx, 0), is not).
template <class R>
void check_buffer_handle(const R& r, const char* operation, SourceLocation where) {
  if constexpr (owning_device_buffer<R>)
    if (OXICUDA_DETAIL_UNLIKELY(!r.context())) empty_handle("oxicuda::DeviceBuffer", operation, where);
}

// A span's size in bytes, or an Error when size() * sizeof(T) does not fit
// a size_t (a span made from a raw pointer and a wrong count).
template <class T>
std::size_t span_bytes(const DeviceSpan<T>& s, const char* operation, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(!s.size_fits()))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                cat({"the device span has ", std::to_string(s.size()), " elements of ", std::to_string(sizeof(T)),
                     " bytes: more bytes than a size_t holds; its count is wrong"}),
                where));
  return s.size_bytes();
}

// Which sides of a copy are device memory (from the ranges' types).
enum class CopyKind { device_to_device, host_to_device, device_to_host };

// The two sides of a copy, after its checks (same element type, a mutable
// destination, the same count): a device address or a host pointer each.
struct CopySides {
  CopyKind kind = CopyKind::device_to_device;
  ffi::CUdeviceptr dst_device = 0;
  ffi::CUdeviceptr src_device = 0;
  void* dst_host = nullptr;
  const void* src_host = nullptr;
  std::size_t bytes = 0;
  CUcontext ctx = nullptr;  // the device side's context, when its span knows it
};

template <class Dst, class Src>
CopySides copy_sides(Dst& dst, Src& src, const char* op, SourceLocation where) {
  CopySides c;
  if constexpr (device_range<Dst> && device_range<Src>) {
    using T = device_element_t<Dst>;
    static_assert(same_element_v<T, device_element_t<Src>>, "copy: element types differ");
    static_assert(!std::is_const_v<T>, "copy: the destination is const");
    const auto d = dst.device_span();
    const auto s = src.device_span();
    check_sizes(op, d.size(), s.size(), sizeof(T), where);
    check_buffer_handle(dst, op, where);
    check_buffer_handle(src, op, where);
    c.dst_device = d.device_ptr();
    c.src_device = s.device_ptr();
    c.bytes = span_bytes(d, op, where);  // (kind: device_to_device)
    c.ctx = d.context() ? d.context() : s.context();
  } else if constexpr (device_range<Dst>) {
    using T = device_element_t<Dst>;
    static_assert(same_element_v<T, host_element_t<Src>>, "copy: element types differ");
    static_assert(!std::is_const_v<T>, "copy: the destination is const");
    const auto d = dst.device_span();
    check_sizes(op, d.size(), std::size(src), sizeof(T), where);
    check_buffer_handle(dst, op, where);
    c.kind = CopyKind::host_to_device;
    c.dst_device = d.device_ptr();
    c.src_host = std::data(src);
    c.bytes = span_bytes(d, op, where);
    c.ctx = d.context();
  } else {
    using T = device_element_t<Src>;
    static_assert(same_element_v<T, host_element_t<Dst>>, "copy: element types differ");
    static_assert(!std::is_const_v<host_element_t<Dst>>, "copy: the destination is const");
    const auto s = src.device_span();
    check_sizes(op, std::size(dst), s.size(), sizeof(T), where);
    check_buffer_handle(src, op, where);
    c.kind = CopyKind::device_to_host;
    c.dst_host = const_cast<void*>(static_cast<const void*>(std::data(dst)));  // not const: asserted above
    c.src_device = s.device_ptr();
    c.bytes = span_bytes(s, op, where);
    c.ctx = s.context();
  }
  return c;
}

// One stream-ordered copy call: `bytes` from `offset` on both sides.
inline Outcome copy_call(CUstream q, const CopySides& c, std::size_t offset, std::size_t bytes) noexcept {
  switch (c.kind) {
    case CopyKind::device_to_device:
      return OXICUDA_DRIVER(MemcpyDtoDAsync, c.dst_device + offset, c.src_device + offset, bytes, q);
    case CopyKind::host_to_device:
      return OXICUDA_DRIVER(MemcpyHtoDAsync, c.dst_device + offset, static_cast<const char*>(c.src_host) + offset,
                            bytes, q);
    case CopyKind::device_to_host:
      break;
  }
  return OXICUDA_DRIVER(MemcpyDtoHAsync, static_cast<char*>(c.dst_host) + offset, c.src_device + offset, bytes, q);
}

// How many bytes from device address `p` stay within the one mapping that
// holds it (cuPointerGetAttributes: its base and size), at most `most`.
inline std::size_t within_mapping(ffi::CUdeviceptr p, std::size_t most) noexcept {
  ffi::CUpointer_attribute attributes[2] = {ffi::CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
                                            ffi::CU_POINTER_ATTRIBUTE_MAPPING_SIZE};
  ffi::CUdeviceptr base = 0;
  std::size_t size = 0;
  void* data[2] = {&base, &size};
  if (!OXICUDA_DRIVER(PointerGetAttributes, 2u, attributes, data, p).ok() || p < base || p - base >= size) return most;
  // (Not std::min: <algorithm> would cost every translation unit about 250 M
  // compiler instructions; BENCHMARKS.md, "Include cost".)
  const auto left = static_cast<std::size_t>(base + size - p);
  return left < most ? left : most;
}

// The copy of copy_by_mappings (below), a mapping at a time. Returns
// `refused` when the copy lies within one mapping (nothing enqueued), a
// later piece's refusal once the stream has finished the pieces before it,
// or success.
inline Outcome copy_in_pieces(CUstream q, const CopySides& c, Outcome refused) noexcept {
  for (std::size_t done = 0; done < c.bytes;) {
    std::size_t piece = c.bytes - done;
    if (c.kind != CopyKind::host_to_device) piece = within_mapping(c.src_device + done, piece);
    if (c.kind != CopyKind::device_to_host) piece = within_mapping(c.dst_device + done, piece);
    if (done == 0 && piece == c.bytes) return refused;  // (within one mapping: refused for another reason)
    const Outcome r = copy_call(q, c, done, piece);
    if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
      if (done != 0) (void)OXICUDA_DRIVER(StreamSynchronize, q);
      return r;
    }
    done += piece;
  }
  return Outcome{ffi::CUDA_SUCCESS, refused.entry};
}

// After the driver refused a stream-ordered copy. Driver 580 (H100,
// tools/probes/vmm_async_copy.cpp) refuses with CUDA_ERROR_INVALID_VALUE a
// copy on a stream of the user's whose device side runs over two physical
// allocations mapped side by side (virtual memory: a GrowableBuffer that has
// grown) when no context is current; with one current, or a mapping at a
// time, it takes the same bytes. So the copy is enqueued again, with the
// memory's context current (when its span knows it; a failure to make it
// current goes to the diagnostic hook, and the pieces go without it), in
// pieces that each stay within one mapping on both sides, in order on the
// same stream: the same copy. Returns what the caller raises, if not
// success: any other refusal, or one of a copy within one mapping, with
// nothing enqueued; a piece refused after others were enqueued, once the
// stream has finished them (no byte lands after the Error). copy and
// copy_batch both use it; it never throws.
[[nodiscard]] OXICUDA_DETAIL_COLD inline Outcome copy_by_mappings(CUstream q, const CopySides& c,
                                                                Outcome refused) noexcept {
  if (refused.result != ffi::CUDA_ERROR_INVALID_VALUE) return refused;
  const ScopedCurrentNothrow current(c.ctx, "making a copy's context current to copy it a VMM mapping at a time");
  return copy_in_pieces(q, c, refused);
}

// The one implementation of every copy direction, enqueued on queue `q`.
template <class Dst, class Src>
void copy_on(CUstream q, Dst& dst, Src& src, const char* op, SourceLocation where) {
  const CopySides c = copy_sides(dst, src, op, where);
  const Outcome r = copy_call(q, c, 0, c.bytes);  // (c.kind is known here: the switch folds away)
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) check(copy_by_mappings(q, c, r), where);
}

template <class R>
CUcontext context_of(const R& r) noexcept {
  if constexpr (device_range<R>)
    return r.device_span().context();
  else
    return nullptr;
}

// The stream a stream-ordered buffer's memory is ordered on (else null).
template <class R>
CUstream stream_of(const R& r) noexcept {
  if constexpr (device_range<R>)
    return r.device_span().stream();
  else
    return nullptr;
}

// A synchronous operation: `enqueue` on a queue, with the memory's context
// current (when known), then wait for that queue. The queue is the stream
// of a stream-ordered side (allocate_async), so that the operation comes
// after the work enqueued there before it (when both sides are
// stream-ordered on different streams, the source's stream is synchronized
// first); otherwise it is the calling thread's per-thread default stream,
// which is ordered after none of the user's streams. Unlike the driver's own
// "synchronous" cuMemcpy/cuMemset (which may return before a pageable copy
// or a memset has landed, and are not ordered with non-blocking streams),
// the bytes are in place when this returns, for every stream to see.
template <class Enqueue>
void synchronously(CUcontext ctx, CUstream ordered_on, CUstream also_after, SourceLocation where,
                   Enqueue&& enqueue) {
  reclaim();
  const CUstream q = ordered_on ? ordered_on : ffi::stream_per_thread();
  auto run = [&] {
    if (also_after && also_after != q) check(OXICUDA_DRIVER(StreamSynchronize, also_after), where);
    enqueue(q);
    check(OXICUDA_DRIVER(StreamSynchronize, q), where);
  };
  if (ctx) {
    SwitchCurrent current(ctx, where);
    run();
  } else {
    run();
  }
  reclaim();
}

// clang-format off
template <class Dst, class Src>
concept copyable = (device_range<Dst> || device_range<Src>) &&
                   (device_range<Dst> || host_range<Dst>) &&
                   (device_range<Src> || host_range<Src>);
// clang-format on

// Enqueues on `stream`, then waits for it (copy, and fill and fill_bytes, with a stream).
template <class Enqueue>
void on_stream_and_wait(StreamRef stream, const char* operation, SourceLocation where, Enqueue&& enqueue) {
  on_stream(stream, operation, where, [&](CUstream q) {
    enqueue(q);
    check(OXICUDA_DRIVER(StreamSynchronize, q), where);
  });
  reclaim();
}

}  // namespace detail

// The ordering rule of the synchronous copies and fills (copy(dst, src),
// fill, fill_bytes, DeviceBuffer::copy_from/copy_to): when one returns, the
// bytes are in place. It is ordered after the work of a stream-ordered
// buffer's stream (allocate_async: it runs on that stream), and after
// nothing else: work pending on your streams is not waited for. Where work
// is pending, use the forms that take a stream, copy(stream, dst, src),
// fill(stream, dst, value), fill_bytes(stream, dst, byte): they enqueue on
// `stream`, after everything enqueued there before, and wait for it.

// Synchronous copy (the ordering rule above). The device side's context,
// when its span knows it, is current for the call.
template <class Dst, class Src>
requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy(Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  const CUcontext ctx = detail::context_of(dst) ? detail::context_of(dst) : detail::context_of(src);
  const CUstream on = detail::stream_of(dst) ? detail::stream_of(dst) : detail::stream_of(src);
  detail::synchronously(ctx, on, detail::stream_of(src), where,
                        [&](CUstream q) { detail::copy_on(q, dst, src, "oxicuda::copy", where); });
}

// Stream-ordered and synchronous: enqueued on `stream` (after the work
// enqueued there before), then waits for `stream`; the bytes are in place
// when it returns.
template <class Dst, class Src>
requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy(StreamRef stream, Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  detail::on_stream_and_wait(stream, "oxicuda::copy", where,
                             [&](CUstream q) { detail::copy_on(q, dst, src, "oxicuda::copy", where); });
}

// Stream-ordered copy: enqueued on `stream`, one driver call.
template <class Dst, class Src>
requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy_async(StreamRef stream, Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::copy_async", where,
                    [&](CUstream q) { detail::copy_on(q, dst, src, "oxicuda::copy_async", where); });
}

OXICUDA_DETAIL_NAMESPACE_END
