// oxicuda/memory/growable_buffer.hpp — GrowableBuffer<T>: device memory
// that grows in place. It reserves the addresses of its largest size up
// front (a VirtualRange) and maps physical memory at the end of what it has
// as it grows (a Mapping per growth), so data() never changes and growing
// never copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "copy.hpp"
#include "memory_mapping.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Device memory of up to max_size() elements of T at one address: resize()
// and reserve() map more physical memory after what is mapped, in
// multiples of the device's allocation granularity, and keep what is there.
// Elements beyond what was written are unspecified (not zeroed). Growing past
// max_size() is an Error that changes nothing. Move-only; dropping it
// unmaps and releases its memory, then frees its range. A default-constructed
// or moved-from one is empty (max_size() 0), and growing it is an Error.
template <class T>
class GrowableBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "GrowableBuffer<T> needs a trivially copyable T");

 public:
  using value_type = T;

  GrowableBuffer() noexcept = default;
  // Reserves the addresses of `max_count` elements on `ctx`'s device
  // (rounded up to the granularity) and maps memory for `count` of them.
  GrowableBuffer(const Context& ctx, std::size_t max_count, std::size_t count = 0,
                 SourceLocation where = SourceLocation::current());
  GrowableBuffer(GrowableBuffer&& other) noexcept { swap(other); }
  GrowableBuffer& operator=(GrowableBuffer&& other) noexcept {
    GrowableBuffer(std::move(other)).swap(*this);
    return *this;
  }
  GrowableBuffer(const GrowableBuffer&) = delete;
  GrowableBuffer& operator=(const GrowableBuffer&) = delete;
  ~GrowableBuffer() { clear_mappings(); }

  // The elements in use.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  // The elements mapped memory holds (size() and more, up to a granularity).
  [[nodiscard]] std::size_t capacity() const noexcept { return mapped_ / sizeof(T); }
  // The most it may ever hold: the `max_count` it was made with.
  [[nodiscard]] std::size_t max_size() const noexcept { return max_count_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  [[nodiscard]] ffi::CUdeviceptr device_ptr() const noexcept { return range_.address(); }
  // The device address as a T* (for a kernel argument; not dereferenceable on the host).
  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(range_.address())); }
  [[nodiscard]] DeviceSpan<T> device_span() const noexcept { return {range_.address(), count_, range_.context().raw()}; }
  [[nodiscard]] DeviceSpan<T> subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    return device_span().subspan(offset, count);
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator DeviceSpan<T>() const noexcept { return device_span(); }
  [[nodiscard]] const VirtualRange& range() const noexcept { return range_; }
  // The mappings made so far, one per growth.
  [[nodiscard]] std::size_t mapping_count() const noexcept { return mappings_.size(); }

  // Makes size() `count`: maps memory for it first when capacity() is
  // short. `count` above max_size() is an Error, and so is any failure to
  // map; either way the buffer is as it was.
  void resize(std::size_t count, SourceLocation where = SourceLocation::current());
  // Maps memory for `count` elements without changing size().
  void reserve(std::size_t count, SourceLocation where = SourceLocation::current());
  // Unmaps the memory that size() does not need (whole mappings only).
  void shrink_to_fit() noexcept;

  void swap(GrowableBuffer& other) noexcept {
    std::swap(range_, other.range_);
    mappings_.swap(other.mappings_);
    std::swap(max_count_, other.max_count_);
    std::swap(count_, other.count_);
    std::swap(mapped_, other.mapped_);
  }

 private:
  void clear_mappings() noexcept {
    while (!mappings_.empty()) mappings_.pop_back();  // (the last mapped first)
  }

  VirtualRange range_;
  std::vector<Mapping> mappings_;
  std::size_t max_count_ = 0;
  std::size_t count_ = 0;
  std::size_t mapped_ = 0;  // bytes
};

template <class T>
GrowableBuffer<T>::GrowableBuffer(const Context& ctx, std::size_t max_count, std::size_t count, SourceLocation where) {
  constexpr const char* operation = "oxicuda::GrowableBuffer::GrowableBuffer";
  if (!ctx) detail::empty_handle("oxicuda::Context", operation, where);
  const std::size_t bytes = detail::checked_bytes(max_count, sizeof(T), operation, where);
  const std::size_t g = allocation_granularity(ctx.device(where), {}, Granularity::minimum, where);
  range_ = VirtualRange::reserve(ctx, round_up_to_granularity(bytes == 0 ? 1 : bytes, g, where), {}, where);
  max_count_ = max_count;
  if (count != 0) resize(count, where);  // (if this throws, range_ is freed with the rest)
}

template <class T>
void GrowableBuffer<T>::reserve(std::size_t count, SourceLocation where) {
  constexpr const char* operation = "oxicuda::GrowableBuffer::reserve";
  if (!range_) detail::empty_handle("oxicuda::GrowableBuffer", operation, where);
  if (OXICUDA_DETAIL_UNLIKELY(count > max_count_))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        detail::cat({"growing to ", std::to_string(count), " elements runs out of the reserved range, ",
                                     std::to_string(max_count_), " elements at most (max_size): make the buffer with a "
                                     "larger maximum. Nothing changed"}),
                        where));
  const std::size_t need = count * sizeof(T);  // (count <= max_count_: no overflow)
  if (need <= mapped_) return;
  const std::size_t chunk = round_up_to_granularity(need - mapped_, range_.granularity(), where);
  mappings_.reserve(mappings_.size() + 1);  // (so that adding the mapping below cannot fail)
  const PhysicalMemory memory = PhysicalMemory::create(range_.context(), chunk, {}, where);
  mappings_.emplace_back(range_, mapped_, memory, MemoryAccess::read_write, where);
  mapped_ += chunk;
}

template <class T>
void GrowableBuffer<T>::resize(std::size_t count, SourceLocation where) {
  if (!range_) detail::empty_handle("oxicuda::GrowableBuffer", "oxicuda::GrowableBuffer::resize", where);
  reserve(count, where);
  count_ = count;
}

template <class T>
void GrowableBuffer<T>::shrink_to_fit() noexcept {
  while (!mappings_.empty() && mapped_ - mappings_.back().size() >= count_ * sizeof(T)) {
    mapped_ -= mappings_.back().size();
    mappings_.pop_back();
  }
}

OXICUDA_DETAIL_NAMESPACE_END
