// The fake driver's devices: FAKE_CUDA_DEVICES of them (1 unless set),
// each an H200 as far as the tests ask.
#include "fake_state.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fake {

int device_count = [] {
  const char* e = std::getenv("FAKE_CUDA_DEVICES");
  return e ? std::atoi(e) : 1;
}();

}  // namespace fake

using namespace fake;

FAKE_EXPORT void fake_set_device_count(int n) { device_count = n; }

namespace {
// fake_set_device_attribute's answers, by (device, attribute); cleared by fake_reset.
std::map<std::pair<int, int>, int>& attribute_overrides = *new std::map<std::pair<int, int>, int>;
}  // namespace

FAKE_EXPORT void fake_set_device_attribute(int dev, int attr, int value) {
  std::lock_guard lock(mu);
  attribute_overrides[{dev, attr}] = value;
}

// fake_set_peer_access's answers, by (device, peer); cleared by fake_reset.
// Unless set, every two distinct devices can reach each other.
namespace {
std::map<std::pair<int, int>, int>& peer_overrides = *new std::map<std::pair<int, int>, int>;
}  // namespace

FAKE_EXPORT void fake_set_peer_access(int dev, int peer, int can) {
  std::lock_guard lock(mu);
  peer_overrides[{dev, peer}] = can;
}

namespace fake {
void reset_device_attributes() {
  std::lock_guard lock(mu);
  attribute_overrides.clear();
  peer_overrides.clear();
}

bool peer_capable_locked(int dev, int peer) {
  if (dev == peer) return false;
  auto it = peer_overrides.find({dev, peer});
  return it == peer_overrides.end() || it->second != 0;
}
}  // namespace fake

CUresult fake_DeviceGetCount(int* n) {
  FAKE_ENTRY(DeviceGetCount);
  *n = device_count;
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGet(CUdevice* d, int ordinal) {
  FAKE_ENTRY(DeviceGet);
  if (ordinal < 0 || ordinal >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTRY(DeviceGetName);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::string n = "oxicuda fake GPU " + std::to_string(dev);
  std::strncpy(name, n.c_str(), static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}

namespace fake {
int device_attribute_locked(CUdevice dev, CUdevice_attribute attr) {
  if (auto it = attribute_overrides.find({dev, attr}); it != attribute_overrides.end()) return it->second;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 48 * 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 227 * 1024;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;  // (the H100's)
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;  // (fabric: 0, as without an IMEX channel)
    default: return 0;
  }
}
}  // namespace fake

CUresult fake_DeviceGetAttribute(int* pi, CUdevice_attribute attr, CUdevice dev) {
  FAKE_ENTRY(DeviceGetAttribute);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  *pi = device_attribute_locked(dev, attr);
  return CUDA_SUCCESS;
}

CUresult fake_DeviceTotalMem(std::size_t* bytes, CUdevice dev) {
  FAKE_ENTRY(DeviceTotalMem);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = std::size_t{80} << 30;
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  FAKE_ENTRY(DeviceGetUuid);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(0xa0 + i + dev);
  return CUDA_SUCCESS;
}

CUresult fake_DeviceGetPCIBusId(char* id, int len, CUdevice dev) {
  FAKE_ENTRY(DeviceGetPCIBusId);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  char text[24];  // (room for any int: no truncation warning)
  std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x18 + dev);
  if (!id || len < static_cast<int>(std::strlen(text)) + 1) return CUDA_ERROR_INVALID_VALUE;
  std::strcpy(id, text);
  return CUDA_SUCCESS;
}

CUresult fake_DeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  FAKE_ENTRY(DeviceCanAccessPeer);
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= device_count || peer < 0 || peer >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  *can = peer_capable_locked(dev, peer);
  return CUDA_SUCCESS;
}

// As NVLink between two H200s: access, native atomics, arrays, rank 0. A
// device and itself is CUDA_ERROR_INVALID_DEVICE, as the driver answers.
CUresult fake_DeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attr, CUdevice src, CUdevice dst) {
  FAKE_ENTRY(DeviceGetP2PAttribute);
  if (!value || attr < CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK || attr > CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED)
    return CUDA_ERROR_INVALID_VALUE;
  if (src < 0 || src >= device_count || dst < 0 || dst >= device_count || src == dst) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(mu);
  const bool can = peer_capable_locked(src, dst);
  *value = attr == CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ? 0 : can;
  return CUDA_SUCCESS;
}
