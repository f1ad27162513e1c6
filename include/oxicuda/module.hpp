// oxicuda/module.hpp — Module (PTX, cubin or fatbin loaded into a context)
// and Function (a kernel in it, which keeps its module alive).
#pragma once

#include "context.hpp"

#include <string_view>
#include <vector>

OXICUDA_NAMESPACE_BEGIN

// Options for the driver's JIT, taken by designated initializers:
//   Module::from_ptx(ctx, ptx, {.max_registers = 64, .line_info = true})
struct JitOptions {
  int max_registers = 0;        // 0: no limit
  int optimization_level = -1;  // 0..4; -1: the driver's default (4)
  bool line_info = false;       // -lineinfo
  bool debug_info = false;      // -G
  std::size_t log_bytes = 16 * 1024;  // room for each of the info and error logs
};

class Function;

// A loaded module. Copies share it; it is unloaded (cuModuleUnload) when the
// last Module or Function that uses it drops.
class Module {
 public:
  Module() noexcept = default;

  // Loads PTX text. On failure the Error's detail holds the JIT's error log
  // (ptxas's "line 4; error : ..."); on success info_log() holds its info log.
  [[nodiscard]] static Module from_ptx(const Context& ctx, std::string_view ptx, JitOptions options = {},
                                       SourceLocation where = SourceLocation::current());
  // Loads a cubin (ELF) or fatbin image, or PTX text, from memory. Images
  // are checked against `size` before the driver reads them, so a truncated
  // file is an error, not a read past the end.
  [[nodiscard]] static Module from_image(const Context& ctx, const void* data, std::size_t size,
                                         JitOptions options = {},
                                         SourceLocation where = SourceLocation::current());
  // Loads a .ptx, .cubin or .fatbin file (the kind is read from its content).
  [[nodiscard]] static Module from_file(const Context& ctx, const std::string& path, JitOptions options = {},
                                        SourceLocation where = SourceLocation::current());

  // The kernel called `name` (its mangled name for a C++ kernel not declared
  // extern "C"). An unknown name is an Error that names it.
  [[nodiscard]] Function function(std::string_view name, SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] CUmodule raw() const noexcept { return state_ ? state_->raw : nullptr; }
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }
  [[nodiscard]] const Context& context() const noexcept;
  // The JIT's info log from loading (empty for a cubin or when it said nothing).
  [[nodiscard]] std::string_view info_log() const noexcept {
    return state_ ? std::string_view(state_->info_log) : std::string_view();
  }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }

  friend bool operator==(const Module& a, const Module& b) noexcept { return a.raw() == b.raw(); }

 private:
  struct State {
    Context ctx;
    CUmodule raw = nullptr;
    std::string info_log;
    State(Context c, CUmodule r, std::string log) noexcept
        : ctx(std::move(c)), raw(r), info_log(std::move(log)) {}
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() { detail::call_nothrow<ffi::Entry::ModuleUnload>(raw); }
  };
  friend class Function;

  static Module load(const Context& ctx, const void* image, std::size_t size, bool is_text,
                     const JitOptions& options, SourceLocation where);

  std::shared_ptr<const State> state_;
};

// A kernel. Copies share it and keep its module (and context) alive.
class Function {
 public:
  Function() noexcept = default;

  [[nodiscard]] CUfunction raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] std::string_view name() const noexcept {
    return state_ ? std::string_view(state_->name) : std::string_view();
  }
  [[nodiscard]] const Module& module() const noexcept;

  [[nodiscard]] int attribute(ffi::CUfunction_attribute attr, SourceLocation where = SourceLocation::current()) const;
  void set_attribute(ffi::CUfunction_attribute attr, int value, SourceLocation where = SourceLocation::current()) const;

  [[nodiscard]] int num_registers(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_NUM_REGS, where);
  }
  [[nodiscard]] int max_threads_per_block(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, where);
  }
  [[nodiscard]] int static_shared_bytes(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, where);
  }
  [[nodiscard]] int local_bytes(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, where);
  }
  [[nodiscard]] int const_bytes(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, where);
  }
  [[nodiscard]] int ptx_version(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_PTX_VERSION, where);
  }
  [[nodiscard]] int binary_version(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_FUNC_ATTRIBUTE_BINARY_VERSION, where);
  }

  // The checked handle for code that launches the function.
  [[nodiscard]] CUfunction checked(const char* operation, SourceLocation where) const {
    if (OXICUDA_UNLIKELY(raw_ == nullptr)) detail::empty_handle("oxicuda::Function", operation, where);
    return raw_;
  }

  friend bool operator==(const Function& a, const Function& b) noexcept { return a.raw_ == b.raw_; }

 private:
  friend class Module;
  struct State {
    Module module;
    std::string name;
  };
  Function(CUfunction raw, std::shared_ptr<const State> state) noexcept : raw_(raw), state_(std::move(state)) {}

  CUfunction raw_ = nullptr;
  std::shared_ptr<const State> state_;
};

