// oxicuda/core/config.hpp — version, switches, platform, ABI namespace.
//
// Switches a user may define before including oxicuda:
//   OXICUDA_NO_EXCEPTIONS  report errors through the error handler (see
//                          error.hpp) even where exceptions are enabled.
//                          Implied by -fno-exceptions.
// Environment variable read at first use:
//   OXICUDA_LIBCUDA_PATH   the driver library to load instead of the system's.
#pragma once

#define OXICUDA_VERSION_MAJOR 0
#define OXICUDA_VERSION_MINOR 1
#define OXICUDA_VERSION_PATCH 0
#define OXICUDA_VERSION_STRING "0.1.0"

#if defined(_MSVC_LANG)
#define OXICUDA_DETAIL_CPLUSPLUS _MSVC_LANG
#else
#define OXICUDA_DETAIL_CPLUSPLUS __cplusplus
#endif
#if OXICUDA_DETAIL_CPLUSPLUS < 202002L
#error "oxicuda needs C++20 (-std=c++20 or /std:c++20)"
#endif

#if defined(_WIN32)
#define OXICUDA_DETAIL_WINDOWS 1
#define OXICUDA_DETAIL_CUDAAPI __stdcall
#else
#define OXICUDA_DETAIL_WINDOWS 0
#define OXICUDA_DETAIL_CUDAAPI
#endif

// OXICUDA_DETAIL_HAS_EXCEPTIONS: the compiler has exceptions (so a user's callback
// may throw, and oxicuda catches it). OXICUDA_EXCEPTIONS: oxicuda reports its
// errors by throwing (else through the error handler).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define OXICUDA_DETAIL_HAS_EXCEPTIONS 1
#else
#define OXICUDA_DETAIL_HAS_EXCEPTIONS 0
#endif
#if OXICUDA_DETAIL_HAS_EXCEPTIONS && !defined(OXICUDA_NO_EXCEPTIONS)
#define OXICUDA_EXCEPTIONS 1
#else
#define OXICUDA_EXCEPTIONS 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define OXICUDA_DETAIL_COLD __attribute__((cold, noinline))
// A hot path's small front, inlined into the caller whatever the compiler's
// size estimate (the launch: bench/overhead).
#define OXICUDA_DETAIL_ALWAYS_INLINE __attribute__((always_inline)) inline
#define OXICUDA_DETAIL_LIKELY(x) __builtin_expect(!!(x), 1)
#define OXICUDA_DETAIL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define OXICUDA_DETAIL_COLD __declspec(noinline)
#define OXICUDA_DETAIL_ALWAYS_INLINE __forceinline
#define OXICUDA_DETAIL_LIKELY(x) (x)
#define OXICUDA_DETAIL_UNLIKELY(x) (x)
#endif

// Every declaration lives in oxicuda::v<major>_<minor>_<patch>, inline, so two
// versions linked into one program cannot silently mix their layouts.
#define OXICUDA_DETAIL_ABI_CONCAT_(a, b, c) v##a##_##b##_##c
#define OXICUDA_DETAIL_ABI_CONCAT(a, b, c) OXICUDA_DETAIL_ABI_CONCAT_(a, b, c)
#define OXICUDA_DETAIL_ABI_NAMESPACE OXICUDA_DETAIL_ABI_CONCAT(OXICUDA_VERSION_MAJOR, OXICUDA_VERSION_MINOR, OXICUDA_VERSION_PATCH)
#define OXICUDA_DETAIL_NAMESPACE_BEGIN \
  namespace oxicuda {           \
  inline namespace OXICUDA_DETAIL_ABI_NAMESPACE {
#define OXICUDA_DETAIL_NAMESPACE_END \
  }                           \
  }
