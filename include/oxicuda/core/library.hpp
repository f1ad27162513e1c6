// oxicuda/core/library.hpp — the one lazy-library mechanism: from a table of
// entry points (ffi.hpp's X-macro shape), the function-pointer struct and the
// stand-ins for missing entries; the search for the library (an environment
// override, then candidate files per platform); resolving every entry; and
// the remembered reason, listing what was tried, when it fails. The driver
// (loader.hpp), NVRTC and nvJitLink (toolkit.hpp) are each one use of it.
// Nothing here throws but std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

#include "traits.hpp"

#if OXICUDA_DETAIL_WINDOWS
#ifndef NOMINMAX
#define NOMINMAX
#define OXICUDA_DETAIL_UNDEF_NOMINMAX_
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#define OXICUDA_DETAIL_UNDEF_LEAN_AND_MEAN_
#endif
#include <windows.h>
#ifdef OXICUDA_DETAIL_UNDEF_NOMINMAX_
#undef NOMINMAX
#undef OXICUDA_DETAIL_UNDEF_NOMINMAX_
#endif
#ifdef OXICUDA_DETAIL_UNDEF_LEAN_AND_MEAN_
#undef WIN32_LEAN_AND_MEAN
#undef OXICUDA_DETAIL_UNDEF_LEAN_AND_MEAN_
#endif
#else
#include <dlfcn.h>
#include <unistd.h>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

// What the first use of a lazily loaded library (NVRTC, nvJitLink) found.
// Filled once; read-only afterwards.
struct LibraryInfo {
  bool found = false;    // opened, and it is the library (its first entry point resolved)
  std::string library;   // the file that was opened, as it was named to the loader
  std::string found_by;  // the search step that found it: "OXICUDA_LIBNVRTC_PATH", "already loaded",
                         // "$CONDA_PREFIX", "the loader's search path", "$CUDA_HOME", "$CUDA_PATH",
                         // "/usr/local/cuda"
  std::string path;      // its full path, as the loader resolved it (empty when unknown)
  std::string reason;    // when not found: what was tried, and how to install the library
  int version = 0;       // major * 1000 + minor * 10 (13000 for 13.0), 0 when unknown (nvJitLink before
                         // 12.3 has no nvJitLinkVersion)

  [[nodiscard]] bool available() const noexcept { return found; }
};

namespace detail {

// Joins the pieces into one string. Every message oxicuda builds goes through
// this one function: `std::string + "literal"` chains instead instantiate the
// standard library's operator templates once per literal length, which made
// them the largest share of this header's own compile time.
inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  std::string s;
  s.reserve(n);
  for (std::string_view p : parts) s.append(p.data(), p.size());
  return s;
}

#if OXICUDA_DETAIL_WINDOWS
using LibHandle = HMODULE;
inline LibHandle lib_open(const char* path) noexcept { return ::LoadLibraryA(path); }
// The library if this process has it loaded already (then held for good).
inline LibHandle lib_open_loaded(const char* file) noexcept {
  return ::GetModuleHandleA(file) ? ::LoadLibraryA(file) : nullptr;
}
// Drops the reference lib_open_loaded took, for a look that keeps nothing.
inline void lib_close_loaded(LibHandle h) noexcept { ::FreeLibrary(h); }
inline void* lib_symbol(LibHandle h, const char* name) noexcept {
  return reinterpret_cast<void*>(::GetProcAddress(h, name));
}
// "Windows error 126: The specified module could not be found".
inline std::string lib_error() {
  const DWORD code = ::GetLastError();
  char text[256];
  DWORD n = ::FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr, code, 0, text,
                             sizeof text, nullptr);
  while (n > 0 && (text[n - 1] == '\r' || text[n - 1] == '\n' || text[n - 1] == '.' || text[n - 1] == ' ')) --n;
  text[n < sizeof text ? n : 0] = '\0';
  return cat({"Windows error ", std::to_string(static_cast<unsigned long>(code)), n ? ": " : "", text});
}
inline long process_id() noexcept { return static_cast<long>(::GetCurrentProcessId()); }
// The full path of the opened library.
inline std::string lib_path(LibHandle h, void*) {
  char buf[1024];
  const DWORD n = ::GetModuleFileNameA(h, buf, sizeof buf);
  return n > 0 && n < sizeof buf ? std::string(buf, n) : std::string();
}
inline constexpr const char* toolkit_lib_dirs[] = {"bin", "bin\\x64"};
inline constexpr const char* path_separator = "\\";
#else
using LibHandle = void*;
inline LibHandle lib_open(const char* path) noexcept { return ::dlopen(path, RTLD_NOW | RTLD_LOCAL); }
inline LibHandle lib_open_loaded(const char* file) noexcept {
  return ::dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
}
inline void lib_close_loaded(LibHandle h) noexcept { ::dlclose(h); }
inline void* lib_symbol(LibHandle h, const char* name) noexcept { return ::dlsym(h, name); }
inline std::string lib_error() {
  const char* e = ::dlerror();
  return cat({e ? e : "unknown error"});
}
inline long process_id() noexcept { return static_cast<long>(::getpid()); }
// The full path of the library that defines `symbol`.
inline std::string lib_path(LibHandle, void* symbol) {
  Dl_info di{};
  return ::dladdr(symbol, &di) && di.dli_fname ? std::string(di.dli_fname) : std::string();
}
inline constexpr const char* toolkit_lib_dirs[] = {"lib64", "lib"};
inline constexpr const char* path_separator = "/";
#endif

