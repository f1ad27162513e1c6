// oxicuda/compile/compiler_identity.hpp — which NVRTC (or nvJitLink) the process
// compiles with, for the kernel cache's key: the library that is loaded, by
// its real path, file and version, without loading it on a cache hit.
#pragma once

#include <string>
#include <string_view>

#include "cache.hpp"
#include "../core/toolkit.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cstdlib>
#include <mutex>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// ---------------------------------------------------------------------------
// Which NVRTC (or nvJitLink) the process compiles with, for the key.
//
// The library that is loaded, by its real path, (device, inode, size, time)
// and version. Once oxicuda has loaded it in this process, that is the
// answer for good. Before, loading it costs ~60 ms, which a hit must not pay:
// a record in the cache directory, kept per search (the variables the search
// reads and the object that calls dlopen), holds what the last load found,
// with fingerprints of everything that could make the search find another
// file: /etc/ld.so.cache, each directory of the dynamic loader's search list
// for the caller (LD_LIBRARY_PATH, RUNPATH, the system's) and of oxicuda's
// own steps ($CONDA_PREFIX/lib, $CUDA_HOME/lib64, ...), and the library's
// file. The record is trusted only when all still match; otherwise the
// library is loaded and asked (a copy already in the process is asked
// without loading anything), and the record rewritten when it changed.

#if !OXICUDA_DETAIL_WINDOWS
// "dev ino size mtime" of `path` (stat follows links), or "-" when missing.
inline std::string file_fingerprint(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return cat({"-"});
  return cat({std::to_string(static_cast<unsigned long long>(st.st_dev)), " ",
              std::to_string(static_cast<unsigned long long>(st.st_ino)), " ",
              std::to_string(static_cast<long long>(st.st_size)), " ", std::to_string(st.st_mtim.tv_sec), ".",
              std::to_string(st.st_mtim.tv_nsec)});
}

// The object (executable or shared library) whose code calls dlopen for
// oxicuda: its file, and a handle to it for dlinfo (to close).
struct Caller {
  std::string file;
  void* handle = nullptr;
};
inline Caller dlopen_caller() {
  Caller c;
  Dl_info di{};
  void* fn = reinterpret_cast<void*>(&lib_open);
  // A shared library is found by its name; the main program's name (which
  // may be argv[0]) is not, and /proc/self/exe is its file.
  if (::dladdr(fn, &di) && di.dli_fname && di.dli_fname[0] != '\0' &&
      (c.handle = ::dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) != nullptr) {
    c.file = di.dli_fname;
    return c;
  }
  c.handle = ::dlopen(nullptr, RTLD_LAZY);
  char exe[4096];
  const ::ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  c.file = n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string("(main program)");
  return c;
}

