// External memory and semaphores (cuImportExternalMemory,
// cuExternalMemoryGetMappedBuffer, cuImportExternalSemaphore,
// cuSignalExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync and their
// destroys), modelled on Linux's file descriptors:
//
// Memory: an opaque fd is accepted when it is one the fake's own VMM export
// made (a memfd named fake_cuda_vmm:..., fake_vmm.cpp), the only exporter
// the fake has; any other descriptor is refused (CUDA_ERROR_INVALID_VALUE:
// what the driver answers for a bogus one is not measured). The size must
// be non-zero and within the memfd's; the flags none or DEDICATED. On
// success the fake takes the descriptor (as the driver does: the caller must
// not close it) and closes it at cuDestroyExternalMemory; on failure it is
// untouched. A mapped buffer is a shared mapping of the memfd (so two
// mappings, or a mapping and a VMM mapping of the same allocation, share
// their bytes, as on the device), counted as a device allocation (copies
// reach it, fake_live("memory") counts it) and freed by cuMemFree.
//
// Semaphores: no Vulkan here, so the fake's stand-in for a semaphore that
// Vulkan exported is an eventfd: opaque_fd and timeline_fd take one, any
// other descriptor is refused; the Win32, Direct3D and NvSci kinds are not
// on Linux (CUDA_ERROR_NOT_SUPPORTED). Each has a value: a signal sets it
// (a binary one: to 1), in stream order (a held stream's signal waits with
// its work); a wait finds the value reached (a binary one consumes it) or,
// where the device would block the stream, counts a blocked wait
// (fake_semaphore reads both). Flags must be 0 (the NvSci ones only apply
// to NvSciSync).
#include "fake_memory_state.hpp"

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fake {
namespace {

struct ExtMemory {
  int fd;
  std::size_t bytes;
};
struct ExtSemaphore {
  int fd;
  bool timeline;
  unsigned long long value = 0;
  long blocked = 0;
};
struct MappedBuffer {
  void* base;  // the mmap's start (the page below the buffer's offset)
  std::size_t length;
};

// Never destroyed, as `live`.
std::map<CUexternalMemory, ExtMemory>& memories = *new std::map<CUexternalMemory, ExtMemory>;
std::map<CUexternalSemaphore, ExtSemaphore*>& semaphores = *new std::map<CUexternalSemaphore, ExtSemaphore*>;
std::map<CUdeviceptr, MappedBuffer>& buffers = *new std::map<CUdeviceptr, MappedBuffer>;
std::uintptr_t next_handle = 0xe7000001;

// What /proc says descriptor `fd` is ("" when it is none).
std::string fd_link(int fd) {
  char link[256] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::readlink(path.c_str(), link, sizeof link - 1) < 0) return {};
  return link;
}

bool known_fd_type(int type, bool memory) {
  return memory ? type >= CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD && type <= CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD
                : type >= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD &&
                      type <= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32;
}

// With `mu` held: signal (or wait for) each semaphore, as the device does when the stream reaches it.
void run_semaphores(const std::vector<std::pair<CUexternalSemaphore, unsigned long long>>& work, bool signal) {
  for (const auto& [h, value] : work) {
    auto it = semaphores.find(h);
    if (it == semaphores.end()) continue;  // destroyed before the stream reached it
    ExtSemaphore& s = *it->second;
    if (signal) {
      s.value = s.timeline ? value : 1;
    } else if (s.timeline ? s.value < value : s.value == 0) {
      ++s.blocked;  // the device would hold the stream here
    } else if (!s.timeline) {
      s.value = 0;
    }
  }
}

template <class Params>
CUresult enqueue_semaphores(const CUexternalSemaphore* sems, const Params* params, unsigned n, CUstream stream,
                            bool signal) {
  if (!sems || !params || n == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  std::vector<std::pair<CUexternalSemaphore, unsigned long long>> work;
  for (unsigned i = 0; i < n; ++i) {
    if (!semaphores.count(sems[i])) return CUDA_ERROR_INVALID_HANDLE;
    if (params[i].flags != 0) return CUDA_ERROR_INVALID_VALUE;
    work.emplace_back(sems[i], params[i].params.fenceValue);
  }
  if (const CUresult r = use_stream(stream)) return r;
  if (held(stream)) {
    defer(stream, [work, signal] { run_semaphores(work, signal); });
    return CUDA_SUCCESS;
  }
  run_semaphores(work, signal);
  return CUDA_SUCCESS;
}

}  // namespace

long live_external_memory() { return static_cast<long>(memories.size()); }
long live_external_semaphore() { return static_cast<long>(semaphores.size()); }

bool external_buffer_free(CUdeviceptr p) {
  auto it = buffers.find(p);
  if (it == buffers.end()) return false;
  ::munmap(it->second.base, it->second.length);
  buffers.erase(it);
  return true;
}

}  // namespace fake

