// oxicuda/compile/cache_entry.hpp — what a kernel cache entry holds (the payload
// cache.hpp frames with its magic and checksum): encode and decode, and the
// load of a decoded entry. The checksum is a hash anyone can recompute, so
// the decoder treats every payload as hostile: each field's bounds, the
// kernel names as Module reads them, the image as Module::from_image checks
// it, nothing after the image. An entry that fails is no entry.
#pragma once

#include <string>
#include <string_view>

#include "cache.hpp"
#include "../kernel/library.hpp"
#include "../kernel/module.hpp"
#include "program.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// An entry's fields, as views into its payload.
struct CacheEntry {
  bool is_text = false;    // PTX; else a cubin or fatbin
  std::string_view names;  // "expr\0lowered\0expr\0lowered\0...": as Module keeps them
  std::string_view log;    // the compile's log (NVRTC's, an architecture fallback)
  std::string_view image;  // the last field
};

// Why `names` is not a list of (name expression, lowered name) pairs, each
// NUL-terminated, whose expressions are `expected` in order (the key holds
// them, so an entry for this key has these); empty when it is.
inline std::string entry_names_problem(std::string_view names, const StringList* expected) {
  if (!names.empty() && names.back() != '\0') return cat({"its kernel-names field does not end with a NUL"});
  std::size_t count = 0;
  StringList::iterator want = expected ? expected->begin() : StringList::iterator(nullptr);
  for (std::string_view rest = names; !rest.empty(); ++count) {
    const std::string_view expr = rest.substr(0, rest.find('\0'));
    rest.remove_prefix(expr.size() + 1);
    if (rest.empty()) return cat({"its kernel-names field ends with a name expression that has no lowered name"});
    const std::string_view lowered = rest.substr(0, rest.find('\0'));
    rest.remove_prefix(lowered.size() + 1);
    if (expr.empty()) return cat({"its kernel-names field holds an empty name expression"});
    // A lowered name is a symbol of the image: letters, digits, '_', '$', '.'.
    if (lowered.empty()) return cat({"its kernel-names field holds an empty lowered name"});
    for (const char c : lowered)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
            c == '.'))
        return cat({"its kernel-names field holds a lowered name that is no symbol"});
    if (expected) {
      if (want == expected->end() || *want != expr)
        return cat({"its kernel-names field does not hold the name expressions asked for"});
      ++want;
    }
  }
  if (expected && count != expected->size())
    return cat({"its kernel-names field holds ", std::to_string(count), " name expressions, not the ",
                std::to_string(expected->size()), " asked for"});
  return {};
}

// Why `image` may not go to the driver, as Module::from_image and from_ptx
// refuse it; empty when it may.
inline std::string entry_image_problem(std::string_view image, bool is_text) {
  if (image.empty()) return cat({"its image is empty"});
  const auto* p = reinterpret_cast<const unsigned char*>(image.data());
  const ImageKind kind = image_kind(p, image.size());
  if (is_text) {
    if (const std::size_t nul = image.find('\0'); nul != std::string_view::npos)
      return cat({"its PTX has a NUL byte at offset ", std::to_string(nul)});
    if (kind != ImageKind::ptx) return cat({"it says PTX, but its image is a binary one"});
    if (image.find_first_not_of(" \t\r\n") == std::string_view::npos) return cat({"its PTX is blank"});
    return {};
  }
  if (kind == ImageKind::ptx) return cat({"it says cubin or fatbin, but its image is neither"});
  return image_problem(p, image.size(), kind);
}

// The payload of an entry, decode_entry's twin: the kind ("1" for PTX, "0"
// else), the names, the log, the image, each a field (put_field). The image
// is the last field, so that in the std::string that holds the payload a
// PTX image is followed by the string's own NUL, as the driver wants it: a
// hit loads it in place.
inline std::string encode_entry(const CacheEntry& e) {
  std::string payload;
  payload.reserve(4 * 8 + 1 + e.names.size() + e.log.size() + e.image.size());
  put_field(payload, e.is_text ? "1" : "0");
  put_field(payload, e.names);
  put_field(payload, e.log);
  put_field(payload, e.image);
  return payload;
}

