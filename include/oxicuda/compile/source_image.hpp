// oxicuda/compile/source_image.hpp — the kernel cache without a Context:
// compile_image compiles CUDA C++ source (or finds it in the cache) into an
// image to load later, on a machine that may have no GPU and no driver (a
// build step, a tool that fills the cache for others). There is no device
// to pick an architecture for, so the target is given. The entry is the one
// module_from_source uses for the same source, options and target: a
// module_from_source on the GPU machine, with the same NVRTC, hits it.
// module_from_image loads the image with its name expressions;
// library_from_source and library_from_image are the same as a KernelLibrary.
#pragma once

#include <string>
#include <string_view>

#include "source.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// What compile_image made or found: the image, its kind, its name
// expressions (for module_from_image) and the log.
struct SourceImage {
  std::string image;         // a cubin (an sm_XX target, or linked by nvJitLink), or PTX text (compute_XX)
  bool is_text = false;      // PTX
  std::string arch;          // the target, as given
  std::string names;         // each name expression and its lowered name, each followed by a NUL
  std::string log;           // NVRTC's log and oxicuda's notes on the cache
  bool from_cache = false;   // a hit: nothing was compiled

  // The lowered name of `expression`, or empty.
  [[nodiscard]] std::string_view lowered_name(std::string_view expression) const noexcept {
    for (std::string_view rest = names; !rest.empty();) {
      const std::string_view e = rest.substr(0, rest.find('\0'));
      rest.remove_prefix(e.size() + 1);
      const std::string_view lowered = rest.substr(0, rest.find('\0'));
      rest.remove_prefix(lowered.size() + (lowered.size() < rest.size()));
      if (e == expression) return lowered;
    }
    return {};
  }
};

// Compiles `source` for `options.compile.arch` (which must be given:
// "sm_90" for a cubin, "compute_90" for PTX; with lto or device_runtime a
// real one, since nvJitLink links for it), through the kernel cache as
// module_from_source does, without a Context and without the driver. An
// Error when the target is missing, and as module_from_source for the rest.
[[nodiscard]] SourceImage compile_image(std::string_view source, const SourceOptions& options,
                                        SourceLocation where = SourceLocation::current());

// Loads what compile_image made into `ctx`; its name expressions are kernel
// names of the module, as for module_from_source.
[[nodiscard]] Module module_from_image(const Context& ctx, const SourceImage& image, const JitOptions& jit = {},
                                       SourceLocation where = SourceLocation::current());

// module_from_source's compile, through the same cache entry (a Module and
// a KernelLibrary of the same source, options and device share it), loaded
// as a KernelLibrary: of no context, its kernels launch in any (`ctx` only
// chooses the architecture, as for module_from_source).
[[nodiscard]] KernelLibrary library_from_source(const Context& ctx, std::string_view source,
                                                const SourceOptions& options = {},
                                                SourceLocation where = SourceLocation::current());

// Loads what compile_image made as a KernelLibrary, with its name expressions.
[[nodiscard]] KernelLibrary library_from_image(const SourceImage& image, const JitOptions& jit = {},
                                               SourceLocation where = SourceLocation::current());

inline SourceImage compile_image(std::string_view source, const SourceOptions& options, SourceLocation where) {
  constexpr const char* call = "oxicuda::compile_image";
  const std::string& arch = options.compile.arch;
  if (arch.empty())
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_OPTION, call,
                        "SourceOptions::compile.arch is empty: without a Context there is no device to compile for; "
                        "give the target (\"sm_90\" for a cubin, \"compute_90\" for PTX)",
                        where));
  if ((options.compile.lto || options.device_runtime) && !std::string_view(arch).starts_with("sm_"))
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_OPTION, call,
                        detail::cat({"the target '", arch, "' is not a real architecture: with lto or device_runtime, "
                                     "nvJitLink links for one (\"sm_90\"), which compile_image cannot ask a device for"}),
                        where));
  detail::check_include_paths(options.compile, call, where);
  const detail::DeviceRuntimeLibrary devrt =
      options.device_runtime ? detail::find_device_runtime(where, call) : detail::DeviceRuntimeLibrary{};
  SourceImage out;
  out.arch = arch;
  std::string notes;
  detail::CacheSlot slot;
  if (options.cache) slot = detail::cache_slot(source, options, arch, devrt, notes, where);
  if (!slot.key.empty()) {
    std::string payload;
    detail::CacheFileId found;
    detail::CacheEntry e;
    if (detail::read_entry(slot.dir, slot.key, options.name_expressions, payload, e, found, notes)) {
      detail::cache_counters().hits.fetch_add(1, std::memory_order_relaxed);
      out.image = e.image;
      out.is_text = e.is_text;
      out.names = e.names;
      out.log = e.log;
      out.from_cache = true;
      detail::add_note(out.log, notes);
      return out;
    }
  }
  if (const std::string why_not = options.cache ? detail::uncachable(source, options) : std::string();
      !why_not.empty()) {
    slot.key.clear();
    detail::add_note(notes, detail::cat({"kernel cache: not used, since ", why_not}));
  }
  if (!slot.key.empty()) detail::cache_counters().misses.fetch_add(1, std::memory_order_relaxed);
  detail::SourceBuild b =
      detail::compile_source(source, options, ComputeCapability{}, arch, slot.key.empty() ? std::string() : slot.dir,
                             slot.key, options.device_runtime ? &devrt : nullptr, where);
  if (!slot.key.empty()) detail::store_in_cache(slot.dir, slot.key, b, options, notes);
  out.image = std::move(b.image);
  out.is_text = b.is_text;
  out.names = std::move(b.names);
  out.log = std::move(b.log);
  detail::add_note(out.log, notes);
  return out;
}

namespace detail {
// A SourceImage fit to load (`op`: module_from_image, library_from_image).
inline void check_source_image(const SourceImage& image, const char* op, SourceLocation where) {
  std::string why = entry_names_problem(image.names, nullptr);
  if (why.empty()) why = entry_image_problem(image.image, image.is_text);
  if (!why.empty()) raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, op, cat({"the SourceImage cannot be loaded: ", why}), where));
}
}  // namespace detail

inline Module module_from_image(const Context& ctx, const SourceImage& image, const JitOptions& jit,
                                SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::module_from_image", where);
  detail::check_source_image(image, "oxicuda::module_from_image", where);
  return detail::ModuleAccess::load(ctx, image.image.data(), image.image.size(), image.is_text, jit, where,
                                    image.names, image.log);
}

inline KernelLibrary library_from_source(const Context& ctx, std::string_view source, const SourceOptions& options,
                                         SourceLocation where) {
  return detail::from_source<KernelLibrary>(ctx, source, options, "oxicuda::library_from_source", where);
}

inline KernelLibrary library_from_image(const SourceImage& image, const JitOptions& jit, SourceLocation where) {
  detail::check_source_image(image, "oxicuda::library_from_image", where);
  return detail::LibraryAccess::load(image.image.data(), image.image.size(), image.is_text, jit, where, image.names,
                                     image.log);
}

OXICUDA_DETAIL_NAMESPACE_END
