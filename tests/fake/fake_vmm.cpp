// The fake driver's virtual memory management, modelled on the host's own:
// a reservation (cuMemAddressReserve) is an inaccessible anonymous mapping
// of the process; a physical allocation (cuMemCreate) is a memfd of its
// size; cuMemMap maps that memfd over part of a reservation (so two
// mappings of one allocation share their bytes, as on the device), still
// inaccessible until cuMemSetAccess opens it; cuMemUnmap turns it back into
// reservation. A posix-fd export is a duplicate of the memfd, which an
// import (here or in another process: the memfd's name says its device and
// export kinds) maps again. As the driver documents:
// sizes, addresses and offsets must be multiples of the granularity
// (kMinimum here, which is not the host's page); a mapping lies inside one
// reservation and over nothing mapped; cuMemUnmap takes whole mappings;
// cuMemSetAccess a fully mapped range; and cuMemRelease frees the memory
// only once its last mapping is gone. What the driver does when a
// reservation is freed with mappings still in it is not measured: the fake
// frees it and keeps those mappings counted live (a leak a test sees).
#include "fake_state.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fake {

namespace {

constexpr std::size_t kMinimum = std::size_t{64} << 10;       // CU_MEM_ALLOC_GRANULARITY_MINIMUM
constexpr std::size_t kRecommended = std::size_t{2} << 20;    // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
constexpr unsigned char kFabricMagic[4] = {'F', 'K', 'F', 'B'};

struct Physical {
  int fd;
  std::size_t bytes;
  int device;
  unsigned types;  // CUmemAllocationHandleType bits it may be exported as
  bool released = false;
  long mappings = 0;
};
struct Mapping {
  std::size_t bytes;
  Physical* physical;
  std::map<int, int> access;  // device -> CUmemAccess_flags
};

// Never destroyed, as `live`.
std::map<CUmemGenericAllocationHandle, Physical*>& handles = *new std::map<CUmemGenericAllocationHandle, Physical*>;
std::map<std::uintptr_t, std::size_t>& reservations = *new std::map<std::uintptr_t, std::size_t>;
std::map<std::uintptr_t, Mapping>& mappings = *new std::map<std::uintptr_t, Mapping>;
// Mappings whose reservation was freed under them: never unmapped, still live.
std::vector<Mapping>& orphans = *new std::vector<Mapping>;
CUmemGenericAllocationHandle next_handle = 0x5a000001;

void* at(std::uintptr_t p) { return reinterpret_cast<void*>(p); }

// With `mu` held: frees the memory of a released allocation with no mapping left.
void settle(Physical* p) {
  if (p->released && p->mappings == 0) {
    ::close(p->fd);
    delete p;
  }
}

CUmemGenericAllocationHandle add_handle(Physical* p) {
  const CUmemGenericAllocationHandle h = next_handle++;
  handles[h] = p;
  return h;
}

// With `mu` held: the reservation holding [p, p + n), or reservations.end().
std::map<std::uintptr_t, std::size_t>::iterator reservation_of(std::uintptr_t p, std::size_t n) {
  auto it = reservations.upper_bound(p);
  if (it == reservations.begin()) return reservations.end();
  --it;
  return p >= it->first && p + n <= it->first + it->second ? it : reservations.end();
}

// With `mu` held: whether any mapping overlaps [p, p + n).
bool overlaps_mapping(std::uintptr_t p, std::size_t n) {
  auto it = mappings.lower_bound(p + n);
  if (it == mappings.begin()) return false;
  --it;
  return it->first + it->second.bytes > p;
}

// With `mu` held: calls f on each of the whole mappings that make up exactly
// [p, p + n), back to back; false (calling nothing) when they do not.
template <class F>
bool whole_mappings(std::uintptr_t p, std::size_t n, F&& f) {
  std::uintptr_t q = p;
  while (q < p + n) {
    auto it = mappings.find(q);
    if (it == mappings.end()) return false;
    q += it->second.bytes;
  }
  if (q != p + n || n == 0) return false;
  for (q = p; q < p + n;) {
    auto it = mappings.find(q);
    q += it->second.bytes;
    f(it);
  }
  return true;
}

// With `mu` held: the mapping that holds address p, or mappings.end().
std::map<std::uintptr_t, Mapping>::iterator mapping_at(std::uintptr_t p) {
  auto it = mappings.upper_bound(p);
  if (it == mappings.begin()) return mappings.end();
  --it;
  return p < it->first + it->second.bytes ? it : mappings.end();
}

bool valid_device(int dev) { return dev >= 0 && dev < device_count; }

// cuMemCreate's and cuMemGetAllocationGranularity's check of the properties.
CUresult check_prop(const CUmemAllocationProp* prop) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  constexpr unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
  if (static_cast<unsigned>(prop->requestedHandleTypes) & ~known) return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

}  // namespace

