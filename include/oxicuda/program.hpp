// oxicuda/program.hpp — Program: CUDA C++ source compiled at run time by
// NVRTC (loaded at first use, toolkit.hpp) into PTX, a cubin or LTO-IR;
// typed and raw compile options; name expressions (the lowered names of
// template kernels); the supported architectures and NVRTC's version; the
// architecture to compile for on a device.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "device.hpp"

OXICUDA_NAMESPACE_BEGIN

// Options for NVRTC, taken by designated initializers:
//   program.compile({.arch = "sm_90", .std = "c++17", .defines = {"N=4"}})
struct CompileOptions {
  std::string arch{};                      // "sm_90": a cubin; "compute_90": PTX; empty: NVRTC's default (PTX)
  std::string std{};                       // "c++17" → -std=c++17; empty: NVRTC's default
  std::vector<std::string> defines{};      // "N=4" → -DN=4, "DEBUG" → -DDEBUG
  std::vector<std::string> include_paths{};// → -I<path> (headers given to the Program come first)
  bool line_info = false;                  // -lineinfo
  bool debug = false;                      // -G
  bool fast_math = false;                  // --use_fast_math
  bool relocatable = false;                // -rdc=true: relocatable device code, for the linker
  bool lto = false;                        // -dlto: LTO-IR, for nvJitLink
  std::vector<std::string> extra{};        // more options, passed as written ("-maxrregcount=64")

  // The options as NVRTC takes them, in the order above.
  [[nodiscard]] std::vector<std::string> arguments() const;
};

// What a compile produced: LTO-IR with lto, a cubin for a real architecture
// (sm_XX), PTX otherwise.
enum class CodeKind { ptx, cubin, ltoir };

struct Compiled {
  CodeKind kind = CodeKind::ptx;
  std::string code;  // the PTX text (no terminating NUL), the cubin, or the LTO-IR
  std::string arch;  // the -arch given ("" for NVRTC's default)
  std::string log;   // NVRTC's log: warnings (and notes oxicuda adds, such as an architecture fallback)
  // Each name expression and its lowered (mangled) name, in the order added.
  std::vector<std::pair<std::string, std::string>> lowered_names;

  // The lowered name of `expression` ("saxpy<float>" → "_Z5saxpyIfEvT_PS0_S1_j"), or empty.
  [[nodiscard]] std::string_view lowered_name(std::string_view expression) const noexcept {
    for (const auto& [e, l] : lowered_names)
      if (e == expression) return l;
    return {};
  }
};

// A named source file that #include can find.
struct Header {
  std::string name;    // as written in the #include ("util.cuh")
  std::string source;
};

// CUDA C++ source, its headers and name expressions, ready to compile (each
// compile() is one NVRTC program, created and destroyed there).
class Program {
 public:
  explicit Program(std::string source, std::string name = "program.cu")
      : source_(std::move(source)), name_(std::move(name)) {}

  Program& header(std::string name, std::string source) {
    headers_.push_back({std::move(name), std::move(source)});
    return *this;
  }
  // A kernel (or variable) named by a C++ expression, such as "saxpy<float>"
  // or "&scale<2>": compiling instantiates it and finds its lowered name.
  Program& name_expression(std::string expression) {
    expressions_.push_back(std::move(expression));
    return *this;
  }

