// oxicuda/source.hpp — module_from_source: CUDA C++ source to a loaded
// Module in one step. It compiles for the context's device (program.hpp),
// links LTO-IR with nvJitLink when asked (lto.hpp), keeps the result in the
// on-disk cache (cache.hpp, cache_entry.hpp) and loads it with its name
// expressions, so that module.kernel<void(float*)>("saxpy<float>") finds the
// template's instance. A cache hit neither compiles nor loads NVRTC.
//
// The cache's rule: whatever NVRTC reads from disk is in the key, or the
// result is not cached. The key holds the source, the headers given, the
// options, the target and the identity of the NVRTC (and nvJitLink) that
// the process loads. NVRTC itself says which headers it read: a cacheable
// compile runs with --fdevice-time-trace, and its result is stored only when
// every header NVRTC processed was one given in memory (or NVRTC's builtin).
// What the trace cannot show (a __has_include probe) is refused by a
// deliberately coarse rule on the text.
#pragma once

#include <string>
#include <string_view>

#include "cache.hpp"
#include "cache_entry.hpp"
#include "kernel.hpp"
#include "lto.hpp"

#if !OXICUDA_WINDOWS
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

OXICUDA_NAMESPACE_BEGIN

struct SourceOptions {
  // NVRTC's options. An empty arch is picked for the context's device
  // (arch_for); with lto, the LTO-IR is linked by nvJitLink into a cubin.
  CompileOptions compile{};
  // Source files for #include: name, source, name, source, ...
  StringList headers{};
  // Kernels named by C++ expressions ("saxpy<float>"); Module::function and
  // Module::kernel accept these names.
  StringList name_expressions{};
  std::string name = "program.cu";  // the source's file name in NVRTC's messages
  JitOptions jit{};                  // for loading the module
  bool cache = true;                 // use the on-disk cache (OXICUDA_CACHE=0 turns it off for all)
};

// Compiles `source` (or finds it in the cache) and loads it into `ctx`. The
// module's info_log() holds NVRTC's log, oxicuda's notes (an architecture
// fallback, where the cache was refused or an entry discarded) and the
// JIT's log. A failed compile is an Error whose detail holds NVRTC's log.
[[nodiscard]] Module module_from_source(const Context& ctx, std::string_view source, const SourceOptions& options = {},
                                        SourceLocation where = SourceLocation::current());

