// oxicuda/compile/lto.hpp — LtoLinker: link-time optimization with nvJitLink (loaded
// at first use, toolkit.hpp). It links LTO-IR (NVRTC's output with
// CompileOptions::lto), PTX and cubins into one cubin for a real architecture.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "../kernel/image.hpp"
#include "arch.hpp"
#include "device_runtime.hpp"
#include "program.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// One nvJitLink link. Move-only; the nvJitLink handle is destroyed with it.
// A failed add or complete is an Error whose detail holds nvJitLink's error log.
class LtoLinker {
 public:
  // `arch` is a real architecture ("sm_90", "sm_90a", "sm_100f"; or
  // "compute_90" with the -ptx option); `options` more nvJitLink options
  // ("-O3", "-lineinfo"). -lto is passed unless lto is false. The
  // architecture (here and in an -arch= option) is checked before nvJitLink
  // sees it: nvJitLink ends the whole process (exit(1)) on some malformed
  // ones, such as "sm_1". A NUL byte in it or in an option is an Error.
  explicit LtoLinker(std::string_view arch, const StringList& options = {}, bool lto = true,
                     SourceLocation where = SourceLocation::current());
  LtoLinker(std::string_view arch, std::initializer_list<std::string_view> options, bool lto = true,
            SourceLocation where = SourceLocation::current())
      : LtoLinker(arch, option_list(options, where), lto, where) {}
  LtoLinker(LtoLinker&& o) noexcept : raw_(o.raw_) { o.raw_ = nullptr; }
  LtoLinker& operator=(LtoLinker&& o) noexcept {
    if (this != &o) {
      destroy();
      raw_ = o.raw_;
      o.raw_ = nullptr;
    }
    return *this;
  }
  ~LtoLinker() { destroy(); }

  // Adds an input from memory; `name` appears in nvJitLink's messages.
  // PTX is read as `size` bytes of text (a terminating NUL is optional): it
  // is copied and NUL-terminated, since nvJitLink reads PTX up to a NUL, not
  // `size` bytes; PTX with a NUL inside is an Error.
  LtoLinker& add(ffi::nvJitLinkInputType kind, const void* data, std::size_t size, std::string_view name = "input",
                 SourceLocation where = SourceLocation::current());
  // Adds what NVRTC compiled (LTO-IR, PTX or a cubin).
  LtoLinker& add(const Compiled& compiled, std::string_view name = "program",
                 SourceLocation where = SourceLocation::current());
  // Adds the CUDA device runtime (libcudadevrt.a, found as
  // device_runtime.hpp says; not found, an Error naming each place looked),
  // for relocatable code that launches kernels or calls
  // cudaGraphSetConditional.
  LtoLinker& add_device_runtime(SourceLocation where = SourceLocation::current());
  // Links: the cubin.
  [[nodiscard]] std::string complete(SourceLocation where = SourceLocation::current());
  // nvJitLink's info log so far.
  [[nodiscard]] std::string info_log(SourceLocation where = SourceLocation::current()) const;
  // nvJitLink's error log so far: after a successful complete(), the
  // warnings nvJitLink wrote there (a failed call's Error already holds it).
  [[nodiscard]] std::string error_log(SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] nvJitLinkHandle raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }

 private:
  void destroy() noexcept {
    if (raw_) detail::check_nothrow(OXICUDA_NVJITLINK(Destroy, &raw_), "destroying an oxicuda::LtoLinker");
    raw_ = nullptr;
  }
  nvJitLinkHandle checked(const char* operation, SourceLocation where) const {
    if (!raw_) detail::empty_handle("oxicuda::LtoLinker", operation, where);
    return raw_;
  }
  // The error log, as far as nvJitLink gives it (the failed call is the error).
  std::string error_detail() const {
    std::string log = error_text(raw_, nullptr);
    return log.empty() ? log : detail::cat({"; nvJitLink error log:\n", log});
  }

  // nvJitLink's error or info log of `h`, its trailing newlines dropped; a
  // failure to give it is an Error at `where`, or with no `where` an empty log.
  static std::string error_text(nvJitLinkHandle h, const SourceLocation* where);
  static std::string info_text(nvJitLinkHandle h, const SourceLocation& where);

  static StringList option_list(std::initializer_list<std::string_view> options, SourceLocation where);

  nvJitLinkHandle raw_ = nullptr;
};