long live_va_range() { return static_cast<long>(reservations.size()); }
long live_physical() { return static_cast<long>(handles.size()); }
long live_vmm_mapping() { return static_cast<long>(mappings.size() + orphans.size()); }

// [ptr, ptr + bytes) mapped, back to back, and open to some device?
bool in_vmm_mapping(CUdeviceptr ptr, std::size_t bytes) {
  std::uintptr_t q = ptr;
  while (q < ptr + bytes) {
    auto it = mapping_at(q);
    if (it == mappings.end() || it->second.access.empty()) return false;
    bool open = false;
    for (const auto& [dev, flags] : it->second.access) open = open || flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    if (!open) return false;
    q = it->first + it->second.bytes;
  }
  return true;
}

bool vmm_extent(CUdeviceptr ptr, VmmExtent& out) {
  auto m = mapping_at(ptr);
  auto r = reservation_of(ptr, 1);
  if (m == mappings.end() || r == reservations.end()) return false;
  out = VmmExtent{m->first, m->second.bytes, r->first, r->second, m->second.physical->device};
  return true;
}

bool spans_vmm_mappings(CUdeviceptr ptr, std::size_t bytes) {
  auto m = mapping_at(ptr);
  return bytes != 0 && m != mappings.end() && ptr + bytes > m->first + m->second.bytes;
}

}  // namespace fake

using namespace fake;

CUresult fake_MemGetAllocationGranularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                          CUmemAllocationGranularity_flags option) {
  FAKE_ENTRY(MemGetAllocationGranularity);
  if (!granularity) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = check_prop(prop)) return r;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = option == CU_MEM_ALLOC_GRANULARITY_MINIMUM ? kMinimum : kRecommended;
  return CUDA_SUCCESS;
}

