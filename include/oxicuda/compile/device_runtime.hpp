// oxicuda/compile/device_runtime.hpp — the CUDA device runtime library
// (libcudadevrt.a) for SourceOptions::device_runtime and
// LtoLinker::add_device_runtime: where it is, its
// identity for the kernel cache's key, and its bytes for nvJitLink, which
// links it with the relocatable device code NVRTC made. A kernel that
// launches kernels (dynamic parallelism), or calls cudaGraphSetConditional,
// needs it: unlinked, the load fails on the unresolved symbol.
//
// Where it is looked for, in order: OXICUDA_LIBCUDADEVRT_PATH (the file; when
// set, nothing else); lib64/ and lib/ of the toolkit roots that
// toolkit_paths.hpp finds as it finds the toolkit's headers ($CONDA_PREFIX,
// $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, then the toolkit of the loaded
// NVRTC: last, since it loads NVRTC, which a kernel-cache hit does not
// need); the distribution's /usr/lib/x86_64-linux-gnu and /usr/lib64.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <string>
#include <string_view>

#include "../core/toolkit.hpp"
#include "../core/check.hpp"
#include "toolkit_paths.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// The library found: its path, and its identity (path, size, time of last
// change, device and inode), which the cache key holds as it holds NVRTC's.
struct DeviceRuntimeLibrary {
  std::string path;
  std::string identity;
};

// The identity of the regular file `path`, or empty when there is none.
inline std::string device_runtime_identity(const std::string& path) {
#if !OXICUDA_DETAIL_WINDOWS
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  return cat({"libcudadevrt ", path, " size ", std::to_string(st.st_size), " mtime ", std::to_string(st.st_mtim.tv_sec),
              ".", std::to_string(st.st_mtim.tv_nsec), " dev ", std::to_string(st.st_dev), " ino ",
              std::to_string(st.st_ino)});
#else
  (void)path;
  return {};
#endif
}

// Finds libcudadevrt.a (the order above); an Error naming every place it
// looked when it is in none.
inline DeviceRuntimeLibrary find_device_runtime(SourceLocation where, const char* call = "oxicuda::module_from_source") {
  constexpr std::string_view file = "libcudadevrt.a";
  std::string looked;
  auto at = [&](const std::string& path, std::string_view how) -> DeviceRuntimeLibrary {
    std::string identity = device_runtime_identity(path);
    if (identity.empty()) looked = cat({looked, looked.empty() ? "" : ", ", path, " (", how, ")"});
    return {identity.empty() ? std::string() : path, std::move(identity)};
  };
  auto missing = [&](std::string_view what) {
    return Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, call,
                 cat({what, "; the CUDA device runtime (SourceOptions::device_runtime, LtoLinker::add_device_runtime) "
                      "is libcudadevrt.a, from the CUDA toolkit: install the toolkit (its lib64/ holds it), or set "
                      "OXICUDA_LIBCUDADEVRT_PATH to the file"}),
                 where);
  };
  if (const std::string own = env_string("OXICUDA_LIBCUDADEVRT_PATH"); !own.empty()) {
    DeviceRuntimeLibrary lib = at(own, "OXICUDA_LIBCUDADEVRT_PATH");
    if (lib.path.empty()) raise(missing(cat({"OXICUDA_LIBCUDADEVRT_PATH='", own, "' names no regular file"})));
    return lib;
  }
  auto in = [&](const std::vector<ToolkitRoot>& roots) -> DeviceRuntimeLibrary {
    for (const ToolkitRoot& r : roots)
      for (const char* sub : toolkit_lib_dirs)
        if (DeviceRuntimeLibrary lib = at(cat({r.dir, "/", sub, "/", file}), r.how); !lib.path.empty()) return lib;
    return {};
  };
  if (DeviceRuntimeLibrary lib = in(toolkit_roots(false, false)); !lib.path.empty()) return lib;
  std::vector<ToolkitRoot> nvrtc;
  add_nvrtc_root(nvrtc);  // (loads NVRTC: only when no other root had the library)
  if (DeviceRuntimeLibrary lib = in(nvrtc); !lib.path.empty()) return lib;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu/", "/usr/lib64/"})
    if (DeviceRuntimeLibrary lib = at(cat({dir, file}), "the distribution's"); !lib.path.empty()) return lib;
  raise(missing(cat({"libcudadevrt.a was not found; looked at ", looked})));
}

// The library's bytes, read for the link. `changed` says so when the file
// is no longer the one `lib.identity` names (replaced since the key was
// made): then the result is not cached under that key.
inline std::string read_device_runtime(const DeviceRuntimeLibrary& lib, std::string& changed, SourceLocation where,
                                       const char* call = "oxicuda::module_from_source") {
  std::string bytes;
#if !OXICUDA_DETAIL_WINDOWS
  const int fd = ::open(lib.path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  bool ok = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (1ll << 30);
  if (ok) {
    bytes.assign(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ::ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ok = got == bytes.size();
  }
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!ok)
    raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, call,
                cat({"cannot read the device runtime library ", lib.path, fd < 0 ? cat({" (", std::strerror(error), ")"})
                                                                                   : std::string()}),
                where));
  if (device_runtime_identity(lib.path) != lib.identity)
    changed = cat({lib.path, " changed while it was linked"});
#else
  (void)lib, (void)changed;
  raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, call, "the device runtime is not available on Windows", where));
#endif
  return bytes;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
