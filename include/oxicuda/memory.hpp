// oxicuda/memory.hpp — device memory (DeviceBuffer<T>, DeviceSpan<T>),
// page-locked host memory (PinnedBuffer<T>), copies and fills, synchronous
// and stream-ordered, and the device's memory pool.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

#include "stream.hpp"

OXICUDA_NAMESPACE_BEGIN

// A view of `size()` elements of T in device memory. Passes to a typed
// kernel parameter `T*` (and converts to T* wherever one is wanted). It may
// know the context of its memory (a span of a DeviceBuffer does), which
// synchronous copies and fills make current for their call.
template <class T>
class DeviceSpan {
 public:
  using element_type = T;

  constexpr DeviceSpan() noexcept = default;
  constexpr DeviceSpan(ffi::CUdeviceptr ptr, std::size_t count, CUcontext ctx = nullptr) noexcept
      : ptr_(ptr), count_(count), ctx_(ctx) {}
  // A span of T converts to a span of const T.
  // clang-format off
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr DeviceSpan(DeviceSpan<U> other) noexcept
      : ptr_(other.device_ptr()), count_(other.size()), ctx_(other.context()) {}
  // clang-format on

  [[nodiscard]] constexpr ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return count_; }
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] constexpr bool empty() const noexcept { return count_ == 0; }
  // The context of the memory, when known (else null).
  [[nodiscard]] constexpr CUcontext context() const noexcept { return ctx_; }
  // Elements [offset, offset + count); clamped to the span.
  [[nodiscard]] constexpr DeviceSpan subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    if (offset > count_) offset = count_;
    if (count > count_ - offset) count = count_ - offset;
    return {ptr_ + offset * sizeof(T), count, ctx_};
  }
  [[nodiscard]] constexpr DeviceSpan device_span() const noexcept { return *this; }
  // NOLINTNEXTLINE(google-explicit-constructor): a device span is a kernel's T*
  operator T*() const noexcept { return data(); }

 private:
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
  CUcontext ctx_ = nullptr;
};

