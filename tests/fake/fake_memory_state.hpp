// The fake driver's memory bookkeeping, shared by its memory parts
// (fake_memory.cpp: allocations, copies, fills, pinned memory;
// fake_pool.cpp: pools and stream-ordered allocations; fake_memory_attrs.cpp:
// managed and registered memory, pointer attributes, peer copies). All of
// it is read and written with `mu` held.
#pragma once

#include "fake_state.hpp"

#include <cstdint>
#include <map>
#include <set>

namespace fake {
// The blocks of mem alloc nodes (owned by their nodes), by address.
extern std::map<std::uintptr_t, std::size_t>& graph_blocks;
}  // namespace fake

namespace fake::mem {

// A memory pool: a device's default one (pools[device]) or one made by
// cuMemPoolCreate (own_pools, live until destroyed and, as the driver does,
// until its last allocation is freed). Access is per device: the pool's
// own device reads and writes; others, what cuMemPoolSetAccess gave them.
struct Pool {
  std::uint64_t release_threshold = 0;
  std::uint64_t used = 0;
  int device = 0;
  std::size_t max_size = 0;  // 0: no limit
  bool destroyed = false;    // cuMemPoolDestroy'd with allocations outstanding
  CUmemAccess_flags access[8] = {};
};

// Never destroyed, as `live` (fake_state.hpp).
extern std::map<std::uintptr_t, std::size_t>& allocations;
extern std::map<std::uintptr_t, std::size_t>& host_allocations;
// The pinned allocations made with CU_MEMHOSTALLOC_DEVICEMAP (mapped at the
// same address, as under unified addressing).
extern std::map<std::uintptr_t, std::size_t>& mapped_allocations;
extern Pool pools[8];
extern std::set<Pool*>& own_pools;
// Every stream-ordered allocation's pool.
extern std::map<std::uintptr_t, Pool*>& pool_allocations;

// What cuPointerGetAttributes tells of an allocation or a registration:
// by its first byte (its size is in the map of its kind).
struct Owner {
  CUcontext ctx;
  CUmemorytype type;
  bool managed;
  int device;
  unsigned long long id;
};
extern std::map<std::uintptr_t, Owner>& owners;
extern unsigned long long next_buffer_id;
// Managed allocations (also in `allocations`), and registered host ranges
// with their flags.
extern std::map<std::uintptr_t, std::size_t>& managed_allocations;
struct Registration {
  std::size_t bytes;
  unsigned flags;
};
extern std::map<std::uintptr_t, Registration>& registrations;

// With `mu` held: notes who owns a new allocation or registration.
void own(std::uintptr_t p, CUmemorytype type, bool managed);

// With `mu` held: a stream-ordered allocation of `bytes` at `p` is freed.
void pool_free(std::uintptr_t p, std::size_t bytes);

Pool* pool_of(CUmemoryPool p);

// [ptr, ptr + bytes) inside one block of `blocks`?
bool in_block(const std::map<std::uintptr_t, std::size_t>& blocks, CUdeviceptr ptr, std::size_t bytes);

// A device-to-device copy of `n` bytes on `s` (checked, then run or held
// as the stream is), with `mu` held and the stream already checked.
CUresult enqueue_device_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s);

}  // namespace fake::mem
