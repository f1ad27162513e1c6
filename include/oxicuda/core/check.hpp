// oxicuda/core/check.hpp — the checked call that every wrapper makes: a call's
// result paired with the entry point that gave it (OXICUDA_DRIVER,
// OXICUDA_NVRTC, OXICUDA_NVJITLINK), check and check_nothrow, the errors
// that explain why a call failed (a missing entry point, a refusal, a sticky
// error), and driver_entry_point for the driver's other functions.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "error.hpp"
#include "toolkit.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN
namespace detail {

// The error for an entry point the driver does not provide: either no usable
// driver at all (the loader's reason), or this one symbol is missing from an
// older driver.
[[noreturn]] OXICUDA_DETAIL_COLD inline void unavailable(ffi::Entry entry, SourceLocation where) {
  const DriverInfo& info = driver_info();
  const ffi::EntryInfo& e = ffi::entry_info(entry);
  switch (info.status) {
    case DriverStatus::ok: {
      const int v = info.version;
      raise(Error(ffi::CUDA_ERROR_NOT_FOUND, e.name,
                  cat({"the loaded driver (", info.library, ", CUDA ", std::to_string(v / 1000), ".",
                       std::to_string(v % 1000 / 10), ") does not provide ", e.name, " (symbol ", e.symbol,
                       ", pinned version ", std::to_string(e.version), "); this call needs a newer driver"}),
                  where));
    }
    case DriverStatus::stub_library:
      raise(Error(ffi::CUDA_ERROR_STUB_LIBRARY, e.name, info.reason, where));
    case DriverStatus::init_failed:
      raise(Error(info.init_result, e.name, info.reason, where));
    case DriverStatus::not_a_driver:
      raise(Error(ffi::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, e.name, info.reason, where));
    case DriverStatus::no_library:
      break;
  }
  raise(Error(ffi::CUDA_ERROR_NOT_INITIALIZED, e.name, info.reason, where));
}

// Why a call that the driver refused may have been refused, where oxicuda
// can tell: a process forked after the driver was loaded, or a CUDA call
// made inside a host function.
inline std::string refusal_reason(ffi::CUresult r) {
  if (r == ffi::CUDA_ERROR_NOT_PERMITTED && in_host_function)
    return "this call was made inside a host function (launch_host_func or a graph host node), on the driver's "
           "thread, where the driver permits no CUDA call; enqueue the work on a stream instead";
  if (r == ffi::CUDA_ERROR_NOT_INITIALIZED && forked_after_load())
    return "this process is a child forked after the CUDA driver was initialized in its parent: CUDA cannot be "
           "used in such a child. Initialize CUDA only after fork(), or exec() a new program in the child";
  if (r == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == ffi::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    return "a stream is capturing, and this call would wait for, or implicitly order itself after, the captured "
           "work (a synchronize or query of the capturing stream, a synchronous copy, fill or allocation during a "
           "global-mode capture, or work on the legacy default stream while a blocking stream captures). The "
           "driver has invalidated the capture: end it, and capture again without this call (or use "
           "CaptureMode::relaxed for calls that are only unsafe, or CaptureMode::per_thread to ignore other "
           "threads)";
  return {};
}

// Whether `r` is a sticky error: a kernel faulted, and the context is
// unusable from then on (the driver repeats the error for every later call
// in it, whatever the call).
inline bool sticky_result(ffi::CUresult r) noexcept {
  switch (r) {
    case ffi::CUDA_ERROR_ASSERT:
    case ffi::CUDA_ERROR_ILLEGAL_ADDRESS:
    case ffi::CUDA_ERROR_LAUNCH_FAILED:
    case ffi::CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case ffi::CUDA_ERROR_MISALIGNED_ADDRESS:
    case ffi::CUDA_ERROR_HARDWARE_STACK_ERROR:
    case ffi::CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case ffi::CUDA_ERROR_INVALID_PC:
    case ffi::CUDA_ERROR_LAUNCH_TIMEOUT:
    case ffi::CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case ffi::CUDA_ERROR_CONTAINED:
      return true;
    default:
      return false;
  }
}

inline constexpr const char* sticky_advice =
    "this error is sticky: a kernel faulted (a device-side assert, an illegal address or instruction, ...), and "
    "the context is now unusable: every later call in it fails with this same error, whatever the call, so this "
    "call may not be the one at fault. Plan on a new process to recover: on driver 580, after a device-side "
    "assert, nothing else does (a reset primary context, or a new one, answers the same error). Where a driver "
    "allows it, drop every handle of the context's objects (its buffers, streams, events and modules are lost; "
    "their destructors' failures go to the diagnostic hook), then reset it: a primary context with "
    "Context::reset_primary(device) (cuDevicePrimaryCtxReset; then retain it again with Context::primary), a "
    "created one by dropping its last handle and creating another";

// A call's result, with the entry point that gave it: the driver's
// (OXICUDA_DRIVER), NVRTC's (OXICUDA_NVRTC) or nvJitLink's (OXICUDA_NVJITLINK).
template <Library L>
struct CallOutcome {
  typename LibraryTraits<L>::result result;
  typename LibraryTraits<L>::entry entry;
  [[nodiscard]] bool ok() const noexcept { return result == LibraryTraits<L>::success; }
};
using Outcome = CallOutcome<Library::driver>;
using NvrtcOutcome = CallOutcome<Library::nvrtc>;
using NvJitLinkOutcome = CallOutcome<Library::nvjitlink>;

// The error for a failed driver call. An entry point the driver lacks
// answers CUDA_ERROR_NOT_FOUND through its stand-in (loader.hpp), which is
// explained here rather than on the hot path.
[[noreturn]] OXICUDA_DETAIL_COLD inline void fail(Outcome o, SourceLocation where, std::string detail = {}) {
  // In a forked child no call reaches the driver (loader.hpp's on_fork_child):
  // what the driver would answer there.
  if (OXICUDA_DETAIL_UNLIKELY(forked_after_load())) o.result = ffi::CUDA_ERROR_NOT_INITIALIZED;
  if (o.result == ffi::CUDA_ERROR_NOT_FOUND && missing(o.entry)) unavailable(o.entry, where);
  if (o.result == ffi::CUDA_ERROR_NOT_INITIALIZED || o.result == ffi::CUDA_ERROR_NOT_PERMITTED ||
      o.result == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || o.result == ffi::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    std::string why = refusal_reason(o.result);
    if (!why.empty()) detail = detail.empty() ? std::move(why) : cat({detail, "\n", why});
  }
  if (sticky_result(o.result)) detail = detail.empty() ? std::string(sticky_advice) : cat({detail, "\n", sticky_advice});
  raise(Error(o.result, ffi::entry_info(o.entry).name, std::move(detail), where));
}

inline const LibraryInfo& library_info(ffi::nvrtc::Entry) noexcept { return nvrtc_info(); }
inline const LibraryInfo& library_info(ffi::nvjitlink::Entry) noexcept { return nvjitlink_info(); }
// (Each library's entry_info is found by argument-dependent lookup.)

// The error for a failed NVRTC or nvJitLink call; a stand-in's answer (the
// library or this entry point of it is missing) says why.
template <Library L>
  requires(L != Library::driver)
[[noreturn]] OXICUDA_DETAIL_COLD void fail(CallOutcome<L> o, SourceLocation where, std::string detail = {}) {
  const ffi::EntryInfo& e = entry_info(o.entry);
  if (o.result == LibraryTraits<L>::not_found && missing(o.entry)) {
    const LibraryInfo& info = library_info(o.entry);
    if (!info.found) raise(Error(o.result, e.name, info.reason, where));
    const int v = info.version;
    raise(Error(o.result, e.name,
                cat({"the loaded library (", info.library, v ? ", version " : "", v ? std::to_string(v / 1000) : "",
                     v ? "." : "", v ? std::to_string(v % 1000 / 10) : "", ") does not provide ", e.symbol,
                     "; this call needs a newer one"}),
                where));
  }
  raise(Error(o.result, e.name, std::move(detail), where));
}

// fail() for check(): the result and the entry apart, so that the hot path
// does not build an outcome it only needs when the call failed.
template <class Result, class EntryT>
[[noreturn]] OXICUDA_DETAIL_COLD void fail_call(Result r, EntryT entry, SourceLocation where) {
  fail(CallOutcome<LibraryOf<Result>::value>{r, entry}, where);
}

// Checks one call's result: throws (or reports) an Error naming the call
// when it failed. Every wrapper calls the driver as
//   check(OXICUDA_DRIVER(StreamCreate, &raw, flags), where);
// which is the driver call, one compare and nothing else on success.
template <Library L>
inline void check(CallOutcome<L> o, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(!o.ok())) fail_call(o.result, o.entry, where);
}

// The same for a call made by a destructor: never throws; a failure goes to
// the diagnostic hook, saying what was being done (`during`: "destroying an
// oxicuda::Stream"). Returns whether the call succeeded.
template <Library L>
inline bool check_nothrow(CallOutcome<L> o, const char* during) noexcept {
  if (OXICUDA_DETAIL_LIKELY(o.ok())) return true;
  if constexpr (L == Library::driver) {
    if (forked_after_load()) return false;  // a forked child leaks what its parent owns, as the driver requires
    report(o.result, entry_info(o.entry).name, during,
           missing(o.entry) ? "the loaded driver does not provide this entry point" : "");
  } else {
    report(o.result, entry_info(o.entry).name, during);
  }
  return false;
}

// The error for using an empty handle (default-constructed or moved-from).
[[noreturn]] OXICUDA_DETAIL_COLD inline void empty_handle(const char* type, const char* operation, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_HANDLE, operation,
              cat({"this ", type, " is empty (default-constructed or moved-from); it has no driver handle"}), where));
}

}  // namespace detail

