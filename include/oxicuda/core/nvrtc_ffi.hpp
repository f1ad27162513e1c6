// oxicuda/core/nvrtc_ffi.hpp — the part of NVRTC's ABI (nvrtc.h) that oxicuda
// uses, declared by hand: results, their names and texts, and the table of
// entry points. Loaded lazily by toolkit.hpp, on the mechanism of library.hpp.
#pragma once

#include <cstddef>

#include "ffi.hpp"

// nvrtc.h's handle type, spelled as nvrtc.h spells it.
typedef struct _nvrtcProgram* nvrtcProgram;

OXICUDA_DETAIL_NAMESPACE_BEGIN
namespace ffi {

enum nvrtcResult : int {
  // Not NVRTC's: what a stand-in answers for an entry point the loaded NVRTC
  // lacks, or for every entry point when no NVRTC was found.
  OXICUDA_NVRTC_NOT_FOUND = -1,
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_OUT_OF_MEMORY = 1,
  NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
  NVRTC_ERROR_INVALID_INPUT = 3,
  NVRTC_ERROR_INVALID_PROGRAM = 4,
  NVRTC_ERROR_INVALID_OPTION = 5,
  NVRTC_ERROR_COMPILATION = 6,
  NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
  NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION = 8,
  NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION = 9,
  NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10,
  NVRTC_ERROR_INTERNAL_ERROR = 11,
  NVRTC_ERROR_TIME_FILE_WRITE_FAILED = 12,
  NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED = 13,
  NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED = 14,
  NVRTC_ERROR_PCH_CREATE = 15,
  NVRTC_ERROR_CANCELLED = 16,
  NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED = 17,
};

// NVRTC's own nvrtcGetErrorString answers only the enumerator's name; these
// say what it means.
inline constexpr ResultText nvrtc_result_texts[] = {
    {-1, "OXICUDA_NVRTC_NOT_FOUND", "NVRTC, or this entry point of it, is not available"},
    {0, "NVRTC_SUCCESS", "no error"},
    {1, "NVRTC_ERROR_OUT_OF_MEMORY", "NVRTC ran out of memory"},
    {2, "NVRTC_ERROR_PROGRAM_CREATION_FAILURE", "the program could not be created"},
    {3, "NVRTC_ERROR_INVALID_INPUT", "an argument is not valid"},
    {4, "NVRTC_ERROR_INVALID_PROGRAM", "the program handle is not valid"},
    {5, "NVRTC_ERROR_INVALID_OPTION", "a compile option is not valid"},
    {6, "NVRTC_ERROR_COMPILATION", "the source did not compile"},
    {7, "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE", "a builtin operation failed"},
    {8, "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION", "name expressions must be added before compiling"},
    {9, "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION", "lowered names exist only after compiling"},
    {10, "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", "the name expression was not added before compiling, or is not valid"},
    {11, "NVRTC_ERROR_INTERNAL_ERROR", "NVRTC failed internally"},
    {12, "NVRTC_ERROR_TIME_FILE_WRITE_FAILED", "the time file could not be written"},
    {13, "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED", "no precompiled header was attempted"},
    {14, "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED", "the heap for the precompiled header was exhausted"},
    {15, "NVRTC_ERROR_PCH_CREATE", "the precompiled header could not be created"},
    {16, "NVRTC_ERROR_CANCELLED", "the compilation was cancelled"},
    {17, "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED", "the time trace file could not be written"},
};

// NVRTC's table of entry points, in the driver table's shape:
//   X(member, version (unused: 0), exported symbol, parameters)
// Every entry returns nvrtcResult. The first entry is the one that tells
// NVRTC from another library (library.hpp).
#define OXICUDA_DETAIL_NVRTC_API(X)                                                                                  \
  X(Version, 0, "nvrtcVersion", (int* major, int* minor))                                                      \
  X(GetNumSupportedArchs, 0, "nvrtcGetNumSupportedArchs", (int* numArchs))                                     \
  X(GetSupportedArchs, 0, "nvrtcGetSupportedArchs", (int* supportedArchs))                                     \
  X(CreateProgram, 0, "nvrtcCreateProgram",                                                                    \
    (nvrtcProgram * prog, const char* src, const char* name, int numHeaders, const char* const* headers,       \
     const char* const* includeNames))                                                                         \
  X(DestroyProgram, 0, "nvrtcDestroyProgram", (nvrtcProgram * prog))                                           \
  X(CompileProgram, 0, "nvrtcCompileProgram", (nvrtcProgram prog, int numOptions, const char* const* options)) \
  X(GetPTXSize, 0, "nvrtcGetPTXSize", (nvrtcProgram prog, std::size_t * ptxSizeRet))                           \
  X(GetPTX, 0, "nvrtcGetPTX", (nvrtcProgram prog, char* ptx))                                                  \
  X(GetCUBINSize, 0, "nvrtcGetCUBINSize", (nvrtcProgram prog, std::size_t * cubinSizeRet))                     \
  X(GetCUBIN, 0, "nvrtcGetCUBIN", (nvrtcProgram prog, char* cubin))                                            \
  X(GetLTOIRSize, 0, "nvrtcGetLTOIRSize", (nvrtcProgram prog, std::size_t * LTOIRSizeRet))                     \
  X(GetLTOIR, 0, "nvrtcGetLTOIR", (nvrtcProgram prog, char* LTOIR))                                            \
  X(GetProgramLogSize, 0, "nvrtcGetProgramLogSize", (nvrtcProgram prog, std::size_t * logSizeRet))             \
  X(GetProgramLog, 0, "nvrtcGetProgramLog", (nvrtcProgram prog, char* log))                                    \
  X(AddNameExpression, 0, "nvrtcAddNameExpression", (nvrtcProgram prog, const char* name_expression))          \
  X(GetLoweredName, 0, "nvrtcGetLoweredName",                                                                  \
    (nvrtcProgram prog, const char* name_expression, const char** lowered_name))

namespace nvrtc {
#define OXICUDA_TABLE_PREFIX "nvrtc"
OXICUDA_DETAIL_TABLE_ENTRIES(OXICUDA_DETAIL_NVRTC_API)
#undef OXICUDA_TABLE_PREFIX
}  // namespace nvrtc

}  // namespace ffi
OXICUDA_DETAIL_NAMESPACE_END
