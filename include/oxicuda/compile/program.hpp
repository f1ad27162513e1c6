// oxicuda/compile/program.hpp — Program: CUDA C++ source compiled at run time by
// NVRTC (loaded at first use, toolkit.hpp) into PTX, a cubin or LTO-IR;
// typed and raw compile options; name expressions (the lowered names of
// template kernels); NVRTC's version. The architectures are arch.hpp's.
#pragma once

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "../driver/device.hpp"
#include "size_then_fill.hpp"
#include "toolkit_paths.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// A list of strings kept in one std::string, each followed by a NUL (so an
// entry cannot hold a NUL byte, as NVRTC's C strings cannot): NVRTC's
// options, defines, name expressions, headers. Cheaper to compile than a
// std::vector<std::string>, and already the shape NVRTC's arrays of C
// strings are made from.
class StringList {
 public:
  StringList() = default;
  StringList(std::initializer_list<std::string_view> items, SourceLocation where = SourceLocation::current()) {
    for (std::string_view s : items) add(s, where);
  }
  // An entry holding a NUL byte is an Error (NVRTC would read it as two, or
  // cut it short), and the list is left as it was.
  StringList& add(std::string_view s, SourceLocation where = SourceLocation::current()) {
    if (OXICUDA_DETAIL_UNLIKELY(s.find('\0') != std::string_view::npos))
      detail::raise(Error(ffi::NVRTC_ERROR_INVALID_INPUT, "oxicuda::StringList::add",
                          detail::cat({"an entry holds a NUL byte at offset ", std::to_string(s.find('\0')),
                                       " (of ", std::to_string(s.size()),
                                       "); NVRTC's options, names and sources are C strings"}),
                          where));
    joined_.append(s.data(), s.size()).push_back('\0');
    ++size_;
    return *this;
  }
  StringList& add(const StringList& more) {
    joined_ += more.joined_;
    size_ += more.size_;
    return *this;
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  // Every entry, each followed by its NUL.
  [[nodiscard]] const std::string& joined() const noexcept { return joined_; }
  // The entries separated by spaces, for messages.
  [[nodiscard]] std::string spaced() const {
    std::string s = joined_;
    if (!s.empty()) s.pop_back();
    for (char& c : s)
      if (c == '\0') c = ' ';
    return s;
  }

  class iterator {
   public:
    explicit iterator(const char* p) noexcept : p_(p) {}
    // The entry, NUL-terminated where it ends.
    std::string_view operator*() const noexcept { return std::string_view(p_); }
    iterator& operator++() noexcept {
      p_ += std::strlen(p_) + 1;
      return *this;
    }
    friend bool operator==(iterator a, iterator b) noexcept { return a.p_ == b.p_; }

   private:
    const char* p_;
  };
  [[nodiscard]] iterator begin() const noexcept { return iterator(joined_.c_str()); }
  [[nodiscard]] iterator end() const noexcept { return iterator(joined_.c_str() + joined_.size()); }

  friend bool operator==(const StringList& a, const StringList& b) noexcept { return a.joined_ == b.joined_; }

 private:
  std::string joined_;
  std::size_t size_ = 0;
};

// Options for NVRTC, taken by designated initializers:
//   program.compile({.arch = "sm_90", .std = "c++17", .defines = {"N=4"}})
struct CompileOptions {
  std::string arch{};                      // "sm_90": a cubin; "compute_90": PTX; empty: NVRTC's default (PTX)
  std::string std{};                       // "c++17" → -std=c++17; empty: NVRTC's default
  StringList defines{};                    // "N=4" → -DN=4, "DEBUG" → -DDEBUG
  StringList include_paths{};              // → -I<path> (headers given to the Program come first); each
                                           //   must be a directory: compiling checks, an Error names one that is not
  bool toolkit_includes = false;           // → -I for the toolkit's include/ and include/cccl/ (toolkit_include_paths())
  bool line_info = false;                  // -lineinfo
  bool debug = false;                      // -G
  bool fast_math = false;                  // --use_fast_math
  bool relocatable = false;                // -rdc=true: relocatable device code, for the linker
  bool lto = false;                        // -dlto: LTO-IR, for nvJitLink
  StringList extra{};                      // more options, passed as written ("-maxrregcount=64")

  // The options as NVRTC takes them, in the order above. With
  // toolkit_includes, the toolkit's directories are looked for here (an
  // Error naming those tried when there is none).
  [[nodiscard]] StringList arguments(SourceLocation where = SourceLocation::current()) const;
};

// What a compile produced, as NVRTC says (also when an option in
// CompileOptions::extra decided it): LTO-IR with lto (-dlto), a cubin for a
// real architecture (sm_XX), PTX otherwise.
enum class CodeKind { ptx, cubin, ltoir };

struct Compiled {
  CodeKind kind = CodeKind::ptx;
  std::string code;  // the PTX text (no terminating NUL), the cubin, or the LTO-IR
  std::string arch;  // the -arch given ("" for NVRTC's default)
  std::string log;   // NVRTC's log: warnings (and notes oxicuda adds, such as an architecture fallback)
  // Each name expression followed by its lowered (mangled) name, in the order added.
  StringList lowered_names;

