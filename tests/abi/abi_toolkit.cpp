// The NVRTC and nvJitLink ABI that nvrtc_ffi.hpp and nvjitlink_ffi.hpp
// declare by hand agrees with the toolkit's nvrtc.h and nvJitLink.h: every
// table entry's function type (from the tables themselves, so none can be
// left out) and every enumerator's value. static_asserts: a disagreement
// fails the build of this test.
#include <nvJitLink.h>
#include <nvrtc.h>

#include "oxicuda.hpp"

#include <cstdio>
#include <type_traits>

namespace abi {
// Our result and input enums (fixed `int`) and the headers' are the same ABI
// when they have the same size; everything else must be the same type.
template <class T, bool = std::is_enum_v<T>>
struct norm {
  using type = T;
};
template <class T>
struct norm<T, true> {
  using type = std::integral_constant<std::size_t, sizeof(T)>;
};
template <class T>
struct norm<T*, false> {
  using type = typename norm<T>::type*;
};
template <class R, class... A>
struct norm<R (*)(A...), false> {
  using type = typename norm<R>::type (*)(typename norm<A>::type...);
};
template <class A, class B>
inline constexpr bool same = std::is_same_v<typename norm<A>::type, typename norm<B>::type>;
}  // namespace abi

static_assert(std::is_same_v<::nvrtcProgram, ::_nvrtcProgram*>);
static_assert(std::is_same_v<::nvJitLinkHandle, ::nvJitLink*>);
static_assert(sizeof(oxicuda::ffi::nvrtcResult) == sizeof(::nvrtcResult));
static_assert(sizeof(oxicuda::ffi::nvJitLinkResult) == sizeof(::nvJitLinkResult));

#define ABI_NVRTC_ENTRY(member, version, symbol, params)                                              \
  static_assert(abi::same<decltype(oxicuda::ffi::nvrtc::NvrtcApi::member), decltype(&::nvrtc##member)>, \
                symbol ": signature differs from nvrtc.h");
OXICUDA_DETAIL_NVRTC_API(ABI_NVRTC_ENTRY)
#define ABI_NVJITLINK_ENTRY(member, version, symbol, params)                                                     \
  static_assert(abi::same<decltype(oxicuda::ffi::nvjitlink::NvJitLinkApi::member), decltype(&::nvJitLink##member)>, \
                symbol ": signature differs from nvJitLink.h");
OXICUDA_DETAIL_NVJITLINK_API(ABI_NVJITLINK_ENTRY)

// Every enumerator, by name (both lists as the parts declare them).
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_SUCCESS) == static_cast<int>(::NVRTC_SUCCESS));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_OUT_OF_MEMORY) == static_cast<int>(::NVRTC_ERROR_OUT_OF_MEMORY));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_PROGRAM_CREATION_FAILURE) == static_cast<int>(::NVRTC_ERROR_PROGRAM_CREATION_FAILURE));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_INVALID_INPUT) == static_cast<int>(::NVRTC_ERROR_INVALID_INPUT));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_INVALID_PROGRAM) == static_cast<int>(::NVRTC_ERROR_INVALID_PROGRAM));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_INVALID_OPTION) == static_cast<int>(::NVRTC_ERROR_INVALID_OPTION));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_COMPILATION) == static_cast<int>(::NVRTC_ERROR_COMPILATION));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE) == static_cast<int>(::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION) == static_cast<int>(::NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION) == static_cast<int>(::NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID) == static_cast<int>(::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_INTERNAL_ERROR) == static_cast<int>(::NVRTC_ERROR_INTERNAL_ERROR));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_TIME_FILE_WRITE_FAILED) == static_cast<int>(::NVRTC_ERROR_TIME_FILE_WRITE_FAILED));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED) == static_cast<int>(::NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) == static_cast<int>(::NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_PCH_CREATE) == static_cast<int>(::NVRTC_ERROR_PCH_CREATE));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_CANCELLED) == static_cast<int>(::NVRTC_ERROR_CANCELLED));
static_assert(static_cast<int>(oxicuda::ffi::NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED) == static_cast<int>(::NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_SUCCESS) == static_cast<int>(::NVJITLINK_SUCCESS));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION) == static_cast<int>(::NVJITLINK_ERROR_UNRECOGNIZED_OPTION));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_MISSING_ARCH) == static_cast<int>(::NVJITLINK_ERROR_MISSING_ARCH));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_INVALID_INPUT) == static_cast<int>(::NVJITLINK_ERROR_INVALID_INPUT));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_PTX_COMPILE) == static_cast<int>(::NVJITLINK_ERROR_PTX_COMPILE));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_NVVM_COMPILE) == static_cast<int>(::NVJITLINK_ERROR_NVVM_COMPILE));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_INTERNAL) == static_cast<int>(::NVJITLINK_ERROR_INTERNAL));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_THREADPOOL) == static_cast<int>(::NVJITLINK_ERROR_THREADPOOL));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_UNRECOGNIZED_INPUT) == static_cast<int>(::NVJITLINK_ERROR_UNRECOGNIZED_INPUT));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_FINALIZE) == static_cast<int>(::NVJITLINK_ERROR_FINALIZE));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_NULL_INPUT) == static_cast<int>(::NVJITLINK_ERROR_NULL_INPUT));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS) == static_cast<int>(::NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_INCORRECT_INPUT_TYPE) == static_cast<int>(::NVJITLINK_ERROR_INCORRECT_INPUT_TYPE));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_ARCH_MISMATCH) == static_cast<int>(::NVJITLINK_ERROR_ARCH_MISMATCH));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_OUTDATED_LIBRARY) == static_cast<int>(::NVJITLINK_ERROR_OUTDATED_LIBRARY));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_MISSING_FATBIN) == static_cast<int>(::NVJITLINK_ERROR_MISSING_FATBIN));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_UNRECOGNIZED_ARCH) == static_cast<int>(::NVJITLINK_ERROR_UNRECOGNIZED_ARCH));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_UNSUPPORTED_ARCH) == static_cast<int>(::NVJITLINK_ERROR_UNSUPPORTED_ARCH));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_ERROR_LTO_NOT_ENABLED) == static_cast<int>(::NVJITLINK_ERROR_LTO_NOT_ENABLED));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_NONE) == static_cast<int>(::NVJITLINK_INPUT_NONE));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_CUBIN) == static_cast<int>(::NVJITLINK_INPUT_CUBIN));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_PTX) == static_cast<int>(::NVJITLINK_INPUT_PTX));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_LTOIR) == static_cast<int>(::NVJITLINK_INPUT_LTOIR));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_FATBIN) == static_cast<int>(::NVJITLINK_INPUT_FATBIN));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_OBJECT) == static_cast<int>(::NVJITLINK_INPUT_OBJECT));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_LIBRARY) == static_cast<int>(::NVJITLINK_INPUT_LIBRARY));
static_assert(static_cast<int>(oxicuda::ffi::NVJITLINK_INPUT_ANY) == static_cast<int>(::NVJITLINK_INPUT_ANY));

int main() {
  std::printf("ABI agreement with nvrtc.h and nvJitLink.h: %zu NVRTC and %zu nvJitLink entry points\n",
              oxicuda::ffi::nvrtc::entry_count, oxicuda::ffi::nvjitlink::entry_count);
  return 0;
}
