// oxicuda/source.hpp — module_from_source: CUDA C++ source to a loaded
// Module in one step. It compiles for the context's device (program.hpp),
// links LTO-IR with nvJitLink when asked (lto.hpp), keeps the result in the
// on-disk cache (cache.hpp) and loads it with its name expressions, so that
// module.kernel<void(float*)>("saxpy<float>") finds the template's instance.
// A cache hit neither compiles nor loads NVRTC.
#pragma once

#include <string>
#include <string_view>

#include "cache.hpp"
#include "kernel.hpp"
#include "lto.hpp"

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

// Which NVRTC (or nvJitLink) would compile, for the cache key, without
// loading it where possible: the resolved file's path, size and time, and
// its version. When a candidate file is loaded in the process already (by
// oxicuda or by another library), it is asked: loading it again costs
// nothing. Else the answer is read from a record in the cache directory,
// kept per search environment (the variables the search reads), when the
// file the record names is unchanged; else the library is loaded and asked.
// A record is written only for what the search found by itself, not for a
// copy that something else had loaded. So a patch release (same version,
// another file) makes other keys.
inline std::string library_identity_for_cache(const std::string& dir, const char* tag, const char* env,
                                              const char* const* files, std::size_t file_count,
                                              const LibraryInfo& (*info_of)() noexcept) {
  auto identity = [](const std::string& path) {
#if OXICUDA_WINDOWS
    return path;
#else
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::string();
    return cat({path, "\n", std::to_string(st.st_size), "\n", std::to_string(st.st_mtim.tv_sec), ".",
                std::to_string(st.st_mtim.tv_nsec)});
#endif
  };
  const std::string record_key =
      KeyHash()
          .add(cat({tag, "\n", env_string(env), "\n", env_string("CONDA_PREFIX"), "\n", env_string("LD_LIBRARY_PATH"),
                    "\n", env_string("CUDA_HOME"), "\n", env_string("CUDA_PATH")}))
          .hex();
  bool loaded = false;
  for (std::size_t i = 0; i < file_count && !loaded; ++i)
    if (LibHandle h = lib_open_loaded(files[i])) {
      loaded = true;
      lib_close_loaded(h);
    }
  std::string payload, note;
  if (!loaded && cache_read(dir, record_key, payload, note)) {
    std::string_view in = payload, id, version;
    if (take_field(in, id) && take_field(in, version) && !id.empty()) {
      const std::string path(id.substr(0, id.find('\n')));
      if (identity(path) == id) return cat({id, "\n", version});
    }
  }
  const LibraryInfo& info = info_of();
  if (!info.found) return std::string();  // the compile that follows reports why
  const std::string id = identity(info.path);
  if (!id.empty() && info.found_by != "already loaded") {
    std::string record;
    put_field(record, id);
    put_field(record, std::to_string(info.version));
    cache_write(dir, record_key, record, note);
  }
  return cat({id.empty() ? info.library : id, "\n", std::to_string(info.version)});
}

// The name of the first file `text` includes with #include "name" that is
// not among `headers` (name, source, ...): a file NVRTC would read from disk,
// whose contents the cache key cannot cover. Empty when there is none.
// (Conservative: an #include inside a comment counts too.)
inline std::string_view disk_include(std::string_view text, const StringList& headers) {
  std::size_t at = 0;
  while ((at = text.find('#', at)) != std::string_view::npos) {
    std::size_t i = at + 1;
    auto blank = [&] {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    };
    blank();
    at = i;
    if (text.substr(i, 7) != "include") continue;
    i += 7;
    blank();
    if (i >= text.size() || text[i] != '"') continue;
    const std::size_t close = text.find('"', i + 1);
    if (close == std::string_view::npos) continue;
    const std::string_view name = text.substr(i + 1, close - i - 1);
    bool given = false;
    std::size_t k = 0;
    for (std::string_view h : headers)
      if (k++ % 2 == 0 && h == name) given = true;
    if (!given) return name;
  }
  return {};
}

// Why the cache cannot serve this compile (the output may depend on files
// on disk), or empty when it can.
inline std::string uncachable(std::string_view source, const SourceOptions& o) {
  if (!o.compile.include_paths.empty()) return "include paths are given";
  for (std::string_view a : o.compile.extra)
    for (std::string_view p : {"-I", "--include-path", "-include", "--pre-include"})
      if (a.substr(0, p.size()) == p) return cat({"the option '", a, "' may read files"});
  if (const std::string_view f = disk_include(source, o.headers); !f.empty())
    return cat({"the source includes \"", f, "\", which is not among the headers given"});
  std::size_t k = 0;
  for (std::string_view h : o.headers)
    if (k++ % 2 == 1)
      if (const std::string_view f = disk_include(h, o.headers); !f.empty())
        return cat({"a header includes \"", f, "\", which is not among the headers given"});
  return {};
}

