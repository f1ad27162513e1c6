// oxicuda/memory/buffer.hpp — owning memory: DeviceBuffer<T> (device memory,
// allocated in a context or stream-ordered on a stream) and PinnedBuffer<T>
// (page-locked host memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "copy.hpp"
#include "pool.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;

  DeviceBuffer() noexcept = default;
  DeviceBuffer(const Context& ctx, std::size_t count, SourceLocation where = SourceLocation::current());
  // Stream-ordered: usable by work enqueued on `stream` after this call (and
  // on other streams once they wait for an event recorded after it). Its
  // synchronous copies and fills (copy_from, copy_to, copy, fill) run on
  // that stream, after the work enqueued there before them. The per-thread
  // default stream is refused: it is another queue on every thread, so the
  // buffer would be freed on whichever thread's queue drops it, not ordered
  // after the work of the thread that used it.
  [[nodiscard]] static DeviceBuffer allocate_async(const Stream& stream, std::size_t count,
                                                   SourceLocation where = SourceLocation::current());
  // The same, drawn from `pool` (cuMemAllocFromPoolAsync): a pool of your
  // own (MemoryPool::create) or any device's default pool.
  [[nodiscard]] static DeviceBuffer allocate_async(const Stream& stream, std::size_t count, const MemoryPool& pool,
                                                   SourceLocation where = SourceLocation::current());
  // Owns stream-ordered memory nothing else frees, as allocate_async's (freed
  // by cuMemFreeAsync on `stream`, or free_on's): a graph's allocation
  // (Graph::add_alloc) its graph does not free, once the graph has been
  // launched on `stream` or before it (the memory exists from the launch's
  // alloc node on), or cuMemAllocAsync's. Once per launch: two owners would
  // free it twice (a stream-ordered buffer's span is refused). Errors: an
  // empty span, an empty or per-thread stream, another context's memory.
  [[nodiscard]] static DeviceBuffer adopt_async(DeviceSpan<T> memory, const Stream& stream,
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
  // The span knows the buffer's context and, for a stream-ordered buffer,
  // the stream it is ordered on (see copy.hpp's ordering rule).
  [[nodiscard]] DeviceSpan<T> device_span() const noexcept { return {ptr_, count_, ctx_.raw(), free_stream_.raw()}; }
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

  // Synchronous copies to and from host memory (sizes must match); for a
  // stream-ordered buffer, on its stream after the work enqueued there
  // (copy.hpp's ordering rule).
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
  // allocate_async's body: from `pool`, or from the stream's device's current pool when null.
  static DeviceBuffer allocate_from(const Stream& stream, std::size_t count, CUmemoryPool pool, SourceLocation where);

  friend class ExternalMemory;  // adopts a mapped buffer (freed by cuMemFree): external_memory.hpp
  DeviceBuffer(const Context& ctx, ffi::CUdeviceptr p, std::size_t n) noexcept : ctx_(ctx), ptr_(p), count_(n) {}

  Context ctx_;
  Stream free_stream_;  // set: stream-ordered
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
};

struct PinnedOptions {
  bool write_combined = false;  // faster for the GPU to read, very slow for the CPU to read
  // CU_MEMHOSTALLOC_DEVICEMAP: mapped into the device's address space, so
  // that kernels read and write it in place (zero-copy): mapped_span() and
  // device_ptr() (cuMemHostGetDevicePointer) give the device's address.
  bool device_map = false;
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
  // Allocated with {.device_map = true}: the device's address of the
  // memory (cuMemHostGetDevicePointer; with unified addressing it equals
  // data(), which the driver does not promise otherwise), 0 when not mapped.
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return device_ptr_; }
  [[nodiscard]] bool mapped() const noexcept { return device_ptr_ != 0; }
  // The mapped memory as a DeviceSpan, for a kernel to read and write in
  // place (zero-copy). An Error when the buffer was not allocated mapped.
  // (Not device_span(): a PinnedBuffer stays a host range for copies.)
  [[nodiscard]] DeviceSpan<T> mapped_span(SourceLocation where = SourceLocation::current()) const;

  void swap(PinnedBuffer& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    std::swap(device_ptr_, other.device_ptr_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  T* data_ = nullptr;
  std::size_t count_ = 0;
  ffi::CUdeviceptr device_ptr_ = 0;
};

template <class T>
DeviceBuffer<T>::DeviceBuffer(const Context& ctx, std::size_t count, SourceLocation where) : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::DeviceBuffer::DeviceBuffer", where);
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::DeviceBuffer::DeviceBuffer", where);
  if (count == 0) return;
  detail::reclaim();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemAlloc, &ptr_, bytes), where);
  count_ = count;
}

template <class T>
DeviceBuffer<T> DeviceBuffer<T>::allocate_async(const Stream& stream, std::size_t count, SourceLocation where) {
  return allocate_from(stream, count, nullptr, where);
}

template <class T>
DeviceBuffer<T> DeviceBuffer<T>::allocate_async(const Stream& stream, std::size_t count, const MemoryPool& pool,
                                                SourceLocation where) {
  if (!pool) detail::empty_handle("oxicuda::MemoryPool", "oxicuda::DeviceBuffer::allocate_async", where);
  return allocate_from(stream, count, pool.raw(), where);
}

