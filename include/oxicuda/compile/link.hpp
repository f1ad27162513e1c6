// oxicuda/compile/link.hpp — Linker: the driver's JIT linker (cuLink*), always there
// with the driver. It links PTX, cubins, fatbins, objects and libraries, from
// memory or files, into one cubin, with the JIT options of module loading.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "../kernel/module.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// What an input to the linker is.
enum class LinkInput {
  cubin = ffi::CU_JIT_INPUT_CUBIN,
  ptx = ffi::CU_JIT_INPUT_PTX,
  fatbin = ffi::CU_JIT_INPUT_FATBINARY,
  object = ffi::CU_JIT_INPUT_OBJECT,    // a relocatable device object (nvcc -rdc -c)
  library = ffi::CU_JIT_INPUT_LIBRARY,  // an archive of them (nvcc -lib)
};

// One link, in the context that is current at each call made here (the
// context given, made current for the duration). Move-only; the driver's
// link state is destroyed with it. On a failed add or complete, the Error's
// detail holds the linker's error log.
namespace detail {
// Owns a JitOptionList on the heap, so that the log buffers the driver
// writes stay where they are when a Linker moves. (A class of its own
// rather than std::unique_ptr, whose templates cost every translation unit
// more to compile.)
class JitOptionsBox {
 public:
  JitOptionsBox() noexcept = default;
  JitOptionsBox(JitOptionsBox&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  JitOptionsBox& operator=(JitOptionsBox&& o) noexcept {
    if (this != &o) {
      delete p_;
      p_ = o.p_;
      o.p_ = nullptr;
    }
    return *this;
  }
  ~JitOptionsBox() { delete p_; }
  void make(const JitOptions& options, const char* operation, SourceLocation where) {
    JitOptionList* made = new JitOptionList(options, operation, where);
    delete p_;
    p_ = made;
  }
  JitOptionList* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  JitOptionList* p_ = nullptr;
};
}  // namespace detail

class Linker {
 public:
  explicit Linker(const Context& ctx, JitOptions options = {}, SourceLocation where = SourceLocation::current());
  Linker(Linker&& o) noexcept
      : ctx_(std::move(o.ctx_)), state_(o.state_), jit_(std::move(o.jit_)) {
    o.state_ = nullptr;
  }
  Linker& operator=(Linker&& o) noexcept {
    if (this != &o) {
      destroy();
      ctx_ = std::move(o.ctx_);
      state_ = o.state_;
      o.state_ = nullptr;
      jit_ = std::move(o.jit_);
    }
    return *this;
  }
  ~Linker() { destroy(); }

  // Adds an input from memory; `name` appears in the linker's messages.
  // PTX is read as `size` bytes of text (a terminating NUL is optional): it
  // is copied and NUL-terminated, since the driver reads PTX up to a NUL,
  // not `size` bytes; PTX with a NUL inside (the driver would drop what
  // follows) is an Error. A cubin must be relocatable (built with -rdc).
  Linker& add(LinkInput kind, const void* data, std::size_t size, std::string_view name = "input",
              SourceLocation where = SourceLocation::current());
  // Adds PTX text (the same rules).
  Linker& add_ptx(std::string_view ptx, std::string_view name = "ptx", SourceLocation where = SourceLocation::current());
  // Adds an input from a file.
  Linker& add_file(LinkInput kind, const std::string& path, SourceLocation where = SourceLocation::current());

  // Completes the link: the cubin (copied out of the driver's link state, so
  // it outlives this Linker).
  [[nodiscard]] std::string complete(SourceLocation where = SourceLocation::current());
  // Completes the link and loads the cubin into the context.
  [[nodiscard]] Module load(SourceLocation where = SourceLocation::current());

  // The linker's info log so far (warnings, with JitOptions::log_bytes room).
  [[nodiscard]] std::string info_log() const { return jit_ ? jit_->info_log() : std::string(); }
  [[nodiscard]] CUlinkState raw() const noexcept { return state_; }
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  CUlinkState checked(const char* operation, SourceLocation where) const {
    if (!state_) detail::empty_handle("oxicuda::Linker", operation, where);
    return state_;
  }
  void destroy() noexcept {
    if (state_) {
      detail::ScopedCurrentNothrow current(ctx_.raw(), "destroying an oxicuda::Linker");
      CUlinkState s = state_;
      state_ = nullptr;
      detail::check_nothrow(OXICUDA_DRIVER(LinkDestroy, s), "destroying an oxicuda::Linker");
    }
  }
  [[noreturn]] void fail_with_log(detail::Outcome r, std::string_view what, SourceLocation where) const {
    detail::fail(r, where, detail::cat({what, jit_->error_log()}));
  }

