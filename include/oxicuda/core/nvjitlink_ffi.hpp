// oxicuda/core/nvjitlink_ffi.hpp — the part of nvJitLink's ABI (nvJitLink.h) that
// oxicuda uses, declared by hand: results, their names and texts, input
// kinds, and the table of entry points. Loaded lazily by toolkit.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ffi.hpp"

// nvJitLink.h's handle type, spelled as nvJitLink.h spells it.
typedef struct nvJitLink* nvJitLinkHandle;

OXICUDA_DETAIL_NAMESPACE_BEGIN
namespace ffi {

enum nvJitLinkResult : int {
  // Not nvJitLink's: what a stand-in answers for an entry point the loaded
  // nvJitLink lacks, or for every entry point when none was found.
  OXICUDA_NVJITLINK_NOT_FOUND = -1,
  NVJITLINK_SUCCESS = 0,
  NVJITLINK_ERROR_UNRECOGNIZED_OPTION = 1,
  NVJITLINK_ERROR_MISSING_ARCH = 2,
  NVJITLINK_ERROR_INVALID_INPUT = 3,
  NVJITLINK_ERROR_PTX_COMPILE = 4,
  NVJITLINK_ERROR_NVVM_COMPILE = 5,
  NVJITLINK_ERROR_INTERNAL = 6,
  NVJITLINK_ERROR_THREADPOOL = 7,
  NVJITLINK_ERROR_UNRECOGNIZED_INPUT = 8,
  NVJITLINK_ERROR_FINALIZE = 9,
  NVJITLINK_ERROR_NULL_INPUT = 10,
  NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS = 11,
  NVJITLINK_ERROR_INCORRECT_INPUT_TYPE = 12,
  NVJITLINK_ERROR_ARCH_MISMATCH = 13,
  NVJITLINK_ERROR_OUTDATED_LIBRARY = 14,
  NVJITLINK_ERROR_MISSING_FATBIN = 15,
  NVJITLINK_ERROR_UNRECOGNIZED_ARCH = 16,
  NVJITLINK_ERROR_UNSUPPORTED_ARCH = 17,
  NVJITLINK_ERROR_LTO_NOT_ENABLED = 18,
};

// nvJitLink has no text function of its own.
inline constexpr ResultText nvjitlink_result_texts[] = {
    {-1, "OXICUDA_NVJITLINK_NOT_FOUND", "nvJitLink, or this entry point of it, is not available"},
    {0, "NVJITLINK_SUCCESS", "no error"},
    {1, "NVJITLINK_ERROR_UNRECOGNIZED_OPTION", "an option is not recognized"},
    {2, "NVJITLINK_ERROR_MISSING_ARCH", "no -arch=sm_NN option was given"},
    {3, "NVJITLINK_ERROR_INVALID_INPUT", "an input is not valid"},
    {4, "NVJITLINK_ERROR_PTX_COMPILE", "compiling PTX failed"},
    {5, "NVJITLINK_ERROR_NVVM_COMPILE", "compiling NVVM IR (LTO-IR) failed"},
    {6, "NVJITLINK_ERROR_INTERNAL", "nvJitLink failed internally"},
    {7, "NVJITLINK_ERROR_THREADPOOL", "nvJitLink's thread pool failed"},
    {8, "NVJITLINK_ERROR_UNRECOGNIZED_INPUT", "an input's kind is not recognized"},
    {9, "NVJITLINK_ERROR_FINALIZE", "finalizing the link failed"},
    {10, "NVJITLINK_ERROR_NULL_INPUT", "an input is null"},
    {11, "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS", "options are incompatible"},
    {12, "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE", "an input is not of the kind it was added as"},
    {13, "NVJITLINK_ERROR_ARCH_MISMATCH", "an input was built for another architecture"},
    {14, "NVJITLINK_ERROR_OUTDATED_LIBRARY", "an input is newer than this nvJitLink"},
    {15, "NVJITLINK_ERROR_MISSING_FATBIN", "a fatbin is missing"},
    {16, "NVJITLINK_ERROR_UNRECOGNIZED_ARCH", "the -arch value is not recognized"},
    {17, "NVJITLINK_ERROR_UNSUPPORTED_ARCH", "the -arch value is not supported"},
    {18, "NVJITLINK_ERROR_LTO_NOT_ENABLED", "linking LTO-IR needs the -lto option"},
};

enum nvJitLinkInputType : int {
  NVJITLINK_INPUT_NONE = 0,
  NVJITLINK_INPUT_CUBIN = 1,
  NVJITLINK_INPUT_PTX = 2,
  NVJITLINK_INPUT_LTOIR = 3,
  NVJITLINK_INPUT_FATBIN = 4,
  NVJITLINK_INPUT_OBJECT = 5,
  NVJITLINK_INPUT_LIBRARY = 6,
  NVJITLINK_INPUT_ANY = 10,
};

// nvJitLink's table of entry points, in the driver table's shape (the
// version is unused: 0). Every entry returns nvJitLinkResult; the first one
// tells nvJitLink from another library.
#define OXICUDA_DETAIL_NVJITLINK_API(X)                                                                                 \
  X(Create, 0, "nvJitLinkCreate", (nvJitLinkHandle * handle, std::uint32_t numOptions, const char** options))    \
  X(Destroy, 0, "nvJitLinkDestroy", (nvJitLinkHandle * handle))                                                  \
  X(AddData, 0, "nvJitLinkAddData",                                                                              \
    (nvJitLinkHandle handle, nvJitLinkInputType inputType, const void* data, std::size_t size, const char* name)) \
  X(Complete, 0, "nvJitLinkComplete", (nvJitLinkHandle handle))                                                  \
  X(GetLinkedCubinSize, 0, "nvJitLinkGetLinkedCubinSize", (nvJitLinkHandle handle, std::size_t * size))          \
  X(GetLinkedCubin, 0, "nvJitLinkGetLinkedCubin", (nvJitLinkHandle handle, void* cubin))                         \
  X(GetErrorLogSize, 0, "nvJitLinkGetErrorLogSize", (nvJitLinkHandle handle, std::size_t * size))                \
  X(GetErrorLog, 0, "nvJitLinkGetErrorLog", (nvJitLinkHandle handle, char* log))                                 \
  X(GetInfoLogSize, 0, "nvJitLinkGetInfoLogSize", (nvJitLinkHandle handle, std::size_t * size))                  \
  X(GetInfoLog, 0, "nvJitLinkGetInfoLog", (nvJitLinkHandle handle, char* log))                                 \
  X(Version, 0, "nvJitLinkVersion", (unsigned int* major, unsigned int* minor))

namespace nvjitlink {
#define OXICUDA_TABLE_PREFIX "nvJitLink"
OXICUDA_DETAIL_TABLE_ENTRIES(OXICUDA_DETAIL_NVJITLINK_API)
#undef OXICUDA_TABLE_PREFIX
}  // namespace nvjitlink

}  // namespace ffi
OXICUDA_DETAIL_NAMESPACE_END