template <class T>
DeviceBuffer<T> DeviceBuffer<T>::allocate_from(const Stream& stream, std::size_t count, CUmemoryPool pool,
                                               SourceLocation where) {
  constexpr const char* op = "oxicuda::DeviceBuffer::allocate_async";
  detail::refuse_per_thread(stream, op, where);
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), op, where);
  DeviceBuffer b;
  detail::on_stream(stream, op, where, [&](CUstream q) {
    if (count == 0) return;
    if (pool)
      detail::check(OXICUDA_DRIVER(MemAllocFromPoolAsync, &b.ptr_, bytes, pool, q), where);
    else
      detail::check(OXICUDA_DRIVER(MemAllocAsync, &b.ptr_, bytes, q), where);
  });
  // Stream-ordered also when empty (nothing to allocate or free): free_on
  // and stream_ordered() behave as for any other size.
  b.ctx_ = stream.context();
  b.free_stream_ = stream;
  b.count_ = count;
  return b;
}

template <class T>
DeviceBuffer<T> DeviceBuffer<T>::adopt_async(DeviceSpan<T> memory, const Stream& stream, SourceLocation where) {
  constexpr const char* op = "oxicuda::DeviceBuffer::adopt_async";
  if (!stream) detail::empty_handle("oxicuda::Stream", op, where);
  detail::refuse_per_thread(stream, op, where);
  const char* why = memory.device_ptr() == 0 || memory.empty()
                        ? "the span is empty (no address or no elements: a default or moved-from buffer's?)"
                    : memory.stream() ? "the span is a stream-ordered DeviceBuffer's: its memory has an owner already"
                                      : nullptr;
  if (why) detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op, why, where));
  if (memory.context() && memory.context() != stream.context().raw())
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_CONTEXT, op,
                        "the memory belongs to another context than the stream that would free it", where));
  (void)detail::checked_bytes(memory.size(), sizeof(T), op, where);
  DeviceBuffer b;
  b.ctx_ = stream.context();
  b.free_stream_ = stream;
  b.ptr_ = memory.device_ptr();
  b.count_ = memory.size();
  return b;
}

template <class T>
void DeviceBuffer<T>::free_on(const Stream& stream, SourceLocation where) {
  if (!stream) detail::empty_handle("oxicuda::Stream", "oxicuda::DeviceBuffer::free_on", where);
  if (!free_stream_)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::DeviceBuffer::free_on",
                        "this buffer was not allocated stream-ordered (allocate_async); it is freed synchronously",
                        where));
  detail::refuse_per_thread(stream, "oxicuda::DeviceBuffer::free_on", where);
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

template <class T>
PinnedBuffer<T>::PinnedBuffer(const Context& ctx, std::size_t count, PinnedOptions options, SourceLocation where)
    : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::PinnedBuffer::PinnedBuffer", where);
  const std::size_t bytes = detail::checked_bytes(count, sizeof(T), "oxicuda::PinnedBuffer::PinnedBuffer", where);
  if (count == 0) return;
  unsigned flags = ffi::memhostalloc_portable;
  if (options.write_combined) flags |= ffi::memhostalloc_writecombined;
  if (options.device_map) flags |= ffi::memhostalloc_devicemap;
  detail::reclaim();
  void* p = nullptr;
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemHostAlloc, &p, bytes, flags), where);
  if (options.device_map) {
    const detail::Outcome r = OXICUDA_DRIVER(MemHostGetDevicePointer, &device_ptr_, p, 0u);
    if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
      detail::check_nothrow(OXICUDA_DRIVER(MemFreeHost, p), "freeing the memory of a failed oxicuda::PinnedBuffer");
      device_ptr_ = 0;
      detail::fail(r, where);
    }
  }
  data_ = static_cast<T*>(p);
  count_ = count;
}

namespace detail {
// The mapped span of page-locked host memory (a PinnedBuffer's, a
// HostRegistration's), or an Error: the handle is empty, or the memory
// was not mapped (`how`: how to ask for it).
template <class T>
DeviceSpan<T> mapped_span_of(ffi::CUdeviceptr device_ptr, std::size_t count, const Context& ctx, const char* type,
                             const char* operation, const char* how, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(device_ptr == 0)) {
    if (!ctx) empty_handle(type, operation, where);
    if (count != 0) raise(Error(ffi::CUDA_ERROR_NOT_MAPPED, operation, how, where));
  }
  return {device_ptr, count, ctx.raw()};
}
}  // namespace detail

template <class T>
DeviceSpan<T> PinnedBuffer<T>::mapped_span(SourceLocation where) const {
  return detail::mapped_span_of<T>(device_ptr_, count_, ctx_, "oxicuda::PinnedBuffer", "oxicuda::PinnedBuffer::mapped_span",
                                   "this PinnedBuffer was not allocated mapped: allocate it with {.device_map = true}",
                                   where);
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
  device_ptr_ = 0;
}

OXICUDA_DETAIL_NAMESPACE_END
