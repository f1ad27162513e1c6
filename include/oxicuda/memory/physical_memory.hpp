// oxicuda/memory/physical_memory.hpp — physical device memory of the
// virtual memory management API (cuMemCreate): an allocation with no
// address of its own until it is mapped into a reserved range
// (memory/virtual_range.hpp, memory/memory_mapping.hpp), and the
// granularity that its size, and every mapping of it, must be a multiple of.
#pragma once

#include <cstddef>
#include <string>

#include "../driver/context.hpp"
#include "../driver/current.hpp"
#include "../driver/handle.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The kind of handle an allocation may be exported as, to another process
// (memory/shareable_memory.hpp): none, a POSIX file descriptor (Linux), or
// a fabric handle (bytes, for another node of an NVLink fabric: only where
// the device has CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED and the
// process an IMEX channel).
enum class ExportKind : int {
  none = ffi::CU_MEM_HANDLE_TYPE_NONE,
  posix_fd = ffi::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
  fabric = ffi::CU_MEM_HANDLE_TYPE_FABRIC,
};

// The granularity the driver requires (minimum), or the one it recommends
// for performance (a multiple of the minimum).
enum class Granularity : int {
  minimum = ffi::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
  recommended = ffi::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
};

// How PhysicalMemory::create allocates.
struct PhysicalOptions {
  // The kind of handle it may be exported as (checked against the device's
  // attributes before the driver is asked).
  ExportKind exportable = ExportKind::none;
};

// The granularity, in bytes, of physical memory on `device` made with
// `options` (cuMemGetAllocationGranularity): sizes, mapping offsets and
// reserved ranges are multiples of the minimum one.
[[nodiscard]] std::size_t allocation_granularity(const Device& device, PhysicalOptions options = {},
                                                 Granularity kind = Granularity::minimum,
                                                 SourceLocation where = SourceLocation::current());

// `bytes` rounded up to a multiple of `granularity` (an Error when that
// overflows std::size_t).
[[nodiscard]] std::size_t round_up_to_granularity(std::size_t bytes, std::size_t granularity,
                                                  SourceLocation where = SourceLocation::current());

// Physical memory on a device (cuMemCreate), owned: copies share it, and the
// last one releases it (cuMemRelease). The driver frees the memory itself
// only once every mapping of it is unmapped too, so a Mapping may outlive
// the PhysicalMemory it maps. A default-constructed one is empty, and every
// operation on it is an Error.
class PhysicalMemory {
 public:
  PhysicalMemory() noexcept = default;
  // `bytes` of memory on `ctx`'s device; `bytes` must be a non-zero
  // multiple of the minimum allocation_granularity (an Error before the
  // driver is asked, naming the granularity). `ctx` stays alive with it.
  [[nodiscard]] static PhysicalMemory create(const Context& ctx, std::size_t bytes, PhysicalOptions options = {},
                                             SourceLocation where = SourceLocation::current());
  // Takes ownership of a handle made elsewhere (cuMemCreate,
  // cuMemImportFromShareableHandle) of `bytes` bytes: your word for the
  // size, checked against the granularity; its device and export kinds are
  // the driver's (cuMemGetAllocationPropertiesFromHandle). If this throws,
  // the handle is released.
  [[nodiscard]] static PhysicalMemory adopt(const Context& ctx, ffi::CUmemGenericAllocationHandle raw, std::size_t bytes,
                                            SourceLocation where = SourceLocation::current());

  [[nodiscard]] ffi::CUmemGenericAllocationHandle raw() const noexcept { return state_ ? state_->raw : 0; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(state_); }
  [[nodiscard]] std::size_t size() const noexcept { return state_ ? state_->bytes : 0; }
  // The minimum granularity of this memory: a mapping's offset in its range must be a multiple of it.
  [[nodiscard]] std::size_t granularity() const noexcept { return state_ ? state_->granularity : 0; }
  [[nodiscard]] Device device() const noexcept { return Device::from_raw(state_ ? state_->device : 0); }
  // Whether it may be exported as `kind` (made exportable so).
  [[nodiscard]] bool exportable_as(ExportKind kind) const noexcept {
    return state_ && kind != ExportKind::none && (state_->kinds & static_cast<unsigned>(kind)) != 0;
  }
  [[nodiscard]] Context context() const noexcept { return state_ ? state_->ctx : Context(); }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }
  friend bool operator==(const PhysicalMemory& a, const PhysicalMemory& b) noexcept { return a.raw() == b.raw(); }

  // The raw handle, or an Error naming `operation` when this one is empty.
  [[nodiscard]] ffi::CUmemGenericAllocationHandle checked_raw(const char* operation, SourceLocation where) const {
    if (OXICUDA_DETAIL_UNLIKELY(!state_)) detail::empty_handle("oxicuda::PhysicalMemory", operation, where);
    return state_->raw;
  }

 private:
  struct State : detail::Owned {
    Context ctx;
    ffi::CUmemGenericAllocationHandle raw;
    std::size_t bytes;
    std::size_t granularity;
    int device;
    unsigned kinds;
    State(Context c, ffi::CUmemGenericAllocationHandle r, std::size_t b, std::size_t g, int d, unsigned k) noexcept
        : ctx(std::move(c)), raw(r), bytes(b), granularity(g), device(d), kinds(k) {}
    ~State() {
      constexpr const char* during = "releasing an oxicuda::PhysicalMemory";
      detail::ScopedCurrentNothrow current(ctx.raw(), during);
      detail::check_nothrow(OXICUDA_DRIVER(MemRelease, raw), during);
    }
  };
  detail::Shared<const State> state_;
};

