// oxicuda/core/toolkit.hpp — NVRTC and nvJitLink, loaded at their first use by
// library.hpp's mechanism (a program that never compiles never looks for
// them), and what that found: nvrtc_info(), nvjitlink_info(). Nothing here
// throws but std::bad_alloc.
#pragma once

#include <cstddef>

#include "library.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Loads NVRTC on first use (thread-safe, once per process, never unloaded)
// and says what happened. The search (README, "Runtime compilation"):
// OXICUDA_LIBNVRTC_PATH; a libnvrtc already loaded in the process;
// $CONDA_PREFIX/lib; libnvrtc.so.13, .12, .11.2 on the loader's search path;
// $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (lib64/, lib/). On Windows
// nvrtc64_130_0.dll, ..._120_0, ..._112_0 in the same places (bin\).
[[nodiscard]] const LibraryInfo& nvrtc_info() noexcept;
// The same for nvJitLink (OXICUDA_LIBNVJITLINK_PATH, libnvJitLink.so.13, .12).
[[nodiscard]] const LibraryInfo& nvjitlink_info() noexcept;

namespace ffi::nvrtc {
#define OXICUDA_DETAIL_TABLE_TRAITS LibraryTraits<Library::nvrtc>
OXICUDA_DETAIL_LIBRARY_API(OXICUDA_DETAIL_NVRTC_API, NvrtcApi)
#undef OXICUDA_DETAIL_TABLE_TRAITS
}  // namespace ffi::nvrtc

namespace ffi::nvjitlink {
#define OXICUDA_DETAIL_TABLE_TRAITS LibraryTraits<Library::nvjitlink>
OXICUDA_DETAIL_LIBRARY_API(OXICUDA_DETAIL_NVJITLINK_API, NvJitLinkApi)
#undef OXICUDA_DETAIL_TABLE_TRAITS
}  // namespace ffi::nvjitlink

namespace detail {

// The file names to try, newest first, and what to do when none is found.
#if OXICUDA_DETAIL_WINDOWS
inline const char* const nvrtc_files[] = {"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll"};
inline const char* const nvjitlink_files[] = {"nvJitLink_130_0.dll", "nvJitLink_120_0.dll"};
inline constexpr const char* nvrtc_hint =
  "Install the CUDA toolkit (its bin\\x64 holds NVRTC) or the nvidia-cuda-nvrtc wheel (pip install "
  "nvidia-cuda-nvrtc), or set OXICUDA_LIBNVRTC_PATH to its nvrtc64_*.dll.";
inline constexpr const char* nvjitlink_hint =
  "Install the CUDA toolkit (its bin\\x64 holds nvJitLink) or the nvidia-nvjitlink wheel (pip install "
  "nvidia-nvjitlink), or set OXICUDA_LIBNVJITLINK_PATH to its nvJitLink_*.dll.";
#else
inline const char* const nvrtc_files[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"};
inline const char* const nvjitlink_files[] = {"libnvJitLink.so.13", "libnvJitLink.so.12"};
inline constexpr const char* nvrtc_hint =
  "Install the CUDA toolkit's NVRTC (the cuda-nvrtc package) or the nvidia-cuda-nvrtc wheel (pip install "
  "nvidia-cuda-nvrtc), or set OXICUDA_LIBNVRTC_PATH to its libnvrtc.";
inline constexpr const char* nvjitlink_hint =
  "Install the CUDA toolkit's nvJitLink (the libnvjitlink package) or the nvidia-nvjitlink wheel (pip "
  "install nvidia-nvjitlink), or set OXICUDA_LIBNVJITLINK_PATH to its libnvJitLink.";
#endif

// One lazily loaded toolkit library: its table and what loading it found.
template <class Api, std::size_t N>
struct ToolkitLibrary {
  Api api;
  bool provided[N] = {};
  LibraryInfo info;
};

using Nvrtc = ToolkitLibrary<ffi::nvrtc::NvrtcApi, ffi::nvrtc::entry_count>;
using NvJitLink = ToolkitLibrary<ffi::nvjitlink::NvJitLinkApi, ffi::nvjitlink::entry_count>;

inline const Nvrtc& nvrtc() noexcept {
  static const Nvrtc* const lib = [] {
    auto* l = new Nvrtc{};
    const LibrarySpec spec{LibraryTraits<Library::nvrtc>::name, "OXICUDA_LIBNVRTC_PATH", nvrtc_files,
                           sizeof nvrtc_files / sizeof nvrtc_files[0], true, nvrtc_hint, nullptr, 0};
    if (load_library(spec, {ffi::nvrtc::entries, ffi::nvrtc::entry_count, &l->api, l->provided}, l->info)) {
      int major = 0, minor = 0;
      if (l->api.Version(&major, &minor) == ffi::NVRTC_SUCCESS) l->info.version = major * 1000 + minor * 10;
    } else {
      l->api = {};
    }
    return l;
  }();
  return *lib;
}

// nvJitLink of CUDA 12.0 to 12.2 exports its entry points only under
// versioned names (__nvJitLinkCreate_12_0).
inline const char* const nvjitlink_versions[] = {"_13_0", "_12_0"};

inline const NvJitLink& nvjitlink() noexcept {
  static const NvJitLink* const lib = [] {
    auto* l = new NvJitLink{};
    const LibrarySpec spec{LibraryTraits<Library::nvjitlink>::name, "OXICUDA_LIBNVJITLINK_PATH", nvjitlink_files,
                           sizeof nvjitlink_files / sizeof nvjitlink_files[0], true, nvjitlink_hint,
                           nvjitlink_versions, sizeof nvjitlink_versions / sizeof nvjitlink_versions[0]};
    if (load_library(spec, {ffi::nvjitlink::entries, ffi::nvjitlink::entry_count, &l->api, l->provided}, l->info)) {
      // nvJitLinkVersion is CUDA 12.3's: older ones leave the version 0.
      unsigned major = 0, minor = 0;
      if (l->api.Version(&major, &minor) == ffi::NVJITLINK_SUCCESS) l->info.version = static_cast<int>(major * 1000 + minor * 10);
    } else {
      l->api = {};
    }
    return l;
  }();
  return *lib;
}

inline bool missing(ffi::nvrtc::Entry e) noexcept { return !nvrtc().provided[static_cast<std::size_t>(e)]; }
inline bool missing(ffi::nvjitlink::Entry e) noexcept { return !nvjitlink().provided[static_cast<std::size_t>(e)]; }

}  // namespace detail

inline const LibraryInfo& nvrtc_info() noexcept { return detail::nvrtc().info; }
inline const LibraryInfo& nvjitlink_info() noexcept { return detail::nvjitlink().info; }

OXICUDA_DETAIL_NAMESPACE_END