using namespace fake;

FAKE_EXPORT int fake_semaphore(const void* semaphore, unsigned long long* value, long* blocked) {
  std::lock_guard lock(mu);
  auto it = semaphores.find(static_cast<CUexternalSemaphore>(const_cast<void*>(semaphore)));
  if (it == semaphores.end()) return -1;
  if (value) *value = it->second->value;
  if (blocked) *blocked = it->second->blocked;
  return 0;
}

CUresult fake_ImportExternalMemory(CUexternalMemory* out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) {
  FAKE_ENTRY(ImportExternalMemory);
  if (!out || !desc || !known_fd_type(desc->type, true)) return CUDA_ERROR_INVALID_VALUE;
  if (desc->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD) return CUDA_ERROR_NOT_SUPPORTED;
  if (desc->size == 0 || (desc->flags & ~external_memory_dedicated) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  struct stat st{};
  if (fd_link(desc->handle.fd).rfind("/memfd:fake_cuda_vmm:", 0) != 0 || ::fstat(desc->handle.fd, &st) != 0)
    return CUDA_ERROR_INVALID_VALUE;  // not a descriptor the fake exported
  if (desc->size > static_cast<unsigned long long>(st.st_size)) return CUDA_ERROR_INVALID_VALUE;
  const auto h = reinterpret_cast<CUexternalMemory>(next_handle++);
  memories[h] = ExtMemory{desc->handle.fd, static_cast<std::size_t>(desc->size)};  // the descriptor is the fake's now
  *out = h;
  return CUDA_SUCCESS;
}

CUresult fake_ExternalMemoryGetMappedBuffer(CUdeviceptr* out, CUexternalMemory memory,
                                            const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* desc) {
  FAKE_ENTRY(ExternalMemoryGetMappedBuffer);
  if (!out || !desc) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  auto it = memories.find(memory);
  if (it == memories.end()) return CUDA_ERROR_INVALID_HANDLE;
  const ExtMemory& m = it->second;
  if (desc->flags != 0 || desc->size == 0 || desc->offset > m.bytes || desc->size > m.bytes - desc->offset)
    return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = need_current_locked()) return r;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t below = static_cast<std::size_t>(desc->offset) % page;
  const std::size_t length = below + static_cast<std::size_t>(desc->size);
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd,
                      static_cast<off_t>(desc->offset - below));
  if (base == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto p = reinterpret_cast<std::uintptr_t>(base) + below;
  buffers[p] = MappedBuffer{base, length};
  mem::allocations[p] = static_cast<std::size_t>(desc->size);
  mem::own(p, CU_MEMORYTYPE_DEVICE, false);
  *out = p;
  return CUDA_SUCCESS;
}

CUresult fake_DestroyExternalMemory(CUexternalMemory memory) {
  FAKE_ENTRY(DestroyExternalMemory);
  std::lock_guard lock(mu);
  auto it = memories.find(memory);
  if (it == memories.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ::close(it->second.fd);  // (its mapped buffers keep the memory until cuMemFree)
  memories.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_ImportExternalSemaphore(CUexternalSemaphore* out, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC* desc) {
  FAKE_ENTRY(ImportExternalSemaphore);
  if (!out || !desc || !known_fd_type(desc->type, false) || desc->flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const bool timeline = desc->type == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
  if (!timeline && desc->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(mu);
  if (const CUresult r = need_current_locked()) return r;
  if (fd_link(desc->handle.fd) != "anon_inode:[eventfd]") return CUDA_ERROR_INVALID_VALUE;
  const auto h = reinterpret_cast<CUexternalSemaphore>(next_handle++);
  semaphores[h] = new ExtSemaphore{desc->handle.fd, timeline};
  *out = h;
  return CUDA_SUCCESS;
}

CUresult fake_SignalExternalSemaphoresAsync(const CUexternalSemaphore* sems,
                                            const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS* params, unsigned n,
                                            CUstream stream) {
  FAKE_ENTRY(SignalExternalSemaphoresAsync);
  return enqueue_semaphores(sems, params, n, stream, true);
}

CUresult fake_WaitExternalSemaphoresAsync(const CUexternalSemaphore* sems,
                                          const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS* params, unsigned n,
                                          CUstream stream) {
  FAKE_ENTRY(WaitExternalSemaphoresAsync);
  return enqueue_semaphores(sems, params, n, stream, false);
}

CUresult fake_DestroyExternalSemaphore(CUexternalSemaphore semaphore) {
  FAKE_ENTRY(DestroyExternalSemaphore);
  std::lock_guard lock(mu);
  auto it = semaphores.find(semaphore);
  if (it == semaphores.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ::close(it->second->fd);
  delete it->second;
  semaphores.erase(it);
  return CUDA_SUCCESS;
}
