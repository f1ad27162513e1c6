// oxicuda/kernel/library_kernel.hpp — a KernelLibrary's kernels and variables:
// KernelLibrary::function (a Function of no context, cuLibraryGetKernel),
// KernelLibrary::kernel<Sig> (typed, checked with cuKernelGetParamInfo as
// Module::kernel is), the library's list of kernels (cuLibraryEnumerateKernels,
// cuKernelGetName), and its variables (cuLibraryGetGlobal, cuLibraryGetManaged).
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "global.hpp"
#include "kernel.hpp"
#include "kernel_names.hpp"
#include "library.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// The library's kernels and their handles (each CUkernel held as the
// CUfunction the driver takes it for), as the driver lists them.
inline ModuleKernels library_kernels(const KernelLibrary& lib, const char* call, SourceLocation where) {
  CUlibrary raw = checked(lib, "oxicuda::KernelLibrary", call, where);
  ModuleKernels k;
  unsigned count = 0;
  check(OXICUDA_DRIVER(LibraryGetKernelCount, &count, raw), where);
  k.raw.assign(count, nullptr);
  if (count)
    check(OXICUDA_DRIVER(LibraryEnumerateKernels, reinterpret_cast<CUkernel*>(k.raw.data()), count, raw), where);
  for (CUfunction f : k.raw) {
    const char* name = nullptr;
    check(OXICUDA_DRIVER(KernelGetName, &name, reinterpret_cast<CUkernel>(f)), where);
    k.names.push_back({name ? name : "", demangle(name ? name : "")});
  }
  return k;
}

// What KernelLibrary::function needs of Function beyond its public API.
struct LibraryKernelAccess {
  static Function make(const KernelLibrary& lib, CUkernel k, std::string name) {
    return Function(reinterpret_cast<CUfunction>(k),
                    Shared<const Function::State>::make(lib, Context(), k, std::move(name)));
  }
};

}  // namespace detail

inline Function KernelLibrary::function(std::string_view name, SourceLocation where) const {
  constexpr const char* op = "oxicuda::KernelLibrary::function";
  (void)detail::checked(*this, "oxicuda::KernelLibrary", op, where);
  std::string n = Module::symbol_name(lowered(name), "kernel", op, where);
  CUkernel k = nullptr;
  const detail::Outcome r = OXICUDA_DRIVER(LibraryGetKernel, &k, state_->raw, n.c_str());
  if (OXICUDA_DETAIL_UNLIKELY(r.result == ffi::CUDA_ERROR_NOT_FOUND)) {
    // No symbol by that name: a kernel whose C++ name or signature it is.
    detail::FoundKernel found = detail::pick_kernel(
        n, r,
        !detail::missing(ffi::Entry::LibraryGetKernelCount) && !detail::missing(ffi::Entry::LibraryEnumerateKernels) &&
            !detail::missing(ffi::Entry::KernelGetName),
        "library", "cuLibraryEnumerateKernels",
        [](const void* of, const char* call, SourceLocation w) {
          return detail::library_kernels(*static_cast<const KernelLibrary*>(of), call, w);
        },
        this, op, where);
    return detail::LibraryKernelAccess::make(*this, reinterpret_cast<CUkernel>(found.raw), std::move(found.symbol));
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::fail(r, where, detail::cat({"looking up kernel '", n, "'"}));
  return detail::LibraryKernelAccess::make(*this, k, std::move(n));
}

template <class Signature>
Kernel<Signature> KernelLibrary::kernel(std::string_view name, SourceLocation where) const {
  Function fn = function(name, where);
  detail::kernel_checker<Signature>::check(fn, where);
  return Kernel<Signature>(std::move(fn));
}

inline std::vector<KernelName> KernelLibrary::kernel_names(SourceLocation where) const {
  return detail::library_kernels(*this, "oxicuda::KernelLibrary::kernel_names", where).names;
}

template <class T>
DeviceSpan<T> KernelLibrary::global(const Context& ctx, std::string_view name, SourceLocation where) const {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "KernelLibrary::global<T>: T is an element type");
  constexpr const char* op = "oxicuda::KernelLibrary::global";
  CUlibrary raw = detail::checked(*this, "oxicuda::KernelLibrary", op, where);
  if (!ctx) detail::empty_handle("oxicuda::Context", op, where);
  const std::string n = Module::symbol_name(lowered(name), "variable", op, where);
  ffi::CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  detail::Outcome r;
  {
    const ScopedCurrent current(ctx, where);  // the driver answers for the current context
    r = OXICUDA_DRIVER(LibraryGetGlobal, &ptr, &bytes, raw, n.c_str());
  }
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::variable_not_found(r, n, "__device__ or __constant__", "library", where);
  detail::check_variable(n, bytes, ptr, sizeof(T), alignof(T), op, where);
  return DeviceSpan<T>(ptr, bytes / sizeof(T), ctx.raw());
}

template <class T>
DeviceSpan<T> KernelLibrary::managed(std::string_view name, SourceLocation where) const {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "KernelLibrary::managed<T>: T is an element type");
  constexpr const char* op = "oxicuda::KernelLibrary::managed";
  CUlibrary raw = detail::checked(*this, "oxicuda::KernelLibrary", op, where);
  const std::string n = Module::symbol_name(lowered(name), "variable", op, where);
  ffi::CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  const detail::Outcome r = OXICUDA_DRIVER(LibraryGetManaged, &ptr, &bytes, raw, n.c_str());
  if (OXICUDA_DETAIL_UNLIKELY(!r.ok())) detail::variable_not_found(r, n, "__managed__", "library", where);
  detail::check_variable(n, bytes, ptr, sizeof(T), alignof(T), op, where);
  return DeviceSpan<T>(ptr, bytes / sizeof(T));
}

OXICUDA_DETAIL_NAMESPACE_END
