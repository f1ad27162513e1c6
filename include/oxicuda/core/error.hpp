// oxicuda/core/error.hpp — Error over any library's result (the driver's
// CUresult, nvrtcResult, nvJitLinkResult), one std::error_category per
// library (both read the library's traits, traits.hpp), and the handlers for
// builds without exceptions and for failures in destructors. The checked
// call that raises them is check.hpp.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <source_location>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "loader.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

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

namespace detail {
// Library L's category (the three above are its instances).
template <Library L>
const std::error_category& result_category() noexcept;
}  // namespace detail

namespace ffi {
// A library's result as a std::error_code in its category (found by
// argument-dependent lookup: std::error_code ec = ffi::CUDA_ERROR_INVALID_VALUE).
template <LibraryResult Result>
[[nodiscard]] std::error_code make_error_code(Result r) noexcept {
  return {static_cast<int>(r), detail::result_category<LibraryOf<Result>::value>()};
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
  // result: a CUresult, nvrtcResult or nvJitLinkResult (traits.hpp).
  template <LibraryResult Result>
  Error(Result result, std::string call, std::string detail = {}, SourceLocation where = SourceLocation::current());

  // The library whose result this is.
  [[nodiscard]] Library library() const noexcept { return library_; }
  // The driver's result; for an error of NVRTC or nvJitLink (see library()
  // and code()), CUDA_ERROR_UNKNOWN.
  [[nodiscard]] ffi::CUresult result() const noexcept {
    return library_ == Library::driver ? static_cast<ffi::CUresult>(code().value()) : ffi::CUDA_ERROR_UNKNOWN;
  }
  // "CUDA_ERROR_INVALID_VALUE", "NVRTC_ERROR_COMPILATION", ...
  [[nodiscard]] std::string_view name() const noexcept { return name_; }
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
  Error(Library library, int result, const std::error_category& category, const char* result_name,
        std::string description, std::string call, std::string detail, SourceLocation where);

  Library library_ = Library::driver;
  const char* name_ = "";
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

// Set on the driver's callback thread while a host function of oxicuda's
// runs there, where the driver refuses CUDA calls.
inline thread_local bool in_host_function = false;

// One library's category: name() is "cuda", "nvrtc" or "nvjitlink";
// message() is "NAME: description"; results that mean running out of memory
// or a bad argument compare equal to std::errc's (LibraryTraits<>::condition).
template <Library L>
class ResultCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return LibraryTraits<L>::category; }
  std::string message(int code) const override {
    const ffi::ResultText* t = result_text<L>(code);
    if (!t) return cat({LibraryTraits<L>::result_type, " ", std::to_string(code), ": unknown result"});
    return cat({t->name, ": ", t->text});
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    const std::errc c = LibraryTraits<L>::condition(code);
    if (c != std::errc{}) return c;
    return {code, *this};
  }
};

template <Library L>
const std::error_category& result_category() noexcept {
  static const ResultCategory<L> category;
  return category;
}

// The library's text for a result: the driver's own when it is loaded (and
// this is not the driver's callback thread, where the driver refuses calls),
// else the header's (LibraryTraits<>::texts).
template <Library L>
inline std::string result_description(int code) {
  if constexpr (L == Library::driver) {
    const char* s = nullptr;
    if (!in_host_function && api().GetErrorString(static_cast<ffi::CUresult>(code), &s) == ffi::CUDA_SUCCESS && s)
      return cat({s});
  }
  const ffi::ResultText* t = result_text<L>(code);
  return cat({t ? t->text : LibraryTraits<L>::unknown_text});
}

// Throws e, or (without exceptions) hands it to the error handler and aborts.
[[noreturn]] OXICUDA_DETAIL_COLD inline void raise(const Error& e) {
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
OXICUDA_DETAIL_COLD void report(Result r, const char* call, std::string_view during, std::string_view detail = {}) noexcept {
  DiagnosticHook h = diagnostic_hook_slot().load(std::memory_order_acquire);
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
  try {
#endif
    (h ? h : default_diagnostic_hook)(Error(r, call, cat({"while ", during, detail.empty() ? "" : "; ", detail}),
                                            SourceLocation()));
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
  } catch (...) {
    std::fputs("oxicuda: a destructor's driver call failed, and reporting it failed too\n", stderr);
  }
#endif
}

}  // namespace detail

inline const std::error_category& cuda_category() noexcept { return detail::result_category<Library::driver>(); }
inline const std::error_category& nvrtc_category() noexcept { return detail::result_category<Library::nvrtc>(); }
inline const std::error_category& nvjitlink_category() noexcept {
  return detail::result_category<Library::nvjitlink>();
}

template <LibraryResult Result>
inline Error::Error(Result result, std::string call, std::string detail, SourceLocation where)
    : Error(LibraryOf<Result>::value, static_cast<int>(result), detail::result_category<LibraryOf<Result>::value>(),
            detail::result_name<LibraryOf<Result>::value>(result),
            detail::result_description<LibraryOf<Result>::value>(result), std::move(call), std::move(detail), where) {}

inline Error::Error(Library library, int result, const std::error_category& category, const char* result_name,
                    std::string description, std::string call, std::string detail, SourceLocation where)
    : std::system_error(result, category),
      library_(library),
      name_(result_name),
      call_(std::move(call)),
      description_(std::move(description)),
      detail_(std::move(detail)),
      where_(where) {
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

inline ErrorHandler set_error_handler(ErrorHandler handler) noexcept {
  return detail::error_handler_slot().exchange(handler, std::memory_order_acq_rel);
}

inline DiagnosticHook set_diagnostic_hook(DiagnosticHook hook) noexcept {
  return detail::diagnostic_hook_slot().exchange(hook, std::memory_order_acq_rel);
}

OXICUDA_DETAIL_NAMESPACE_END

template <>
struct std::is_error_code_enum<oxicuda::ffi::CUresult> : std::true_type {};
template <>
struct std::is_error_code_enum<oxicuda::ffi::nvrtcResult> : std::true_type {};
template <>
struct std::is_error_code_enum<oxicuda::ffi::nvJitLinkResult> : std::true_type {};