// The directories the dynamic loader would search for a library that `h`'s
// object opens by name (glibc's RTLD_DI_SERINFO), each followed by '\n'.
inline std::string loader_search_dirs(void* h) {
  std::string dirs;
#if defined(__GLIBC__)
  Dl_serinfo size{};
  if (!h || ::dlinfo(h, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size < sizeof(Dl_serinfo)) return dirs;
  void* block = std::malloc(size.dls_size);
  if (!block) return dirs;
  auto* info = static_cast<Dl_serinfo*>(block);
  if (::dlinfo(h, RTLD_DI_SERINFOSIZE, info) == 0 && ::dlinfo(h, RTLD_DI_SERINFO, info) == 0)
    for (unsigned k = 0; k < info->dls_cnt; ++k)
      if (info->dls_serpath[k].dls_name) dirs.append(info->dls_serpath[k].dls_name).push_back('\n');
  std::free(block);
#else
  (void)h;
#endif
  return dirs;
}
#endif

#if !OXICUDA_DETAIL_WINDOWS
// What of the search is fixed for the life of the process, found once: the
// object that calls dlopen (its file and fingerprint), and the directories
// the dynamic loader searches for it (it read LD_LIBRARY_PATH at start-up).
struct CallerSearch {
  std::string caller;
  std::string dirs;
};
inline const CallerSearch& caller_search() {
  static const CallerSearch* const s = [] {
    auto* c = new CallerSearch;
    Caller k = dlopen_caller();
    c->caller = cat({k.file, "\n", file_fingerprint(k.file.c_str())});
    c->dirs = loader_search_dirs(k.handle);
    if (k.handle) ::dlclose(k.handle);
    return c;
  }();
  return *s;
}
#endif

// The search's inputs: what names the record.
inline std::string search_inputs(const char* tag, const char* env) {
  return cat({tag, "\n", env_string(env), "\n", env_string("CONDA_PREFIX"), "\n", env_string("LD_LIBRARY_PATH"),
              "\n", env_string("CUDA_HOME"), "\n", env_string("CUDA_PATH")
#if !OXICUDA_DETAIL_WINDOWS
                                                          ,
              "\n", caller_search().caller
#endif
  });
}

// Fingerprints of what could change the file the search finds: one line a
// file or directory ("path dev ino size mtime", or "path -").
inline std::string search_fingerprints(const char* env) {
  std::string out;
#if OXICUDA_DETAIL_WINDOWS
  (void)env;
#else
  // The file the variable names, through any links on its way (a directory
  // link re-pointed names another library by the same path).
  if (const std::string named = env_string(env); !named.empty()) {
    char* real = ::realpath(named.c_str(), nullptr);
    const std::string r = real ? std::string(real) : std::string("-");
    std::free(real);
    out.append(env).append(" ").append(r).append(" ").append(file_fingerprint(r.c_str())).push_back('\n');
  }
  std::string dirs = caller_search().dirs;
  for (const char* root : {"CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH"}) {
    const std::string r = env_string(root);
    if (r.empty()) continue;
    if (std::string_view(root) == "CONDA_PREFIX") dirs.append(r).append("/lib\n");
    else dirs.append(r).append("/lib64\n").append(r).append("/lib\n");
  }
  dirs.append("/usr/local/cuda/lib64\n/usr/local/cuda/lib\n");
  out.append("/etc/ld.so.cache ").append(file_fingerprint("/etc/ld.so.cache")).push_back('\n');
  std::string seen = "\n";
  for (std::string_view rest = dirs; !rest.empty();) {
    const std::string_view d = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(d.size() + (d.size() < rest.size()));
    const std::string line = cat({"\n", d, "\n"});
    if (d.empty() || seen.find(line) != std::string::npos) continue;
    seen.append(d).push_back('\n');
    out.append(d).append(" ").append(file_fingerprint(std::string(d).c_str())).push_back('\n');
    // glibc also searches <dir>/glibc-hwcaps/<level>/ (x86-64-v2, ...), which
    // RTLD_DI_SERINFO does not list: a library added there changes no
    // fingerprint of <dir> itself.
    const std::string hw = cat({d, "/glibc-hwcaps"});
    out.append(hw).append(" ").append(file_fingerprint(hw.c_str())).push_back('\n');
    if (DIR* dh = ::opendir(hw.c_str())) {
      std::string levels;
      while (const struct dirent* ent = ::readdir(dh))
        if (ent->d_name[0] != '.') levels.append(hw).append("/").append(ent->d_name).push_back('\n');
      ::closedir(dh);
      for (std::string_view lr = levels; !lr.empty();) {
        const std::string_view l = lr.substr(0, lr.find('\n'));
        lr.remove_prefix(l.size() + (l.size() < lr.size()));
        out.append(l).append(" ").append(file_fingerprint(std::string(l).c_str())).push_back('\n');
      }
    }
  }
#endif
  return out;
}

// The identity of a loaded library for the key: its real path, its file's
// fingerprint, its version; for NVRTC, then the real path and fingerprint of
// the builtins library it loads at its first compile (by name, through the
// loader: libnvrtc-builtins.so.13.0 for 13.0), which holds its builtin
// header. (Files, one a line.)
inline std::string loaded_identity(const LibraryInfo& info, bool nvrtc_builtins) {
#if !OXICUDA_DETAIL_WINDOWS
  char* real = ::realpath(info.path.c_str(), nullptr);
  const std::string path = real ? std::string(real) : info.path.empty() ? info.library : info.path;
  std::free(real);
  std::string id = cat({path, "\n", file_fingerprint(path.c_str()), "\n", std::to_string(info.version)});
  if (nvrtc_builtins && info.version > 0) {
    const std::string name = cat({"libnvrtc-builtins.so.", std::to_string(info.version / 1000), ".",
                                  std::to_string(info.version % 1000 / 10)});
    std::string builtins = "-";
    if (void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      struct link_map* map = nullptr;
      if (::dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) {
        char* b = ::realpath(map->l_name, nullptr);
        if (b) builtins = b;
        std::free(b);
      }
      ::dlclose(h);
    }
    id = cat({id, "\n", builtins, "\n", builtins == "-" ? std::string("-") : file_fingerprint(builtins.c_str())});
  }
  return id;
#else
  (void)nvrtc_builtins;
  return cat({info.path.empty() ? info.library : info.path, "\n", std::to_string(info.version)});
#endif
}

// Whether the files an identity names (loaded_identity) are unchanged.
inline bool identity_files_unchanged(std::string_view id) {
#if !OXICUDA_DETAIL_WINDOWS
  std::string_view line[5];
  int n = 0;
  for (std::string_view rest = id; n < 5 && !rest.empty(); ++n) {
    line[n] = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(line[n].size() + (line[n].size() < rest.size()));
  }
  if (n < 3 || line[0].empty() || file_fingerprint(std::string(line[0]).c_str()) != line[1]) return false;
  return n < 5 || line[3] == "-" || file_fingerprint(std::string(line[3]).c_str()) == line[4];
#else
  (void)id;
  return false;
#endif
}

// Whether a library of this kind may be loaded in the process: one whose
// file is named as `named` (the environment's override), or, without it,
// whose file name begins as a candidate's family does ("libnvrtc.so" for
// "libnvrtc.so.13"): then oxicuda's search would take it ("already
// loaded"), so it is asked. Read from the loader's list in memory
// (dl_iterate_phdr): dlopen with RTLD_NOLOAD would search the disk for a
// library that is not loaded, which costs a hit far more.
inline bool loaded_in_process(const char* const* files, std::size_t file_count, const std::string& named) {
#if !OXICUDA_DETAIL_WINDOWS
  struct Look {
    const char* const* files;
    std::size_t count;
    std::string_view named, named_base;
    bool found;
  };
  const std::string_view n = named;
  Look look{files, file_count, n, n.substr(n.rfind('/') == std::string_view::npos ? 0 : n.rfind('/') + 1), false};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* l = static_cast<Look*>(data);
        const std::string_view name = info->dlpi_name ? info->dlpi_name : "";
        const std::size_t slash = name.rfind('/');
        const std::string_view base = name.substr(slash == std::string_view::npos ? 0 : slash + 1);
        if (!l->named.empty()) {
          l->found = name == l->named || base == l->named_base;
        } else {
          for (std::size_t i = 0; i < l->count && !l->found; ++i) {
            const std::string_view f = l->files[i];
            const std::string_view family = f.substr(0, f.find(".so") == std::string_view::npos ? f.size() : f.find(".so") + 3);
            l->found = base.substr(0, family.size()) == family;
          }
        }
        return l->found ? 1 : 0;
      },
      &look);
  return look.found;
