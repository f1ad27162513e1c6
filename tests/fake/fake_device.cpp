// The fake driver's devices: FAKE_CUDA_DEVICES of them (1 unless set),
// each an H200 as far as the tests ask.
#include "fake_state.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fake {

int device_count = [] {
  const char* e = std::getenv("FAKE_CUDA_DEVICES");
  return e ? std::atoi(e) : 1;
}();

}  // namespace fake

using namespace fake;

FAKE_EXPORT void fake_set_device_count(int n) { device_count = n; }

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

CUresult fake_DeviceGetAttribute(int* pi, CUdevice_attribute attr, CUdevice dev) {
  FAKE_ENTRY(DeviceGetAttribute);
  if (dev < 0 || dev >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 227 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    default: *pi = 0;
  }
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
