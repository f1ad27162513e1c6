// oxicuda/memory/managed_batch.hpp — batches of operations on managed
// memory (CUDA 13.0): prefetches to each range's own location
// (cuMemPrefetchBatchAsync), discards (cuMemDiscardBatchAsync) and both at
// once (cuMemDiscardAndPrefetchBatchAsync); a loop of single prefetches
// where the driver has no batched call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "copy_batch.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A range of managed memory (a ManagedBuffer, or a DeviceSpan of one),
// by address and size; a moved-from buffer is an Error when it is made.
class ManagedRange {
 public:
  template <class R>
    requires detail::device_range<R>
  ManagedRange(const R& range, SourceLocation where = SourceLocation::current())  // NOLINT: a range is one
      : ptr_(range.device_span().device_ptr()),
        bytes_(detail::managed_bytes(range, "oxicuda::ManagedRange", where)) {}

  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return bytes_; }

 private:
  ffi::CUdeviceptr ptr_;
  std::size_t bytes_;
};

// One prefetch of a batch: a range and where it goes.
struct Prefetch {
  ManagedRange range;
  MemoryLocation to;
};

// Migrates every range to its location, ordered on `stream`: one
// cuMemPrefetchBatchAsync, consecutive ranges bound for one location
// sharing one entry. Each distinct target device must have concurrent
// managed access (an Error saying so otherwise, before anything is
// enqueued). Empty ranges are left out; an empty batch enqueues nothing.
// Without the batched call (a driver older than CUDA 13.0) or on the legacy
// default stream (which it refuses), a loop of cuMemPrefetchAsync.
void prefetch_batch(StreamRef stream, std::span<const Prefetch> prefetches,
                    SourceLocation where = SourceLocation::current());
inline void prefetch_batch(StreamRef stream, std::initializer_list<Prefetch> prefetches,
                           SourceLocation where = SourceLocation::current()) {
  prefetch_batch(stream, std::span<const Prefetch>(prefetches.begin(), prefetches.size()), where);
}

// Tells the driver that the ranges' contents are no longer needed, ordered
// on `stream`: their pages need not be migrated or kept, and reading one
// before writing or prefetching it gives indeterminate values. The driver's
// call only (CUDA 13.0, not on the legacy default stream): without it, an
// Error (CUDA_ERROR_NOT_SUPPORTED) that names the driver needed, since no
// single call before CUDA 13.0 discards.
void discard_batch(StreamRef stream, std::span<const ManagedRange> ranges,
                   SourceLocation where = SourceLocation::current());
inline void discard_batch(StreamRef stream, std::initializer_list<ManagedRange> ranges,
                          SourceLocation where = SourceLocation::current()) {
  discard_batch(stream, std::span<const ManagedRange>(ranges.begin(), ranges.size()), where);
}

// Discards each range, then prefetches it to its location (its contents
// indeterminate there): one cuMemDiscardAndPrefetchBatchAsync. Without the
// call, or on the legacy default stream, a loop of cuMemPrefetchAsync:
// keeping the contents is one of the outcomes a discard allows.
void discard_and_prefetch_batch(StreamRef stream, std::span<const Prefetch> prefetches,
                                SourceLocation where = SourceLocation::current());
inline void discard_and_prefetch_batch(StreamRef stream, std::initializer_list<Prefetch> prefetches,
                                       SourceLocation where = SourceLocation::current()) {
  discard_and_prefetch_batch(stream, std::span<const Prefetch>(prefetches.begin(), prefetches.size()), where);
}

// Whether the loaded driver has all three batched calls on managed memory.
[[nodiscard]] inline bool batched_managed_available() noexcept {
  return !detail::missing(ffi::Entry::MemPrefetchBatchAsync) && !detail::missing(ffi::Entry::MemDiscardBatchAsync) &&
         !detail::missing(ffi::Entry::MemDiscardAndPrefetchBatchAsync);
}

