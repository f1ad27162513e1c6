// oxicuda/kernel/kernel.hpp — Kernel<Sig>, a kernel typed by its signature, and the
// check of its parameter layout against the driver's (Module::kernel<Sig>).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "function.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Whether T may be a kernel parameter type: passed to the kernel by copying
// its bytes. True for trivially copyable types; specialize it to
// std::true_type for a type of your own whose bytes are safe to copy even
// though it is not trivially copyable (a handle with a user-written copy
// constructor, say). References never qualify.
template <class T>
struct is_kernel_parameter : std::bool_constant<std::is_trivially_copyable_v<T>> {};

template <class T>
inline constexpr bool is_kernel_parameter_v =
    !std::is_reference_v<T> && is_kernel_parameter<std::remove_cv_t<T>>::value;
// A kernel that knows its parameter types: Kernel<void(float*, unsigned)>.
// Launching it (launch.hpp) converts each argument to its parameter type and
// refuses, at compile time, arguments that cannot convert.
template <class... Params>
class Kernel<void(Params...)> {
  static_assert((is_kernel_parameter_v<Params> && ...),
                "oxicuda::Kernel: every parameter type must be trivially copyable and not a reference "
                "(specialize oxicuda::is_kernel_parameter<T> for a type whose bytes are safe to copy)");

 public:
  using signature = void(Params...);
  static constexpr std::size_t arity = sizeof...(Params);

  Kernel() noexcept = default;
  // Types an untyped Function without checking its parameters (see
  // Module::kernel for the checked way).
  explicit Kernel(Function fn) noexcept : fn_(std::move(fn)) {}

  [[nodiscard]] const Function& function() const noexcept { return fn_; }
  [[nodiscard]] CUfunction raw() const noexcept { return fn_.raw(); }
  [[nodiscard]] std::string_view name() const noexcept { return fn_.name(); }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(fn_); }
  // The same kernel in `ctx` (Function::for_context): for a library's kernel.
  [[nodiscard]] Kernel for_context(const Context& ctx, SourceLocation where = SourceLocation::current()) const {
    return Kernel(fn_.for_context(ctx, where));
  }

 private:
  Function fn_;
};

namespace detail {

// The spelling of a type, from the compiler (for error messages).
template <class T>
constexpr std::string_view type_name() noexcept {
#if defined(__clang__) || defined(__GNUC__)
  constexpr std::string_view p = __PRETTY_FUNCTION__;
  constexpr std::size_t start = p.find("T = ") + 4;
  return p.substr(start, p.find_first_of(";]", start) - start);
#elif defined(_MSC_VER)
  constexpr std::string_view p = __FUNCSIG__;
  constexpr std::size_t start = p.find("type_name<") + 10;
  return p.substr(start, p.rfind(">(") - start);
#else
  return "the declared signature";
#endif
}

struct ParamSlot {
  std::size_t offset = 0;
  std::size_t size = 0;
};

inline std::string describe_layout(const ParamSlot* slots, std::size_t n) {
  std::string s = cat({std::to_string(n), n == 1 ? " parameter" : " parameters"});
  for (std::size_t i = 0; i < n; ++i)
    s = cat({s, i ? ", " : " (", std::to_string(slots[i].size), " bytes at ", std::to_string(slots[i].offset)});
  return n ? cat({s, ")"}) : s;
}

// The driver's report of parameter `i` of `fn`: cuFuncGetParamInfo for a
// module's kernel, cuKernelGetParamInfo for a library's.
inline Outcome param_info(const Function& fn, std::size_t i, ParamSlot& slot) noexcept {
  if (const CUkernel k = fn.library_kernel()) return OXICUDA_DRIVER(KernelGetParamInfo, k, i, &slot.offset, &slot.size);
  return OXICUDA_DRIVER(FuncGetParamInfo, fn.raw(), i, &slot.offset, &slot.size);
}

// Compares the kernel's parameter layout, as the driver reports it, with the
// declared one. Silent where the driver cannot tell (no cuFuncGetParamInfo,
// or for a library's kernel no cuKernelGetParamInfo, or
// CUDA_ERROR_NOT_SUPPORTED for this function); any other failure of the
// query is an Error.
[[noreturn]] OXICUDA_DETAIL_COLD inline void layout_mismatch(const Function& fn, std::string_view signature,
                                                      const ParamSlot* want, std::size_t n_want, const ParamSlot* got,
                                                      std::size_t n_got, SourceLocation where) {
  const bool library = fn.library_kernel() != nullptr;
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, library ? "oxicuda::KernelLibrary::kernel" : "oxicuda::Module::kernel",
              cat({"kernel '", fn.name(), "' is declared ", signature, ", ", describe_layout(want, n_want),
                   library ? ", but the library's kernel takes " : ", but the module's kernel takes ",
                   describe_layout(got, n_got)}),
              where));
}