CUresult fake_MemAddressReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr, unsigned long long flags) {
  FAKE_ENTRY(MemAddressReserve);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (!ptr || flags != 0 || size == 0 || size % page != 0 || (alignment & (alignment - 1)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  const std::size_t align = alignment > kMinimum ? alignment : kMinimum;
  void* m = ::mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto base = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t start = (base + align - 1) / align * align;
  if (start > base) ::munmap(m, start - base);
  if (start + size < base + size + align) ::munmap(at(start + size), base + size + align - (start + size));
  std::lock_guard lock(mu);
  reservations[start] = size;
  *ptr = start;
  return CUDA_SUCCESS;
}

CUresult fake_MemAddressFree(CUdeviceptr ptr, std::size_t size) {
  FAKE_ENTRY(MemAddressFree);
  std::lock_guard lock(mu);
  auto it = reservations.find(ptr);
  if (it == reservations.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (it->second != size) return CUDA_ERROR_INVALID_VALUE;  // the size must be the reserved one
  for (auto m = mappings.lower_bound(ptr); m != mappings.end() && m->first < ptr + size;) {
    orphans.push_back(m->second);
    m = mappings.erase(m);
  }
  ::munmap(at(ptr), size);
  reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_MemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                        unsigned long long flags) {
  FAKE_ENTRY(MemCreate);
  if (!handle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = check_prop(prop)) return r;
  if (size == 0 || size % kMinimum != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  const int dev = prop->location.id;
  const unsigned types = static_cast<unsigned>(prop->requestedHandleTypes);
  if (!device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) return CUDA_ERROR_NOT_SUPPORTED;
  if ((types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
      !device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
    return CUDA_ERROR_NOT_SUPPORTED;
  if ((types & CU_MEM_HANDLE_TYPE_FABRIC) && !device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED))
    return CUDA_ERROR_NOT_PERMITTED;  // (the driver's answer without an IMEX channel)
  const std::string name = "fake_cuda_vmm:" + std::to_string(dev) + ":" + std::to_string(types);
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *handle = add_handle(new Physical{fd, size, dev, types});
  return CUDA_SUCCESS;
}

CUresult fake_MemRelease(CUmemGenericAllocationHandle handle) {
  FAKE_ENTRY(MemRelease);
  std::lock_guard lock(mu);
  auto it = handles.find(handle);
  if (it == handles.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  Physical* p = it->second;
  handles.erase(it);
  p->released = true;
  settle(p);
  return CUDA_SUCCESS;
}

CUresult fake_MemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                     unsigned long long flags) {
  FAKE_ENTRY(MemMap);
  std::lock_guard lock(mu);
  auto h = handles.find(handle);
  if (h == handles.end()) return CUDA_ERROR_INVALID_HANDLE;
  Physical* p = h->second;
  // The documented rules: granularity multiples, an offset of zero (for now), within the allocation.
  if (flags != 0 || size == 0 || ptr % kMinimum || size % kMinimum || offset != 0 || size > p->bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (reservation_of(ptr, size) == reservations.end() || overlaps_mapping(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  if (::mmap(at(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, 0) == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  mappings[ptr] = Mapping{size, p, {}};
  ++p->mappings;
  return CUDA_SUCCESS;
}

CUresult fake_MemUnmap(CUdeviceptr ptr, std::size_t size) {
  FAKE_ENTRY(MemUnmap);
  std::lock_guard lock(mu);
  if (mapping_at(ptr) == mappings.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const bool whole = whole_mappings(ptr, size, [](std::map<std::uintptr_t, Mapping>::iterator it) {
    ::mmap(at(it->first), it->second.bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    Physical* p = it->second.physical;
    --p->mappings;
    mappings.erase(it);
    settle(p);
  });
  return whole ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;  // (a part of a mapping cannot be unmapped)
}

CUresult fake_MemSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
  FAKE_ENTRY(MemSetAccess);
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
    const int f = desc[i].flags;
    if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(mu);
  // The range must be fully mapped: the fake asks for whole mappings, back to back.
  const bool whole = whole_mappings(ptr, size, [&](std::map<std::uintptr_t, Mapping>::iterator it) {
    bool open = false;
    for (std::size_t i = 0; i < count; ++i) it->second.access[desc[i].location.id] = desc[i].flags;
    for (const auto& [dev, flags] : it->second.access) open = open || flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    ::mprotect(at(it->first), it->second.bytes, open ? PROT_READ | PROT_WRITE : PROT_NONE);
  });
  return whole ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_MemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  FAKE_ENTRY(MemGetAccess);
  if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(location->id)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  auto it = mapping_at(ptr);
  if (it == mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  auto a = it->second.access.find(location->id);
  *flags = a == it->second.access.end() ? 0 : static_cast<unsigned long long>(a->second);
  return CUDA_SUCCESS;
}

CUresult fake_MemExportToShareableHandle(void* out, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,
                                         unsigned long long flags) {
  FAKE_ENTRY(MemExportToShareableHandle);
  if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  auto h = handles.find(handle);
  if (h == handles.end()) return CUDA_ERROR_INVALID_VALUE;
  const Physical* p = h->second;
  // Only as a kind it was created exportable as.
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC) return CUDA_ERROR_NOT_SUPPORTED;
  if (!(p->types & static_cast<unsigned>(type))) return CUDA_ERROR_INVALID_VALUE;
  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    const int fd = ::fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    std::memcpy(out, &fd, sizeof fd);
  } else {
    CUmemFabricHandle f{};
    std::memcpy(f.data, kFabricMagic, 4);
    std::memcpy(f.data + 8, &handle, sizeof handle);
    std::memcpy(out, &f, sizeof f);
  }
  return CUDA_SUCCESS;
}

CUresult fake_MemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                           CUmemAllocationHandleType type) {
  FAKE_ENTRY(MemImportFromShareableHandle);
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
    CUmemFabricHandle f{};
    if (!os_handle) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(&f, os_handle, sizeof f);
    CUmemGenericAllocationHandle from = 0;
    std::memcpy(&from, f.data + 8, sizeof from);
    auto h = handles.find(from);
    if (std::memcmp(f.data, kFabricMagic, 4) != 0 || h == handles.end()) return CUDA_ERROR_INVALID_VALUE;
    Physical* p = h->second;
    const int fd = ::fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *handle = add_handle(new Physical{fd, p->bytes, p->device, p->types});
    return CUDA_SUCCESS;
  }
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  // The descriptor is the pointer's value (as the driver takes it).
  const int given = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  struct stat st{};
  char link[256] = {};
  int dev = -1;
  unsigned types = 0;
  const std::string path = "/proc/self/fd/" + std::to_string(given);
  if (::fstat(given, &st) != 0 || ::readlink(path.c_str(), link, sizeof link - 1) < 0 ||
      std::sscanf(link, "/memfd:fake_cuda_vmm:%d:%u", &dev, &types) != 2)
    return CUDA_ERROR_INVALID_VALUE;  // not a descriptor the fake exported
  const int fd = ::fcntl(given, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  // An imported handle's properties name no handle type (driver 580, H100:
  // cuMemGetAllocationPropertiesFromHandle in the importing process).
  (void)types;
  *handle = add_handle(new Physical{fd, static_cast<std::size_t>(st.st_size), dev, 0});
  return CUDA_SUCCESS;
}

CUresult fake_MemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  FAKE_ENTRY(MemGetAllocationPropertiesFromHandle);
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  auto h = handles.find(handle);
  if (h == handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->requestedHandleTypes = static_cast<CUmemAllocationHandleType>(h->second->types);
  prop->location = {CU_MEM_LOCATION_TYPE_DEVICE, h->second->device};
  return CUDA_SUCCESS;
}
