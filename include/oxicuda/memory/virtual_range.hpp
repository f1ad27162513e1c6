// oxicuda/memory/virtual_range.hpp — a reserved range of device virtual
// addresses (cuMemAddressReserve): addresses only, no memory, until
// physical memory is mapped into it (memory/memory_mapping.hpp).
#pragma once

#include <cstddef>
#include <string>

#include "physical_memory.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// How VirtualRange::reserve reserves.
struct ReserveOptions {
  // The start's alignment, a power of two (0: the minimum allocation
  // granularity of the context's device, which every mapping needs anyway).
  std::size_t alignment = 0;
  // An address to start at, if the driver can (0: the driver's choice). A
  // hint only: address() says where the range is.
  ffi::CUdeviceptr address_hint = 0;
};

// A reserved range of virtual addresses, owned: copies share it, and the
// last one frees it (cuMemAddressFree). Every Mapping into it holds a copy,
// so the range outlives its mappings. A default-constructed one is empty,
// and every operation on it is an Error.
class VirtualRange {
 public:
  VirtualRange() noexcept = default;
  // `bytes` of addresses for `ctx`'s device; `bytes` must be a non-zero
  // multiple of the device's minimum allocation_granularity (an Error
  // before the driver is asked). `ctx` stays alive with it.
  [[nodiscard]] static VirtualRange reserve(const Context& ctx, std::size_t bytes, ReserveOptions options = {},
                                            SourceLocation where = SourceLocation::current());

  [[nodiscard]] ffi::CUdeviceptr address() const noexcept { return state_ ? state_->ptr : 0; }
  [[nodiscard]] std::size_t size() const noexcept { return state_ ? state_->bytes : 0; }
  // The minimum allocation granularity of the context's device when reserved.
  [[nodiscard]] std::size_t granularity() const noexcept { return state_ ? state_->granularity : 0; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(state_); }
  [[nodiscard]] Context context() const noexcept { return state_ ? state_->ctx : Context(); }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }
  friend bool operator==(const VirtualRange& a, const VirtualRange& b) noexcept { return a.address() == b.address(); }

 private:
  struct State : detail::Owned {
    Context ctx;
    ffi::CUdeviceptr ptr;
    std::size_t bytes;
    std::size_t granularity;
    State(Context c, ffi::CUdeviceptr p, std::size_t b, std::size_t g) noexcept
        : ctx(std::move(c)), ptr(p), bytes(b), granularity(g) {}
    ~State() {
      constexpr const char* during = "freeing an oxicuda::VirtualRange";
      detail::ScopedCurrentNothrow current(ctx.raw(), during);
      detail::check_nothrow(OXICUDA_DRIVER(MemAddressFree, ptr, bytes), during);
    }
  };
  detail::Shared<const State> state_;
};

inline VirtualRange VirtualRange::reserve(const Context& ctx, std::size_t bytes, ReserveOptions options,
                                          SourceLocation where) {
  constexpr const char* operation = "oxicuda::VirtualRange::reserve";
  if (!ctx) detail::empty_handle("oxicuda::Context", operation, where);
  if (OXICUDA_DETAIL_UNLIKELY((options.alignment & (options.alignment - 1)) != 0))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        detail::cat({"an alignment of ", std::to_string(options.alignment),
                                     " bytes: it must be a power of two (or 0)"}),
                        where));
  const std::size_t g = allocation_granularity(ctx.device(where), {}, Granularity::minimum, where);
  detail::check_granular(bytes, g, "a range", operation, where);
  const std::size_t alignment = options.alignment > g ? options.alignment : g;
  ffi::CUdeviceptr ptr = 0;
  {
    detail::SwitchCurrent current(ctx.raw(), where);
    detail::check(OXICUDA_DRIVER(MemAddressReserve, &ptr, bytes, alignment, options.address_hint, 0), where);
  }
  VirtualRange r;
  r.state_ = detail::Shared<const State>::make(Context(ctx), ptr, bytes, g);
  return r;
}

OXICUDA_DETAIL_NAMESPACE_END