[[noreturn]] OXICUDA_DETAIL_COLD inline void layout_query_failed(const Function& fn, Outcome r, SourceLocation where) {
  fail(r, where, cat({"asking the layout of kernel '", fn.name(), "'"}));
}

// The context a library's kernel's layout is asked in: the driver answers
// cuKernelGetParamInfo only with a context current (CUDA_ERROR_INVALID_CONTEXT
// otherwise: driver 580, H100), though the kernel belongs to no context and
// its layout is its image's. The thread's current context, else device 0's
// primary context.
OXICUDA_DETAIL_COLD inline Context layout_query_context(SourceLocation where) {
  CUcontext current = nullptr;
  check(OXICUDA_DRIVER(CtxGetCurrent, &current), where);
  return current ? Context::borrow(current) : Context::primary(Device::get(0, where), where);
}

template <class... Params>
void check_parameters(const Function& fn, SourceLocation where) {
  if (missing(fn.library_kernel() ? ffi::Entry::KernelGetParamInfo : ffi::Entry::FuncGetParamInfo))
    return;  // an older driver: nothing to check against
  constexpr std::size_t n = sizeof...(Params);
  ParamSlot want[n + 1] = {};
  {
    constexpr std::size_t sizes[n + 1] = {sizeof(Params)..., 0};
    constexpr std::size_t aligns[n + 1] = {alignof(Params)..., 1};
    std::size_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      offset = (offset + aligns[i] - 1) / aligns[i] * aligns[i];
      want[i] = {offset, sizes[i]};
      offset += sizes[i];
    }
  }
  constexpr std::size_t most = n + 64;  // enough to say that it is clearly not the declared kernel
  ParamSlot got[most];
  std::size_t count = 0;
  auto query = [&] {  // false where the driver cannot tell for this function
    for (std::size_t i = 0; i < most; ++i) {
      ParamSlot slot;
      const Outcome r = param_info(fn, i, slot);
      if (r.result == ffi::CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
      if (r.result == ffi::CUDA_ERROR_NOT_SUPPORTED) return false;
      if (!r.ok()) layout_query_failed(fn, r, where);
      got[count++] = slot;
    }
    return true;
  };
  if (fn.library_kernel()) {
    const Context in = layout_query_context(where);
    const SwitchCurrent current(in.raw(), where);
    if (!query()) return;
  } else if (!query()) {
    return;
  }
  // The driver places each parameter at its alignment in the constant bank,
  // and reports offsets from where the parameters begin, which need not be
  // a multiple of the largest alignment (on the H100 a 128-byte-aligned
  // CUtensorMap first comes at 112). So the declared layout is laid out
  // from every base the bank could have (mod 128, in 4-byte steps) and
  // accepted when one of them gives the driver's offsets.
  constexpr std::size_t aligns[n + 1] = {alignof(Params)..., 1};
  bool same = false;
  for (std::size_t base = 0; !same && count == n && base < 128; base += 4) {
    same = true;
    std::size_t at = base;
    for (std::size_t i = 0; same && i < n; ++i) {
      at = (at + aligns[i] - 1) / aligns[i] * aligns[i];
      same = got[i].offset == at - base && got[i].size == want[i].size;
      at += want[i].size;
    }
  }
  if (!same) layout_mismatch(fn, type_name<void(Params...)>(), want, n, got, count, where);
}

template <class Signature>
struct kernel_checker;
template <class... Params>
struct kernel_checker<void(Params...)> {
  static void check(const Function& fn, SourceLocation where) { check_parameters<Params...>(fn, where); }
};

}  // namespace detail

template <class Signature>
Kernel<Signature> Module::kernel(std::string_view name, SourceLocation where) const {
  Function fn = function(name, where);
  detail::kernel_checker<Signature>::check(fn, where);
  return Kernel<Signature>(std::move(fn));
}

OXICUDA_DETAIL_NAMESPACE_END
