// oxicuda/core/error.hpp — Error over any library's result (the driver's
// CUresult, nvrtcResult, nvJitLinkResult), one std::error_category per
// library, the handlers for builds without exceptions and for failures in destructors, and
// the checked call through the entry-point table that every wrapper uses.
#pragma once

#include <atomic>
#include <cstdio>
#include <source_location>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "loader.hpp"
#include "toolkit.hpp"

OXICUDA_NAMESPACE_BEGIN

// Every operation takes the caller's source line as a defaulted last
// argument: SourceLocation where the standard library has it, else
// (clang 14 with libstdc++ 12) the same thing built on the compiler builtins.
#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          const char* function = __builtin_FUNCTION(),
                                          unsigned line = __builtin_LINE()) noexcept {
    SourceLocation s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    return s;
  }
  constexpr SourceLocation() noexcept = default;
  [[nodiscard]] constexpr const char* file_name() const noexcept { return file_; }
  [[nodiscard]] constexpr const char* function_name() const noexcept { return function_; }
  [[nodiscard]] constexpr unsigned line() const noexcept { return line_; }
  [[nodiscard]] constexpr unsigned column() const noexcept { return 0; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
};
#endif

// The category of every CUresult: name() is "cuda", message() is
// "CUDA_ERROR_NAME: description", and out-of-memory / invalid-value compare
// equal to std::errc::not_enough_memory / invalid_argument.
[[nodiscard]] const std::error_category& cuda_category() noexcept;
// NVRTC's ("nvrtc") and nvJitLink's ("nvjitlink"), alike.
[[nodiscard]] const std::error_category& nvrtc_category() noexcept;
[[nodiscard]] const std::error_category& nvjitlink_category() noexcept;

namespace ffi {
[[nodiscard]] inline std::error_code make_error_code(CUresult r) noexcept {
  return {static_cast<int>(r), cuda_category()};
}
[[nodiscard]] inline std::error_code make_error_code(nvrtcResult r) noexcept {
  return {static_cast<int>(r), nvrtc_category()};
}
[[nodiscard]] inline std::error_code make_error_code(nvJitLinkResult r) noexcept {
  return {static_cast<int>(r), nvjitlink_category()};
}
}  // namespace ffi

// A failed call of the driver, NVRTC or nvJitLink (or a misuse oxicuda
// detected before calling). what() reads:
//   cuStreamCreate failed: CUDA_ERROR_INVALID_CONTEXT (201): invalid device context
//     at app.cpp:42 in int main()
//     <detail, when there is one: a JIT or compile log, the loader's reason, ...>
// code() is in the library's own category, so it compares equal to that
// library's results (e.code() == ffi::NVRTC_ERROR_COMPILATION).
class Error : public std::system_error {
 public:
  Error(ffi::CUresult result, std::string call, std::string detail = {},
        SourceLocation where = SourceLocation::current());
  Error(ffi::nvrtcResult result, std::string call, std::string detail = {},
        SourceLocation where = SourceLocation::current());
  Error(ffi::nvJitLinkResult result, std::string call, std::string detail = {},
        SourceLocation where = SourceLocation::current());

  // The library whose result this is.
  [[nodiscard]] Library library() const noexcept { return library_; }
  // The driver's result; for an error of NVRTC or nvJitLink (see library()
  // and code()), CUDA_ERROR_UNKNOWN.
  [[nodiscard]] ffi::CUresult result() const noexcept {
    return library_ == Library::driver ? static_cast<ffi::CUresult>(code().value()) : ffi::CUDA_ERROR_UNKNOWN;
  }
  // "CUDA_ERROR_INVALID_VALUE", "NVRTC_ERROR_COMPILATION", ...
  [[nodiscard]] std::string_view name() const noexcept;
  // The library's text for the result (the driver's own when it is loaded,
  // else the header's).
  [[nodiscard]] const std::string& description() const noexcept { return description_; }
  // The call that failed ("cuStreamCreate", "nvrtcCompileProgram"), or the
  // oxicuda operation that refused to make one ("oxicuda::Stream::record").
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  // More that explains this failure; may be empty.
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }
  // The caller's source line.
  [[nodiscard]] const SourceLocation& where() const noexcept { return where_; }
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

 private:
  Error(Library library, int result, const std::error_category& category, std::string call, std::string detail,
        SourceLocation where);

  Library library_ = Library::driver;
  std::string call_;
  std::string description_;
  std::string detail_;
  std::string what_;
  SourceLocation where_;
};

