// oxicuda/kernel/library.hpp — KernelLibrary: PTX, a cubin or a fatbin loaded once
// for every context (cuLibraryLoadData, cuLibraryLoadFromFile: CUDA 12.0),
// with the driver's JIT options and the library options. It belongs to no
// context: its kernels (KernelLibrary::function, KernelLibrary::kernel<Sig>, in
// library_kernel.hpp) launch in the context of the stream they go to, and
// the driver loads the library into a context when it is first used there.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../driver/current.hpp"
#include "image.hpp"
#include "module.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Options for loading a library (CUlibraryOption), by designated initializers.
struct LibraryOptions {
  // CU_LIBRARY_BINARY_IS_PRESERVED: the driver may read the image given to
  // from_image for as long as the library is loaded, instead of keeping its
  // own copy (a memory hint it may ignore). The caller then keeps the image
  // alive and unchanged until the last handle of the library drops. Only
  // from_image takes it (from_ptx copies its text; the driver refuses it
  // for a file): elsewhere it is an Error.
  bool binary_is_preserved = false;
};

// Whether the loaded driver has libraries (cuLibraryLoadData: CUDA 12.0).
// Without them, loading one is an Error naming the entry point it lacks.
[[nodiscard]] inline bool libraries_available() noexcept { return !detail::missing(ffi::Entry::LibraryLoadData); }

class Function;
template <class Signature>
class Kernel;
template <class T>
class DeviceSpan;
namespace detail {
struct LibraryAccess;
}  // namespace detail

// A loaded library. Copies share it; it is unloaded (cuLibraryUnload) when
// the last KernelLibrary, or Function or Kernel of it, drops. As for a Module,
// synchronize the work that uses its kernels before the last handle goes.
class KernelLibrary {
 public:
  KernelLibrary() noexcept = default;

  // Loads PTX text. On failure the Error's detail holds the JIT's error
  // log; on success info_log() holds its info log.
  [[nodiscard]] static KernelLibrary from_ptx(std::string_view ptx, JitOptions options = {}, LibraryOptions library = {},
                                        SourceLocation where = SourceLocation::current());
  // Loads a cubin (ELF) or fatbin image, or PTX text, from memory, checked
  // against `size` first as Module::from_image checks it.
  [[nodiscard]] static KernelLibrary from_image(const void* data, std::size_t size, JitOptions options = {},
                                          LibraryOptions library = {}, SourceLocation where = SourceLocation::current());
  // Loads a .ptx, .cubin or .fatbin file (cuLibraryLoadFromFile: the driver
  // reads it). A file that cannot be opened, or is empty, is an Error first.
  [[nodiscard]] static KernelLibrary from_file(const std::string& path, JitOptions options = {}, LibraryOptions library = {},
                                         SourceLocation where = SourceLocation::current());

  // The kernel called `name` (cuLibraryGetKernel), as a Function of no
  // context: launches, graph kernel nodes and the occupancy queries take it
  // as any Function. Names as Module::function takes them: the symbol, a
  // name expression compiled with the library, or (through the driver's
  // list, CUDA 12.4) a C++ name or signature. (library_kernel.hpp.)
  [[nodiscard]] Function function(std::string_view name, SourceLocation where = SourceLocation::current()) const;
  // The kernel called `name`, typed by its signature and checked against
  // the driver's layout (cuKernelGetParamInfo, CUDA 12.4) as Module::kernel
  // checks it. (library_kernel.hpp.)
  template <class Signature>
  [[nodiscard]] Kernel<Signature> kernel(std::string_view name, SourceLocation where = SourceLocation::current()) const;
  // The library's kernels, each symbol and its demangled C++ name
  // (cuLibraryEnumerateKernels and cuKernelGetName, CUDA 12.4).
  // (library_kernel.hpp.)
  [[nodiscard]] std::vector<KernelName> kernel_names(SourceLocation where = SourceLocation::current()) const;