namespace detail {

// ---------------------------------------------------------------------------
// What NVRTC may read from disk.

// `text` with its line splices undone (a backslash, or the trigraph ??/,
// before a newline or CR LF), as translation phase 2 does.
inline std::string unspliced(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t j = text[i] == '\\' ? i + 1 : text.substr(i, 3) == "?\?/" ? i + 3 : i;
    if (j != i) {
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        i = j + 1;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

// What in `text` could make NVRTC look at the disk in a way that its trace
// does not show, or empty. NVRTC answers __has_include from the disk and
// does not report the probe; a token paste can spell it (CAT(__has_,
// include)). So any "has_include" or token-paste operator (## or %:%:),
// anywhere (also in a comment or a string), keeps the compile out of the
// cache: coarse on purpose.
inline std::string_view disk_probe(std::string_view text) {
  const std::string t = unspliced(text);
  if (t.find("has_include") != std::string::npos) return "__has_include";
  if (t.find("##") != std::string::npos) return "the token-paste operator ##";
  if (t.find("%:%:") != std::string::npos) return "the token-paste operator %:%:";
  return {};
}

// Why the cache cannot serve this compile, or empty when it may (then the
// trace decides).
inline std::string uncachable(std::string_view source, const SourceOptions& o) {
  if (!o.compile.include_paths.empty()) return cat({"include paths are given"});
  for (std::string_view a : o.compile.extra) {
    // -I, --include-path, -include, --pre-include, the PCH options
    // (--pch, --create-pch, --use-pch, --pch-dir, ...) and a trace of the
    // caller's own all read or write files.
    const bool reads = a.substr(0, 2) == "-I" || a.find("include") != std::string_view::npos ||
                       a.find("pch") != std::string_view::npos || a.find("time-trace") != std::string_view::npos ||
                       a.substr(0, 1) == "@";
    if (reads) return cat({"the option '", a, "' may read or write files"});
  }
  if (const std::string_view p = disk_probe(source); !p.empty())
    return cat({"the source uses ", p, ", whose answer may come from the disk (NVRTC does not report it)"});
  std::size_t k = 0;
  for (std::string_view h : o.headers)
    if (k++ % 2 == 1)
      if (const std::string_view p = disk_probe(h); !p.empty())
        return cat({"a header uses ", p, ", whose answer may come from the disk (NVRTC does not report it)"});
  // NVRTC preprocesses the options' macros (-D) and the name expressions too.
  for (std::string_view a : o.compile.arguments())
    if (const std::string_view p = disk_probe(a); !p.empty())
      return cat({"the option '", a, "' uses ", p, ", whose answer may come from the disk (NVRTC does not report it)"});
  for (std::string_view e : o.name_expressions)
    if (const std::string_view p = disk_probe(e); !p.empty())
      return cat({"the name expression '", e, "' uses ", p,
                  ", whose answer may come from the disk (NVRTC does not report it)"});
  return {};
}

// A minimal JSON reader for NVRTC's trace (Chrome's trace format): walks a
// value, reads strings with their escapes. `ok` turns false on anything it
// cannot read, and stays false.
struct JsonReader {
  std::string_view s;
  std::size_t i = 0;
  bool ok = true;
  int depth = 0;

  void space() noexcept {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) noexcept {
    space();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  void utf8(std::string& out, unsigned c) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  bool string(std::string& out) {
    out.clear();
    if (!eat('"')) return ok = false;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i >= s.size()) return ok = false;
      c = s[i++];
      switch (c) {
        case '"': case '\\': case '/': out.push_back(c); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          unsigned v = 0;
          for (int k = 0; k < 4; ++k, ++i) {
            if (i >= s.size()) return ok = false;
            const char h = s[i];
            v = v * 16 + static_cast<unsigned>(h >= '0' && h <= '9'   ? h - '0'
                                               : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                               : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                                      : 99);
            if (v > 0xFFFF) return ok = false;
          }
          if (v == 0) return ok = false;  // no NUL in a file's name
          utf8(out, v);  // (a surrogate pair stays two: such a name only fails to match)
          break;
        }
        default: return ok = false;
      }
    }
    return eat('"') || (ok = false);
  }
  // Skips one value.
  void skip() {
    space();
    if (!ok || i >= s.size() || ++depth > 64) {
      ok = false;
      return;
    }
    std::string ignored;
    if (s[i] == '"') {
      string(ignored);
    } else if (s[i] == '{') {
      object([&](const std::string&) { skip(); });
    } else if (s[i] == '[') {
      array([&] { skip(); });
    } else {
      const std::size_t start = i;
      while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n') ++i;
      if (i == start) ok = false;
    }
    --depth;
  }
  // An object: `member(key)` reads (or skips) each member's value.
  template <class F>
  void object(F&& member) {
    if (!eat('{')) {
      ok = false;
      return;
    }
    if (eat('}')) return;
    std::string key;
    do {
      if (!string(key) || !eat(':')) return void(ok = false);
      member(key);
      if (!ok) return;
    } while (eat(','));
    if (!eat('}')) ok = false;
  }
  template <class F>
  void array(F&& element) {
    if (!eat('[')) {
      ok = false;
      return;
    }
    if (eat(']')) return;
    do {
      element();
      if (!ok) return;
    } while (eat(','));
    if (!eat(']')) ok = false;
  }
};

// The headers NVRTC's trace says it processed ("Processing Header File"
// events), into `headers` (each followed by a NUL). False when the trace
// cannot be read, or lists no header at all (NVRTC always processes its
// builtin one: another format, which is not understood).
inline bool trace_headers(std::string_view trace, std::string& headers) {
  JsonReader j{trace};
  std::size_t count = 0;
  j.object([&](const std::string& key) {
    if (key != "traceEvents") return j.skip();
    j.array([&] {
      std::string name, detail, value;
      bool has_detail = false;
      j.object([&](const std::string& k) {
        if (k == "name") {
          j.string(name);
        } else if (k == "args") {
          j.object([&](const std::string& a) {
            if (a == "detail") {
              has_detail = j.string(detail);
            } else {
              j.skip();
            }
          });
        } else {
          j.skip();
        }
      });
      if (j.ok && name == "Processing Header File") {
        if (!has_detail) j.ok = false;
        headers.append(detail).push_back('\0');
        ++count;
      }
    });
  });
  j.space();
  return j.ok && j.i == trace.size() && count > 0;
}

// NVRTC's own header, which the trace lists by this name.
inline constexpr std::string_view nvrtc_builtin_header = "__nv_nvrtc_builtin_header.h";

// Why the compile that wrote `trace` may have read a file from disk (the
// first header it processed that is not among `given`: name, source, ...),
// or empty when it read none.
inline std::string disk_header(std::string_view trace, const StringList& given) {
  std::string headers;
  if (!trace_headers(trace, headers)) return cat({"NVRTC's trace of the headers it read could not be read"});
  for (std::string_view rest = headers; !rest.empty();) {
    const std::string_view h = rest.substr(0, rest.find('\0'));
    rest.remove_prefix(h.size() + 1);
    bool in_memory = h == nvrtc_builtin_header;
    std::size_t k = 0;
    for (std::string_view name : given)
      if (k++ % 2 == 0 && name == h) in_memory = true;
    if (!in_memory) return cat({"NVRTC read \"", h, "\" from disk (it is not among the headers given)"});
#if !OXICUDA_WINDOWS
    // NVRTC resolves an include relative to the including file's name, on
    // disk: a header given as "d/x.h" that includes "y.h" reads the file
    // d/y.h when there is one, and the trace then names "d/y.h", as it names
    // a header given by that name. When a file by the name exists, the trace
    // cannot tell which was read.
    struct stat st {};
    if (h != nvrtc_builtin_header && ::stat(std::string(h).c_str(), &st) == 0)
      return cat({"NVRTC processed \"", h, "\", the name of a header given, and a file by that name exists on disk: ",
                  "the trace cannot tell which one it read"});
#endif
  }
  return {};
}

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

#if !OXICUDA_WINDOWS
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

#if !OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
                                                          ,
              "\n", caller_search().caller
#endif
  });
}

