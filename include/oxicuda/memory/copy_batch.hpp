// oxicuda/memory/copy_batch.hpp — many copies in one driver call
// (cuMemcpyBatchAsync, CUDA 13.0), each with its own attributes (how its
// source may be read, where managed memory is best reached), and a loop of
// single copies where the driver has no batched call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "managed.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// When a copy of a batch may read its source (CUmemcpySrcAccessOrder).
enum class SourceAccess : int {
  stream = ffi::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,  // in stream order, as any copy_async (the default)
  // before copy_batch returns, out of stream order: for a source that dies
  // with the caller's scope (a local array), when no earlier work on the
  // stream touches it
  during_call = ffi::CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
  // at any time, before or after copy_batch returns, out of stream order:
  // for host memory that CUDA did not allocate and no earlier work touches
  any = ffi::CU_MEMCPY_SRC_ACCESS_ORDER_ANY,
};

// One copy's attributes (CUmemcpyAttributes), by designated initializers:
//   {dst, src, {.source_access = oxicuda::SourceAccess::during_call}}
// The location hints apply to managed memory (and, where the device can
// reach pageable memory, to memory of malloc's); the driver ignores them
// for other memory.
struct CopyOptions {
  SourceAccess source_access = SourceAccess::stream;
  std::optional<MemoryLocation> source_hint{};
  std::optional<MemoryLocation> destination_hint{};
  bool prefer_overlap_with_compute = false;  // a hint (CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)

  friend bool operator==(const CopyOptions& a, const CopyOptions& b) noexcept {
    auto same = [](const std::optional<MemoryLocation>& x, const std::optional<MemoryLocation>& y) {
      return x.has_value() == y.has_value() &&
             (!x || (x->raw().type == y->raw().type && x->raw().id == y->raw().id));
    };
    return a.source_access == b.source_access && same(a.source_hint, b.source_hint) &&
           same(a.destination_hint, b.destination_hint) &&
           a.prefer_overlap_with_compute == b.prefer_overlap_with_compute;
  }
};

namespace detail {
struct BatchCopyAccess;  // (below: what copy_batch reads of a BatchCopy)
template <class R>
struct device_element_lazy {
  using type = device_element_t<R>;
};
template <class R>
struct host_element_lazy {
  using type = host_element_t<R>;
};
// A side's element type, whichever kind of range it is.
template <class R>
using batch_element_t = std::conditional_t<device_range<R>, device_element_lazy<R>, host_element_lazy<R>>;
}  // namespace detail

// One copy of a batch: a destination and a source as copy_async takes them
// (host ranges, DeviceBuffer, DeviceSpan, ManagedBuffer, PinnedBuffer; one
// side at least in device memory), and its options. Element types are
// checked when it is made; the counts, by copy_batch, before the driver
// sees anything. It keeps addresses, not the ranges: the memory must live
// until the copy has run (as for copy_async).
class BatchCopy {
 public:
  // clang-format off
  template <class Dst, class Src>
    requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
  BatchCopy(Dst&& dst, Src&& src, CopyOptions options = {}) noexcept : options_(options) {
    // clang-format on
    using T = typename detail::batch_element_t<std::remove_cvref_t<Dst>>::type;
    using U = typename detail::batch_element_t<std::remove_cvref_t<Src>>::type;
    static_assert(detail::same_element_v<T, U>, "copy_batch: element types differ");
    static_assert(!std::is_const_v<T>, "copy_batch: the destination is const");
    side(dst, dst_, dst_count_, dst_device_);
    side(src, src_, src_count_, src_device_);
    element_size_ = sizeof(T);
  }

  [[nodiscard]] const CopyOptions& options() const noexcept { return options_; }

 private:
  friend struct detail::BatchCopyAccess;