// nvJitLink's version (13000 for 13.0; nvJitLinkVersion, CUDA 12.3+); loads
// nvJitLink. An Error when there is none, or when it is older than 12.3.
[[nodiscard]] int nvjitlink_version(SourceLocation where = SourceLocation::current());

namespace detail {

[[noreturn]] OXICUDA_DETAIL_COLD inline void nul_in_option(std::string_view what, std::string_view s, SourceLocation where) {
  raise(Error(ffi::NVJITLINK_ERROR_UNRECOGNIZED_OPTION, "oxicuda::LtoLinker::LtoLinker",
              cat({what, " holds a NUL byte at offset ", std::to_string(s.find('\0')), " (of ",
                   std::to_string(s.size()), "); nvJitLink's options are C strings"}),
              where));
}

inline void check_lto_arch(std::string_view arch, std::string_view given_as, SourceLocation where) {
  if (arch.find('\0') != std::string_view::npos) nul_in_option("the architecture", arch, where);
  if (!plausible_arch(arch))
    raise(Error(ffi::NVJITLINK_ERROR_UNRECOGNIZED_ARCH, "oxicuda::LtoLinker::LtoLinker",
                cat({"the architecture '", arch, "'", given_as,
                     " is not sm_NN, sm_NNa, sm_NNf or compute_NN, with NN the compute capability's two or three "
                     "digits (\"sm_90\" for 9.0); it is checked before nvJitLink sees it, because nvJitLink ends "
                     "the process on some malformed architectures"}),
                where));
}

}  // namespace detail

inline StringList LtoLinker::option_list(std::initializer_list<std::string_view> options, SourceLocation where) {
  StringList list;
  for (std::string_view o : options) {
    if (o.find('\0') != std::string_view::npos) detail::nul_in_option(detail::cat({"the option '", o.substr(0, o.find('\0')), "...'"}), o, where);
    list.add(o, where);
  }
  return list;
}

inline LtoLinker::LtoLinker(std::string_view arch, const StringList& options, bool lto, SourceLocation where) {
  detail::check_lto_arch(arch, "", where);
  for (std::string_view o : options)
    if (o.starts_with("-arch=")) detail::check_lto_arch(o.substr(6), detail::cat({" (in the option '", o, "')"}), where);
  StringList all;
  all.add(detail::cat({"-arch=", arch}), where);
  if (lto) all.add("-lto");
  all.add(options);
  const detail::CStrings argv(all);
  const auto r = OXICUDA_NVJITLINK(Create, &raw_, static_cast<std::uint32_t>(all.size()), argv.get());
  if (OXICUDA_DETAIL_LIKELY(r.ok())) return;
  // A refused create still hands back a handle holding the reason (nvJitLink
  // 13: "unrecognized option"): read it, then destroy the handle, which the
  // destructor of a throwing constructor would not.
  std::string log = raw_ ? error_detail() : std::string();
  destroy();
  detail::fail(r, where, detail::cat({"creating a link (options: ", all.spaced(), ")", log}));
}

