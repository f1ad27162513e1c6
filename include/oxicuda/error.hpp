// oxicuda/error.hpp — Error, its std::error_category over CUresult, the
// handlers for builds without exceptions and for failures in destructors, and
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

namespace ffi {
[[nodiscard]] inline std::error_code make_error_code(CUresult r) noexcept {
  return {static_cast<int>(r), cuda_category()};
}
}  // namespace ffi

// A failed driver call (or a misuse oxicuda detected before calling). what()
// reads:
//   cuStreamCreate failed: CUDA_ERROR_INVALID_CONTEXT (201): invalid device context
//     at app.cpp:42 in int main()
//     <detail, when there is one: a JIT log, the loader's reason, ...>
class Error : public std::system_error {
 public:
  Error(ffi::CUresult result, std::string call, std::string detail = {},
        SourceLocation where = SourceLocation::current());

  [[nodiscard]] ffi::CUresult result() const noexcept { return static_cast<ffi::CUresult>(code().value()); }
  // "CUDA_ERROR_INVALID_VALUE"
  [[nodiscard]] std::string_view name() const noexcept;
  // The driver's text for the result (or the header's own when no driver is loaded).
  [[nodiscard]] const std::string& description() const noexcept { return description_; }
  // The driver call that failed ("cuStreamCreate"), or the oxicuda operation
  // that refused to make one ("oxicuda::Stream::record").
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  // More that explains this failure; may be empty.
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }
  // The caller's source line.
  [[nodiscard]] const SourceLocation& where() const noexcept { return where_; }
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

 private:
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

class CudaCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda"; }
  std::string message(int code) const override {
    const ffi::ResultText* t = result_text(code);
    if (!t) return cat({"CUresult ", std::to_string(code), ": unknown result"});
    return cat({t->name, ": ", t->text});
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    switch (code) {
      case ffi::CUDA_ERROR_OUT_OF_MEMORY:
        return std::errc::not_enough_memory;
      case ffi::CUDA_ERROR_INVALID_VALUE:
        return std::errc::invalid_argument;
      case ffi::CUDA_ERROR_NOT_SUPPORTED:
        return std::errc::not_supported;
      default:
        return {code, *this};
    }
  }
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
OXICUDA_COLD inline void report(ffi::CUresult r, const char* call, std::string_view during,
                                std::string_view detail = {}) noexcept {
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
  if (o.result == ffi::CUDA_ERROR_NOT_FOUND && missing(o.entry)) unavailable(o.entry, where);
  if (o.result == ffi::CUDA_ERROR_NOT_INITIALIZED || o.result == ffi::CUDA_ERROR_NOT_PERMITTED ||
      o.result == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || o.result == ffi::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    std::string why = refusal_reason(o.result);
    if (!why.empty()) detail = detail.empty() ? std::move(why) : cat({detail, "\n", why});
  }
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
  report(o.result, ffi::entry_info(o.entry).name, during,
         missing(o.entry) ? "the loaded driver does not provide this entry point" : "");
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
  static const detail::CudaCategory category;
  return category;
}

inline Error::Error(ffi::CUresult result, std::string call, std::string detail, SourceLocation where)
    : std::system_error(static_cast<int>(result), cuda_category()),
      call_(std::move(call)),
      description_(detail::driver_description(result)),
      detail_(std::move(detail)),
      where_(where) {
  const char* function = where_.function_name();
  what_ = detail::cat({call_, " failed: ", name(), " (", std::to_string(static_cast<int>(result)), "): ", description_});
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
  const ffi::ResultText* t = detail::result_text(code().value());
  return t ? t->name : "CUDA_ERROR_?";
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
#define OXICUDA_DRIVER(member, ...) \
  (::oxicuda::detail::Outcome{::oxicuda::detail::api().member(__VA_ARGS__), ::oxicuda::ffi::Entry::member})

template <>
struct std::is_error_code_enum<oxicuda::ffi::CUresult> : std::true_type {};