namespace detail {
inline ffi::CUmemAllocationProp allocation_prop(int device, ExportKind exportable) noexcept {
  ffi::CUmemAllocationProp prop{};
  prop.type = ffi::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = static_cast<ffi::CUmemAllocationHandleType>(exportable);
  prop.location = {ffi::CU_MEM_LOCATION_TYPE_DEVICE, device};
  return prop;
}

// An Error unless `bytes` is a non-zero multiple of `granularity`.
inline void check_granular(std::size_t bytes, std::size_t granularity, const char* what, const char* operation,
                           SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(bytes == 0 || granularity == 0 || bytes % granularity != 0))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                cat({what, " of ", std::to_string(bytes), " bytes is not a non-zero multiple of the allocation "
                     "granularity, ", std::to_string(granularity), " bytes (allocation_granularity; "
                     "round_up_to_granularity rounds a size up to it)"}),
                where));
}

// An Error unless `device` can make memory exportable as `kind`.
inline void check_exportable(const Device& device, ExportKind kind, const char* operation, SourceLocation where) {
  if (kind == ExportKind::none) return;
  const bool fd = kind == ExportKind::posix_fd;
  if (!fd && kind != ExportKind::fabric)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, "an ExportKind that is none of none, posix_fd and fabric", where));
  const auto attr = fd ? ffi::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
                       : ffi::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED;
  if (OXICUDA_DETAIL_UNLIKELY(device.attribute(attr, where) == 0))
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                cat({"device ", std::to_string(device.raw()), " cannot export memory as ",
                     fd ? "a POSIX file descriptor (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0)"
                        : "a fabric handle (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED is 0)"}),
                where));
}
}  // namespace detail

inline std::size_t allocation_granularity(const Device& device, PhysicalOptions options, Granularity kind,
                                          SourceLocation where) {
  const ffi::CUmemAllocationProp prop = detail::allocation_prop(device.raw(), options.exportable);
  std::size_t g = 0;
  detail::check(OXICUDA_DRIVER(MemGetAllocationGranularity, &g, &prop,
                               static_cast<ffi::CUmemAllocationGranularity_flags>(kind)),
                where);
  return g;
}

inline std::size_t round_up_to_granularity(std::size_t bytes, std::size_t granularity, SourceLocation where) {
  constexpr const char* operation = "oxicuda::round_up_to_granularity";
  if (granularity == 0) detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, "a granularity of 0 bytes", where));
  const std::size_t rest = bytes % granularity;
  if (rest == 0) return bytes;
  if (OXICUDA_DETAIL_UNLIKELY(bytes > std::size_t(-1) - (granularity - rest)))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                        detail::cat({std::to_string(bytes), " bytes rounded up overflow std::size_t"}), where));
  return bytes + (granularity - rest);
}

inline PhysicalMemory PhysicalMemory::create(const Context& ctx, std::size_t bytes, PhysicalOptions options,
                                             SourceLocation where) {
  constexpr const char* operation = "oxicuda::PhysicalMemory::create";
  if (!ctx) detail::empty_handle("oxicuda::Context", operation, where);
  const Device device = ctx.device(where);
  detail::check_exportable(device, options.exportable, operation, where);
  const std::size_t g = allocation_granularity(device, options, Granularity::minimum, where);
  detail::check_granular(bytes, g, "a size", operation, where);
  const ffi::CUmemAllocationProp prop = detail::allocation_prop(device.raw(), options.exportable);
  ffi::CUmemGenericAllocationHandle raw = 0;
  {
    detail::SwitchCurrent current(ctx.raw(), where);
    detail::check(OXICUDA_DRIVER(MemCreate, &raw, bytes, &prop, 0), where);
  }
  PhysicalMemory m;
  m.state_ = detail::Shared<const State>::make(Context(ctx), raw, bytes, g, device.raw(),
                                               static_cast<unsigned>(options.exportable));
  return m;
}

inline PhysicalMemory PhysicalMemory::adopt(const Context& ctx, ffi::CUmemGenericAllocationHandle raw, std::size_t bytes,
                                            SourceLocation where) {
  constexpr const char* operation = "oxicuda::PhysicalMemory::adopt";
  if (!ctx) {
    detail::check_nothrow(OXICUDA_DRIVER(MemRelease, raw), "releasing a handle that oxicuda::PhysicalMemory::adopt refused");
    detail::empty_handle("oxicuda::Context", operation, where);
  }
  // Owned from here: if a check below throws, the state releases it.
  PhysicalMemory m;
  m.state_ = detail::Shared<const State>::make(Context(ctx), raw, bytes, std::size_t{0}, 0, 0u);
  auto& s = const_cast<State&>(*m.state_.get());  // (made non-const: filled in below)
  ffi::CUmemAllocationProp prop{};
  detail::check(OXICUDA_DRIVER(MemGetAllocationPropertiesFromHandle, &prop, raw), where);
  s.device = prop.location.id;
  s.kinds = static_cast<unsigned>(prop.requestedHandleTypes);
  s.granularity = allocation_granularity(Device::from_raw(s.device), {static_cast<ExportKind>(s.kinds)},
                                         Granularity::minimum, where);
  detail::check_granular(bytes, s.granularity, "a size", operation, where);
  return m;
}

OXICUDA_DETAIL_NAMESPACE_END