inline LtoLinker& LtoLinker::add(ffi::nvJitLinkInputType kind, const void* data, std::size_t size,
                                 std::string_view name, SourceLocation where) {
  nvJitLinkHandle h = checked("oxicuda::LtoLinker::add", where);
  const std::string n(name);
  std::string text;
  if (kind == ffi::NVJITLINK_INPUT_PTX) {
    text = detail::ptx_text(static_cast<const char*>(data), data ? size : 0, ffi::NVJITLINK_ERROR_INVALID_INPUT,
                            "oxicuda::LtoLinker::add", detail::cat({"the PTX input '", n, "'"}), "nvJitLink", where);
    data = text.c_str();
    size = text.size() + 1;
  }
  const detail::NvJitLinkOutcome r = OXICUDA_NVJITLINK(AddData, h, kind, data, size, n.c_str());
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
    detail::fail(r, where, detail::cat({"adding '", n, "' (", std::to_string(size), " bytes)", error_detail()}));
  return *this;
}

inline LtoLinker& LtoLinker::add(const Compiled& compiled, std::string_view name, SourceLocation where) {
  const ffi::nvJitLinkInputType kind = compiled.kind == CodeKind::ltoir   ? ffi::NVJITLINK_INPUT_LTOIR
                                       : compiled.kind == CodeKind::cubin ? ffi::NVJITLINK_INPUT_CUBIN
                                                                          : ffi::NVJITLINK_INPUT_PTX;
  return add(kind, compiled.code.data(), compiled.code.size(), name, where);
}

inline LtoLinker& LtoLinker::add_device_runtime(SourceLocation where) {
  constexpr const char* call = "oxicuda::LtoLinker::add_device_runtime";
  (void)checked(call, where);
  const detail::DeviceRuntimeLibrary lib = detail::find_device_runtime(where, call);
  std::string changed;
  const std::string bytes = detail::read_device_runtime(lib, changed, where, call);
  return add(ffi::NVJITLINK_INPUT_LIBRARY, bytes.data(), bytes.size(), lib.path, where);
}

inline std::string LtoLinker::complete(SourceLocation where) {
  nvJitLinkHandle h = checked("oxicuda::LtoLinker::complete", where);
  const detail::NvJitLinkOutcome r = OXICUDA_NVJITLINK(Complete, h);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::fail(r, where, detail::cat({"linking", error_detail()}));
  std::string cubin;
  detail::check(
      detail::size_then_fill([&](std::size_t* n) { return OXICUDA_NVJITLINK(GetLinkedCubinSize, h, n); },
                             [&](char* out) { return OXICUDA_NVJITLINK(GetLinkedCubin, h, out); }, cubin, false),
      where);
  return cubin;
}

inline std::string LtoLinker::error_text(nvJitLinkHandle h, const SourceLocation* where) {
  std::string log;
  const detail::NvJitLinkOutcome r =
      detail::size_then_fill([&](std::size_t* n) { return OXICUDA_NVJITLINK(GetErrorLogSize, h, n); },
                             [&](char* out) { return OXICUDA_NVJITLINK(GetErrorLog, h, out); }, log, true);
  if (where) detail::check(r, *where);
  while (!log.empty() && log.back() == '\n') log.pop_back();
  return log;
}

inline std::string LtoLinker::info_text(nvJitLinkHandle h, const SourceLocation& where) {
  std::string log;
  detail::check(detail::size_then_fill([&](std::size_t* n) { return OXICUDA_NVJITLINK(GetInfoLogSize, h, n); },
                                       [&](char* out) { return OXICUDA_NVJITLINK(GetInfoLog, h, out); }, log, true),
                where);
  while (!log.empty() && log.back() == '\n') log.pop_back();
  return log;
}

inline std::string LtoLinker::info_log(SourceLocation where) const {
  return info_text(checked("oxicuda::LtoLinker::info_log", where), where);
}

inline std::string LtoLinker::error_log(SourceLocation where) const {
  return error_text(checked("oxicuda::LtoLinker::error_log", where), &where);
}

inline int nvjitlink_version(SourceLocation where) {
  unsigned major = 0, minor = 0;
  detail::check(OXICUDA_NVJITLINK(Version, &major, &minor), where);
  return static_cast<int>(major * 1000 + minor * 10);
}

OXICUDA_DETAIL_NAMESPACE_END