// Any entry point of the loaded driver, by name and CUDA version, from the
// driver oxicuda loaded (cuGetProcAddress_v2, with the legacy default
// stream semantics of oxicuda's own table): for a driver function that
// oxicuda does not wrap, without linking libcuda or calling
// cuGetProcAddress yourself. `symbol` is the name without a _v2 suffix, as
// cuGetProcAddress takes it; `version` the CUDA version whose form you want
// (12000 for CUDA 12.0). Typed, with cuda.h's PFN types (cudaTypedefs.h):
//   auto get = oxicuda::driver_entry_point<PFN_cuCtxGetApiVersion_v3020>("cuCtxGetApiVersion", 3020);
//   unsigned v = 0;
//   get(ctx.raw(), &v);  // a CUresult, yours to check
// An Error (CUDA_ERROR_NOT_FOUND) when the driver has no such function, or
// not at that version; the call itself is then never made.
[[nodiscard]] void* driver_entry_point(const char* symbol, int version,
                                       SourceLocation where = SourceLocation::current());
// clang-format off
template <class Fn>
  requires(std::is_pointer_v<Fn> && std::is_function_v<std::remove_pointer_t<Fn>>)
[[nodiscard]] Fn driver_entry_point(const char* symbol, int version, SourceLocation where = SourceLocation::current()) {
  return reinterpret_cast<Fn>(driver_entry_point(symbol, version, where));
}
// clang-format on

