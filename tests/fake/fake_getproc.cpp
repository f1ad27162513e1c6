// cuGetProcAddress_v2 for the fake driver (left out of the variant that
// models a driver older than CUDA 11.3, so the loader's dlsym path runs).
#include "fake_cuda.hpp"

#include <cstring>
#include <dlfcn.h>

CUresult fake_GetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  FAKE_ENTRY(GetProcAddress);
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (version > 13000) return CUDA_ERROR_INVALID_VALUE;
  if (flags > 2) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  // The table's entry points, and a function that is not in it.
  static const EntryInfo extra[] = {{"cuCtxGetApiVersion", 3020, "cuCtxGetApiVersion"}};
  auto lookup = [&](const EntryInfo& e) -> bool {
    if (std::strcmp(e.name, symbol) != 0) return false;
    if (version < e.version) {
      if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return true;
    }
    Dl_info self{};
    dladdr(reinterpret_cast<void*>(&fake_GetProcAddress), &self);
    void* lib = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    *pfn = lib ? dlsym(lib, e.symbol) : nullptr;
    if (lib) dlclose(lib);
    if (*pfn && status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return true;
  };
  for (const auto& e : entries)
    if (lookup(e)) return CUDA_SUCCESS;
  for (const auto& e : extra)
    if (lookup(e)) return CUDA_SUCCESS;
  return CUDA_SUCCESS;
}
