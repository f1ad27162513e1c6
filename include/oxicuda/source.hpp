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

// What NVRTC's version is, without loading it where possible: NVRTC's own
// answer when it is loaded; else the version recorded in the cache directory
// when the library it was read from (found by the same search, with the
// same environment) is unchanged (same path, size and time); else NVRTC is
// loaded, asked, and the record rewritten.
inline int nvrtc_version_for_cache(const std::string& dir) {
  const std::string search = cat({env_string("OXICUDA_LIBNVRTC_PATH"), "\n", env_string("CONDA_PREFIX"), "\n",
                                  env_string("LD_LIBRARY_PATH"), "\n", env_string("CUDA_HOME"), "\n",
                                  env_string("CUDA_PATH")});
  const std::string record_key = KeyHash().add("nvrtc").add(search).hex();
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
  std::string payload, note;
  if (cache_read(dir, record_key, payload, note)) {
    std::string_view in = payload, id, version;
    if (take_field(in, id) && take_field(in, version) && !id.empty()) {
      const std::string path(id.substr(0, id.find('\n')));
      if (identity(path) == id) return std::atoi(std::string(version).c_str());
    }
  }
  const LibraryInfo& info = nvrtc_info();
  if (!info.found) return 0;  // the compile that follows reports why
  std::string record;
  put_field(record, identity(info.path));
  put_field(record, std::to_string(info.version));
  cache_write(dir, record_key, record, note);
  return info.version;
}

// The entry's key: everything that makes the compiled image.
inline std::string source_key(std::string_view source, const SourceOptions& o, std::string_view target,
                              int nvrtc_version) {
  KeyHash h;
  h.add("oxicuda-source-1").add(source).add(o.name).add(target).add(std::to_string(nvrtc_version));
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
  if (options.cache) {
    dir = detail::cache_directory(notes);
    if (!dir.empty()) {
      const int version = detail::nvrtc_version_for_cache(dir);
      key = detail::source_key(source, options, options.compile.arch.empty() ? device_arch : options.compile.arch,
                               version);
      std::string payload;
      std::string_view in, is_text, names, log, image;
      if (detail::cache_read(dir, key, payload, notes)) {
        // The image is the last field, so a PTX image is followed by the
        // payload string's own NUL, as the driver wants it.
        in = payload;
        if (detail::take_field(in, is_text) && detail::take_field(in, names) && detail::take_field(in, log) &&
            detail::take_field(in, image) && !image.empty())
        {
          detail::cache_counters().hits.fetch_add(1, std::memory_order_relaxed);
          return detail::ModuleAccess::load(ctx, image.data(), image.size(), is_text == "1", options.jit, where,
                                            std::string(names), log);
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
    LtoLinker linker(compile.arch.rfind("compute_", 0) == 0 ? detail::cat({"sm_", compile.arch.substr(8)})
                                                            : compile.arch,
                     {}, true, where);
    linker.add(c, options.name, where);
    image = linker.complete(where);
  }
  std::string names = c.lowered_names.joined();  // expression, lowered name, ...: as Module keeps them
  std::string log = c.log;
  for (const std::string* n : {&fallback, &notes})
    if (!n->empty()) log = log.empty() ? *n : detail::cat({log, "\n", *n});
  const bool is_text = c.kind == CodeKind::ptx;
  if (!key.empty()) {
    std::string payload;
    detail::put_field(payload, is_text ? "1" : "0");
    detail::put_field(payload, names);
    detail::put_field(payload, log);
    detail::put_field(payload, image);
    std::string write_note;
    if (!detail::cache_write(dir, key, payload, write_note)) log = detail::cat({log, log.empty() ? "" : "\n", write_note});
  }
  return detail::ModuleAccess::load(ctx, image.data(), image.size(), is_text, options.jit,
                                    where, std::move(names), log);
}

OXICUDA_NAMESPACE_END
