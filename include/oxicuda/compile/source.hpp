// oxicuda/compile/source.hpp — module_from_source: CUDA C++ source to a loaded
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
//
// Below it: SourceOptions and the rules on what NVRTC may read
// (source_rules.hpp), the compiler's identity for the key
// (compiler_identity.hpp), the entry's codec (cache_entry.hpp).
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "arch.hpp"
#include "cache.hpp"
#include "cache_entry.hpp"
#include "compiler_identity.hpp"
#include "device_runtime.hpp"
#include "../kernel/kernel.hpp"
#include "lto.hpp"
#include "source_rules.hpp"

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

// Compiles `source` (or finds it in the cache) and loads it into `ctx`. The
// module's info_log() holds NVRTC's log, oxicuda's notes (an architecture
// fallback, where the cache was refused or an entry discarded) and the
// JIT's log. A failed compile is an Error whose detail holds NVRTC's log.
[[nodiscard]] Module module_from_source(const Context& ctx, std::string_view source, const SourceOptions& options = {},
                                        SourceLocation where = SourceLocation::current());

namespace detail {

// The entry's key: everything that makes the compiled image.
inline std::string source_key(std::string_view source, const SourceOptions& o, std::string_view target,
                              const std::string& compilers, SourceLocation where = SourceLocation::current()) {
  KeyHash h;
  h.add("oxicuda-source-4").add(source).add(o.name).add(target).add(compilers);
  h.add(o.headers.joined()).add(o.name_expressions.joined()).add(o.compile.arguments(where).joined());
  h.add(o.device_runtime ? "device_runtime" : "");
  return h.hex();
}

// ---------------------------------------------------------------------------
// module_from_source's steps: the cache slot, find in the cache, compile,
// store.

// Where this compile's entry would be: the cache directory and the key.
struct CacheSlot {
  std::string dir, key;  // both empty when the cache is off or refused
};

// Step 0: the slot; why there is none goes to `notes`. The key holds the
// identity of each library that makes the image: NVRTC's; with lto or the
// device runtime, nvJitLink's and the device's architecture (nvJitLink
// links for it); with the device runtime, libcudadevrt.a's (`devrt`).
inline CacheSlot cache_slot(std::string_view source, const SourceOptions& o, const std::string& device_arch,
                            const DeviceRuntimeLibrary& devrt, std::string& notes,
                            SourceLocation where = SourceLocation::current()) {
  CacheSlot slot;
  std::string dir_note;
  slot.dir = cache_directory(dir_note);
  add_note(notes, dir_note);
  if (slot.dir.empty()) return slot;
  std::string compilers = library_identity_for_cache(slot.dir, "nvrtc", "OXICUDA_LIBNVRTC_PATH", nvrtc_files,
                                                     sizeof nvrtc_files / sizeof nvrtc_files[0], &nvrtc_info);
  if (o.compile.lto || o.device_runtime)
    compilers = cat({compilers, "\n", device_arch, "\n",
                     library_identity_for_cache(slot.dir, "nvjitlink", "OXICUDA_LIBNVJITLINK_PATH", nvjitlink_files,
                                                sizeof nvjitlink_files / sizeof nvjitlink_files[0], &nvjitlink_info)});
  if (o.device_runtime) compilers = cat({compilers, "\n", devrt.identity});
  slot.key = source_key(source, o, o.compile.arch.empty() ? device_arch : o.compile.arch, compilers, where);
  return slot;
}

// Step 1: the entry `key`, loaded into `ctx`, in `out`: true for a hit. An
// entry that is no entry (cache_entry.hpp) or that the driver refuses as an
// image is discarded, with a note, and the caller compiles. Any other load
// failure (out of memory, a bad JitOptions value) is raised, and the entry
// kept. Nothing is thrown for the entry itself, so this holds without
// exceptions too.
// (`Out`: a Module, or a KernelLibrary for library_from_source.)
template <class Out>
bool find_in_cache(const Context& ctx, const std::string& dir, const std::string& key, const SourceOptions& o,
                   SourceLocation where, Out& out, std::string& notes) {
  std::string payload;
  CacheFileId found;
  CacheEntry e;
  if (!read_entry(dir, key, o.name_expressions, payload, e, found, notes)) return false;
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
  add_note(notes, cache_discard(dir, key, found,
                                cat({"the driver did not load it (", describe_result(r.result), jit_error, ")"})));
  return false;
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

// Step 2: compiles (and, with lto or the device runtime `devrt`, links
// with nvJitLink). With `trace_dir` (a cacheable
// compile), NVRTC writes its trace there and `not_cached` says whether it
// read a file from disk.
inline SourceBuild compile_source(std::string_view source, const SourceOptions& options, ComputeCapability cc,
                                  const std::string& device_arch, const std::string& trace_dir,
                                  const std::string& key, const DeviceRuntimeLibrary* devrt, SourceLocation where) {
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
  if (options.device_runtime) compile.relocatable = true;  // -rdc=true, for the link below
  const StringList args = compile.arguments(where);
  NvrtcProgramGuard program;
  NvrtcOutcome r{ffi::NVRTC_SUCCESS, ffi::nvrtc::Entry::CompileProgram};
  bool compiled = false;
#if !OXICUDA_DETAIL_WINDOWS
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
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
    const std::string log = nvrtc_log(program.raw, where, false);  // the compile's failure is the error
    fail(r, where,
         cat({"compiling '", options.name, "' (", std::to_string(source.size()), " bytes of source",
              args.size() == 0 ? "" : "; options: ", args.spaced(), ")", log.empty() ? "" : "; NVRTC log:\n", log}));
  }
  b.log = nvrtc_log(program.raw, where);
  StringList lowered_names;
  for (std::string_view e : options.name_expressions) {
    const char* lowered = nullptr;
    check(OXICUDA_NVRTC(GetLoweredName, program.raw, e.data(), &lowered), where);
    lowered_names.add(e).add(lowered ? lowered : "");
  }
  b.names = lowered_names.joined();
  const CodeKind kind = compile.lto ? CodeKind::ltoir
                       : std::string_view(compile.arch).starts_with("sm_") ? CodeKind::cubin
                                                                           : CodeKind::ptx;
  nvrtcProgram p = program.raw;
  if (kind == CodeKind::ltoir)
    check(size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetLTOIRSize, p, n); },
                         [&](char* out) { return OXICUDA_NVRTC(GetLTOIR, p, out); }, b.image, false),
          where);
  else if (kind == CodeKind::cubin)
    check(size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetCUBINSize, p, n); },
                         [&](char* out) { return OXICUDA_NVRTC(GetCUBIN, p, out); }, b.image, false),
          where);
  else
    check(size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetPTXSize, p, n); },
                         [&](char* out) { return OXICUDA_NVRTC(GetPTX, p, out); }, b.image, true),
          where);
  if (kind == CodeKind::ltoir || devrt) {
    // For a virtual architecture (compute_90), the link is for the device's
    // own: LTO-IR of compute_90 links for sm_100, as its PTX would JIT.
    // With the device runtime, the relocatable code and libcudadevrt.a are
    // linked into one cubin (an LTO link when the code is LTO-IR).
    Compiled c;
    c.kind = kind;
    c.code = std::move(b.image);
    c.arch = compile.arch;
    LtoLinker linker(std::string_view(compile.arch).starts_with("compute_") ? device_arch : compile.arch, {},
                     kind == CodeKind::ltoir, where);
    linker.add(c, options.name, where);
    if (devrt) {
      std::string changed;
      const std::string library = read_device_runtime(*devrt, changed, where);
      linker.add(ffi::NVJITLINK_INPUT_LIBRARY, library.data(), library.size(), devrt->path, where);
      if (b.not_cached.empty()) b.not_cached = changed;
    }
    b.image = linker.complete(where);
  }
  b.is_text = kind == CodeKind::ptx && !devrt;
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
  const std::string payload = encode_entry({b.is_text, b.names, b.log, b.image});
  CacheEntry e;
  if (const std::string why = decode_entry(payload, e, &o.name_expressions); !why.empty()) {
    add_note(notes, cat({"kernel cache: not stored, since the entry would be refused when read: ", why}));
    return;
  }
  // A hit reads through the directory verified once and held open; a store
  // walks the path and checks it again, as the first use did.
  std::string note;
  if (cache_directory(note, true, true) != dir) return add_note(notes, note);
  if (!cache_write(dir, key, payload, note)) add_note(notes, note);
}

}  // namespace detail

