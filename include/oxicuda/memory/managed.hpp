// oxicuda/memory/managed.hpp — ManagedBuffer<T> (managed memory,
// cuMemAllocManaged: one address for the host and the devices, migrated on
// demand, and larger than the device's memory if need be), its
// stream-ordered prefetch (cuMemPrefetchAsync) and memory advice
// (cuMemAdvise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "copy.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Who may reach a new managed allocation: every stream on every device
// (global), or only the host until a stream is attached to it (host).
enum class Attach : unsigned { global = ffi::mem_attach_global, host = ffi::mem_attach_host };

struct ManagedOptions {
  Attach attach = Attach::global;
};

// `count` elements of T in managed memory, freed (cuMemFree) when the
// buffer is destroyed. Both a host range (data, size, begin/end,
// operator[]: the host reads and writes it in place) and a device range
// (device_span: copies, fills and kernel arguments take it). The host may
// touch it while no kernel that uses it runs (on devices without
// concurrent managed access, while no kernel at all runs in its context).
// Move-only; elements not initialized.
template <class T>
class ManagedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "ManagedBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  ManagedBuffer() noexcept = default;
  ManagedBuffer(const Context& ctx, std::size_t count, ManagedOptions options = {},
                SourceLocation where = SourceLocation::current());
  ManagedBuffer(ManagedBuffer&& other) noexcept { swap(other); }
  ManagedBuffer& operator=(ManagedBuffer&& other) noexcept {
    ManagedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ManagedBuffer(const ManagedBuffer&) = delete;
  ManagedBuffer& operator=(const ManagedBuffer&) = delete;
  ~ManagedBuffer() { release(); }

  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] T* begin() const noexcept { return data(); }
  [[nodiscard]] T* end() const noexcept { return data() + count_; }
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return data()[i]; }
  [[nodiscard]] std::span<T> host() const noexcept { return {data(), count_}; }
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return ptr_; }
  [[nodiscard]] DeviceSpan<T> device_span() const noexcept { return {ptr_, count_, ctx_.raw()}; }
  [[nodiscard]] DeviceSpan<T> subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    return device_span().subspan(offset, count);
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator DeviceSpan<T>() const noexcept { return device_span(); }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }
  // Frees now; the buffer is then empty.
  void reset() noexcept { release(); }

  void swap(ManagedBuffer& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(ptr_, other.ptr_);
    std::swap(count_, other.count_);
  }

 private:
  void release() noexcept;

  Context ctx_;
  ffi::CUdeviceptr ptr_ = 0;
  std::size_t count_ = 0;
};

// Where managed memory should be: a device's memory, or the host's.
class MemoryLocation {
 public:
  [[nodiscard]] static constexpr MemoryLocation host() noexcept { return MemoryLocation(ffi::CU_MEM_LOCATION_TYPE_HOST, 0); }
  [[nodiscard]] static constexpr MemoryLocation device(const Device& d) noexcept {
    return MemoryLocation(ffi::CU_MEM_LOCATION_TYPE_DEVICE, d.raw());
  }
  [[nodiscard]] constexpr bool is_host() const noexcept { return raw_.type == ffi::CU_MEM_LOCATION_TYPE_HOST; }
  [[nodiscard]] constexpr ffi::CUmemLocation raw() const noexcept { return raw_; }

 private:
  constexpr MemoryLocation(ffi::CUmemLocationType type, int id) noexcept : raw_{type, id} {}
  ffi::CUmemLocation raw_;
};

// cuMemAdvise's advice (CUmem_advise): hints that cut page faults.
enum class Advice : int {
  set_read_mostly = ffi::CU_MEM_ADVISE_SET_READ_MOSTLY,  // read-mostly: copies are made where it is read
  unset_read_mostly = ffi::CU_MEM_ADVISE_UNSET_READ_MOSTLY,
  set_preferred_location = ffi::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
  unset_preferred_location = ffi::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
  set_accessed_by = ffi::CU_MEM_ADVISE_SET_ACCESSED_BY,  // mapped there, so that it is reached without a fault
  unset_accessed_by = ffi::CU_MEM_ADVISE_UNSET_ACCESSED_BY,
};