// Builds without exceptions report an error by calling this handler; it must
// not return (oxicuda aborts if it does). The default prints what() to stderr.
// Passing nullptr restores the default. Returns the previous handler.
using ErrorHandler = void (*)(const Error&);
ErrorHandler set_error_handler(ErrorHandler handler) noexcept;

// Destructors never throw: a failing destroy (cuStreamDestroy_v2 and friends)
// is passed to this hook instead. The default prints one line to stderr.
// Passing nullptr restores the default. Returns the previous hook. A hook
// should not throw; if it does (in a build with exceptions), oxicuda prints
// that reporting failed and carries on.
using DiagnosticHook = void (*)(const Error&);
DiagnosticHook set_diagnostic_hook(DiagnosticHook hook) noexcept;

namespace detail {

inline void default_error_handler(const Error& e) {
  std::fputs("oxicuda: ", stderr);
  std::fputs(e.what(), stderr);
  std::fputs("\n", stderr);
}

inline void default_diagnostic_hook(const Error& e) noexcept {
  std::fputs("oxicuda (in a destructor, ignored): ", stderr);
  std::fputs(e.what(), stderr);
  std::fputs("\n", stderr);
}

inline std::atomic<ErrorHandler>& error_handler_slot() noexcept {
  static std::atomic<ErrorHandler> slot{nullptr};
  return slot;
}

inline std::atomic<DiagnosticHook>& diagnostic_hook_slot() noexcept {
  static std::atomic<DiagnosticHook> slot{nullptr};
  return slot;
}

// A library's names and texts for its results (the library's own text
// functions may be unavailable, as the stub driver's are).
struct ResultTable {
  const ffi::ResultText* texts;
  std::size_t count;
  const char* unknown_name;  // "CUDA_ERROR_?"
  const char* type;          // "CUresult"
};

inline ResultTable result_table(Library library) noexcept {
  switch (library) {
    case Library::nvrtc:
      return {ffi::nvrtc_result_texts, sizeof ffi::nvrtc_result_texts / sizeof ffi::nvrtc_result_texts[0],
              "NVRTC_ERROR_?", "nvrtcResult"};
    case Library::nvjitlink:
      return {ffi::nvjitlink_result_texts,
              sizeof ffi::nvjitlink_result_texts / sizeof ffi::nvjitlink_result_texts[0], "NVJITLINK_ERROR_?", "nvJitLinkResult"};
    case Library::driver:
      break;
  }
  return {ffi::result_texts, sizeof ffi::result_texts / sizeof ffi::result_texts[0], "CUDA_ERROR_?", "CUresult"};
}

inline const ffi::ResultText* result_text(Library library, int code) noexcept {
  const ResultTable t = result_table(library);
  for (std::size_t i = 0; i < t.count; ++i)
    if (t.texts[i].code == code) return &t.texts[i];
  return nullptr;
}

// One library's category: name() is "cuda", "nvrtc" or "nvjitlink";
// message() is "NAME: description"; results that mean running out of memory
// or a bad argument compare equal to std::errc's.
class ResultCategory final : public std::error_category {
 public:
  constexpr ResultCategory(Library library, const char* name) noexcept : library_(library), name_(name) {}
  const char* name() const noexcept override { return name_; }
  std::string message(int code) const override {
    const ffi::ResultText* t = result_text(library_, code);
    if (!t) return cat({result_table(library_).type, " ", std::to_string(code), ": unknown result"});
    return cat({t->name, ": ", t->text});
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    switch (library_) {
      case Library::driver:
        if (code == ffi::CUDA_ERROR_OUT_OF_MEMORY) return std::errc::not_enough_memory;
        if (code == ffi::CUDA_ERROR_INVALID_VALUE) return std::errc::invalid_argument;
        if (code == ffi::CUDA_ERROR_NOT_SUPPORTED) return std::errc::not_supported;
        break;
      case Library::nvrtc:
        if (code == ffi::NVRTC_ERROR_OUT_OF_MEMORY) return std::errc::not_enough_memory;
        if (code == ffi::NVRTC_ERROR_INVALID_INPUT || code == ffi::NVRTC_ERROR_INVALID_OPTION)
          return std::errc::invalid_argument;
        break;
      case Library::nvjitlink:
        if (code == ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION || code == ffi::NVJITLINK_ERROR_INVALID_INPUT ||
            code == ffi::NVJITLINK_ERROR_NULL_INPUT)
          return std::errc::invalid_argument;
        if (code == ffi::NVJITLINK_ERROR_UNSUPPORTED_ARCH) return std::errc::not_supported;
        break;
    }
    return {code, *this};
  }