  // The __device__ or __constant__ variable called `name` in context `ctx`
  // (cuLibraryGetGlobal, with `ctx` current: each context has its own copy),
  // as a span of T over all its bytes, checked as Module::global checks it.
  // (library_kernel.hpp.)
  template <class T>
  [[nodiscard]] DeviceSpan<T> global(const Context& ctx, std::string_view name,
                                     SourceLocation where = SourceLocation::current()) const;
  // The __managed__ variable called `name` (cuLibraryGetManaged): one for
  // every device, reachable from the host through data(). Its span names no
  // context. (library_kernel.hpp.)
  template <class T>
  [[nodiscard]] DeviceSpan<T> managed(std::string_view name, SourceLocation where = SourceLocation::current()) const;

  // The module the library is in `ctx` (cuLibraryGetModule, with `ctx`
  // current), owned by the library: valid while it is loaded, never to be
  // unloaded by the caller.
  [[nodiscard]] CUmodule raw_module(const Context& ctx, SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] CUlibrary raw() const noexcept { return state_ ? state_->raw : nullptr; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(state_); }
  // The JIT's info log from loading (and, from source, the compile's log).
  [[nodiscard]] std::string_view info_log() const noexcept {
    return state_ ? std::string_view(state_->info_log) : std::string_view();
  }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }
  // How long the driver's JIT took, in milliseconds, with JitOptions::wall_time; else 0.
  [[nodiscard]] float jit_wall_time_ms() const noexcept { return state_ ? state_->wall_time_ms : 0.0f; }

  friend bool operator==(const KernelLibrary& a, const KernelLibrary& b) noexcept { return a.raw() == b.raw(); }

 private:
  struct State : detail::Owned {
    CUlibrary raw = nullptr;
    std::string info_log;
    std::string names;  // name expressions and their lowered names (from source), as a Module's
    float wall_time_ms = 0;
    State(CUlibrary r, std::string log, std::string n, float ms) noexcept
        : raw(r), info_log(std::move(log)), names(std::move(n)), wall_time_ms(ms) {}
    ~State() { detail::check_nothrow(OXICUDA_DRIVER(LibraryUnload, raw), "unloading an oxicuda::KernelLibrary"); }
  };
  friend struct detail::LibraryAccess;

  // `image` (or, with `path`, the file) loaded; `names` and `log` come with
  // a library compiled from source.
  static KernelLibrary load(const void* image, const char* path, std::size_t size, bool is_text, const JitOptions& options,
                      LibraryOptions library, SourceLocation where, std::string names = {},
                      std::string_view log_before = {});
  [[nodiscard]] std::string_view lowered(std::string_view name) const noexcept {
    return Module::lowered_in(state_ ? std::string_view(state_->names) : std::string_view(), name);
  }

  detail::Shared<const State> state_;
};

inline KernelLibrary KernelLibrary::load(const void* image, const char* path, std::size_t size, bool is_text,
                             const JitOptions& options, LibraryOptions library, SourceLocation where, std::string names,
                             std::string_view log_before) {
  constexpr const char* op = "oxicuda::KernelLibrary::load";
  if (library.binary_is_preserved && (path || is_text))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                        path ? "LibraryOptions::binary_is_preserved is for an image in memory (from_image); the "
                               "driver refuses it for a file"
                             : "LibraryOptions::binary_is_preserved is for a binary image in memory (from_image); "
                               "PTX text is copied before the driver reads it, so the copy could not be preserved",
                        where));
  detail::JitOptionList jit(options, op, where);
  ffi::CUlibraryOption keys[1] = {ffi::CU_LIBRARY_BINARY_IS_PRESERVED};
  void* values[1] = {reinterpret_cast<void*>(std::size_t{1})};
  const unsigned count = library.binary_is_preserved ? 1u : 0u;
  CUlibrary raw = nullptr;
  const detail::Outcome r =
      path ? OXICUDA_DRIVER(LibraryLoadFromFile, &raw, path, jit.keys, jit.values, jit.count, keys, values, count)
           : OXICUDA_DRIVER(LibraryLoadData, &raw, image, jit.keys, jit.values, jit.count, keys, values, count);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
    detail::fail(r, where,
                 path ? detail::cat({"loading the library file '", path, "'", jit.error_log()})
                      : detail::cat({is_text ? "PTX source" : "binary image", " of ", std::to_string(size), " bytes",
                                     jit.error_log()}));
  KernelLibrary lib;
  lib.state_ = detail::Shared<const State>::make(raw, jit.loaded_log(log_before), std::move(names), jit.wall_time_ms());
  return lib;
}