#else
  (void)files, (void)file_count, (void)named;
  return false;
#endif
}

// Once oxicuda has loaded a library in this process, its identity stands
// for good: every compile uses that copy. (With the directory whose record
// was last brought up to date, so that a record is written once a
// directory, not on every lookup.)
struct LoadedIdentity {
  std::string id, dir;
};
struct LoadedIdentities {
#if !OXICUDA_DETAIL_WINDOWS
  std::mutex mu;
#endif
  LoadedIdentity nvrtc, nvjitlink, other;
};
inline LoadedIdentities& loaded_identities() {
  static LoadedIdentities* const l = new LoadedIdentities;
  return *l;
}

inline std::string library_identity_for_cache(const std::string& dir, const char* tag, const char* env,
                                              const char* const* files, std::size_t file_count,
                                              const LibraryInfo& (*info_of)() noexcept) {
#if OXICUDA_DETAIL_WINDOWS
  (void)dir, (void)tag, (void)env, (void)files, (void)file_count;
  const LibraryInfo& info = info_of();
  return info.found ? loaded_identity(info, false) : std::string();
#else
  LoadedIdentities& memo = loaded_identities();
  // (Only oxicuda's own libraries are remembered; a test's stand-in is not.)
  const bool remembered = info_of == &nvrtc_info || info_of == &nvjitlink_info;
  LoadedIdentity& mine = info_of == &nvrtc_info ? memo.nvrtc : info_of == &nvjitlink_info ? memo.nvjitlink : memo.other;
  std::string id;
  if (remembered) {
    std::lock_guard lock(memo.mu);
    if (!mine.id.empty() && mine.dir == dir) return mine.id;
    id = mine.id;
  }
  // Loaded in the process already (by oxicuda, or anyone): asking is cheap.
  const bool loaded = !id.empty() || loaded_in_process(files, file_count, env_string(env));
  const std::string record = cat({tag, "-", KeyHash().add(search_inputs(tag, env)).hex()});
  std::string payload, note;
  const std::string fingerprints = search_fingerprints(env);
  const bool have_record = cache_record_read(dir, record, payload, note);
  if (!loaded && have_record) {
    std::string_view in = payload, recorded, prints;
    if (take_field(in, recorded) && take_field(in, prints) && in.empty() && prints == fingerprints) {
      // The library's own file (and NVRTC's builtins), unchanged.
      if (identity_files_unchanged(recorded)) return std::string(recorded);
    }
  }
  const LibraryInfo& info = info_of();
  if (!info.found) return std::string();  // the compile that follows reports why
  if (id.empty()) id = loaded_identity(info, std::string_view(tag) == "nvrtc");
  if (remembered) {
    std::lock_guard lock(memo.mu);
    mine.id = id;
    mine.dir = dir;
  }
  // A record only for what oxicuda's search found (now, or at an earlier
  // compile of this process), not for a copy that something else had
  // loaded; and only when it changed.
  if (info.found_by != std::string_view("already loaded")) {
    std::string fresh;
    put_field(fresh, id);
    put_field(fresh, fingerprints);
    if (!have_record || fresh != payload) (void)cache_record_write(dir, record, fresh, note);
  }
  return id;
#endif
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