namespace detail {

inline std::uint64_t read_le(const unsigned char* p, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

enum class ImageKind { ptx, elf, fatbin };

inline ImageKind image_kind(const unsigned char* p, std::size_t size) noexcept {
  if (size >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') return ImageKind::elf;
  if (size >= 4 && read_le(p, 4) == 0xBA55ED50u) return ImageKind::fatbin;
  return ImageKind::ptx;
}

// Why a binary image is unfit to hand to the driver (which reads it without
// knowing its size), or empty when it is fit.
inline std::string image_problem(const unsigned char* p, std::size_t size, ImageKind kind) {
  auto truncated = [&](const char* what, std::uint64_t need) {
    return std::string("the ") + what + " image is truncated: its headers describe " + std::to_string(need) +
           " bytes but only " + std::to_string(size) + " were given";
  };
  if (kind == ImageKind::elf) {
    if (size < 64) return truncated("cubin (ELF)", 64);
    if (p[4] != 2) return "the cubin (ELF) image is not a 64-bit ELF file";
    const std::uint64_t phoff = read_le(p + 32, 8), shoff = read_le(p + 40, 8);
    const std::uint64_t phsize = read_le(p + 54, 2) * read_le(p + 56, 2);
    const std::uint64_t shsize = read_le(p + 58, 2) * read_le(p + 60, 2);
    const std::uint64_t need = phoff + phsize > shoff + shsize ? phoff + phsize : shoff + shsize;
    if (need > size) return truncated("cubin (ELF)", need);
  } else if (kind == ImageKind::fatbin) {
    if (size < 16) return truncated("fatbin", 16);
    const std::uint64_t need = read_le(p + 6, 2) + read_le(p + 8, 8);
    if (need > size) return truncated("fatbin", need);
  }
  return {};
}

}  // namespace detail

inline Module Module::load(const Context& ctx, const void* image, std::size_t size, bool is_text,
                           const JitOptions& options, SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::Module::load", where);
  std::vector<char> info(options.log_bytes + 1, '\0'), error(options.log_bytes + 1, '\0');
  ffi::CUjit_option keys[10];
  void* values[10];
  unsigned n = 0;
  auto add = [&](ffi::CUjit_option key, void* value) {
    keys[n] = key;
    values[n] = value;
    ++n;
  };
  auto as_value = [](std::size_t v) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(v)); };
  add(ffi::CU_JIT_INFO_LOG_BUFFER, info.data());
  add(ffi::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, as_value(options.log_bytes));
  add(ffi::CU_JIT_ERROR_LOG_BUFFER, error.data());
  add(ffi::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, as_value(options.log_bytes));
  if (options.max_registers > 0)
    add(ffi::CU_JIT_MAX_REGISTERS, as_value(static_cast<std::size_t>(options.max_registers)));
  if (options.optimization_level >= 0)
    add(ffi::CU_JIT_OPTIMIZATION_LEVEL, as_value(static_cast<std::size_t>(options.optimization_level)));
  if (options.line_info) add(ffi::CU_JIT_GENERATE_LINE_INFO, as_value(1));
  if (options.debug_info) add(ffi::CU_JIT_GENERATE_DEBUG_INFO, as_value(1));