  template <class R>
  void side(R& r, std::uintptr_t& address, std::size_t& count, bool& device) noexcept {
    using Range = std::remove_cvref_t<R>;
    if constexpr (detail::device_range<Range>) {
      const auto s = r.device_span();
      address = static_cast<std::uintptr_t>(s.device_ptr());
      count = s.size();
      device = true;
      if (!ctx_) ctx_ = s.context();
      if constexpr (detail::owning_device_buffer<Range>) empty_buffer_ = empty_buffer_ || !r.context();
    } else {
      address = reinterpret_cast<std::uintptr_t>(std::data(r));
      count = static_cast<std::size_t>(std::size(r));
      device = false;
    }
  }

  std::uintptr_t dst_ = 0, src_ = 0;
  std::size_t dst_count_ = 0, src_count_ = 0, element_size_ = 1;
  CUcontext ctx_ = nullptr;  // the device side's context, where its range knows it
  bool dst_device_ = false, src_device_ = false, empty_buffer_ = false;
  CopyOptions options_;
};

// Enqueues every copy of `copies` on `stream`: one cuMemcpyBatchAsync, the
// consecutive copies of equal options sharing one attribute entry. The
// batch runs in stream order; the copies within it in no order, so none
// may read what another writes. Every copy's sizes are checked first (a
// mismatch is an Error naming the copy's index, and nothing is enqueued);
// copies of no elements are left out; an empty batch enqueues nothing.
// Without the batched call (a driver older than CUDA 13.0, where
// batched_copies_available() is false) or on the legacy default stream
// (which the batched call refuses), it is a loop of single async copies,
// followed by a wait for the stream when a copy asked for
// SourceAccess::during_call. Driver 580 refuses a batch when no context is
// current on the calling thread: the batch is then tried again with the
// stream's context current (a second cuMemcpyBatchAsync, a cuCtxGetCurrent
// and two cuCtxSetCurrent; a cuStreamGetCtx too when neither the stream nor
// a copy knows its context). With a context current, a batch the driver
// takes is one call. Up to 16 copies cost no allocation.
void copy_batch(StreamRef stream, std::span<const BatchCopy> copies, SourceLocation where = SourceLocation::current());
inline void copy_batch(StreamRef stream, std::initializer_list<BatchCopy> copies,
                       SourceLocation where = SourceLocation::current()) {
  copy_batch(stream, std::span<const BatchCopy>(copies.begin(), copies.size()), where);
}

// Whether the loaded driver has cuMemcpyBatchAsync (CUDA 13.0's form):
// copy_batch is then one driver call, else a loop of single copies.
[[nodiscard]] inline bool batched_copies_available() noexcept { return !detail::missing(ffi::Entry::MemcpyBatchAsync); }

namespace detail {

// Scratch memory for a batch's arrays: inline up to `Inline` bytes, else
// one allocation. (It owns that allocation itself rather than through
// std::unique_ptr<std::byte[]>, whose templates cost every translation unit
// more to compile than this class.)
template <std::size_t Inline>
class BatchScratch {
 public:
  explicit BatchScratch(std::size_t bytes) : heap_(bytes <= Inline ? nullptr : new std::byte[bytes]) {
    data_ = heap_ ? heap_ : inline_;
  }
  BatchScratch(const BatchScratch&) = delete;
  BatchScratch& operator=(const BatchScratch&) = delete;
  ~BatchScratch() { delete[] heap_; }
  // The next `n` objects of T (trivial types, carved in order of falling alignment).
  template <class T>
  T* take(std::size_t n) noexcept {
    static_assert(std::is_trivial_v<T> && alignof(T) <= alignof(std::max_align_t));
    T* p = reinterpret_cast<T*>(data_ + used_);
    used_ += n * sizeof(T);
    return p;
  }

