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
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok()))
    detail::fail(r, where,
                 r.result == ffi::CUDA_ERROR_NOT_FOUND
                     ? detail::cat({"the module has no __device__ or __constant__ variable named '", n,
                                    "' (one in a namespace, or not extern \"C\", has a mangled name)"})
                     : detail::cat({"looking up the variable '", n, "'"}));
  if (OXICUDA_DETAIL_UNLIKELY(bytes % sizeof(T) != 0 || ptr % alignof(T) != 0))
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                        detail::cat({"the variable '", n, "' is ", std::to_string(bytes), " bytes",
                                     bytes % sizeof(T) != 0 ? " (not a whole number of " : " at an address not aligned to ",
                                     std::to_string(bytes % sizeof(T) != 0 ? sizeof(T) : alignof(T)),
                                     bytes % sizeof(T) != 0 ? "-byte elements)" : " bytes", ": not a span of T"}),
                        where));
  return DeviceSpan<T>(ptr, bytes / sizeof(T), state_->ctx.raw());
}

OXICUDA_DETAIL_NAMESPACE_END