namespace detail {

// A prefetch or advice's target device must have concurrent managed access
// (cuMemPrefetchAsync's documented requirement): an Error saying so
// otherwise, rather than the driver's bare code or a silent no-op.
inline void check_managed_target(MemoryLocation to, const char* operation, SourceLocation where) {
  if (to.is_host()) return;
  const Device d = Device::from_raw(to.raw().id);
  if (OXICUDA_DETAIL_UNLIKELY(d.attribute(ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, where) == 0))
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                cat({"device ", std::to_string(to.raw().id), " (", d.name(where),
                     ") has no concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0: a "
                     "Windows or pre-Pascal device); managed memory migrates there on demand only"}),
                where));
}

template <class R>
std::size_t managed_bytes(const R& range, const char* operation, SourceLocation where) {
  if constexpr (requires { { range.context() } -> std::same_as<const Context&>; })  // a buffer: moved-from?
    if (OXICUDA_DETAIL_UNLIKELY(!range.context())) empty_handle("buffer", operation, where);
  return span_bytes(range.device_span(), operation, where);
}

}  // namespace detail

// Migrates a range of managed memory to `to`, ordered on `stream` (a
// kernel enqueued after it finds the pages in place). A range of memory
// that is not managed is an Error of the driver's (CUDA_ERROR_INVALID_VALUE).
template <class R>
  requires detail::device_range<R>
void prefetch_async(StreamRef stream, const R& range, MemoryLocation to, SourceLocation where = SourceLocation::current()) {
  const std::size_t bytes = detail::managed_bytes(range, "oxicuda::prefetch_async", where);
  detail::check_managed_target(to, "oxicuda::prefetch_async", where);
  if (bytes == 0) return;
  const ffi::CUdeviceptr p = range.device_span().device_ptr();
  detail::on_stream(stream, "oxicuda::prefetch_async", where, [&](CUstream q) {
    detail::check(OXICUDA_DRIVER(MemPrefetchAsync, p, bytes, to.raw(), 0u, q), where);
  });
}

// Gives the driver advice on a range of managed memory, with the memory's
// context current (a span without one needs a current context). The
// location is the advice's device (preferred location, accessed by),
// ignored by the read-mostly advice.
template <class R>
  requires detail::device_range<R>
void advise(const R& range, Advice advice, MemoryLocation location, SourceLocation where = SourceLocation::current()) {
  const std::size_t bytes = detail::managed_bytes(range, "oxicuda::advise", where);
  if (bytes == 0) return;
  const auto span = range.device_span();
  // cuMemAdvise needs a current context (CUDA_ERROR_INVALID_CONTEXT without
  // one, on the H100): the memory's own, when its span knows it.
  auto call = [&] {
    detail::check(OXICUDA_DRIVER(MemAdvise, span.device_ptr(), bytes, static_cast<ffi::CUmem_advise>(advice),
                                 location.raw()),
                  where);
  };
  if (span.context()) {
    detail::SwitchCurrent current(span.context(), where);
    call();
  } else {
    call();
  }
}

template <class T>
ManagedBuffer<T>::ManagedBuffer(const Context& ctx, std::size_t count, ManagedOptions options, SourceLocation where)
    : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::ManagedBuffer::ManagedBuffer", where);
  if (count > std::size_t(-1) / sizeof(T))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::ManagedBuffer::ManagedBuffer",
                        detail::cat({std::to_string(count), " elements of ", std::to_string(sizeof(T)),
                                     " bytes overflow size_t"}),
                        where));
  if (count == 0) return;
  detail::reclaim();
  detail::SwitchCurrent current(ctx.raw(), where);
  detail::check(OXICUDA_DRIVER(MemAllocManaged, &ptr_, count * sizeof(T), static_cast<unsigned>(options.attach)),
                where);
  count_ = count;
}

template <class T>
void ManagedBuffer<T>::release() noexcept {
  if (ptr_ != 0) {
    constexpr const char* during = "freeing an oxicuda::ManagedBuffer";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(MemFree, ptr_), during);
  }
  ptr_ = 0;
  count_ = 0;
}

OXICUDA_DETAIL_NAMESPACE_END