 private:
  alignas(std::max_align_t) std::byte inline_[Inline];
  std::byte* heap_;
  std::byte* data_;
  std::size_t used_ = 0;
};

struct BatchCopyAccess {
  static std::uintptr_t dst(const BatchCopy& c) noexcept { return c.dst_; }
  static std::uintptr_t src(const BatchCopy& c) noexcept { return c.src_; }
  // The copy's bytes, once check() has passed.
  static std::size_t bytes(const BatchCopy& c) noexcept { return c.dst_count_ * c.element_size_; }
  // The device side's context, where its range knew it (else nullptr).
  static CUcontext context(const BatchCopy& c) noexcept { return c.ctx_; }
  // The copy as copy() makes it (one side at least is device memory: the
  // constructor's requirement), once check() has passed.
  static CopySides sides(const BatchCopy& c) noexcept {
    CopySides s;
    s.kind = !c.src_device_ ? CopyKind::host_to_device
             : c.dst_device_ ? CopyKind::device_to_device
                             : CopyKind::device_to_host;
    if (c.dst_device_) s.dst_device = c.dst_;
    else s.dst_host = reinterpret_cast<void*>(c.dst_);
    if (c.src_device_) s.src_device = c.src_;
    else s.src_host = reinterpret_cast<const void*>(c.src_);
    s.bytes = bytes(c);
    s.ctx = context(c);
    return s;
  }

  // Copy `i` of the batch is well-formed, or an Error naming it.
  static void check(const BatchCopy& c, std::size_t i, SourceLocation where) {
    if (OXICUDA_DETAIL_UNLIKELY(c.empty_buffer_ || c.dst_count_ != c.src_count_ ||
                                c.dst_count_ > std::size_t(-1) / c.element_size_))
      refuse(c, i, where);
  }

  [[noreturn]] OXICUDA_DETAIL_COLD static void refuse(const BatchCopy& c, std::size_t i, SourceLocation where) {
    constexpr const char* op = "oxicuda::copy_batch";
    const std::string which = cat({"copy ", std::to_string(i), " of the batch: "});
    if (c.empty_buffer_)
      raise(Error(ffi::CUDA_ERROR_INVALID_HANDLE, op,
                  which + "an oxicuda::DeviceBuffer is empty (default-constructed or moved-from)", where));
    if (c.dst_count_ != c.src_count_)
      raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                  cat({which, "size mismatch: the destination has ", std::to_string(c.dst_count_),
                       " elements, the source ", std::to_string(c.src_count_), " (element size ",
                       std::to_string(c.element_size_), " bytes)"}),
                  where));
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                cat({which, std::to_string(c.dst_count_), " elements of ", std::to_string(c.element_size_),
                     " bytes: more bytes than a size_t holds; a span's count is wrong"}),
                where));
  }
};

inline ffi::CUmemcpyAttributes copy_attributes(const CopyOptions& o) noexcept {
  constexpr ffi::CUmemLocation none{ffi::CU_MEM_LOCATION_TYPE_INVALID, 0};
  return {static_cast<ffi::CUmemcpySrcAccessOrder>(o.source_access), o.source_hint ? o.source_hint->raw() : none,
          o.destination_hint ? o.destination_hint->raw() : none,
          o.prefer_overlap_with_compute ? unsigned(ffi::CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) : 0u};
}

[[noreturn]] OXICUDA_DETAIL_COLD inline void refuse_copy(Outcome o, std::size_t i, SourceLocation where) {
  fail(o, where, cat({"copy ", std::to_string(i), " of the batch"}));
}

// The context a refused batch is tried again in: the stream's, else the
// first copy's device memory's, else the one the driver names for the
// stream (none: nullptr).
inline CUcontext batch_context(StreamRef stream, std::span<const BatchCopy> copies, CUstream q) noexcept {
  if (stream.context()) return stream.context().raw();
  for (const BatchCopy& c : copies)
    if (const CUcontext ctx = BatchCopyAccess::context(c)) return ctx;
  CUcontext ctx = nullptr;
  return OXICUDA_DRIVER(StreamGetCtx, q, &ctx).ok() ? ctx : nullptr;
}

}  // namespace detail