inline KernelLibrary KernelLibrary::from_ptx(std::string_view ptx, JitOptions options, LibraryOptions library,
                                 SourceLocation where) {
  const std::string copy = detail::ptx_text(ptx.data(), ptx.size(), ffi::CUDA_ERROR_INVALID_PTX,
                                            "oxicuda::KernelLibrary::from_ptx", "the PTX source", "the driver", where);
  return load(copy.c_str(), nullptr, copy.size(), true, options, library, where);
}

inline KernelLibrary KernelLibrary::from_image(const void* data, std::size_t size, JitOptions options, LibraryOptions library,
                                   SourceLocation where) {
  if (detail::checked_image(data, size, "oxicuda::KernelLibrary::from_image", where) == detail::ImageKind::ptx) {
    const std::string copy = detail::ptx_text(static_cast<const char*>(data), size, ffi::CUDA_ERROR_INVALID_PTX,
                                              "oxicuda::KernelLibrary::from_image", "the PTX source", "the driver", where);
    return load(copy.c_str(), nullptr, copy.size(), true, options, library, where);
  }
  return load(data, nullptr, size, false, options, library, where);
}

inline KernelLibrary KernelLibrary::from_file(const std::string& path, JitOptions options, LibraryOptions library,
                                  SourceLocation where) {
  constexpr const char* op = "oxicuda::KernelLibrary::from_file";
  if (path.find('\0') != std::string::npos)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op, "the path has a NUL byte", where));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) detail::raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, op, detail::cat({"cannot open '", path, "'"}), where));
  const bool empty = std::fgetc(f) == EOF;
  std::fclose(f);
  if (empty) detail::raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, op, detail::cat({"'", path, "' is empty"}), where));
  return load(nullptr, path.c_str(), 0, false, options, library, where);
}

inline CUmodule KernelLibrary::raw_module(const Context& ctx, SourceLocation where) const {
  CUlibrary lib = detail::checked(*this, "oxicuda::KernelLibrary", "oxicuda::KernelLibrary::raw_module", where);
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::KernelLibrary::raw_module", where);
  CUmodule m = nullptr;
  const ScopedCurrent current(ctx, where);
  detail::check(OXICUDA_DRIVER(LibraryGetModule, &m, lib), where);
  return m;
}

namespace detail {

// Loading a library with the name expressions and log of its compilation
// (runtime compilation, above this part).
struct LibraryAccess {
  static KernelLibrary load(const void* image, std::size_t size, bool is_text, const JitOptions& options,
                      SourceLocation where, std::string names, std::string_view log) {
    return KernelLibrary::load(image, nullptr, size, is_text, options, {}, where, std::move(names), log);
  }
  // The driver's answer to loading `image`, not raised (a cache hit
  // inspects it: an entry the driver refuses is discarded); `out` and
  // `jit_error` set as for Module's load_entry.
  static Outcome try_load(const void* image, const JitOptions& options, SourceLocation where, std::string names,
                          std::string_view log_before, KernelLibrary& out, std::string& jit_error) {
    JitOptionList jit(options, "oxicuda::library_from_source", where);
    CUlibrary raw = nullptr;
    const Outcome r = OXICUDA_DRIVER(LibraryLoadData, &raw, image, jit.keys, jit.values, jit.count, nullptr, nullptr, 0);
    if (!r.ok()) {
      jit_error = jit.error_log();
      return r;
    }
    out.state_ =
        Shared<const KernelLibrary::State>::make(raw, jit.loaded_log(log_before), std::move(names), jit.wall_time_ms());
    return r;
  }
  static std::string_view lowered(const KernelLibrary& lib, std::string_view name) noexcept { return lib.lowered(name); }
};

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
