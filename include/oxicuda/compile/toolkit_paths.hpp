// oxicuda/compile/toolkit_paths.hpp — the CUDA toolkit's own directories, found
// through the places NVRTC itself is searched (toolkit.hpp): the toolkit the
// loaded NVRTC belongs to (a toolkit's lib64/, a conda environment's lib/, a
// wheel's nvidia/cu13/lib/), $CONDA_PREFIX, $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda. From them: the include directories that
// CompileOptions::toolkit_includes gives NVRTC (CUDA 13 keeps CCCL, and so
// <cuda/std/...>, under include/cccl), and the library directories where
// device_runtime.hpp looks for libcudadevrt.a.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "../core/check.hpp"
#include "../core/toolkit.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <sys/stat.h>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// A directory that may hold a toolkit (include/, lib64/, lib/), and how it
// was found, for messages ("$CUDA_HOME").
struct ToolkitRoot {
  std::string dir;
  std::string how;
};

#if OXICUDA_DETAIL_WINDOWS
inline bool path_is(const std::string& path, bool directory) noexcept {
  const DWORD a = ::GetFileAttributesA(path.c_str());
  return a != INVALID_FILE_ATTRIBUTES && ((a & FILE_ATTRIBUTE_DIRECTORY) != 0) == directory;
}
#else
inline bool path_is(const std::string& path, bool directory) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}
#endif
inline bool is_directory(const std::string& path) noexcept { return path_is(path, true); }
inline bool is_regular_file(const std::string& path) noexcept { return path_is(path, false); }

// The toolkit root of the library at `path`: the directory above its own
// (lib64/, lib/; bin\ or bin\x64\ on Windows), or empty.
inline std::string root_of_library(const std::string& path) {
  const std::size_t slash = path.find_last_of(OXICUDA_DETAIL_WINDOWS ? "\\/" : "/");
  if (slash == std::string::npos || slash == 0) return {};
  std::string dir = path.substr(0, slash);
  if (OXICUDA_DETAIL_WINDOWS && dir.size() > 4 && dir.substr(dir.size() - 4) == "\\x64") dir.resize(dir.size() - 4);
  const std::size_t up = dir.find_last_of(OXICUDA_DETAIL_WINDOWS ? "\\/" : "/");
  return up == std::string::npos || up == 0 ? std::string() : dir.substr(0, up);
}

// The roots, in the order NVRTC is searched: $CONDA_PREFIX (and its
// targets/x86_64-linux, where conda's CUDA packages keep their headers),
// $CUDA_HOME, $CUDA_PATH, /usr/local/cuda; the toolkit of the NVRTC this
// process loads goes first with `nvrtc_first` (headers that match the
// compiler), else last (so that a search that need not load NVRTC, such as
// one before a kernel-cache hit, loads it only when nothing else is found:
// `with_nvrtc` false leaves it out, for the caller to add).
// The toolkit of the NVRTC this process loads (loading it), appended to
// `roots` when there is one.
inline void add_nvrtc_root(std::vector<ToolkitRoot>& roots) {
  if (const LibraryInfo& nvrtc = nvrtc_info(); nvrtc.found)
    if (std::string root = root_of_library(nvrtc.path); !root.empty())
      roots.push_back({std::move(root), cat({"the toolkit of the loaded NVRTC, ", nvrtc.path})});
}

inline std::vector<ToolkitRoot> toolkit_roots(bool nvrtc_first, bool with_nvrtc = true) {
  std::vector<ToolkitRoot> roots;
  if (nvrtc_first && with_nvrtc) add_nvrtc_root(roots);
  if (const std::string conda = env_string("CONDA_PREFIX"); !conda.empty()) {
    roots.push_back({conda, "$CONDA_PREFIX"});
    if (!OXICUDA_DETAIL_WINDOWS) roots.push_back({cat({conda, "/targets/x86_64-linux"}), "$CONDA_PREFIX"});
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (std::string dir = env_string(var); !dir.empty()) roots.push_back({std::move(dir), cat({"$", var})});
  if (!OXICUDA_DETAIL_WINDOWS) roots.push_back({"/usr/local/cuda", "the default toolkit"});
  if (!nvrtc_first && with_nvrtc) add_nvrtc_root(roots);
  return roots;
}

// The include directories of the first root that holds the CUDA runtime's
// headers (include/cuda_runtime.h): include/, and include/cccl/ where there
// is one (CUDA 13). An Error naming every directory tried when none does.
inline std::vector<std::string> find_toolkit_includes(const std::vector<ToolkitRoot>& roots, SourceLocation where) {
  std::string tried;
  for (const ToolkitRoot& r : roots) {
    const std::string include = cat({r.dir, path_separator, "include"});
    if (is_regular_file(cat({include, path_separator, "cuda_runtime.h"}))) {
      std::vector<std::string> dirs{include};
      if (std::string cccl = cat({include, path_separator, "cccl"}); is_directory(cccl)) dirs.push_back(std::move(cccl));
      return dirs;
    }
    tried = cat({tried, tried.empty() ? "" : ", ", include, " (", r.how, ")"});
  }
  raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, "oxicuda::toolkit_include_paths",
              cat({"no CUDA toolkit headers (include/cuda_runtime.h) were found for CompileOptions::toolkit_includes; "
                   "tried ", tried.empty() ? "nothing (no toolkit root is known)" : std::string_view(tried),
                   ". Install the toolkit's headers (or the nvidia-cuda-runtime and nvidia-cuda-cccl wheels beside "
                   "NVRTC's), or set CUDA_HOME to the toolkit"}),
              where));
}

}  // namespace detail

// The CUDA toolkit's include directories, as CompileOptions::toolkit_includes
// gives them to NVRTC: include/ and (CUDA 13) include/cccl/ of the first
// toolkit found (detail::toolkit_roots: the loaded NVRTC's own first). An
// Error naming the directories tried when there is none. Loads NVRTC.
[[nodiscard]] inline std::vector<std::string> toolkit_include_paths(SourceLocation where = SourceLocation::current()) {
  return detail::find_toolkit_includes(detail::toolkit_roots(true), where);
}

OXICUDA_DETAIL_NAMESPACE_END
