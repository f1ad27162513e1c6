// oxicuda/compile/source_rules.hpp — SourceOptions (what module_from_source takes)
// and what NVRTC may read from disk under them: the options and text that
// keep a compile out of the kernel cache, and NVRTC's trace of the headers
// it processed (--fdevice-time-trace), read back to tell whether it read a
// file that the key does not hold.
#pragma once

#include <string>
#include <string_view>

#include "../kernel/module.hpp"
#include "program.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

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
  // Link the CUDA device runtime (libcudadevrt.a, device_runtime.hpp), for a
  // kernel that launches kernels or calls cudaGraphSetConditional: compiles
  // relocatable device code (-rdc=true) and links it with the library
  // through nvJitLink (with lto, as part of the LTO link). An Error names
  // where the library was looked for when it is not found.
  bool device_runtime = false;
};

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
  if (o.compile.toolkit_includes) return cat({"the toolkit's include directories are given (toolkit_includes)"});
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
#if !OXICUDA_DETAIL_WINDOWS
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

#if !OXICUDA_DETAIL_WINDOWS
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

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