  // Compiles. A failure is an Error whose detail holds NVRTC's log.
  [[nodiscard]] Compiled compile(const CompileOptions& options = {},
                                 SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::vector<Header>& headers() const noexcept { return headers_; }
  [[nodiscard]] const std::vector<std::string>& name_expressions() const noexcept { return expressions_; }

 private:
  std::string source_;
  std::string name_;
  std::vector<Header> headers_;
  std::vector<std::string> expressions_;
};

// NVRTC's version (13000 for 13.0); loads NVRTC. An Error, with the loader's
// reason, when there is none.
[[nodiscard]] int nvrtc_version(SourceLocation where = SourceLocation::current());
// The real architectures this NVRTC compiles for (75, 80, ..., 120).
[[nodiscard]] std::vector<int> supported_archs(SourceLocation where = SourceLocation::current());

// The architecture to compile for on a device: its own (sm_XX, a cubin) when
// NVRTC supports it; otherwise, for a device newer than NVRTC, the newest
// architecture NVRTC supports as PTX (compute_XX, which the driver compiles
// forward), and a note that says so.
struct ArchChoice {
  std::string arch;
  std::string note;  // empty unless there was a fallback
};
[[nodiscard]] ArchChoice arch_for(const Device& device, SourceLocation where = SourceLocation::current());
// The same from a compute capability and NVRTC's supported architectures.
[[nodiscard]] ArchChoice arch_for(ComputeCapability cc, const std::vector<int>& supported,
                                  SourceLocation where = SourceLocation::current());

namespace detail {

// Destroys an NVRTC program however the compile ends.
struct NvrtcProgramGuard {
  nvrtcProgram raw = nullptr;
  NvrtcProgramGuard() = default;
  NvrtcProgramGuard(const NvrtcProgramGuard&) = delete;
  NvrtcProgramGuard& operator=(const NvrtcProgramGuard&) = delete;
  ~NvrtcProgramGuard() {
    if (raw) check_nothrow(OXICUDA_NVRTC(DestroyProgram, &raw), "destroying an NVRTC program");
  }
};

inline std::string nvrtc_log(nvrtcProgram p, SourceLocation where) {
  std::size_t size = 0;
  check(OXICUDA_NVRTC(GetProgramLogSize, p, &size), where);
  std::string log(size, '\0');
  if (size) check(OXICUDA_NVRTC(GetProgramLog, p, log.data()), where);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

}  // namespace detail

inline std::vector<std::string> CompileOptions::arguments() const {
  std::vector<std::string> a;
  if (!arch.empty()) a.push_back(detail::cat({"-arch=", arch}));
  if (!std.empty()) a.push_back(detail::cat({"-std=", std}));
  for (const std::string& d : defines) a.push_back(detail::cat({"-D", d}));
  for (const std::string& i : include_paths) a.push_back(detail::cat({"-I", i}));
  if (line_info) a.emplace_back("-lineinfo");
  if (debug) a.emplace_back("-G");
  if (fast_math) a.emplace_back("--use_fast_math");
  if (relocatable) a.emplace_back("-rdc=true");
  if (lto) a.emplace_back("-dlto");
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline Compiled Program::compile(const CompileOptions& options, SourceLocation where) const {
  std::vector<const char*> header_sources, header_names;
  for (const Header& h : headers_) {
    header_sources.push_back(h.source.c_str());
    header_names.push_back(h.name.c_str());
  }
  detail::NvrtcProgramGuard program;
  detail::check(OXICUDA_NVRTC(CreateProgram, &program.raw, source_.c_str(), name_.c_str(),
                              static_cast<int>(headers_.size()), header_sources.data(), header_names.data()),
                where);
  for (const std::string& e : expressions_) detail::check(OXICUDA_NVRTC(AddNameExpression, program.raw, e.c_str()), where);

  const std::vector<std::string> args = options.arguments();
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const detail::NvrtcOutcome r =
      OXICUDA_NVRTC(CompileProgram, program.raw, static_cast<int>(argv.size()), argv.data());
  if (OXICUDA_UNLIKELY(!r.ok())) {
    std::string options_text;
    for (const std::string& a : args) options_text = detail::cat({options_text, " ", a});
    std::string log;
    std::size_t size = 0;  // the log as far as NVRTC gives it: the compile's failure is the error
    if (OXICUDA_NVRTC(GetProgramLogSize, program.raw, &size).ok()) {
      log.assign(size, '\0');
      if (size && !OXICUDA_NVRTC(GetProgramLog, program.raw, log.data()).ok()) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    detail::fail(r, where,
                 detail::cat({"compiling '", name_, "' (", std::to_string(source_.size()), " bytes of source",
                              options_text.empty() ? "" : "; options:", options_text, ")",
                              log.empty() ? "" : "; NVRTC log:\n", log}));
  }

  Compiled c;
  c.arch = options.arch;
  c.log = detail::nvrtc_log(program.raw, where);
  for (const std::string& e : expressions_) {
    const char* lowered = nullptr;
    detail::check(OXICUDA_NVRTC(GetLoweredName, program.raw, e.c_str(), &lowered), where);
    c.lowered_names.emplace_back(e, lowered ? lowered : "");
  }
  std::size_t size = 0;
  if (options.lto) {
    c.kind = CodeKind::ltoir;
    detail::check(OXICUDA_NVRTC(GetLTOIRSize, program.raw, &size), where);
    c.code.assign(size, '\0');
    detail::check(OXICUDA_NVRTC(GetLTOIR, program.raw, c.code.data()), where);
  } else if (options.arch.rfind("sm_", 0) == 0) {
    c.kind = CodeKind::cubin;
    detail::check(OXICUDA_NVRTC(GetCUBINSize, program.raw, &size), where);
    c.code.assign(size, '\0');
    detail::check(OXICUDA_NVRTC(GetCUBIN, program.raw, c.code.data()), where);
  } else {
    c.kind = CodeKind::ptx;
    detail::check(OXICUDA_NVRTC(GetPTXSize, program.raw, &size), where);
    c.code.assign(size, '\0');
    detail::check(OXICUDA_NVRTC(GetPTX, program.raw, c.code.data()), where);
    while (!c.code.empty() && c.code.back() == '\0') c.code.pop_back();
  }
  return c;
}

inline int nvrtc_version(SourceLocation where) {
  int major = 0, minor = 0;
  detail::check(OXICUDA_NVRTC(Version, &major, &minor), where);
  return major * 1000 + minor * 10;
}

inline std::vector<int> supported_archs(SourceLocation where) {
  int n = 0;
  detail::check(OXICUDA_NVRTC(GetNumSupportedArchs, &n), where);
  std::vector<int> archs(static_cast<std::size_t>(n > 0 ? n : 0));
  if (n > 0) detail::check(OXICUDA_NVRTC(GetSupportedArchs, archs.data()), where);
  return archs;
}

inline ArchChoice arch_for(ComputeCapability cc, const std::vector<int>& supported, SourceLocation where) {
  const int want = cc.major * 10 + cc.minor;
  int newest_below = 0;
  for (int a : supported) {
    if (a == want) return {detail::cat({"sm_", std::to_string(want)}), {}};
    if (a < want && a > newest_below) newest_below = a;
  }
  if (newest_below == 0)
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_OPTION, "oxicuda::arch_for",
                        detail::cat({"NVRTC supports no architecture up to the device's compute capability ",
                                     std::to_string(cc.major), ".", std::to_string(cc.minor)}),
                        where));
  return {detail::cat({"compute_", std::to_string(newest_below)}),
          detail::cat({"oxicuda: NVRTC does not support sm_", std::to_string(want), " (compute capability ",
                       std::to_string(cc.major), ".", std::to_string(cc.minor),
                       "); compiled PTX for compute_", std::to_string(newest_below),
                       ", its newest architecture, which the driver compiles for the device"})};
}

inline ArchChoice arch_for(const Device& device, SourceLocation where) {
  return arch_for(device.compute_capability(where), supported_archs(where), where);
}

OXICUDA_NAMESPACE_END