// The entry's key: everything that makes the compiled image.
inline std::string source_key(std::string_view source, const SourceOptions& o, std::string_view target,
                              const std::string& compilers) {
  KeyHash h;
  h.add("oxicuda-source-2").add(source).add(o.name).add(target).add(compilers);
  h.add(o.headers.joined()).add(o.name_expressions.joined()).add(o.compile.arguments().joined());
  return h.hex();
}

}  // namespace detail

inline Module module_from_source(const Context& ctx, std::string_view source, const SourceOptions& options,
                                 SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::module_from_source", where);
  const ComputeCapability cc = ctx.device(where).compute_capability(where);
  const std::string device_arch = detail::cat({"sm_", std::to_string(cc.major * 10 + cc.minor)});

  std::string notes, dir, key;
  const std::string why_not = options.cache ? detail::uncachable(source, options) : std::string();
  if (!why_not.empty()) notes = detail::cat({"kernel cache: not used, since ", why_not});
  if (options.cache && why_not.empty()) {
    dir = detail::cache_directory(notes);
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
      std::string payload;
      std::string_view in, is_text, names, log, image;
      if (detail::cache_read(dir, key, payload, notes)) {
        // The image is the last field, so a PTX image is followed by the
        // payload string's own NUL, as the driver wants it.
        in = payload;
        if (detail::take_field(in, is_text) && detail::take_field(in, names) && detail::take_field(in, log) &&
            detail::take_field(in, image) && !image.empty())
        {
#if OXICUDA_EXCEPTIONS
          // An entry the driver will not load (made for another driver, say)
          // is discarded and compiled again, not an error on every run.
          try {
            Module m = detail::ModuleAccess::load(ctx, image.data(), image.size(), is_text == "1", options.jit, where,
                                                  std::string(names), log);
            detail::cache_counters().hits.fetch_add(1, std::memory_order_relaxed);
            return m;
          } catch (const Error& e) {
            const std::string path = detail::cache_remove(dir, key);
            notes = detail::cat({notes, notes.empty() ? "" : "\n", "oxicuda cache: discarded ", path,
                                 ": the driver did not load it (", e.what(), ")"});
          }
#else
          detail::cache_counters().hits.fetch_add(1, std::memory_order_relaxed);
          return detail::ModuleAccess::load(ctx, image.data(), image.size(), is_text == "1", options.jit, where,
                                            std::string(names), log);
#endif
        }
      }
    }
  }

  if (!key.empty()) detail::cache_counters().misses.fetch_add(1, std::memory_order_relaxed);
  Program program{std::string(source), options.name};
  program.headers(options.headers);
  for (std::string_view e : options.name_expressions) program.name_expression(e);
  CompileOptions compile = options.compile;
  std::string fallback;
  if (compile.arch.empty()) {
    ArchChoice choice = arch_for(cc, supported_archs(where), where);
    compile.arch = std::move(choice.arch);
    fallback = std::move(choice.note);
    if (compile.lto && !fallback.empty())  // nvJitLink links for a real architecture only
      compile.lto = false;
  }
  Compiled c = program.compile(compile, where);
  std::string image = c.code;
  if (c.kind == CodeKind::ltoir) {
    // For a virtual architecture (compute_90), the link is for the device's
    // own: LTO-IR of compute_90 links for sm_100, as its PTX would JIT.
    LtoLinker linker(std::string_view(compile.arch).starts_with("compute_") ? device_arch : compile.arch, {}, true, where);
    linker.add(c, options.name, where);
    image = linker.complete(where);
  }
  std::string names = c.lowered_names.joined();  // expression, lowered name, ...: as Module keeps them
  // The entry keeps the compile's own log (NVRTC's, the architecture's
  // fallback); this run's notes on the cache go to this module only.
  std::string log = c.log;
  if (!fallback.empty()) log = log.empty() ? fallback : detail::cat({log, "\n", fallback});
  const bool is_text = c.kind == CodeKind::ptx;
  if (!key.empty()) {
    std::string payload;
    detail::put_field(payload, is_text ? "1" : "0");
    detail::put_field(payload, names);
    detail::put_field(payload, log);
    detail::put_field(payload, image);
    std::string write_note;
    if (!detail::cache_write(dir, key, payload, write_note)) notes = detail::cat({notes, notes.empty() ? "" : "\n", write_note});
  }
  if (!notes.empty()) log = log.empty() ? notes : detail::cat({log, "\n", notes});
  return detail::ModuleAccess::load(ctx, image.data(), image.size(), is_text, options.jit,
                                    where, std::move(names), log);
}

OXICUDA_NAMESPACE_END