  // The lowered name of `expression` ("saxpy<float>" → "_Z5saxpyIfEvT_PS0_S1_j"), or empty.
  [[nodiscard]] std::string_view lowered_name(std::string_view expression) const noexcept {
    for (auto it = lowered_names.begin(); it != lowered_names.end(); ++it) {
      const std::string_view e = *it;
      if (++it == lowered_names.end()) break;
      if (e == expression) return *it;
    }
    return {};
  }
};

// CUDA C++ source, its headers and name expressions, ready to compile (each
// compile() is one NVRTC program, created and destroyed there).
class Program {
 public:
  explicit Program(std::string source, std::string name = "program.cu")
      : source_(std::move(source)), name_(std::move(name)) {}

  // A source file that #include "name" finds.
  Program& header(std::string_view name, std::string_view source, SourceLocation where = SourceLocation::current()) {
    StringList pair;
    pair.add(name, where).add(source, where);  // (an Error leaves the headers as they were)
    headers_.add(pair);
    return *this;
  }
  // Headers as a list of name, source, name, source, ...
  Program& headers(const StringList& names_and_sources) {
    headers_.add(names_and_sources);
    return *this;
  }
  // A kernel (or variable) named by a C++ expression, such as "saxpy<float>"
  // or "&scale<2>": compiling instantiates it and finds its lowered name.
  Program& name_expression(std::string_view expression, SourceLocation where = SourceLocation::current()) {
    expressions_.add(expression, where);
    return *this;
  }

  // Compiles. A failure is an Error whose detail holds NVRTC's log.
  [[nodiscard]] Compiled compile(const CompileOptions& options = {},
                                 SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // Name, source, name, source, ...
  [[nodiscard]] const StringList& headers() const noexcept { return headers_; }
  [[nodiscard]] const StringList& name_expressions() const noexcept { return expressions_; }

 private:
  std::string source_;
  std::string name_;
  StringList headers_;
  StringList expressions_;
};

// NVRTC's version (13000 for 13.0); loads NVRTC. An Error, with the loader's
// reason, when there is none.
[[nodiscard]] int nvrtc_version(SourceLocation where = SourceLocation::current());

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

// NVRTC's log of `p`, its trailing newlines and spaces dropped; `checked`
// false: as far as NVRTC gives it (for a failed compile, whose failure is
// the error), else a failure to give it is an Error.
inline std::string nvrtc_log(nvrtcProgram p, SourceLocation where, bool checked = true) {
  std::string log;
  const NvrtcOutcome r = size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetProgramLogSize, p, n); },
                                        [&](char* out) { return OXICUDA_NVRTC(GetProgramLog, p, out); }, log, true);
  if (checked) check(r, where);
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

}  // namespace detail

inline StringList CompileOptions::arguments(SourceLocation where) const {
  StringList a;
  if (!arch.empty()) a.add(detail::cat({"-arch=", arch}));
  if (!std.empty()) a.add(detail::cat({"-std=", std}));
  for (std::string_view d : defines) a.add(detail::cat({"-D", d}));
  for (std::string_view i : include_paths) a.add(detail::cat({"-I", i}));
  if (toolkit_includes)
    for (const std::string& i : toolkit_include_paths(where)) a.add(detail::cat({"-I", i}), where);
  if (line_info) a.add("-lineinfo");
  if (debug) a.add("-G");
  if (fast_math) a.add("--use_fast_math");
  if (relocatable) a.add("-rdc=true");
  if (lto) a.add("-dlto");
  return a.add(extra);
}

namespace detail {
// NVRTC ignores an include directory that does not exist: here it is an
// Error, before NVRTC runs.
inline void check_include_paths(const CompileOptions& o, const char* call, SourceLocation where) {
  for (std::string_view i : o.include_paths)
    if (!is_directory(std::string(i)))
      raise(Error(ffi::NVRTC_ERROR_INVALID_OPTION, call,
                  cat({"CompileOptions::include_paths names '", i,
                       "', which is not a directory (NVRTC would ignore it without a word)"}),
                  where));
}

// A list's entries as the array of C strings a C API takes (pointing into
// the list), every `step`-th from `skip`, null-terminated. (An owning array
// of its own rather than std::unique_ptr<const char*[]>, whose templates
// cost every translation unit more to compile than this whole class.)
class CStrings {
 public:
  explicit CStrings(const StringList& list, std::size_t skip = 0, std::size_t step = 1)
      : p_(new const char*[list.size() + 1]) {
    std::size_t i = 0, n = 0;
    for (std::string_view s : list)
      if (i++ >= skip && (i - 1 - skip) % step == 0 && n < list.size()) p_[n++] = s.data();
    p_[n] = nullptr;
  }
  CStrings(const CStrings&) = delete;
  CStrings& operator=(const CStrings&) = delete;
  ~CStrings() { delete[] p_; }
  [[nodiscard]] const char** get() const noexcept { return p_; }