  CUmodule raw = nullptr;
  ffi::CUresult r;
  {
    ScopedCurrent current(ctx, where);
    r = detail::call_result<ffi::Entry::ModuleLoadDataEx>(where, &raw, image, n, keys, values);
  }
  if (OXICUDA_UNLIKELY(r != ffi::CUDA_SUCCESS)) {
    std::string why = std::string(is_text ? "PTX source" : "binary image") + " of " + std::to_string(size) + " bytes";
    if (error[0] != '\0') why += "; JIT error log:\n" + std::string(error.data());
    detail::fail(ffi::Entry::ModuleLoadDataEx, r, where, std::move(why));
  }
  std::string log(info.data());
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  Module m;
#if OXICUDA_EXCEPTIONS
  try {
    m.state_ = std::make_shared<const State>(ctx, raw, std::move(log));
  } catch (...) {
    detail::call_nothrow<ffi::Entry::ModuleUnload>(raw);
    throw;
  }
#else
  m.state_ = std::make_shared<const State>(ctx, raw, std::move(log));
#endif
  return m;
}

inline Module Module::from_ptx(const Context& ctx, std::string_view ptx, JitOptions options, SourceLocation where) {
  if (ptx.find_first_not_of(" \t\r\n") == std::string_view::npos)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_PTX, "oxicuda::Module::from_ptx", "the PTX source is empty", where));
  const std::string text(ptx);  // the driver wants it NUL-terminated
  return load(ctx, text.c_str(), text.size(), true, options, where);
}

inline Module Module::from_image(const Context& ctx, const void* data, std::size_t size, JitOptions options,
                                 SourceLocation where) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (p == nullptr || size == 0)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, "oxicuda::Module::from_image", "the image is empty", where));
  const detail::ImageKind kind = detail::image_kind(p, size);
  if (kind == detail::ImageKind::ptx)
    return from_ptx(ctx, std::string_view(static_cast<const char*>(data), size), options, where);
  std::string problem = detail::image_problem(p, size, kind);
  if (!problem.empty())
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, "oxicuda::Module::from_image", std::move(problem), where));
  return load(ctx, data, size, false, options, where);
}

inline Module Module::from_file(const Context& ctx, const std::string& path, JitOptions options,
                                SourceLocation where) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    detail::raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, "oxicuda::Module::from_file",
                        "cannot open '" + path + "'", where));
  std::vector<char> bytes;
  char chunk[1 << 14];
  std::size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed)
    detail::raise(Error(ffi::CUDA_ERROR_FILE_NOT_FOUND, "oxicuda::Module::from_file",
                        "cannot read '" + path + "'", where));
  if (bytes.empty())
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, "oxicuda::Module::from_file",
                        "'" + path + "' is empty", where));
  return from_image(ctx, bytes.data(), bytes.size(), options, where);
}

inline const Context& Module::context() const noexcept {
  static const Context empty;
  return state_ ? state_->ctx : empty;
}

inline Function Module::function(std::string_view name, SourceLocation where) const {
  if (!state_) detail::empty_handle("oxicuda::Module", "oxicuda::Module::function", where);
  std::string n(name);
  CUfunction raw = nullptr;
  ffi::CUresult r;
  {
    ScopedCurrent current(state_->ctx, where);
    r = detail::call_result<ffi::Entry::ModuleGetFunction>(where, &raw, state_->raw, n.c_str());
  }
  if (OXICUDA_UNLIKELY(r != ffi::CUDA_SUCCESS))
    detail::fail(ffi::Entry::ModuleGetFunction, r, where,
                 r == ffi::CUDA_ERROR_NOT_FOUND
                     ? "the module has no kernel named '" + n +
                           "' (a C++ kernel not declared extern \"C\" has a mangled name)"
                     : "looking up kernel '" + n + "'");
  return Function(raw, std::make_shared<const Function::State>(Function::State{*this, std::move(n)}));
}

inline const Module& Function::module() const noexcept {
  static const Module empty;
  return state_ ? state_->module : empty;
}

inline int Function::attribute(ffi::CUfunction_attribute attr, SourceLocation where) const {
  CUfunction f = checked("oxicuda::Function::attribute", where);
  int v = 0;
  detail::call<ffi::Entry::FuncGetAttribute>(where, &v, attr, f);
  return v;
}

inline void Function::set_attribute(ffi::CUfunction_attribute attr, int value, SourceLocation where) const {
  detail::call<ffi::Entry::FuncSetAttribute>(where, checked("oxicuda::Function::set_attribute", where), attr, value);
}

OXICUDA_NAMESPACE_END