namespace detail {

inline bool same_location(const ffi::CUmemLocation& a, const ffi::CUmemLocation& b) noexcept {
  return a.type == b.type && a.id == b.id;
}

// The prefetches (or discards and prefetches) of `p`: checked, then the
// batched call `entry` or, without it, a loop of single prefetches.
inline void managed_prefetches(StreamRef stream, std::span<const Prefetch> p, bool discard, const char* op,
                               SourceLocation where) {
  std::size_t n = 0;
  const MemoryLocation* checked = nullptr;  // the location checked last (consecutive repeats are checked once)
  for (const Prefetch& x : p) {
    if (x.range.size_bytes() == 0) continue;
    if (!checked || !same_location(checked->raw(), x.to.raw())) check_managed_target(x.to, op, where);
    checked = &x.to;
    ++n;
  }
  const ffi::Entry entry = discard ? ffi::Entry::MemDiscardAndPrefetchBatchAsync : ffi::Entry::MemPrefetchBatchAsync;
  on_stream(stream, op, where, [&](CUstream q) {
    if (n == 0) return;
    if (missing(entry) || q == ffi::stream_legacy()) {
      for (const Prefetch& x : p)
        if (x.range.size_bytes() != 0)
          check(OXICUDA_DRIVER(MemPrefetchAsync, x.range.device_ptr(), x.range.size_bytes(), x.to.raw(), 0u, q),
                where);
      return;
    }
    constexpr std::size_t per_range = 3 * sizeof(std::uint64_t) + sizeof(ffi::CUmemLocation);
    BatchScratch<32 * per_range> scratch(n * per_range);
    auto* ptrs = scratch.take<ffi::CUdeviceptr>(n);
    auto* sizes = scratch.take<std::size_t>(n);
    auto* idxs = scratch.take<std::size_t>(n);
    auto* locs = scratch.take<ffi::CUmemLocation>(n);
    std::size_t k = 0, runs = 0;
    for (const Prefetch& x : p) {
      if (x.range.size_bytes() == 0) continue;
      if (runs == 0 || !same_location(locs[runs - 1], x.to.raw())) {
        locs[runs] = x.to.raw();
        idxs[runs++] = k;
      }
      ptrs[k] = x.range.device_ptr(), sizes[k++] = x.range.size_bytes();
    }
    if (discard)
      check(OXICUDA_DRIVER(MemDiscardAndPrefetchBatchAsync, ptrs, sizes, n, locs, idxs, runs, 0ull, q), where);
    else
      check(OXICUDA_DRIVER(MemPrefetchBatchAsync, ptrs, sizes, n, locs, idxs, runs, 0ull, q), where);
  });
}

[[noreturn]] OXICUDA_DETAIL_COLD inline void no_discard(const char* why, SourceLocation where) {
  const DriverInfo& info = driver_info();
  raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, "oxicuda::discard_batch",
              cat({why, " (the loaded driver is CUDA ", std::to_string(info.version / 1000), ".",
                   std::to_string(info.version % 1000 / 10),
                   "); a discard needs cuMemDiscardBatchAsync, a driver of CUDA 13.0 or newer, and no single call "
                   "before it discards"}),
              where));
}

}  // namespace detail

inline void prefetch_batch(StreamRef stream, std::span<const Prefetch> prefetches, SourceLocation where) {
  detail::managed_prefetches(stream, prefetches, false, "oxicuda::prefetch_batch", where);
}

inline void discard_and_prefetch_batch(StreamRef stream, std::span<const Prefetch> prefetches,
                                       SourceLocation where) {
  detail::managed_prefetches(stream, prefetches, true, "oxicuda::discard_and_prefetch_batch", where);
}

inline void discard_batch(StreamRef stream, std::span<const ManagedRange> ranges, SourceLocation where) {
  std::size_t n = 0;
  for (const ManagedRange& r : ranges) n += r.size_bytes() != 0;
  detail::on_stream(stream, "oxicuda::discard_batch", where, [&](CUstream q) {
    if (n == 0) return;
    if (detail::missing(ffi::Entry::MemDiscardBatchAsync))
      detail::no_discard("this driver has no cuMemDiscardBatchAsync", where);
    if (q == ffi::stream_legacy())
      detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::discard_batch",
                          "the driver's batched discard refuses the legacy default stream: use a Stream of your own",
                          where));
    constexpr std::size_t per_range = 2 * sizeof(std::uint64_t);
    detail::BatchScratch<32 * per_range> scratch(n * per_range);
    auto* ptrs = scratch.take<ffi::CUdeviceptr>(n);
    auto* sizes = scratch.take<std::size_t>(n);
    std::size_t k = 0;
    for (const ManagedRange& r : ranges)
      if (r.size_bytes() != 0) ptrs[k] = r.device_ptr(), sizes[k++] = r.size_bytes();
    detail::check(OXICUDA_DRIVER(MemDiscardBatchAsync, ptrs, sizes, n, 0ull, q), where);
  });
}

OXICUDA_DETAIL_NAMESPACE_END
