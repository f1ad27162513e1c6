// oxicuda/memory/pool.hpp — MemoryPool: the device's default pool that
// stream-ordered allocations draw from, or a pool of your own (created on a
// device with its properties, shared by other devices you give access to).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../driver/device.hpp"
#include "../driver/handle.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Who may read and write a pool's memory, from a device.
enum class PoolAccess : int {
  none = ffi::CU_MEM_ACCESS_FLAGS_PROT_NONE,
  read = ffi::CU_MEM_ACCESS_FLAGS_PROT_READ,
  read_write = ffi::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
};

// A pool of your own (MemoryPool::create).
struct PoolOptions {
  // The most the pool may reserve, in bytes (0: the driver's default, as
  // large as the device allows).
  std::size_t max_size = 0;
  // Memory the pool keeps reserved after a synchronization (as
  // set_release_threshold; 0: everything is returned).
  std::uint64_t release_threshold = 0;
};

// A memory pool that stream-ordered allocations draw from
// (DeviceBuffer::allocate_async). Either the device's default pool,
// borrowed (the driver keeps it for the device's lifetime), or a pool of
// your own, owned: copies share it, and the last one destroys it
// (cuMemPoolDestroy; memory still allocated from it stays valid until it is
// freed, then the driver releases the pool). A default-constructed pool is
// empty, and every operation on it is an Error.
class MemoryPool {
 public:
  MemoryPool() noexcept = default;
  [[nodiscard]] static MemoryPool device_default(const Device& device,
                                                 SourceLocation where = SourceLocation::current());
  // A new pool of pinned device memory on `device`, which has read-write
  // access to it; other devices have none until set_access gives it.
  [[nodiscard]] static MemoryPool create(const Device& device, PoolOptions options = {},
                                         SourceLocation where = SourceLocation::current());

  [[nodiscard]] CUmemoryPool raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  // The device whose memory it holds.
  [[nodiscard]] Device device() const noexcept { return device_; }
  // Whether this handle (with its copies) owns the pool: one made by create.
  [[nodiscard]] bool owns() const noexcept { return static_cast<bool>(state_); }
  friend bool operator==(const MemoryPool& a, const MemoryPool& b) noexcept { return a.raw_ == b.raw_; }

  // Gives `peer` this access to the pool's memory: to what it holds now
  // and will hold (cuMemPoolSetAccess). A device with no peer access to
  // the pool's device is the driver's Error.
  void set_access(const Device& peer, PoolAccess access, SourceLocation where = SourceLocation::current()) const;
  // The access `peer` has to the pool's memory.
  [[nodiscard]] PoolAccess access(const Device& peer, SourceLocation where = SourceLocation::current()) const;

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
  struct State : detail::Owned {
    CUmemoryPool raw;
    explicit State(CUmemoryPool r) noexcept : raw(r) {}
    ~State() { detail::check_nothrow(OXICUDA_DRIVER(MemPoolDestroy, raw), "destroying an oxicuda::MemoryPool"); }
  };
  MemoryPool(CUmemoryPool raw, Device device) noexcept : raw_(raw), device_(device) {}
  [[nodiscard]] std::uint64_t get(ffi::CUmemPool_attribute attr, SourceLocation where) const;
  void check_handle(const char* operation, SourceLocation where) const {
    if (OXICUDA_DETAIL_UNLIKELY(!raw_)) detail::empty_handle("oxicuda::MemoryPool", operation, where);
  }

  CUmemoryPool raw_ = nullptr;
  Device device_ = Device::from_raw(0);
  detail::Shared<const State> state_;  // set: owned
};

inline MemoryPool MemoryPool::device_default(const Device& device, SourceLocation where) {
  CUmemoryPool pool = nullptr;
  detail::check(OXICUDA_DRIVER(DeviceGetDefaultMemPool, &pool, device.raw()), where);
  return MemoryPool(pool, device);
}

inline MemoryPool MemoryPool::create(const Device& device, PoolOptions options, SourceLocation where) {
  ffi::CUmemPoolProps props{};
  props.allocType = ffi::CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = ffi::CU_MEM_HANDLE_TYPE_NONE;
  props.location = {ffi::CU_MEM_LOCATION_TYPE_DEVICE, device.raw()};
  props.maxSize = options.max_size;
  CUmemoryPool raw = nullptr;
  detail::check(OXICUDA_DRIVER(MemPoolCreate, &raw, &props), where);
  MemoryPool pool(raw, device);
  pool.state_ = detail::Shared<const State>::make(raw);  // (owns raw from here, also if this throws)
  if (options.release_threshold != 0) pool.set_release_threshold(options.release_threshold, where);
  return pool;
}

inline void MemoryPool::set_access(const Device& peer, PoolAccess access, SourceLocation where) const {
  check_handle("oxicuda::MemoryPool::set_access", where);
  const ffi::CUmemAccessDesc desc{{ffi::CU_MEM_LOCATION_TYPE_DEVICE, peer.raw()},
                                  static_cast<ffi::CUmemAccess_flags>(access)};
  detail::check(OXICUDA_DRIVER(MemPoolSetAccess, raw_, &desc, 1), where);
}

inline PoolAccess MemoryPool::access(const Device& peer, SourceLocation where) const {
  check_handle("oxicuda::MemoryPool::access", where);
  ffi::CUmemLocation location{ffi::CU_MEM_LOCATION_TYPE_DEVICE, peer.raw()};
  ffi::CUmemAccess_flags flags = ffi::CU_MEM_ACCESS_FLAGS_PROT_NONE;
  detail::check(OXICUDA_DRIVER(MemPoolGetAccess, &flags, raw_, &location), where);
  return static_cast<PoolAccess>(flags);
}

inline void MemoryPool::set_release_threshold(std::uint64_t bytes, SourceLocation where) const {
  check_handle("oxicuda::MemoryPool::set_release_threshold", where);
  ffi::cuuint64_t v = bytes;
  detail::check(OXICUDA_DRIVER(MemPoolSetAttribute, raw_, ffi::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, static_cast<void*>(&v)), where);
}

inline void MemoryPool::trim_to(std::size_t keep_bytes, SourceLocation where) const {
  check_handle("oxicuda::MemoryPool::trim_to", where);
  detail::check(OXICUDA_DRIVER(MemPoolTrimTo, raw_, keep_bytes), where);
}

inline std::uint64_t MemoryPool::get(ffi::CUmemPool_attribute attr, SourceLocation where) const {
  check_handle("oxicuda::MemoryPool (reading an attribute)", where);
  ffi::cuuint64_t v = 0;
  detail::check(OXICUDA_DRIVER(MemPoolGetAttribute, raw_, attr, static_cast<void*>(&v)),
                where);
  return v;
}

OXICUDA_DETAIL_NAMESPACE_END