namespace detail {

// module_from_source's steps, to a Module or (library_from_source) a
// KernelLibrary: the same entry in the cache either way; only the load differs.
template <class Out>
Out from_source(const Context& ctx, std::string_view source, const SourceOptions& options, const char* op,
                SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", op, where);
  const ComputeCapability cc = ctx.device(where).compute_capability(where);
  const std::string device_arch = detail::cat({"sm_", std::to_string(cc.major * 10 + cc.minor)});

  detail::check_include_paths(options.compile, "oxicuda::module_from_source", where);
  const detail::DeviceRuntimeLibrary devrt =
      options.device_runtime ? detail::find_device_runtime(where) : detail::DeviceRuntimeLibrary{};
  std::string notes;
  detail::CacheSlot slot;
  if (options.cache) slot = detail::cache_slot(source, options, device_arch, devrt, notes, where);
  std::string &dir = slot.dir, &key = slot.key;
  if (!key.empty()) {
    Out hit;
    if (detail::find_in_cache(ctx, dir, key, options, where, hit, notes)) return hit;
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
                                                 key, options.device_runtime ? &devrt : nullptr, where);
  // The entry keeps the compile's own log; this run's notes on the cache go
  // to this module only.
  if (!key.empty()) detail::store_in_cache(dir, key, b, options, notes);
  std::string log = b.log;
  if (!notes.empty()) log = log.empty() ? notes : detail::cat({log, "\n", notes});
  if constexpr (std::is_same_v<Out, KernelLibrary>)
    return detail::LibraryAccess::load(b.image.data(), b.image.size(), b.is_text, options.jit, where,
                                       std::move(b.names), log);
  else
    return detail::ModuleAccess::load(ctx, b.image.data(), b.image.size(), b.is_text, options.jit, where,
                                      std::move(b.names), log);
}

}  // namespace detail

inline Module module_from_source(const Context& ctx, std::string_view source, const SourceOptions& options,
                                 SourceLocation where) {
  return detail::from_source<Module>(ctx, source, options, "oxicuda::module_from_source", where);
}

OXICUDA_DETAIL_NAMESPACE_END