// encode_entry's twin: reads `payload` into `entry` (views into it); `expected`, when given, are
// the name expressions the entry must hold. Returns why it is not an entry
// that may be loaded, or empty. Never reads outside `payload`.
inline std::string decode_entry(const std::string& payload, CacheEntry& entry, const StringList* expected = nullptr) {
  std::string_view in = payload, is_text;
  if (!take_field(in, is_text) || !take_field(in, entry.names) || !take_field(in, entry.log) ||
      !take_field(in, entry.image))
    return cat({"a field runs past its end"});
  if (!in.empty()) return cat({std::to_string(in.size()), " bytes follow its image"});
  if (is_text != "0" && is_text != "1") return cat({"its kind field is neither 0 nor 1"});
  entry.is_text = is_text == "1";
  if (std::string problem = entry_names_problem(entry.names, expected); !problem.empty()) return problem;
  return entry_image_problem(entry.image, entry.is_text);
}

// Appends `note` to `notes`, a line each.
inline void add_note(std::string& notes, std::string_view note) {
  if (!note.empty()) notes = notes.empty() ? std::string(note) : cat({notes, "\n", note});
}

// The entry `key` of `dir` read into `payload` and decoded into `e`, which
// must hold the name expressions `expected`: true when it is there and is
// an entry. One that is no entry is discarded, with a note in `notes`;
// `found` names the file read.
inline bool read_entry(const std::string& dir, const std::string& key, const StringList& expected,
                       std::string& payload, CacheEntry& e, CacheFileId& found, std::string& notes) {
  std::string note;
  const bool read = cache_read(dir, key, payload, note, &found);
  add_note(notes, note);
  if (!read) return false;
  if (const std::string why = decode_entry(payload, e, &expected); !why.empty()) {
    add_note(notes, cache_discard(dir, key, found, why));
    return false;
  }
  return true;
}

// Whether a load failure (cuModuleLoadDataEx's result) is the entry's
// fault, so the entry should go: an image this driver or device cannot use.
// Any other (out of memory, a bad JitOptions value, a context gone) is the
// caller's or the moment's, and the entry stays.
inline bool entry_at_fault(ffi::CUresult r) noexcept {
  switch (r) {
    case ffi::CUDA_ERROR_INVALID_IMAGE:
    case ffi::CUDA_ERROR_NO_BINARY_FOR_GPU:
    case ffi::CUDA_ERROR_INVALID_PTX:
    case ffi::CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case ffi::CUDA_ERROR_INVALID_SOURCE:
    case ffi::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
    case ffi::CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
      return true;
    default:
      return false;
  }
}

// Loads a decoded entry (from its payload, no copy) into `out`; the driver's
// result, not raised, and in `jit_error` the JIT's error log. A JitOptions
// value the driver cannot take is raised (JitOptionList), as for any load.
inline Outcome load_entry(const Context& ctx, const CacheEntry& e, const JitOptions& options, SourceLocation where,
                          Module& out, std::string& jit_error) {
  JitOptionList jit(options, "oxicuda::module_from_source", where);
  std::string names(e.names);  // (before the load: nothing that throws comes between it and the handle)
  CUmodule raw = nullptr;
  Outcome r;
  {
    ScopedCurrent current(ctx, where);
    r = OXICUDA_DRIVER(ModuleLoadDataEx, &raw, e.image.data(), jit.count, jit.keys, jit.values);
  }
  if (!r.ok()) {
    jit_error = jit.error_log();
    return r;
  }
  out = ModuleAccess::adopt(ctx, raw, jit.loaded_log(e.log), std::move(names));
  return r;
}

// The same, loaded as a KernelLibrary (of no context: `ctx` only chose the
// architecture the entry was compiled for).
inline Outcome load_entry(const Context&, const CacheEntry& e, const JitOptions& options, SourceLocation where,
                          KernelLibrary& out, std::string& jit_error) {
  return LibraryAccess::try_load(e.image.data(), options, where, std::string(e.names), e.log, out, jit_error);
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