 private:
  const char** p_;
};
}  // namespace detail

inline Compiled Program::compile(const CompileOptions& options, SourceLocation where) const {
  if (const std::size_t nul = source_.find('\0'); nul != std::string::npos)
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_INPUT, "oxicuda::Program::compile",
                        detail::cat({"the source holds a NUL byte at offset ", std::to_string(nul),
                                     "; NVRTC would compile only what comes before it"}),
                        where));
  if (headers_.size() % 2 != 0)
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_INPUT, "oxicuda::Program::compile",
                        "the headers are a list of name, source pairs; the last name has no source", where));
  detail::check_include_paths(options, "oxicuda::Program::compile", where);
  const StringList args = options.arguments(where);
  const detail::CStrings header_names(headers_, 0, 2);
  const detail::CStrings header_sources(headers_, 1, 2);
  detail::NvrtcProgramGuard program;
  detail::check(OXICUDA_NVRTC(CreateProgram, &program.raw, source_.c_str(), name_.c_str(),
                              static_cast<int>(headers_.size() / 2), header_sources.get(), header_names.get()),
                where);
  for (std::string_view e : expressions_)
    detail::check(OXICUDA_NVRTC(AddNameExpression, program.raw, e.data()), where);

  const detail::CStrings argv(args);
  const detail::NvrtcOutcome r = OXICUDA_NVRTC(CompileProgram, program.raw, static_cast<int>(args.size()), argv.get());
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
    const std::string log = detail::nvrtc_log(program.raw, where, false);  // the compile's failure is the error
    detail::fail(r, where,
                 detail::cat({"compiling '", name_, "' (", std::to_string(source_.size()), " bytes of source",
                              args.size() == 0 ? "" : "; options: ", args.spaced(), ")",
                              log.empty() ? "" : "; NVRTC log:\n", log}));
  }

  Compiled c;
  c.arch = options.arch;
  c.log = detail::nvrtc_log(program.raw, where);
  for (std::string_view e : expressions_) {
    const char* lowered = nullptr;
    detail::check(OXICUDA_NVRTC(GetLoweredName, program.raw, e.data(), &lowered), where);
    c.lowered_names.add(e).add(lowered ? lowered : "");
  }
  // What NVRTC produced decides the kind, not the options asked for: -dlto
  // or -arch in `extra` change it. Asked in order: LTO-IR (NVRTC 12+), a
  // cubin, PTX (NVRTC's answer is 1 for none, its terminating NUL).
  // (With .lto an NVRTC without nvrtcGetLTOIRSize is an Error naming it.)
  nvrtcProgram p = program.raw;
  if (options.lto || !detail::missing(ffi::nvrtc::Entry::GetLTOIRSize)) {
    c.kind = CodeKind::ltoir;
    detail::check(detail::size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetLTOIRSize, p, n); },
                                         [&](char* out) { return OXICUDA_NVRTC(GetLTOIR, p, out); }, c.code, false),
                  where);
  }
  if (c.code.empty()) {
    c.kind = CodeKind::cubin;
    detail::check(detail::size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetCUBINSize, p, n); },
                                         [&](char* out) { return OXICUDA_NVRTC(GetCUBIN, p, out); }, c.code, false),
                  where);
  }
  if (c.code.empty()) {
    c.kind = CodeKind::ptx;
    detail::check(detail::size_then_fill([&](std::size_t* n) { return OXICUDA_NVRTC(GetPTXSize, p, n); },
                                         [&](char* out) { return OXICUDA_NVRTC(GetPTX, p, out); }, c.code, true),
                  where);
  }
  if (OXICUDA_DETAIL_UNLIKELY(c.code.empty()))
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_OPTION, "oxicuda::Program::compile",
                        detail::cat({"compiling '", name_, "' succeeded but NVRTC produced no code (no LTO-IR, cubin "
                                     "or PTX; options: ", args.spaced(),
                                     "); an option in CompileOptions::extra may ask for output that NVRTC keeps to "
                                     "itself: use the fields (.arch, .lto, .relocatable) instead"}),
                        where));
  return c;
}

inline int nvrtc_version(SourceLocation where) {
  int major = 0, minor = 0;
  detail::check(OXICUDA_NVRTC(Version, &major, &minor), where);
  return major * 1000 + minor * 10;
}

OXICUDA_DETAIL_NAMESPACE_END