inline void copy_batch(StreamRef stream, std::span<const BatchCopy> copies, SourceLocation where) {
  using A = detail::BatchCopyAccess;
  std::size_t n = 0;  // the copies of at least one byte
  for (std::size_t i = 0; i < copies.size(); ++i) {
    A::check(copies[i], i, where);
    n += A::bytes(copies[i]) != 0;
  }
  detail::on_stream(stream, "oxicuda::copy_batch", where, [&](CUstream q) {
    if (n == 0) return;
    // The copies one by one, each an Error of its own naming its index.
    // The copies before a refused one stay enqueued; those that read their
    // source during the call are finished before the Error leaves.
    auto one_by_one = [&] {
      bool wait = false;
      for (std::size_t i = 0; i < copies.size(); ++i) {
        const BatchCopy& c = copies[i];
        if (A::bytes(c) == 0) continue;
        // As copy() does it, the refusal of a copy over two VMM mappings
        // included (copy_by_mappings).
        const detail::CopySides sides = A::sides(c);
        detail::Outcome o = detail::copy_call(q, sides, 0, sides.bytes);
        if (OXICUDA_DETAIL_UNLIKELY(!o.ok())) o = detail::copy_by_mappings(q, sides, o);
        if (OXICUDA_DETAIL_UNLIKELY(!o.ok())) {
          if (wait) (void)OXICUDA_DRIVER(StreamSynchronize, q);
          detail::refuse_copy(o, i, where);
        }
        wait = wait || c.options().source_access == SourceAccess::during_call;
      }
      if (wait) detail::check(OXICUDA_DRIVER(StreamSynchronize, q), where);
    };
    if (detail::missing(ffi::Entry::MemcpyBatchAsync) || q == ffi::stream_legacy()) return one_by_one();
    constexpr std::size_t per_copy = 4 * sizeof(std::uint64_t) + sizeof(ffi::CUmemcpyAttributes);
    detail::BatchScratch<16 * per_copy> scratch(n * per_copy);
    auto* dsts = scratch.take<ffi::CUdeviceptr>(n);
    auto* srcs = scratch.take<ffi::CUdeviceptr>(n);
    auto* sizes = scratch.take<std::size_t>(n);
    auto* idxs = scratch.take<std::size_t>(n);
    auto* attrs = scratch.take<ffi::CUmemcpyAttributes>(n);
    std::size_t k = 0, runs = 0;
    const CopyOptions* last = nullptr;
    for (const BatchCopy& c : copies) {
      const std::size_t bytes = A::bytes(c);
      if (bytes == 0) continue;
      if (!last || !(*last == c.options())) {
        attrs[runs] = detail::copy_attributes(c.options());
        idxs[runs++] = k;
        last = &c.options();
      }
      dsts[k] = A::dst(c), srcs[k] = A::src(c), sizes[k++] = bytes;
    }
    auto batch = [&] { return OXICUDA_DRIVER(MemcpyBatchAsync, dsts, srcs, sizes, n, attrs, idxs, runs, q); };
    detail::Outcome batched = batch();
    // Driver 580 refuses every batch with CUDA_ERROR_INVALID_VALUE when no
    // context is current on the calling thread, and takes the same batch
    // with one current (H100, tools/probes/vmm_batch_copy.cpp). A refused
    // batch has enqueued nothing: it is tried again with the stream's
    // context current. Refused again, it runs one by one (with that context
    // still current), where a copy that is really wrong is an Error naming
    // it. (Running a copy twice writes the same bytes: no copy of a batch
    // may read what another writes.)
    if (OXICUDA_DETAIL_UNLIKELY(batched.result == ffi::CUDA_ERROR_INVALID_VALUE)) {
      const CUcontext ctx = detail::batch_context(stream, copies, q);
      if (ctx == nullptr) return one_by_one();
      const detail::SwitchCurrent current(ctx, where);
      batched = batch();
      if (batched.result == ffi::CUDA_ERROR_INVALID_VALUE) return one_by_one();
    }
    detail::check(batched, where);
  });
}

OXICUDA_DETAIL_NAMESPACE_END
