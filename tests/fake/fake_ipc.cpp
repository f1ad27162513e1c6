// The fake driver's IPC handles. A handle's 64 bytes name the exporting
// process's id and what it exports (an allocation's address, size and id;
// an event's address). As the driver, the fake refuses to open a handle in
// the process that exported it (CUDA_ERROR_INVALID_CONTEXT); a test opens
// its own "in another process" by making the fake believe it runs in
// another (fake_set_process_id). Opened memory is the exporter's own bytes
// (one address space here), mapped once per address with a count of opens,
// as the driver counts a context's opens of one handle; an opened event is
// a new event that does not record time.
#include "fake_state.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include <unistd.h>

namespace fake {

namespace {

long pid_override = 0;  // fake_set_process_id; 0: the real id
// Opened mappings: address -> opens not yet closed. Never destroyed, as `live`.
std::map<CUdeviceptr, long>& opened = *new std::map<CUdeviceptr, long>;

constexpr char kMemoryMagic[4] = {'F', 'K', 'I', 'M'};
constexpr char kEventMagic[4] = {'F', 'K', 'I', 'E'};

std::uint64_t process_id() { return static_cast<std::uint64_t>(pid_override ? pid_override : ::getpid()); }

void put(char* bytes, std::size_t at, std::uint64_t v) { std::memcpy(bytes + at, &v, sizeof v); }
std::uint64_t get(const char* bytes, std::size_t at) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes + at, sizeof v);
  return v;
}

// With `mu` held: whether `bytes` are a handle of the fake's with `magic`,
// exported by another process (else the driver's answer, out).
bool openable(const char* bytes, const char (&magic)[4], CUresult& refused) {
  if (std::memcmp(bytes, magic, 4) != 0) {
    refused = CUDA_ERROR_INVALID_VALUE;
    return false;
  }
  if (get(bytes, 8) == process_id()) {
    refused = CUDA_ERROR_INVALID_CONTEXT;  // the exporter's own handle
    return false;
  }
  return true;
}

}  // namespace

void reset_ipc() {
  std::lock_guard lock(mu);
  pid_override = 0;
}

long live_ipc_memory() {
  long n = 0;
  for (const auto& [p, opens] : opened) n += opens;
  return n;
}

}  // namespace fake

using namespace fake;

FAKE_EXPORT void fake_set_process_id(long pid) {
  std::lock_guard lock(mu);
  pid_override = pid;
}

CUresult fake_IpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  FAKE_ENTRY(IpcGetMemHandle);
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = need_current()) return r;
  std::lock_guard lock(mu);
  std::size_t bytes = 0;
  unsigned long long id = 0;
  if (!ipc_allocation(ptr, bytes, id)) return CUDA_ERROR_INVALID_VALUE;  // not the start of a cuMemAlloc allocation
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  std::memcpy(handle->reserved, kMemoryMagic, 4);
  put(handle->reserved, 8, process_id());
  put(handle->reserved, 16, ptr);
  put(handle->reserved, 24, bytes);
  put(handle->reserved, 32, id);
  return CUDA_SUCCESS;
}

CUresult fake_IpcOpenMemHandle(CUdeviceptr* out, CUipcMemHandle handle, unsigned int flags) {
  FAKE_ENTRY(IpcOpenMemHandle);
  if (!out || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS})) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = need_current()) return r;
  std::lock_guard lock(mu);
  CUresult refused = CUDA_SUCCESS;
  if (!openable(handle.reserved, kMemoryMagic, refused)) return refused;
  const CUdeviceptr ptr = get(handle.reserved, 16);
  if (!ipc_allocation_live(ptr, get(handle.reserved, 32))) return CUDA_ERROR_INVALID_VALUE;  // freed since
  ++opened[ptr];
  *out = ptr;
  return CUDA_SUCCESS;
}

CUresult fake_IpcCloseMemHandle(CUdeviceptr ptr) {
  FAKE_ENTRY(IpcCloseMemHandle);
  std::lock_guard lock(mu);
  auto it = opened.find(ptr);
  if (it == opened.end()) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (--it->second == 0) opened.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_IpcGetEventHandle(CUipcEventHandle* handle, CUevent e) {
  FAKE_ENTRY(IpcGetEventHandle);
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  const long flags = event_flags(e);
  if (flags < 0) return CUDA_ERROR_INVALID_HANDLE;
  constexpr long needed = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  if ((flags & needed) != needed) return CUDA_ERROR_INVALID_VALUE;
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  std::memcpy(handle->reserved, kEventMagic, 4);
  put(handle->reserved, 8, process_id());
  put(handle->reserved, 16, reinterpret_cast<std::uintptr_t>(e));
  return CUDA_SUCCESS;
}

CUresult fake_IpcOpenEventHandle(CUevent* out, CUipcEventHandle handle) {
  FAKE_ENTRY(IpcOpenEventHandle);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = need_current()) return r;
  std::lock_guard lock(mu);
  CUresult refused = CUDA_SUCCESS;
  if (!openable(handle.reserved, kEventMagic, refused)) return refused;
  const auto exported = reinterpret_cast<CUevent>(static_cast<std::uintptr_t>(get(handle.reserved, 16)));
  if (event_flags(exported) < 0) return CUDA_ERROR_INVALID_HANDLE;  // destroyed since
  *out = new_event(current(), CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
  return CUDA_SUCCESS;
}