 private:
  Library library_;
  const char* name_;
};

// Throws e, or (without exceptions) hands it to the error handler and aborts.
[[noreturn]] OXICUDA_COLD inline void raise(const Error& e) {
#if OXICUDA_EXCEPTIONS
  throw e;
#else
  ErrorHandler h = error_handler_slot().load(std::memory_order_acquire);
  (h ? h : default_error_handler)(e);
  std::abort();
#endif
}

// Reports a failure that cannot be thrown (in a destructor, or in a host
// function on the driver's thread) to the diagnostic hook. Never throws: a
// hook that throws is caught wherever the compiler has exceptions, also
// when oxicuda itself reports by handler (OXICUDA_NO_EXCEPTIONS). The Error
// has no source line: the failure is oxicuda's cleanup, not a line of the
// caller's; `during` says what was being done ("destroying an oxicuda::Stream").
template <class Result>
OXICUDA_COLD void report(Result r, const char* call, std::string_view during, std::string_view detail = {}) noexcept {
  DiagnosticHook h = diagnostic_hook_slot().load(std::memory_order_acquire);
#if OXICUDA_HAS_EXCEPTIONS
  try {
#endif
    (h ? h : default_diagnostic_hook)(Error(r, call, cat({"while ", during, detail.empty() ? "" : "; ", detail}),
                                            SourceLocation()));
#if OXICUDA_HAS_EXCEPTIONS
  } catch (...) {
    std::fputs("oxicuda: a destructor's driver call failed, and reporting it failed too\n", stderr);
  }
#endif
}

// Set on the driver's callback thread while a host function of oxicuda's
// runs there, where the driver refuses CUDA calls.
inline thread_local bool in_host_function = false;

// The error for an entry point the driver does not provide: either no usable
// driver at all (the loader's reason), or this one symbol is missing from an
// older driver.
[[noreturn]] OXICUDA_COLD inline void unavailable(ffi::Entry entry, SourceLocation where) {
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
    "call may not be the one at fault. To recover, drop every handle of the context's objects (its buffers, "
    "streams, events and modules are lost; their destructors' failures go to the diagnostic hook), then reset it: "
    "a primary context with Context::reset_primary(device) (cuDevicePrimaryCtxReset; then retain it again with "
    "Context::primary), a created one by dropping its last handle and creating another. Where the driver still "
    "refuses after that, only a new process recovers";

// A driver call's result, with the entry point that gave it.
struct Outcome {
  ffi::CUresult result;
  ffi::Entry entry;
  [[nodiscard]] bool ok() const noexcept { return result == ffi::CUDA_SUCCESS; }
};

// The error for a failed driver call. An entry point the driver lacks
// answers CUDA_ERROR_NOT_FOUND through its stand-in (loader.hpp), which is
// explained here rather than on the hot path.
[[noreturn]] OXICUDA_COLD inline void fail(Outcome o, SourceLocation where, std::string detail = {}) {
  // In a forked child no call reaches the driver (loader.hpp's on_fork_child):
  // what the driver would answer there.
  if (OXICUDA_UNLIKELY(forked_after_load())) o.result = ffi::CUDA_ERROR_NOT_INITIALIZED;
  if (o.result == ffi::CUDA_ERROR_NOT_FOUND && missing(o.entry)) unavailable(o.entry, where);
  if (o.result == ffi::CUDA_ERROR_NOT_INITIALIZED || o.result == ffi::CUDA_ERROR_NOT_PERMITTED ||
      o.result == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || o.result == ffi::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    std::string why = refusal_reason(o.result);
    if (!why.empty()) detail = detail.empty() ? std::move(why) : cat({detail, "\n", why});
  }
  if (sticky_result(o.result)) detail = detail.empty() ? std::string(sticky_advice) : cat({detail, "\n", sticky_advice});
  raise(Error(o.result, ffi::entry_info(o.entry).name, std::move(detail), where));
}

// fail() for check(): the result and the entry apart, so that the hot path
// does not build an Outcome it only needs when the call failed.
[[noreturn]] OXICUDA_COLD inline void fail_call(ffi::CUresult r, ffi::Entry entry, SourceLocation where) {
  fail(Outcome{r, entry}, where);
}

// Checks one driver call's result: throws (or reports) an Error naming the
// call when it failed. Every wrapper calls the driver as
//   check(OXICUDA_DRIVER(StreamCreate, &raw, flags), where);
// which is the driver call, one compare and nothing else on success.
inline void check(Outcome o, SourceLocation where) {
  if (OXICUDA_UNLIKELY(!o.ok())) fail_call(o.result, o.entry, where);
}

// The same for a call made by a destructor: never throws; a failure goes to
// the diagnostic hook, saying what was being done (`during`: "destroying an
// oxicuda::Stream"). Returns whether the call succeeded.
inline bool check_nothrow(Outcome o, const char* during) noexcept {
  if (OXICUDA_LIKELY(o.ok())) return true;
  if (forked_after_load()) return false;  // a forked child leaks what its parent owns, as the driver requires
  report(o.result, ffi::entry_info(o.entry).name, during,
         missing(o.entry) ? "the loaded driver does not provide this entry point" : "");
  return false;
}

// An NVRTC or nvJitLink call's result, with the entry point that gave it
// (OXICUDA_NVRTC, OXICUDA_NVJITLINK).
template <class Result, class EntryT>
struct ToolkitOutcome {
  Result result;
  EntryT entry;
  [[nodiscard]] bool ok() const noexcept { return result == 0; }
};
using NvrtcOutcome = ToolkitOutcome<ffi::nvrtcResult, ffi::nvrtc::Entry>;
using NvJitLinkOutcome = ToolkitOutcome<ffi::nvJitLinkResult, ffi::nvjitlink::Entry>;

inline const LibraryInfo& library_info(ffi::nvrtc::Entry) noexcept { return nvrtc_info(); }
inline const LibraryInfo& library_info(ffi::nvjitlink::Entry) noexcept { return nvjitlink_info(); }
// (Each library's entry_info is found by argument-dependent lookup.)

// The error for a failed NVRTC or nvJitLink call; a stand-in's answer (the
// library or this entry point of it is missing) says why.
template <class Result, class EntryT>
[[noreturn]] OXICUDA_COLD void fail(ToolkitOutcome<Result, EntryT> o, SourceLocation where, std::string detail = {}) {
  const ffi::EntryInfo& e = entry_info(o.entry);
  if (o.result == -1 && missing(o.entry)) {
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

template <class Result, class EntryT>
inline void check(ToolkitOutcome<Result, EntryT> o, SourceLocation where) {
  if (OXICUDA_UNLIKELY(!o.ok())) fail(o, where);
}

// For a destructor: never throws; a failure goes to the diagnostic hook.
template <class Result, class EntryT>
inline bool check_nothrow(ToolkitOutcome<Result, EntryT> o, const char* during) noexcept {
  if (OXICUDA_LIKELY(o.ok())) return true;
  report(o.result, entry_info(o.entry).name, during);
  return false;
}

// The error for using an empty handle (default-constructed or moved-from).
[[noreturn]] OXICUDA_COLD inline void empty_handle(const char* type, const char* operation, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_HANDLE, operation,
              cat({"this ", type, " is empty (default-constructed or moved-from); it has no driver handle"}), where));
}

inline std::string driver_description(ffi::CUresult r) {
  const char* s = nullptr;
  // Not on the driver's callback thread, where the driver refuses calls.
  if (in_host_function || api().GetErrorString(r, &s) != ffi::CUDA_SUCCESS || !s) {
    const ffi::ResultText* t = result_text(r);
    s = t ? t->text : "unknown CUresult";
  }
  return cat({s});
}

}  // namespace detail

inline const std::error_category& cuda_category() noexcept {
  static const detail::ResultCategory category(Library::driver, "cuda");
  return category;
}
inline const std::error_category& nvrtc_category() noexcept {
  static const detail::ResultCategory category(Library::nvrtc, "nvrtc");
  return category;
}
inline const std::error_category& nvjitlink_category() noexcept {
  static const detail::ResultCategory category(Library::nvjitlink, "nvjitlink");
  return category;
}

inline Error::Error(ffi::CUresult result, std::string call, std::string detail, SourceLocation where)
    : Error(Library::driver, result, cuda_category(), std::move(call), std::move(detail), where) {}
inline Error::Error(ffi::nvrtcResult result, std::string call, std::string detail, SourceLocation where)
    : Error(Library::nvrtc, result, nvrtc_category(), std::move(call), std::move(detail), where) {}
inline Error::Error(ffi::nvJitLinkResult result, std::string call, std::string detail, SourceLocation where)
    : Error(Library::nvjitlink, result, nvjitlink_category(), std::move(call), std::move(detail), where) {}

inline Error::Error(Library library, int result, const std::error_category& category, std::string call,
                    std::string detail, SourceLocation where)
    : std::system_error(result, category),
      library_(library),
      call_(std::move(call)),
      detail_(std::move(detail)),
      where_(where) {
  if (library == Library::driver) {
    description_ = detail::driver_description(static_cast<ffi::CUresult>(result));
  } else {
    const ffi::ResultText* t = detail::result_text(library, result);
    description_ = t ? t->text : "unknown result";
  }
  const char* function = where_.function_name();
  what_ = detail::cat({call_, " failed: ", name(), " (", std::to_string(result), "): ", description_});
  if (where_.line() != 0)  // no line: oxicuda's own cleanup (see detail::report), not the caller's
    what_ = detail::cat({what_, "\n  at ", where_.file_name(), ":", std::to_string(where_.line()),
                         *function ? " in " : "", function});
  if (!detail_.empty()) {
    // The detail on its own lines, each indented by two spaces.
    std::string_view rest = detail_;
    while (!rest.empty()) {
      const std::size_t eol = rest.find('\n');
      const std::string_view line = rest.substr(0, eol);
      what_.append(static_cast<const char*>("\n  "), 3).append(line.data(), line.size());
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    }
    while (!what_.empty() && (what_.back() == ' ' || what_.back() == '\n')) what_.pop_back();
  }
}

inline std::string_view Error::name() const noexcept {
  const ffi::ResultText* t = detail::result_text(library_, code().value());
  return t ? t->name : detail::result_table(library_).unknown_name;
}

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

inline ErrorHandler set_error_handler(ErrorHandler handler) noexcept {
  return detail::error_handler_slot().exchange(handler, std::memory_order_acq_rel);
}

inline DiagnosticHook set_diagnostic_hook(DiagnosticHook hook) noexcept {
  return detail::diagnostic_hook_slot().exchange(hook, std::memory_order_acq_rel);
}

OXICUDA_NAMESPACE_END

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

template <>
struct std::is_error_code_enum<oxicuda::ffi::CUresult> : std::true_type {};
template <>
struct std::is_error_code_enum<oxicuda::ffi::nvrtcResult> : std::true_type {};
template <>
struct std::is_error_code_enum<oxicuda::ffi::nvJitLinkResult> : std::true_type {};
