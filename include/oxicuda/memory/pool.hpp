// oxicuda/memory/pool.hpp — MemoryPool, the device's default pool that
// stream-ordered allocations draw from.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../driver/device.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

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

OXICUDA_DETAIL_NAMESPACE_END