  Context ctx_;
  CUlinkState state_ = nullptr;
  // The options' log buffers, written by the driver until the link state is
  // destroyed: they stay where they are when the Linker moves.
  detail::JitOptionsBox jit_;
};

inline Linker::Linker(const Context& ctx, JitOptions options, SourceLocation where) : ctx_(ctx) {
  if (!ctx) detail::empty_handle("oxicuda::Context", "oxicuda::Linker::Linker", where);
  jit_.make(options, "oxicuda::Linker::Linker", where);
  ScopedCurrent current(ctx_, where);
  const detail::Outcome r = OXICUDA_DRIVER(LinkCreate, jit_->count, jit_->keys, jit_->values, &state_);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) {
    state_ = nullptr;
    fail_with_log(r, "creating a link", where);
  }
}

inline Linker& Linker::add(LinkInput kind, const void* data, std::size_t size, std::string_view name,
                           SourceLocation where) {
  CUlinkState s = checked("oxicuda::Linker::add", where);
  if (data == nullptr || size == 0)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::Linker::add",
                        detail::cat({"the input '", name, "' is empty"}), where));
  const std::string n(name);
  std::string text;
  if (kind == LinkInput::ptx) {
    text = detail::ptx_text(static_cast<const char*>(data), size, ffi::CUDA_ERROR_INVALID_PTX, "oxicuda::Linker::add",
                            detail::cat({"the PTX input '", n, "'"}), "the driver", where);
    data = text.c_str();
    size = text.size() + 1;
  }
  ScopedCurrent current(ctx_, where);
  const detail::Outcome r = OXICUDA_DRIVER(LinkAddData, s, static_cast<ffi::CUjitInputType>(kind),
                                           const_cast<void*>(data), size, n.c_str(), 0u, nullptr, nullptr);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
    fail_with_log(r,
                  detail::cat({"adding '", n, "' (", std::to_string(size), " bytes)",
                               kind == LinkInput::cubin && (r.result == ffi::CUDA_ERROR_NO_BINARY_FOR_GPU ||
                                                             r.result == ffi::CUDA_ERROR_INVALID_IMAGE)
                                   ? "; a cubin input to a Linker must be relocatable device code: compile it with "
                                     "-rdc (CompileOptions::relocatable, nvcc -rdc=true -cubin)"
                                   : ""}),
                  where);
  return *this;
}

inline Linker& Linker::add_ptx(std::string_view ptx, std::string_view name, SourceLocation where) {
  return add(LinkInput::ptx, ptx.data(), ptx.size(), name, where);
}

inline Linker& Linker::add_file(LinkInput kind, const std::string& path, SourceLocation where) {
  CUlinkState s = checked("oxicuda::Linker::add_file", where);
  ScopedCurrent current(ctx_, where);
  const detail::Outcome r =
      OXICUDA_DRIVER(LinkAddFile, s, static_cast<ffi::CUjitInputType>(kind), path.c_str(), 0u, nullptr, nullptr);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) fail_with_log(r, detail::cat({"adding the file '", path, "'"}), where);
  return *this;
}

inline std::string Linker::complete(SourceLocation where) {
  CUlinkState s = checked("oxicuda::Linker::complete", where);
  void* cubin = nullptr;
  std::size_t size = 0;
  ScopedCurrent current(ctx_, where);
  const detail::Outcome r = OXICUDA_DRIVER(LinkComplete, s, &cubin, &size);
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) fail_with_log(r, "completing the link", where);
  return std::string(static_cast<const char*>(cubin), size);
}

inline Module Linker::load(SourceLocation where) {
  const std::string cubin = complete(where);
  return Module::from_image(ctx_, cubin.data(), cubin.size(), {}, where);
}

OXICUDA_DETAIL_NAMESPACE_END
