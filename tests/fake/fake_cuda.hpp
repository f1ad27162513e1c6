// The fake driver's shared declarations (not part of oxicuda).
//
// The fake exports every entry point of oxicuda's table under its driver
// symbol (cuStreamDestroy_v2, ...), keeps in-memory handles, counts calls per
// entry point, counts live handles per kind, and fails a chosen call of a
// chosen entry point on request. Tests reach its controls (fake_*) through
// tests/fake_driver.hpp. It is split in files so that variants can leave
// out cuGetProcAddress_v2 (fake_getproc.cpp) or the newest entry points
// (fake_optional.cpp), as older drivers do.
#pragma once

#include "oxicuda/ffi.hpp"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

using namespace oxicuda::ffi;

namespace fake {

// Counts the call, and returns the injected failure for it (or CUDA_SUCCESS).
CUresult enter(Entry e) noexcept;

}  // namespace fake

// Declares fake_<member> with the driver's exported symbol name, so each
// definition below must have exactly the table's signature.
#define FAKE_DECLARE(member, version, symbol, params) \
  extern "C" __attribute__((visibility("default"))) CUresult fake_##member params __asm__(symbol);
OXICUDA_DRIVER_API(FAKE_DECLARE)
#undef FAKE_DECLARE

#define FAKE_ENTRY(member)                                                          \
  do {                                                                              \
    if (const CUresult fake_r_ = ::fake::enter(Entry::member); fake_r_ != CUDA_SUCCESS) \
      return fake_r_;                                                               \
  } while (0)
