// oxicuda/core/traits.hpp — one traits type per library whose results oxicuda
// reports (the CUDA driver, NVRTC, nvJitLink): its result and entry-point
// types, its names, the names and texts of its results, what its stand-ins
// answer, and which results mean a standard condition. The loader, the
// stand-ins (library.hpp), Error and its categories, and the fake driver read
// a library through it: the driver is one instance like the others, and
// nothing switches on the library.
#pragma once

#include <cstddef>
#include <span>
#include <system_error>

#include "nvjitlink_ffi.hpp"
#include "nvrtc_ffi.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The libraries whose results an Error may carry.
enum class Library { driver, nvrtc, nvjitlink };

// One library's traits: specialized below for each Library, each with
//   result        the library's result enum (CUresult, nvrtcResult, ...)
//   entry         the enum of its table's entry points (ffi.hpp's X-macro shape)
//   name          the library, for messages ("CUDA driver", "NVRTC")
//   category      its std::error_category's name ("cuda")
//   result_type   the result type's name as the library spells it ("CUresult")
//   unknown_name  the name of a result its table does not list ("CUDA_ERROR_?")
//   unknown_text  and its text ("unknown CUresult")
//   success       the result of a call that succeeded
//   not_found     what a stand-in answers: for an entry point the loaded
//                 library lacks, or for all of them when none was loaded
//   texts         the names and texts of its results (the header's own)
//   condition     the std::errc that a result compares equal to, or errc{}
template <Library L>
struct LibraryTraits;

template <>
struct LibraryTraits<Library::driver> {
  using result = ffi::CUresult;
  using entry = ffi::Entry;
  static constexpr Library library = Library::driver;
  static constexpr const char* name = "CUDA driver";
  static constexpr const char* category = "cuda";
  static constexpr const char* result_type = "CUresult";
  static constexpr const char* unknown_name = "CUDA_ERROR_?";
  static constexpr const char* unknown_text = "unknown CUresult";
  static constexpr result success = ffi::CUDA_SUCCESS;
  static constexpr result not_found = ffi::CUDA_ERROR_NOT_FOUND;
  static constexpr std::span<const ffi::ResultText> texts{ffi::result_texts, std::size(ffi::result_texts)};
  static constexpr std::errc condition(int code) noexcept {
    if (code == ffi::CUDA_ERROR_OUT_OF_MEMORY) return std::errc::not_enough_memory;
    if (code == ffi::CUDA_ERROR_INVALID_VALUE) return std::errc::invalid_argument;
    if (code == ffi::CUDA_ERROR_NOT_SUPPORTED) return std::errc::not_supported;
    return {};
  }
};

template <>
struct LibraryTraits<Library::nvrtc> {
  using result = ffi::nvrtcResult;
  using entry = ffi::nvrtc::Entry;
  static constexpr Library library = Library::nvrtc;
  static constexpr const char* name = "NVRTC";
  static constexpr const char* category = "nvrtc";
  static constexpr const char* result_type = "nvrtcResult";
  static constexpr const char* unknown_name = "NVRTC_ERROR_?";
  static constexpr const char* unknown_text = "unknown result";
  static constexpr result success = ffi::NVRTC_SUCCESS;
  static constexpr result not_found = ffi::OXICUDA_NVRTC_NOT_FOUND;
  static constexpr std::span<const ffi::ResultText> texts{ffi::nvrtc_result_texts, std::size(ffi::nvrtc_result_texts)};
  static constexpr std::errc condition(int code) noexcept {
    if (code == ffi::NVRTC_ERROR_OUT_OF_MEMORY) return std::errc::not_enough_memory;
    if (code == ffi::NVRTC_ERROR_INVALID_INPUT || code == ffi::NVRTC_ERROR_INVALID_OPTION)
      return std::errc::invalid_argument;
    return {};
  }
};

template <>
struct LibraryTraits<Library::nvjitlink> {
  using result = ffi::nvJitLinkResult;
  using entry = ffi::nvjitlink::Entry;
  static constexpr Library library = Library::nvjitlink;
  static constexpr const char* name = "nvJitLink";
  static constexpr const char* category = "nvjitlink";
  static constexpr const char* result_type = "nvJitLinkResult";
  static constexpr const char* unknown_name = "NVJITLINK_ERROR_?";
  static constexpr const char* unknown_text = "unknown result";
  static constexpr result success = ffi::NVJITLINK_SUCCESS;
  static constexpr result not_found = ffi::OXICUDA_NVJITLINK_NOT_FOUND;
  static constexpr std::span<const ffi::ResultText> texts{ffi::nvjitlink_result_texts, std::size(ffi::nvjitlink_result_texts)};
  static constexpr std::errc condition(int code) noexcept {
    if (code == ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION || code == ffi::NVJITLINK_ERROR_INVALID_INPUT ||
        code == ffi::NVJITLINK_ERROR_NULL_INPUT)
      return std::errc::invalid_argument;
    if (code == ffi::NVJITLINK_ERROR_UNSUPPORTED_ARCH) return std::errc::not_supported;
    return {};
  }
};

// The library whose result type is Result (none for any other type), and
// its traits: TraitsOf<ffi::nvrtcResult> is LibraryTraits<Library::nvrtc>.
template <class Result>
struct LibraryOf {};
template <>
struct LibraryOf<ffi::CUresult> {
  static constexpr Library value = Library::driver;
};
template <>
struct LibraryOf<ffi::nvrtcResult> {
  static constexpr Library value = Library::nvrtc;
};
template <>
struct LibraryOf<ffi::nvJitLinkResult> {
  static constexpr Library value = Library::nvjitlink;
};

// A result type of one of the libraries.
template <class Result>
concept LibraryResult = requires { LibraryOf<Result>::value; };

template <LibraryResult Result>
using TraitsOf = LibraryTraits<LibraryOf<Result>::value>;

namespace detail {

// The one lookup of a result in its library's table (the library's own text
// functions may be unavailable, as the stub driver's are): null when the
// table does not list it.
template <Library L>
constexpr const ffi::ResultText* result_text(int code) noexcept {
  for (const ffi::ResultText& t : LibraryTraits<L>::texts)
    if (t.code == code) return &t;
  return nullptr;
}

// "CUDA_ERROR_INVALID_VALUE", or the library's unknown name ("CUDA_ERROR_?").
template <Library L>
constexpr const char* result_name(int code) noexcept {
  const ffi::ResultText* t = result_text<L>(code);
  return t ? t->name : LibraryTraits<L>::unknown_name;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
