// oxicuda/lto.hpp — LtoLinker: link-time optimization with nvJitLink (loaded
// at first use, toolkit.hpp). It links LTO-IR (NVRTC's output with
// CompileOptions::lto), PTX and cubins into one cubin for a real architecture.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "program.hpp"

OXICUDA_NAMESPACE_BEGIN

// One nvJitLink link. Move-only; the nvJitLink handle is destroyed with it.
// A failed add or complete is an Error whose detail holds nvJitLink's error log.
class LtoLinker {
 public:
  // `arch` is a real architecture ("sm_90"); `options` more nvJitLink options
  // ("-O3", "-lineinfo"). -lto is passed unless lto is false.
  explicit LtoLinker(std::string_view arch, const StringList& options = {}, bool lto = true,
                     SourceLocation where = SourceLocation::current());
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
  LtoLinker& add(ffi::nvJitLinkInputType kind, const void* data, std::size_t size, std::string_view name = "input",
                 SourceLocation where = SourceLocation::current());
  // Adds what NVRTC compiled (LTO-IR, PTX or a cubin).
  LtoLinker& add(const Compiled& compiled, std::string_view name = "program",
                 SourceLocation where = SourceLocation::current());
  // Links: the cubin.
  [[nodiscard]] std::string complete(SourceLocation where = SourceLocation::current());
  // nvJitLink's info log so far.
  [[nodiscard]] std::string info_log(SourceLocation where = SourceLocation::current()) const;

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
  std::string error_log() const {
    std::size_t size = 0;
    std::string log;
    if (OXICUDA_NVJITLINK(GetErrorLogSize, raw_, &size).ok() && size > 1) {
      log.assign(size, '\0');
      if (!OXICUDA_NVJITLINK(GetErrorLog, raw_, log.data()).ok()) log.clear();
    }
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log.empty() ? log : detail::cat({"; nvJitLink error log:\n", log});
  }

  nvJitLinkHandle raw_ = nullptr;
};

inline LtoLinker::LtoLinker(std::string_view arch, const StringList& options, bool lto, SourceLocation where) {
  StringList all{detail::cat({"-arch=", arch})};
  if (lto) all.add("-lto");
  all.add(options);
  const detail::CStrings argv(all);
  const auto r = OXICUDA_NVJITLINK(Create, &raw_, static_cast<std::uint32_t>(all.size()), argv.get());
  if (OXICUDA_LIKELY(r.ok())) return;
  // A refused create still hands back a handle holding the reason (nvJitLink
  // 13: "unrecognized option"): read it, then destroy the handle, which the
  // destructor of a throwing constructor would not.
  std::string log = raw_ ? error_log() : std::string();
  destroy();
  detail::fail(r, where, detail::cat({"creating a link (options: ", all.spaced(), ")", log}));
}

inline LtoLinker& LtoLinker::add(ffi::nvJitLinkInputType kind, const void* data, std::size_t size,
                                 std::string_view name, SourceLocation where) {
  nvJitLinkHandle h = checked("oxicuda::LtoLinker::add", where);
  const std::string n(name);
  const detail::NvJitLinkOutcome r = OXICUDA_NVJITLINK(AddData, h, kind, data, size, n.c_str());
  if (OXICUDA_UNLIKELY(!r.ok()))
    detail::fail(r, where, detail::cat({"adding '", n, "' (", std::to_string(size), " bytes)", error_log()}));
  return *this;
}

inline LtoLinker& LtoLinker::add(const Compiled& compiled, std::string_view name, SourceLocation where) {
  const ffi::nvJitLinkInputType kind = compiled.kind == CodeKind::ltoir   ? ffi::NVJITLINK_INPUT_LTOIR
                                       : compiled.kind == CodeKind::cubin ? ffi::NVJITLINK_INPUT_CUBIN
                                                                          : ffi::NVJITLINK_INPUT_PTX;
  if (kind == ffi::NVJITLINK_INPUT_PTX) {
    const std::string text = compiled.code;  // with its terminating NUL
    return add(kind, text.c_str(), text.size() + 1, name, where);
  }
  return add(kind, compiled.code.data(), compiled.code.size(), name, where);
}

inline std::string LtoLinker::complete(SourceLocation where) {
  nvJitLinkHandle h = checked("oxicuda::LtoLinker::complete", where);
  const detail::NvJitLinkOutcome r = OXICUDA_NVJITLINK(Complete, h);
  if (OXICUDA_UNLIKELY(!r.ok())) detail::fail(r, where, detail::cat({"linking", error_log()}));
  std::size_t size = 0;
  detail::check(OXICUDA_NVJITLINK(GetLinkedCubinSize, h, &size), where);
  std::string cubin(size, '\0');
  detail::check(OXICUDA_NVJITLINK(GetLinkedCubin, h, cubin.data()), where);
  return cubin;
}

inline std::string LtoLinker::info_log(SourceLocation where) const {
  nvJitLinkHandle h = checked("oxicuda::LtoLinker::info_log", where);
  std::size_t size = 0;
  detail::check(OXICUDA_NVJITLINK(GetInfoLogSize, h, &size), where);
  std::string log(size, '\0');
  if (size) detail::check(OXICUDA_NVJITLINK(GetInfoLog, h, log.data()), where);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

OXICUDA_NAMESPACE_END