inline void* driver_entry_point(const char* symbol, int version, SourceLocation where) {
  constexpr const char* op = "oxicuda::driver_entry_point";
  if (symbol == nullptr || *symbol == '\0')
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op, "no symbol name was given", where));
  void* p = nullptr;
  ffi::CUdriverProcAddressQueryResult status = ffi::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  detail::check(detail::Outcome{detail::api().GetProcAddress(symbol, &p, version, ffi::CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                                              &status),
                                ffi::Entry::GetProcAddress},
                where);
  if (status == ffi::CU_GET_PROC_ADDRESS_SUCCESS && p != nullptr) return p;
  const DriverInfo& info = driver_info();
  const std::string driver = detail::cat({"the loaded driver (", info.library, ", CUDA ",
                                          std::to_string(info.version / 1000), ".",
                                          std::to_string(info.version % 1000 / 10), ")"});
  if (status == ffi::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
    detail::raise(Error(ffi::CUDA_ERROR_NOT_FOUND, op,
                        detail::cat({driver, " has ", symbol, ", but not at version ", std::to_string(version),
                                     ": ask for the version of an older CUDA, or use a newer driver"}),
                        where));
  detail::raise(Error(ffi::CUDA_ERROR_NOT_FOUND, op,
                      detail::cat({driver, " has no entry point named ", symbol, " (at version ",
                                   std::to_string(version),
                                   "); give the name without a version suffix, as cuGetProcAddress takes it "
                                   "(\"cuMemAlloc\", not \"cuMemAlloc_v2\")"}),
                      where));
}

OXICUDA_DETAIL_NAMESPACE_END

// Calls the driver's entry point `member` (a name of the table in ffi.hpp,
// without its `cu`) with the arguments that follow, and pairs the result with
// that entry point, so that an error can only name the call that was made:
//   detail::check(OXICUDA_DRIVER(StreamCreate, &raw, flags), where);
// oxicuda's own; for a driver function of your own choosing, see
// oxicuda::driver_entry_point.
#define OXICUDA_DRIVER(member, ...) \
  (::oxicuda::detail::Outcome{::oxicuda::detail::api().member(__VA_ARGS__), ::oxicuda::ffi::Entry::member})

// The same for NVRTC's and nvJitLink's calls:
//   detail::check(OXICUDA_NVRTC(CompileProgram, prog, n, options), where);
#define OXICUDA_NVRTC(member, ...)                                                                           \
  (::oxicuda::detail::NvrtcOutcome{::oxicuda::detail::nvrtc().api.member(__VA_ARGS__),                      \
                                   ::oxicuda::ffi::nvrtc::Entry::member})
#define OXICUDA_NVJITLINK(member, ...)                                                                       \
  (::oxicuda::detail::NvJitLinkOutcome{::oxicuda::detail::nvjitlink().api.member(__VA_ARGS__),              \
                                       ::oxicuda::ffi::nvjitlink::Entry::member})
