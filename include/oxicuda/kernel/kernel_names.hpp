// oxicuda/kernel/kernel_names.hpp — a module's kernels by their C++ names, for
// images built ahead of time (nvcc's cubin or fatbin), where no name
// expression recorded the lowered names: the driver lists the module's
// functions (cuModuleGetFunctionCount, cuModuleEnumerateFunctions: CUDA
// 12.4) and names each (cuFuncGetName: 12.3); each name is demangled
// (the C++ runtime's __cxa_demangle, where there is one) and matched against
// the C++ name asked for. Module::function falls back to this when no
// symbol has the name.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../driver/current.hpp"
#include "module.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// `symbol` demangled, or itself. Only a mangled function name ("_Z...") is
// demangled: __cxa_demangle also reads type names, and would make "f" "float".
// The C++ runtime's __cxa_demangle is found in the process (its <cxxabi.h>
// would put a namespace `abi` at global scope in every includer's way).
inline std::string demangle(const char* symbol) {
#if !OXICUDA_DETAIL_WINDOWS
  using Demangle = char* (*)(const char*, char*, std::size_t*, int*);
  static const Demangle fn = [] {
    Demangle f = nullptr;
    void* p = ::dlsym(RTLD_DEFAULT, "__cxa_demangle");
    std::memcpy(&f, &p, sizeof f);
    return f;
  }();
  if (!fn || std::string_view(symbol).substr(0, 2) != "_Z") return symbol;
  int status = 0;
  char* d = fn(symbol, nullptr, nullptr, &status);
  if (d && status == 0) {
    std::string out(d);
    std::free(d);
    return out;
  }
  std::free(d);
#endif
  return symbol;
}

// `s` without white space and without a leading "void " (a kernel's return
// type), for comparing C++ names as written by people and by the demangler.
inline std::string compact_name(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  if (s.size() > 5 && s.substr(0, 4) == "void" && (s[4] == ' ' || s[4] == '\t' || s[4] == '\n')) s.remove_prefix(5);
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n') out.push_back(c);
  return out;
}

// The part of a compact demangled name before its parameter list: the
// first '(' outside the template arguments.
inline std::string_view without_parameters(std::string_view compact) {
  int depth = 0;
  for (std::size_t i = 0; i < compact.size(); ++i) {
    if (compact[i] == '<') ++depth;
    if (compact[i] == '>') --depth;
    if (compact[i] == '(' && depth == 0) return compact.substr(0, i);
  }
  return compact;
}

// The module's kernels and their handles, as the driver lists them.
struct ModuleKernels {
  std::vector<KernelName> names;
  std::vector<CUfunction> raw;
};

inline ModuleKernels module_kernels(const Module& m, const char* call, SourceLocation where) {
  (void)checked(m, "oxicuda::Module", call, where);
  ModuleKernels k;
  const ScopedCurrent current(m.context(), where);
  unsigned count = 0;
  check(OXICUDA_DRIVER(ModuleGetFunctionCount, &count, m.raw()), where);
  k.raw.assign(count, nullptr);
  if (count) check(OXICUDA_DRIVER(ModuleEnumerateFunctions, k.raw.data(), count, m.raw()), where);
  for (CUfunction f : k.raw) {
    const char* name = nullptr;
    check(OXICUDA_DRIVER(FuncGetName, &name, f), where);
    k.names.push_back({name ? name : "", demangle(name ? name : "")});
  }
  return k;
}

// The kernels whose symbol, demangled signature ("saxpy<float>(float*,
// float)", with or without "void", white space ignored) or demangled name
// without its parameters ("saxpy<float>", "ns::scale") is `name`.
inline std::vector<std::size_t> kernels_named(const std::vector<KernelName>& names, std::string_view name) {
  const std::string want = compact_name(name);
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string d = compact_name(names[i].demangled);
    if (names[i].symbol == name || d == want || without_parameters(d) == want) found.push_back(i);
  }
  return found;
}

// The kernels listed for a message: "saxpy<float>(float*) [_Z5saxpy...]", ...
inline std::string kernel_list(const std::vector<KernelName>& names, const std::vector<std::size_t>& which) {
  std::string list;
  std::size_t shown = 0;
  for (std::size_t i : which) {
    if (++shown > 16) return cat({list, ", and ", std::to_string(which.size() - 16), " more"});
    const KernelName& k = names[i];
    list = cat({list, list.empty() ? "" : ", ", k.demangled,
                k.demangled == k.symbol ? std::string() : cat({" [", k.symbol, "]"})});
  }
  return list.empty() ? std::string("none") : list;
}

// The kernel whose C++ name or signature is `name`, for Module::function
// once cuModuleGetFunction answered `not_found`: its handle and symbol. An
// Error when there is none (listing the module's kernels) or several
// (overloads: listing them), or when the driver cannot list its kernels.
struct FoundKernel {
  CUfunction raw = nullptr;
  std::string symbol;
};

// The C++ name lookup of a module's or a library's kernels (`owner`,
// "module" or "library"; `enumerate`, the driver's entry that lists them;
// `list`, what lists them once asked), for `op`.
inline FoundKernel pick_kernel(std::string_view name, Outcome not_found, bool can_list, const char* owner,
                               const char* enumerate, ModuleKernels (*list)(const void*, const char*, SourceLocation),
                               const void* of, const char* op, SourceLocation where) {
  const std::string none = cat({"the ", owner, " has no kernel named '", name, "'"});
  if (!can_list)
    fail(not_found, where,
         cat({none, " (a C++ kernel not declared extern \"C\" has a mangled name; this driver lacks ", enumerate,
              " (CUDA 12.4), which finds one by its C++ name)"}));
  ModuleKernels k = list(of, op, where);
  const std::vector<std::size_t> found = kernels_named(k.names, name);
  if (found.size() == 1) return {k.raw[found.front()], std::move(k.names[found.front()].symbol)};
  if (found.size() > 1)
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, op,
                cat({"'", name, "' names ", std::to_string(found.size()), " kernels of the ", owner, " (overloads): ",
                     kernel_list(k.names, found), "; give its signature, as the list writes it, or its symbol"}),
                where));
  std::vector<std::size_t> all(k.names.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  fail(not_found, where,
       cat({none, ": no symbol, C++ name or signature is that (a template's instance is in the image only where "
                  "the build instantiated it",
            "); its kernels: ", kernel_list(k.names, all)}));
}

inline FoundKernel kernel_by_cpp_name(const Module& m, std::string_view name, Outcome not_found,
                                      SourceLocation where) {
  return pick_kernel(
      name, not_found,
      !missing(ffi::Entry::ModuleGetFunctionCount) && !missing(ffi::Entry::ModuleEnumerateFunctions) &&
          !missing(ffi::Entry::FuncGetName),
      "module", "cuModuleEnumerateFunctions",
      [](const void* of, const char* op, SourceLocation w) { return module_kernels(*static_cast<const Module*>(of), op, w); },
      &m, "oxicuda::Module::function", where);
}

}  // namespace detail

inline std::vector<KernelName> Module::kernel_names(SourceLocation where) const {
  return detail::module_kernels(*this, "oxicuda::Module::kernel_names", where).names;
}

OXICUDA_DETAIL_NAMESPACE_END