// `count` elements of T in device memory, freed when the buffer is
// destroyed. Move-only, like std::vector's storage; the elements are not
// initialized. Allocated either synchronously in a context (cuMemAlloc; freed
// with cuMemFree) or stream-ordered on a stream (allocate_async:
// cuMemAllocAsync; freed with cuMemFreeAsync on the stream given to free_on,
// by default the allocating one).
template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;

  DeviceBuffer() noexcept = default;
  DeviceBuffer(const Context& ctx, std::size_t count, SourceLocation where = SourceLocation::current());
  // Stream-ordered: usable by work enqueued on `stream` after this call (and
  // on other streams once they wait for an event recorded after it).
  [[nodiscard]] static DeviceBuffer allocate_async(const Stream& stream, std::size_t count,
                                                   SourceLocation where = SourceLocation::current());
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  // The device address as a T* (for a kernel argument; not dereferenceable on the host).
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] DeviceSpan<T> device_span() const noexcept { return {ptr_, count_, ctx_.raw()}; }
  [[nodiscard]] DeviceSpan<T> subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    return device_span().subspan(offset, count);
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator DeviceSpan<T>() const noexcept { return device_span(); }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }
  [[nodiscard]] bool stream_ordered() const noexcept { return static_cast<bool>(free_stream_); }

  // For a stream-ordered buffer: free it on `stream` instead (after the work
  // enqueued there before the buffer's end). The caller orders that stream
  // after every use of the buffer, as for cuMemFreeAsync.
  void free_on(const Stream& stream, SourceLocation where = SourceLocation::current());
  // Frees now (stream-ordered on the free stream, or synchronously); the
  // buffer is then empty.
  void reset() noexcept { release(); }

  // Synchronous copies to and from host memory (sizes must match).
  void copy_from(std::span<const T> host, SourceLocation where = SourceLocation::current());
  void copy_to(std::span<T> host, SourceLocation where = SourceLocation::current()) const;

  void swap(DeviceBuffer& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(free_stream_, other.free_stream_);
    std::swap(ptr_, other.ptr_);
    std::swap(count_, other.count_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  Stream free_stream_;  // set: stream-ordered
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
};

// Options for page-locked host memory, taken by designated initializers.
struct PinnedOptions {
  bool write_combined = false;  // faster for the GPU to read, very slow for the CPU to read
};

// `count` elements of T in page-locked (pinned) host memory: copies to and
// from it run at full bus speed and truly asynchronously. A contiguous range
// (data, size, begin/end, operator[]); move-only; elements not initialized.
// Allocated portable (usable with every context).
template <class T>
class PinnedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "PinnedBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  PinnedBuffer() noexcept = default;
  PinnedBuffer(const Context& ctx, std::size_t count, PinnedOptions options = {},
               SourceLocation where = SourceLocation::current());
  PinnedBuffer(PinnedBuffer&& other) noexcept { swap(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    PinnedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] T* begin() noexcept { return data_; }
  [[nodiscard]] T* end() noexcept { return data_ + count_; }
  [[nodiscard]] const T* begin() const noexcept { return data_; }
  [[nodiscard]] const T* end() const noexcept { return data_ + count_; }
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return data_[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator std::span<T>() noexcept { return {data_, count_}; }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator std::span<const T>() const noexcept { return {data_, count_}; }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }

  void swap(PinnedBuffer& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// The device's default memory pool, which stream-ordered allocations draw
// from. Not owned: the driver keeps it for the device's lifetime.
class MemoryPool {
 public:
  [[nodiscard]] static MemoryPool device_default(const Device& device,
                                                 SourceLocation where = SourceLocation::current());

  [[nodiscard]] CUmemoryPool raw() const noexcept { return raw_; }
  // Memory the pool keeps reserved after a synchronization instead of
  // returning it to the system (default 0: everything is returned).
  void set_release_threshold(std::uint64_t bytes, SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] std::uint64_t release_threshold(SourceLocation where = SourceLocation::current()) const {
    return get(ffi::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, where);
  }
  // Returns reserved memory beyond `keep_bytes` to the system now.
  void trim_to(std::size_t keep_bytes, SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] std::uint64_t reserved_bytes(SourceLocation where = SourceLocation::current()) const {
    return get(ffi::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, where);
  }
  [[nodiscard]] std::uint64_t used_bytes(SourceLocation where = SourceLocation::current()) const {
    return get(ffi::CU_MEMPOOL_ATTR_USED_MEM_CURRENT, where);
  }

 private:
  explicit MemoryPool(CUmemoryPool raw) noexcept : raw_(raw) {}
  [[nodiscard]] std::uint64_t get(ffi::CUmemPool_attribute attr, SourceLocation where) const;
  CUmemoryPool raw_ = nullptr;
};

// --- copies and fills ---------------------------------------------------------
//
// copy(dst, src) and copy_async(stream, dst, src) copy between host memory
// (any contiguous range: std::vector, std::array, std::span, PinnedBuffer)
// and device memory (DeviceBuffer, DeviceSpan), in any direction, after
// checking that both sides have the same element type and count. The async
// forms are one driver call each, with no allocation and no context switch;
// from pageable host memory the driver stages the copy, so it may return
// before or after the copy is done — use a PinnedBuffer for truly async copies.

namespace detail {

template <class R>
concept device_range = requires(const R& r) {
  r.device_span();
};

template <class R>
concept host_range = !device_range<R> && requires(R & r) {
  {std::data(r)};
  { std::size(r) } -> std::convertible_to<std::size_t>;
};

template <class R>
using device_element_t = typename decltype(std::declval<const R&>().device_span())::element_type;

template <class R>
using host_element_t = std::remove_pointer_t<decltype(std::data(std::declval<R&>()))>;

template <class A, class B>
inline constexpr bool same_element_v = std::is_same_v<std::remove_cv_t<A>, std::remove_cv_t<B>>;

[[noreturn]] OXICUDA_COLD inline void size_mismatch(const char* operation, std::size_t dst, std::size_t src,
                                                    std::size_t element_size, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
              cat({"size mismatch: the destination has ", std::to_string(dst), " elements, the source ",
                   std::to_string(src), " (element size ", std::to_string(element_size), " bytes)",
                   dst == 0 || src == 0 ? "; an empty device buffer is default-constructed or moved-from" : ""}),
              where));
}

inline void check_sizes(const char* operation, std::size_t dst, std::size_t src, std::size_t element_size,
                        SourceLocation where) {
  if (OXICUDA_UNLIKELY(dst != src)) size_mismatch(operation, dst, src, element_size, where);
}

}  // namespace detail

namespace detail {

// The one implementation of every copy direction, enqueued on queue `q`.
template <class Dst, class Src>
void copy_on(CUstream q, Dst& dst, Src& src, const char* op, SourceLocation where) {
  if constexpr (device_range<Dst> && device_range<Src>) {
    using T = device_element_t<Dst>;
    static_assert(same_element_v<T, device_element_t<Src>>, "copy: element types differ");
    static_assert(!std::is_const_v<T>, "copy: the destination is const");
    const auto d = dst.device_span();
    const auto s = src.device_span();
    check_sizes(op, d.size(), s.size(), sizeof(T), where);
    check(OXICUDA_DRIVER(MemcpyDtoDAsync, d.device_ptr(), s.device_ptr(), d.size_bytes(), q), where);
  } else if constexpr (device_range<Dst>) {
    using T = device_element_t<Dst>;
    static_assert(same_element_v<T, host_element_t<Src>>, "copy: element types differ");
    static_assert(!std::is_const_v<T>, "copy: the destination is const");
    const auto d = dst.device_span();
    check_sizes(op, d.size(), std::size(src), sizeof(T), where);
    check(OXICUDA_DRIVER(MemcpyHtoDAsync, d.device_ptr(), std::data(src), d.size_bytes(), q), where);
  } else {
    using T = device_element_t<Src>;
    static_assert(same_element_v<T, host_element_t<Dst>>, "copy: element types differ");
    static_assert(!std::is_const_v<host_element_t<Dst>>, "copy: the destination is const");
    const auto s = src.device_span();
    check_sizes(op, std::size(dst), s.size(), sizeof(T), where);
    check(OXICUDA_DRIVER(MemcpyDtoHAsync, std::data(dst), s.device_ptr(), s.size_bytes(), q), where);
  }
}

template <class Dst>
void fill_on(CUstream q, Dst& dst, device_element_t<Dst> value, SourceLocation where) {
  using T = device_element_t<Dst>;
  static_assert(!std::is_const_v<T>, "fill: the destination is const");
  static_assert(sizeof(T) == 1 || sizeof(T) == 4, "fill: elements of 1 or 4 bytes; use fill_bytes otherwise");
  const auto d = dst.device_span();
  if constexpr (sizeof(T) == 1)
    check(OXICUDA_DRIVER(MemsetD8Async, d.device_ptr(), std::bit_cast<unsigned char>(value), d.size(), q), where);
  else
    check(OXICUDA_DRIVER(MemsetD32Async, d.device_ptr(), std::bit_cast<unsigned>(value), d.size(), q),
          where);
}

template <class Dst>
void fill_bytes_on(CUstream q, Dst& dst, unsigned char byte, SourceLocation where) {
  static_assert(!std::is_const_v<device_element_t<Dst>>, "fill_bytes: the destination is const");
  const auto d = dst.device_span();
  check(OXICUDA_DRIVER(MemsetD8Async, d.device_ptr(), byte, d.size_bytes(), q), where);
}

template <class R>
CUcontext context_of(const R& r) noexcept {
  if constexpr (device_range<R>)
    return r.device_span().context();
  else
    return nullptr;
}

// A synchronous operation: `enqueue` on the calling thread's per-thread
// default stream, with the memory's context current (when known), then wait
// for that stream. Unlike the driver's own "synchronous" cuMemcpy/cuMemset
// (which may return before a pageable copy or a memset has landed, and are
// not ordered with non-blocking streams), the bytes are in place when this
// returns, for every stream to see.
template <class Enqueue>
void synchronously(CUcontext ctx, SourceLocation where, Enqueue&& enqueue) {
  auto run = [&] {
    enqueue(ffi::stream_per_thread());
    check(OXICUDA_DRIVER(StreamSynchronize, ffi::stream_per_thread()), where);
  };
  if (ctx) {
    ScopedCurrent current(ctx, where);
    run();
  } else {
    run();
  }
}

// clang-format off
template <class Dst, class Src>
concept copyable = (device_range<Dst> || device_range<Src>) &&
                   (device_range<Dst> || host_range<Dst>) &&
                   (device_range<Src> || host_range<Src>);
// clang-format on

}  // namespace detail

// Synchronous copy: when it returns, the bytes are in place (see
// detail::synchronously). The device side's context, when its span knows
// it, is current for the call.
template <class Dst, class Src>
requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy(Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  const CUcontext ctx = detail::context_of(dst) ? detail::context_of(dst) : detail::context_of(src);
  detail::synchronously(ctx, where, [&](CUstream q) { detail::copy_on(q, dst, src, "oxicuda::copy", where); });
}

// Stream-ordered copy: enqueued on `stream`, one driver call.
template <class Dst, class Src>
requires detail::copyable<std::remove_cvref_t<Dst>, std::remove_cvref_t<Src>>
void copy_async(const Stream& stream, Dst&& dst, Src&& src, SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::copy_async", where,
                    [&](CUstream q) { detail::copy_on(q, dst, src, "oxicuda::copy_async", where); });
}