// Where and how to look for one library.
struct LibrarySpec {
  const char* name;                 // "NVRTC", for messages
  const char* env;                  // the variable naming a file to use instead: "OXICUDA_LIBNVRTC_PATH"
  const char* const* files;         // the file names to try, newest first ("libnvrtc.so.13", ...)
  std::size_t file_count;
  bool toolkit;                     // also look where a toolkit or a conda environment keeps it
  const char* install;              // how to get it, for the reason when it is not found
  // Where an entry's plain symbol is missing, "__<symbol><suffix>" is tried
  // with each suffix in turn: nvJitLink of CUDA 12.0 to 12.2 exports only
  // such versioned names (__nvJitLinkCreate_12_0).
  const char* const* versioned_suffixes;
  std::size_t versioned_count;
};

// One table's slots as the mechanism fills them: the entries, the function-
// pointer struct seen as pointer-sized slots in entry order (its stand-ins
// already in place), and which slots hold the library's own function.
struct TableSlots {
  const ffi::EntryInfo* entries;
  std::size_t count;
  void* slots;
  bool* provided;
};

// Puts `p` in entry i's slot (one loop rather than a typed assignment per
// entry: much cheaper to compile).
inline void set_slot(const TableSlots& t, std::size_t i, void* p) noexcept {
  std::memcpy(static_cast<unsigned char*>(t.slots) + i * sizeof p, &p, sizeof p);
  t.provided[i] = true;
}

// Fills every slot it can from the library by the entry's exported symbol
// (or, failing that, its versioned names: LibrarySpec); an entry already
// provided (by the driver's cuGetProcAddress_v2) is kept, and one not found
// keeps its stand-in.
inline void resolve_symbols(LibHandle h, const TableSlots& t, const char* const* suffixes = nullptr,
                            std::size_t suffix_count = 0) noexcept {
  for (std::size_t i = 0; i < t.count; ++i) {
    if (t.provided[i]) continue;
    void* p = lib_symbol(h, t.entries[i].symbol);
    for (std::size_t k = 0; !p && k < suffix_count; ++k) {
      char name[96];
      const int n = std::snprintf(name, sizeof name, "__%s%s", t.entries[i].symbol, suffixes[k]);
      if (n > 0 && static_cast<std::size_t>(n) < sizeof name) p = lib_symbol(h, name);
    }
    if (p) set_slot(t, i, p);
  }
}

// What a search found: the handle (null when nothing could be opened), the
// file as it was named to the loader, the step that found it, and every
// attempt that failed ("path (why)", joined by "; ").
struct Opened {
  LibHandle handle{};
  std::string path;
  const char* found_by = "";
  std::string tried;
  bool from_env = false;  // the environment override named the file (and only it was tried)
};

inline std::string env_string(const char* name) {
  const char* v = name ? std::getenv(name) : nullptr;
  return v ? std::string(v) : std::string();
}

// The search. The environment override, when set and not empty, is the only
// candidate. Otherwise, for a toolkit library (modelled on NVIDIA's
// cuda-pathfinder): a copy already loaded in the process; $CONDA_PREFIX;
// the file names on the loader's search path, newest first; $CUDA_HOME,
// $CUDA_PATH and /usr/local/cuda (their lib64/ and lib/; on Windows bin\).
// For the driver: only the file names on the loader's search path.
inline Opened open_library(const LibrarySpec& spec) {
  Opened o;
  auto attempt = [&](const std::string& path, const char* step) {
    o.handle = lib_open(path.c_str());
    if (o.handle) {
      o.path = path;
      o.found_by = step;
      return true;
    }
    o.tried = cat({o.tried, o.tried.empty() ? "" : "; ", path, " (", lib_error(), ")"});
    return false;
  };
  const std::string env = env_string(spec.env);
  if (!env.empty()) {
    o.from_env = true;
    attempt(env, spec.env);
    return o;
  }
  const char* const* files = spec.files;
  const char* const* end = spec.files + spec.file_count;
  if (spec.toolkit) {
    for (const char* const* f = files; f != end; ++f)
      if ((o.handle = lib_open_loaded(*f))) {
        o.path = *f;
        o.found_by = "already loaded";
        return o;
      }
    if (const std::string conda = env_string("CONDA_PREFIX"); !conda.empty())
      for (const char* const* f = files; f != end; ++f)
        if (attempt(cat({conda, path_separator, OXICUDA_DETAIL_WINDOWS ? "Library\\bin" : "lib",
                         path_separator, *f}),
                    "$CONDA_PREFIX"))
          return o;
  }
  for (const char* const* f = files; f != end; ++f)
    if (attempt(*f, "the loader's search path")) return o;
  if (spec.toolkit) {
    struct Root {
      std::string dir;
      const char* step;
    };
    const Root roots[] = {{env_string("CUDA_HOME"), "$CUDA_HOME"},
                          {env_string("CUDA_PATH"), "$CUDA_PATH"},
                          {cat({OXICUDA_DETAIL_WINDOWS ? "" : "/usr/local/cuda"}), "/usr/local/cuda"}};
    for (const Root& r : roots) {
      if (r.dir.empty()) continue;
      for (const char* sub : toolkit_lib_dirs)
        for (const char* const* f = files; f != end; ++f)
          if (attempt(cat({r.dir, path_separator, sub, path_separator, *f}),
                      r.step))
            return o;
    }
  }
  return o;
}

