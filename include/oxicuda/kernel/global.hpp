// oxicuda/kernel/global.hpp — Module::global: a module's __device__ or
// __constant__ variable (cuModuleGetGlobal) as a DeviceSpan, checked against
// its size.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "../memory/span.hpp"
#include "module.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// A variable's lookup failed: why, in words (`kind`: "__device__ or
// __constant__", "__managed__"; `owner`: "module", "library").
[[noreturn]] OXICUDA_DETAIL_COLD inline void variable_not_found(Outcome r, const std::string& n, const char* kind,
                                                               const char* owner, SourceLocation where) {
  fail(r, where,
       r.result == ffi::CUDA_ERROR_NOT_FOUND
           ? cat({"the ", owner, " has no ", kind, " variable named '", n,
                  "' (one in a namespace, or not extern \"C\", has a mangled name)"})
           : cat({"looking up the variable '", n, "'"}));
}

// A variable of `bytes` at `ptr` as elements of `size` bytes aligned to
// `align`: an Error when it is not a whole number of them, or not aligned.
inline void check_variable(const std::string& n, std::size_t bytes, ffi::CUdeviceptr ptr, std::size_t size,
                           std::size_t align, const char* op, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(bytes % size != 0 || ptr % align != 0))
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                cat({"the variable '", n, "' is ", std::to_string(bytes), " bytes",
                     bytes % size != 0 ? " (not a whole number of " : " at an address not aligned to ",
                     std::to_string(bytes % size != 0 ? size : align),
                     bytes % size != 0 ? "-byte elements)" : " bytes", ": not a span of T"}),
                where));
}

}  // namespace detail

template <class T>
DeviceSpan<T> Module::global(std::string_view name, SourceLocation where) const {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "Module::global<T>: T is an element type");
  constexpr const char* op = "oxicuda::Module::global";
  (void)detail::checked(*this, "oxicuda::Module", op, where);
  const std::string n = symbol_name(lowered(name), "variable", op, where);
  ffi::CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  detail::Outcome r;
  {
    ScopedCurrent current(state_->ctx, where);
    r = OXICUDA_DRIVER(ModuleGetGlobal, &ptr, &bytes, state_->raw, n.c_str());
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::variable_not_found(r, n, "__device__ or __constant__", "module", where);
  detail::check_variable(n, bytes, ptr, sizeof(T), alignof(T), op, where);
  return DeviceSpan<T>(ptr, bytes / sizeof(T), state_->ctx.raw());
}

OXICUDA_DETAIL_NAMESPACE_END