// Sets every element of `dst` to `value` (elements of 1 or 4 bytes:
// cuMemsetD8Async / cuMemsetD32Async); fill_bytes sets every byte, whatever T. The
// synchronous forms return with the memory set; the _async ones are one
// driver call on `stream`.
template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill(Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
          SourceLocation where = SourceLocation::current()) {
  detail::synchronously(detail::context_of(dst), where, [&](CUstream q) { detail::fill_on(q, dst, value, where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_async(const Stream& stream, Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
                SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::fill_async", where, [&](CUstream q) { detail::fill_on(q, dst, value, where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_bytes(Dst&& dst, unsigned char byte, SourceLocation where = SourceLocation::current()) {
  detail::synchronously(detail::context_of(dst), where,
                        [&](CUstream q) { detail::fill_bytes_on(q, dst, byte, where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_bytes_async(const Stream& stream, Dst&& dst, unsigned char byte,
                      SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::fill_bytes_async", where,
                    [&](CUstream q) { detail::fill_bytes_on(q, dst, byte, where); });
}

// --- DeviceBuffer -----------------------------------------------------------------

namespace detail {
inline std::size_t checked_bytes(std::size_t count, std::size_t element_size, const char* operation,
                                 SourceLocation where) {
  if (count > static_cast<std::size_t>(-1) / element_size)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                cat({std::to_string(count), " elements of ", std::to_string(element_size), " bytes overflow size_t"}),
                where));
  return count * element_size;
}
}  // namespace detail

template <class T>
DeviceBuffer<T>::DeviceBuffer(const Context& ctx, std::size_t count, SourceLocation where) : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::DeviceBuffer::DeviceBuffer", where);
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::DeviceBuffer::DeviceBuffer", where);
  if (count == 0) return;
  ScopedCurrent current(ctx, where);
  detail::check(OXICUDA_DRIVER(MemAlloc, &ptr_, bytes), where);
  count_ = count;
}

template <class T>
DeviceBuffer<T> DeviceBuffer<T>::allocate_async(const Stream& stream, std::size_t count, SourceLocation where) {
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::DeviceBuffer::allocate_async", where);
  DeviceBuffer b;
  detail::on_stream(stream, "oxicuda::DeviceBuffer::allocate_async", where, [&](CUstream q) {
    if (count != 0) detail::check(OXICUDA_DRIVER(MemAllocAsync, &b.ptr_, bytes, q), where);
  });
  // Stream-ordered also when empty (nothing to allocate or free): free_on
  // and stream_ordered() behave as for any other size.
  b.ctx_ = stream.context();
  b.free_stream_ = stream;
  b.count_ = count;
  return b;
}

template <class T>
void DeviceBuffer<T>::free_on(const Stream& stream, SourceLocation where) {
  if (!stream) detail::empty_handle("oxicuda::Stream", "oxicuda::DeviceBuffer::free_on", where);
  if (!free_stream_)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::DeviceBuffer::free_on",
                        "this buffer was not allocated stream-ordered (allocate_async); it is freed synchronously",
                        where));
  free_stream_ = stream;
}

template <class T>
void DeviceBuffer<T>::release() noexcept {
  if (ptr_ != 0) {
    constexpr const char* during = "freeing an oxicuda::DeviceBuffer";
    if (free_stream_) {
      // A default stream belongs to the current context: make its own current.
      const bool default_stream = reinterpret_cast<std::uintptr_t>(free_stream_.raw()) <= 2;
      detail::ScopedCurrentNothrow current(default_stream ? free_stream_.context().raw() : nullptr, during);
      detail::check_nothrow(OXICUDA_DRIVER(MemFreeAsync, ptr_, free_stream_.raw()), during);
    } else {
      detail::ScopedCurrentNothrow current(ctx_.raw(), during);
      detail::check_nothrow(OXICUDA_DRIVER(MemFree, ptr_), during);
    }
  }
  ptr_ = 0;
  count_ = 0;
  free_stream_ = Stream();
}

template <class T>
void DeviceBuffer<T>::copy_from(std::span<const T> host, SourceLocation where) {
  copy(*this, host, where);
}

template <class T>
void DeviceBuffer<T>::copy_to(std::span<T> host, SourceLocation where) const {
  copy(host, *this, where);
}

// --- PinnedBuffer ---------------------------------------------------------------

template <class T>
PinnedBuffer<T>::PinnedBuffer(const Context& ctx, std::size_t count, PinnedOptions options, SourceLocation where)
    : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::PinnedBuffer::PinnedBuffer", where);
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::PinnedBuffer::PinnedBuffer", where);
  if (count == 0) return;
  unsigned flags = ffi::memhostalloc_portable;
  if (options.write_combined) flags |= ffi::memhostalloc_writecombined;
  void* p = nullptr;
  ScopedCurrent current(ctx, where);
  detail::check(OXICUDA_DRIVER(MemHostAlloc, &p, bytes, flags), where);
  data_ = static_cast<T*>(p);
  count_ = count;
}

template <class T>
void PinnedBuffer<T>::release() noexcept {
  if (data_ != nullptr) {
    constexpr const char* during = "freeing an oxicuda::PinnedBuffer";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(MemFreeHost, static_cast<void*>(data_)), during);
  }
  data_ = nullptr;
  count_ = 0;
}

// --- MemoryPool -------------------------------------------------------------------

inline MemoryPool MemoryPool::device_default(const Device& device, SourceLocation where) {
  CUmemoryPool pool = nullptr;
  detail::check(OXICUDA_DRIVER(DeviceGetDefaultMemPool, &pool, device.raw()), where);
  return MemoryPool(pool);
}

inline void MemoryPool::set_release_threshold(std::uint64_t bytes, SourceLocation where) const {
  ffi::cuuint64_t v = bytes;
  detail::check(OXICUDA_DRIVER(MemPoolSetAttribute, raw_, ffi::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, static_cast<void*>(&v)), where);
}

inline void MemoryPool::trim_to(std::size_t keep_bytes, SourceLocation where) const {
  detail::check(OXICUDA_DRIVER(MemPoolTrimTo, raw_, keep_bytes), where);
}

inline std::uint64_t MemoryPool::get(ffi::CUmemPool_attribute attr, SourceLocation where) const {
  ffi::cuuint64_t v = 0;
  detail::check(OXICUDA_DRIVER(MemPoolGetAttribute, raw_, attr, static_cast<void*>(&v)),
                where);
  return v;
}

OXICUDA_NAMESPACE_END