// Fingerprints of what could change the file the search finds: one line a
// file or directory ("path dev ino size mtime", or "path -").
inline std::string search_fingerprints(const char* env) {
  std::string out;
#if OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
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
#if OXICUDA_WINDOWS
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

// The entry's key: everything that makes the compiled image.
inline std::string source_key(std::string_view source, const SourceOptions& o, std::string_view target,
                              const std::string& compilers) {
  KeyHash h;
  h.add("oxicuda-source-3").add(source).add(o.name).add(target).add(compilers);
  h.add(o.headers.joined()).add(o.name_expressions.joined()).add(o.compile.arguments().joined());
  return h.hex();
}

inline void add_note(std::string& notes, std::string_view note) {
  if (!note.empty()) notes = notes.empty() ? std::string(note) : cat({notes, "\n", note});
}

// ---------------------------------------------------------------------------
// module_from_source's steps: find in the cache, compile, store.

// Step 1: the entry `key`, loaded into `ctx`, in `out`: true for a hit. An
// entry that is no entry (cache_entry.hpp) or that the driver refuses as an
// image is discarded, with a note, and the caller compiles. Any other load
// failure (out of memory, a bad JitOptions value) is raised, and the entry
// kept. Nothing is thrown for the entry itself, so this holds without
// exceptions too.
inline bool find_in_cache(const Context& ctx, const std::string& dir, const std::string& key, const SourceOptions& o,
                          SourceLocation where, Module& out, std::string& notes) {
  std::string payload, note;
  const bool read = cache_read(dir, key, payload, note);
  add_note(notes, note);
  if (!read) return false;
  CacheEntry e;
  if (const std::string why = decode_entry(payload, e, &o.name_expressions); !why.empty()) {
    add_note(notes, cat({"oxicuda cache: discarded ", cache_remove(dir, key), ": ", why}));
    return false;
  }
  std::string jit_error;
  const Outcome r = load_entry(ctx, e, o.jit, where, out, jit_error);
  if (r.ok()) {
    cache_counters().hits.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const std::string path = cat({dir, "/", key, ".bin"});
  if (!entry_at_fault(r.result))
    fail(r, where, cat({"loading the kernel cache's entry ", path, " (", e.is_text ? "PTX" : "binary image", " of ",
                        std::to_string(e.image.size()), " bytes; the entry is kept: this failure is not its fault)",
                        jit_error}));
  add_note(notes, cat({"oxicuda cache: discarded ", cache_remove(dir, key), ": the driver did not load it (",
                       describe_result(r.result), jit_error, ")"}));
  return false;
}

// One of NVRTC's size-then-fill queries (log, PTX, cubin, LTO-IR) into
// `out`; text loses its trailing NULs.
template <class Size, class Fill>
NvrtcOutcome nvrtc_fetch(Size size, Fill fill, std::string& out, bool text) {
  std::size_t n = 0;
  NvrtcOutcome r = size(&n);
  if (!r.ok()) return r;
  out.assign(n, '\0');
  if (n) r = fill(out.data());
  if (text)
    while (!out.empty() && out.back() == '\0') out.pop_back();
  return r;
}

// What step 2 made.
struct SourceBuild {
  std::string image;
  bool is_text = false;
  std::string names;      // expression, lowered name, ...: as Module keeps them
  std::string log;        // the compile's own log (NVRTC's, an architecture fallback)
  std::string not_cached;  // why the result may not be stored (what NVRTC read from disk), or empty
};

// One NVRTC compile, its result not raised: NVRTC_ERROR_INVALID_OPTION
// from an NVRTC without --fdevice-time-trace is the caller's to handle.
inline NvrtcOutcome nvrtc_compile(NvrtcProgramGuard& program, std::string_view source, const SourceOptions& o,
                                  const StringList& args, SourceLocation where) {
  if (program.raw) check(OXICUDA_NVRTC(DestroyProgram, &program.raw), where);
  const std::string text(source);
  if (text.find('\0') != std::string::npos)
    raise(Error(ffi::NVRTC_ERROR_INVALID_INPUT, "oxicuda::module_from_source",
                cat({"the source holds a NUL byte at offset ", std::to_string(text.find('\0')),
                     "; NVRTC would compile only what comes before it"}),
                where));
  if (o.headers.size() % 2 != 0)
    raise(Error(ffi::NVRTC_ERROR_INVALID_INPUT, "oxicuda::module_from_source",
                "the headers are a list of name, source pairs; the last name has no source", where));
  const CStrings header_names(o.headers, 0, 2);
  const CStrings header_sources(o.headers, 1, 2);
  check(OXICUDA_NVRTC(CreateProgram, &program.raw, text.c_str(), o.name.c_str(),
                      static_cast<int>(o.headers.size() / 2), header_sources.get(), header_names.get()),
        where);
  for (std::string_view e : o.name_expressions) check(OXICUDA_NVRTC(AddNameExpression, program.raw, e.data()), where);
  const CStrings argv(args);
  return OXICUDA_NVRTC(CompileProgram, program.raw, static_cast<int>(args.size()), argv.get());
}

#if !OXICUDA_WINDOWS
// A private name for NVRTC's trace in the cache directory (0700): a file
// made by mkstemp, which NVRTC's own ("<name>.json") sits beside. Named as a
// writer's temporary file of the entry (<key>.bin.tmp.XXXXXX), so that the
// cache's scan removes one that a killed process left behind (after an hour).
struct TraceFile {
  std::string name;
  TraceFile(const std::string& dir, const std::string& key) {
    std::string t = cat({dir, "/", key, ".bin.tmp.XXXXXX"});
    const int fd = ::mkstemp(t.data());
    if (fd >= 0) {
      ::close(fd);
      name = std::move(t);
      ::unlink(cat({name, ".json"}).c_str());
    }
  }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  ~TraceFile() {
    if (name.empty()) return;
    ::unlink(cat({name, ".json"}).c_str());
    ::unlink(name.c_str());
  }
  // The trace NVRTC wrote (at most 64 MiB), or false.
  bool read(std::string& out) const {
    const int fd = ::open(cat({name, ".json"}).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (64 << 20);
    if (ok) {
      out.assign(static_cast<std::size_t>(st.st_size), '\0');
      std::size_t got = 0;
      while (got < out.size()) {
        const ::ssize_t n = ::read(fd, out.data() + got, out.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      ok = got == out.size();
    }
    ::close(fd);
    return ok;
  }
};
#endif

// Step 2: compiles (and, with lto, links). With `trace_dir` (a cacheable
// compile), NVRTC writes its trace there and `not_cached` says whether it
// read a file from disk.
inline SourceBuild compile_source(std::string_view source, const SourceOptions& options, ComputeCapability cc,
                                  const std::string& device_arch, const std::string& trace_dir,
                                  const std::string& key, SourceLocation where) {
  SourceBuild b;
  CompileOptions compile = options.compile;
  std::string fallback;
  if (compile.arch.empty()) {
    ArchChoice choice = arch_for(cc, supported_archs(where), where);
    compile.arch = std::move(choice.arch);
    fallback = std::move(choice.note);
    if (compile.lto && !fallback.empty())  // nvJitLink links for a real architecture only
      compile.lto = false;
  }
  const StringList args = compile.arguments();
  NvrtcProgramGuard program;
  NvrtcOutcome r{ffi::NVRTC_SUCCESS, ffi::nvrtc::Entry::CompileProgram};
  bool compiled = false;
#if !OXICUDA_WINDOWS
  struct rlimit fsize {};
  const bool size_limited = ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY;
  if (!trace_dir.empty() && size_limited) {
    // NVRTC writes the trace itself, and past the limit the write would
    // raise SIGXFSZ, which ends the process: no trace, so not stored.
    b.not_cached = cat({"the process has a file-size limit (RLIMIT_FSIZE, ", std::to_string(fsize.rlim_cur),
                        " bytes), under which NVRTC's trace of the headers it read is not written"});
  } else if (!trace_dir.empty()) {
    const TraceFile trace(trace_dir, key);
    if (trace.name.empty()) {
      b.not_cached = cat({"no file for NVRTC's trace could be made in ", trace_dir});
    } else {
      StringList traced = args;
      traced.add(cat({"--fdevice-time-trace=", trace.name}));
      r = nvrtc_compile(program, source, options, traced, where);
      compiled = r.ok() || r.result != ffi::NVRTC_ERROR_INVALID_OPTION;
      std::string text;
      if (!compiled)
        b.not_cached = cat({"this NVRTC does not take --fdevice-time-trace, which tells which files it read"});
      else if (r.ok() && !trace.read(text))
        b.not_cached = cat({"NVRTC wrote no trace of the headers it read"});
      else if (r.ok())
        b.not_cached = disk_header(text, options.headers);
    }
  }
#else
  (void)trace_dir, (void)key;
#endif
  if (!compiled) r = nvrtc_compile(program, source, options, args, where);
  if (OXICUDA_UNLIKELY(!r.ok())) {
    std::string log;
    (void)nvrtc_fetch([&](std::size_t* n) { return OXICUDA_NVRTC(GetProgramLogSize, program.raw, n); },
                      [&](char* p) { return OXICUDA_NVRTC(GetProgramLog, program.raw, p); }, log, true);
    while (!log.empty() && log.back() == '\n') log.pop_back();
    fail(r, where,
         cat({"compiling '", options.name, "' (", std::to_string(source.size()), " bytes of source",
              args.size() == 0 ? "" : "; options: ", args.spaced(), ")", log.empty() ? "" : "; NVRTC log:\n", log}));
  }
  check(nvrtc_fetch([&](std::size_t* n) { return OXICUDA_NVRTC(GetProgramLogSize, program.raw, n); },
                    [&](char* p) { return OXICUDA_NVRTC(GetProgramLog, program.raw, p); }, b.log, true),
        where);
  while (!b.log.empty() && (b.log.back() == '\n' || b.log.back() == ' ')) b.log.pop_back();
  StringList lowered_names;
  for (std::string_view e : options.name_expressions) {
    const char* lowered = nullptr;
    check(OXICUDA_NVRTC(GetLoweredName, program.raw, e.data(), &lowered), where);
    lowered_names.add(e).add(lowered ? lowered : "");
  }
  b.names = lowered_names.joined();
  CodeKind kind = CodeKind::ptx;
  if (compile.lto) {
    kind = CodeKind::ltoir;
    check(nvrtc_fetch([&](std::size_t* n) { return OXICUDA_NVRTC(GetLTOIRSize, program.raw, n); },
                      [&](char* p) { return OXICUDA_NVRTC(GetLTOIR, program.raw, p); }, b.image, false),
          where);
  } else if (std::string_view(compile.arch).starts_with("sm_")) {
    kind = CodeKind::cubin;
    check(nvrtc_fetch([&](std::size_t* n) { return OXICUDA_NVRTC(GetCUBINSize, program.raw, n); },
                      [&](char* p) { return OXICUDA_NVRTC(GetCUBIN, program.raw, p); }, b.image, false),
          where);
  } else {
    check(nvrtc_fetch([&](std::size_t* n) { return OXICUDA_NVRTC(GetPTXSize, program.raw, n); },
                      [&](char* p) { return OXICUDA_NVRTC(GetPTX, program.raw, p); }, b.image, true),
          where);
  }
  if (kind == CodeKind::ltoir) {
    // For a virtual architecture (compute_90), the link is for the device's
    // own: LTO-IR of compute_90 links for sm_100, as its PTX would JIT.
    Compiled c;
    c.kind = kind;
    c.code = std::move(b.image);
    c.arch = compile.arch;
    LtoLinker linker(std::string_view(compile.arch).starts_with("compute_") ? device_arch : compile.arch, {}, true,
                     where);
    linker.add(c, options.name, where);
    b.image = linker.complete(where);
  }
  b.is_text = kind == CodeKind::ptx;
  if (!fallback.empty()) b.log = b.log.empty() ? fallback : cat({b.log, "\n", fallback});
  return b;
}

// Step 3: stores what step 2 made as the entry `key`, unless it may not be
// cached; what happened goes to `notes`.
inline void store_in_cache(const std::string& dir, const std::string& key, const SourceBuild& b,
                           const SourceOptions& o, std::string& notes) {
  if (!b.not_cached.empty()) {
    add_note(notes, cat({"kernel cache: not stored, since ", b.not_cached}));
    return;
  }
  const std::string payload = encode_entry(b.is_text, b.names, b.log, b.image);
  CacheEntry e;
  if (const std::string why = decode_entry(payload, e, &o.name_expressions); !why.empty()) {
    add_note(notes, cat({"kernel cache: not stored, since the entry would be refused when read: ", why}));
    return;
  }
  std::string note;
  if (!cache_write(dir, key, payload, note)) add_note(notes, note);
}

}  // namespace detail

inline Module module_from_source(const Context& ctx, std::string_view source, const SourceOptions& options,
                                 SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::module_from_source", where);
  const ComputeCapability cc = ctx.device(where).compute_capability(where);
  const std::string device_arch = detail::cat({"sm_", std::to_string(cc.major * 10 + cc.minor)});

  std::string notes, dir, key;
  if (options.cache) {
    std::string dir_note;
    dir = detail::cache_directory(dir_note);
    detail::add_note(notes, dir_note);
    if (!dir.empty()) {
      std::string compilers = detail::library_identity_for_cache(
          dir, "nvrtc", "OXICUDA_LIBNVRTC_PATH", detail::nvrtc_files,
          sizeof detail::nvrtc_files / sizeof detail::nvrtc_files[0], &nvrtc_info);
      if (options.compile.lto)  // nvJitLink makes the image too; and it links for the device
        compilers = detail::cat({compilers, "\n", device_arch, "\n",
                                 detail::library_identity_for_cache(
                                     dir, "nvjitlink", "OXICUDA_LIBNVJITLINK_PATH", detail::nvjitlink_files,
                                     sizeof detail::nvjitlink_files / sizeof detail::nvjitlink_files[0],
                                     &nvjitlink_info)});
      key = detail::source_key(source, options, options.compile.arch.empty() ? device_arch : options.compile.arch,
                               compilers);
      Module hit;
      if (detail::find_in_cache(ctx, dir, key, options, where, hit, notes)) return hit;
    }
  }
  // A miss: may its result be kept? (A hit needs no such check: an entry is
  // stored only when these rules held, and the key holds all they read.)
  if (const std::string why_not = options.cache ? detail::uncachable(source, options) : std::string();
      !why_not.empty()) {
    key.clear();
    detail::add_note(notes, detail::cat({"kernel cache: not used, since ", why_not}));
  }

  if (!key.empty()) detail::cache_counters().misses.fetch_add(1, std::memory_order_relaxed);
  detail::SourceBuild b = detail::compile_source(source, options, cc, device_arch, key.empty() ? std::string() : dir,
                                                 key, where);
  // The entry keeps the compile's own log; this run's notes on the cache go
  // to this module only.
  if (!key.empty()) detail::store_in_cache(dir, key, b, options, notes);
  std::string log = b.log;
  if (!notes.empty()) log = log.empty() ? notes : detail::cat({log, "\n", notes});
  return detail::ModuleAccess::load(ctx, b.image.data(), b.image.size(), b.is_text, options.jit, where,
                                    std::move(b.names), log);
}

OXICUDA_NAMESPACE_END