// Loads a toolkit library for `info`: the search, then every entry resolved
// by its symbol. The table's first entry tells the library from another
// one: without it, every slot goes back to its stand-in. The reason, when
// the library cannot be used, lists everything that was tried.
inline LibHandle load_library(const LibrarySpec& spec, const TableSlots& table, LibraryInfo& info) {
  Opened o = open_library(spec);
  if (!o.handle) {
    info.reason = o.from_env ? cat({spec.env, " names a ", spec.name, " library that cannot be opened: ", o.tried,
                                    ". Point it at ", spec.name, "'s library or unset it."})
                             : cat({"no ", spec.name, " library could be found (", spec.name,
                                    " was not loaded in this process; tried ", o.tried, "). ", spec.install});
    return nullptr;
  }
  info.library = o.path;
  info.found_by = o.found_by;
  resolve_symbols(o.handle, table, spec.versioned_suffixes, spec.versioned_count);
  if (!table.provided[0]) {
    info.reason = cat({o.path, " was opened but exports no ", table.entries[0].symbol, ": it is not ", spec.name,
                       ". ", spec.install});
    for (std::size_t i = 0; i < table.count; ++i) table.provided[i] = false;
    return nullptr;
  }
  info.found = true;
  void* first = nullptr;
  std::memcpy(&first, table.slots, sizeof first);
  info.path = lib_path(o.handle, first);
  return o.handle;
}

}  // namespace detail
OXICUDA_DETAIL_NAMESPACE_END

// A table's stand-ins (namespace `missing`, one per entry, answering the
// library's LibraryTraits<>::not_found so that a wrapper never tests a
// pointer) and its function-pointer struct `Api` (one member per entry, each
// starting as its stand-in). Expand it in the table's namespace with the
// library's traits; the struct is standard-layout, one pointer-sized slot per
// entry in entry order (TableSlots relies on it).
#if defined(__GNUC__) || defined(__clang__)
#define OXICUDA_DETAIL_UNUSED_PARAMETERS_PUSH \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"")
#define OXICUDA_DETAIL_UNUSED_PARAMETERS_POP _Pragma("GCC diagnostic pop")
#elif defined(_MSC_VER)
#define OXICUDA_DETAIL_UNUSED_PARAMETERS_PUSH __pragma(warning(push)) __pragma(warning(disable : 4100))
#define OXICUDA_DETAIL_UNUSED_PARAMETERS_POP __pragma(warning(pop))
#else
#define OXICUDA_DETAIL_UNUSED_PARAMETERS_PUSH
#define OXICUDA_DETAIL_UNUSED_PARAMETERS_POP
#endif
#define OXICUDA_DETAIL_X_STAND_IN(member, version, symbol, params)                              \
  inline OXICUDA_DETAIL_TABLE_TRAITS::result OXICUDA_DETAIL_CUDAAPI member params noexcept {           \
    return OXICUDA_DETAIL_TABLE_TRAITS::not_found;                                              \
  }
#define OXICUDA_DETAIL_X_SLOT(member, version, symbol, params) \
  OXICUDA_DETAIL_TABLE_TRAITS::result(OXICUDA_DETAIL_CUDAAPI * member) params = &missing::member;
#define OXICUDA_DETAIL_LIBRARY_API(TABLE, Api)                                                     \
  namespace missing {                                                                       \
  OXICUDA_DETAIL_UNUSED_PARAMETERS_PUSH TABLE(OXICUDA_DETAIL_X_STAND_IN) OXICUDA_DETAIL_UNUSED_PARAMETERS_POP \
  }                                                                                         \
  struct Api {                                                                              \
    TABLE(OXICUDA_DETAIL_X_SLOT)                                                                   \
  };                                                                                        \
  static_assert(sizeof(Api) == entry_count * sizeof(void*));
