// The fake driver's libraries (cuLibrary*, cuKernel*: CUDA 12.0, the
// enumeration 12.4), over its modules (fake_module_launch.cpp). A library
// keeps its image and one reading of it (its kernels: the module's
// functions, with their names and parameters; its __managed__ variables,
// one for every device); it is loaded into a context, as a module of kind
// library_module (not the caller's to unload), when first used there: a
// kernel's function (cuKernelGetFunction, or a launch of the kernel on a
// stream of that context), the library's module, or a global. PTX marks a
// managed variable `.attribute(.managed)` on its line. This file is one of
// the optional ones: the fake_cuda_old variant has no libraries.
#include "fake_state.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fake {

namespace {

struct Library;
struct Kernel {
  Library* lib;
  std::size_t index;  // among the functions of each of the library's modules
};
struct Library {
  std::string image;             // PTX without its managed attributes (empty: a cubin, no kernels)
  Module* reading = nullptr;     // the image read once: its kernels, and the managed variables' memory
  std::vector<std::string> managed;  // the names of its managed variables
  std::vector<Kernel*> kernels;
  std::vector<std::pair<CUcontext, Module*>> loaded;
};

// The library in `ctx` (with `mu` held), loaded there first; null when it
// cannot be (no context).
Module* in_context(Library& lib, CUcontext ctx) {
  if (!ctx) return nullptr;
  for (auto& [c, m] : lib.loaded)
    if (c == ctx) return m;
  Module* m = nullptr;
  std::vector<std::pair<CUjit_option, void*>> none;
  static const char cubin[] = "\x7f" "ELF";
  if (read_module(ctx, lib.image.empty() ? cubin : lib.image.c_str(), none, m) != CUDA_SUCCESS) return nullptr;
  add_module(m, Kind::library_module);
  lib.loaded.emplace_back(ctx, m);
  return m;
}

// With `mu` held: a live kernel's function in `ctx`.
Func* kernel_in(CUfunction fn, CUcontext ctx) {
  if (!alive(fn, Kind::kernel)) return nullptr;
  const Kernel& k = *reinterpret_cast<Kernel*>(fn);
  Module* m = in_context(*k.lib, ctx);
  return m && k.index < m->funcs.size() ? m->funcs[k.index] : nullptr;
}

// Installs kernel_in as the resolver of library kernels (fake_module_launch.cpp).
[[maybe_unused]] const bool installed = (kernel_resolver = &kernel_in, true);

// A new library from `text` (a copy of the caller's image; null for a
// cubin), its JIT options' outputs written.
CUresult load(CUlibrary* out, const char* text, CUjit_option* keys, void** values, unsigned n,
              const CUlibraryOption* lib_keys, unsigned n_lib) {
  for (unsigned i = 0; i < n_lib; ++i)
    if (lib_keys[i] != CU_LIBRARY_BINARY_IS_PRESERVED && lib_keys[i] != CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE)
      return CUDA_ERROR_INVALID_VALUE;
  auto* lib = new Library;
  if (text) {
    // The managed variables: their lines' names, the attribute dropped for the module reader.
    std::string ptx = text;
    static const std::string attr = " .attribute(.managed)";
    for (std::size_t at; (at = ptx.find(attr)) != std::string::npos;) {
      ptx.erase(at, attr.size());
      std::string decl = ptx.substr(at, ptx.find_first_of(";=", at) - at);  // "... .u32 name[4]"
      decl = decl.substr(0, decl.find('['));
      while (!decl.empty() && decl.back() == ' ') decl.pop_back();
      lib->managed.push_back(decl.substr(decl.find_last_of(' ') + 1));
    }
    lib->image = std::move(ptx);
  }
  std::vector<std::pair<CUjit_option, void*>> opts;
  for (unsigned i = 0; i < n; ++i) opts.emplace_back(keys[i], values[i]);
  static const char cubin[] = "\x7f" "ELF";
  const CUresult r = read_module(nullptr, text ? lib->image.c_str() : cubin, opts, lib->reading);
  for (unsigned i = 0; i < n; ++i) values[i] = opts[i].second;
  if (r != CUDA_SUCCESS) {
    delete lib;
    return r;
  }
  std::lock_guard lock(mu);
  for (const Global& g : lib->reading->globals) module_variable_add(g.ptr, g.bytes);
  for (std::size_t i = 0; i < lib->reading->funcs.size(); ++i) {
    lib->kernels.push_back(new Kernel{lib, i});
    live[lib->kernels.back()] = Kind::kernel;
  }
  live[lib] = Kind::library;
  *out = reinterpret_cast<CUlibrary>(lib);
  return CUDA_SUCCESS;
}

Library* library(CUlibrary l) { return alive(l, Kind::library) ? reinterpret_cast<Library*>(l) : nullptr; }
const Func* kernel_func(CUkernel k) {
  if (!alive(k, Kind::kernel)) return nullptr;
  const Kernel& kk = *reinterpret_cast<Kernel*>(k);
  return kk.lib->reading->funcs[kk.index];
}

}  // namespace

}  // namespace fake

using namespace fake;

CUresult fake_LibraryLoadData(CUlibrary* out, const void* code, CUjit_option* keys, void** values, unsigned int n,
                              CUlibraryOption* lib_keys, void** lib_values, unsigned int n_lib) {
  FAKE_ENTRY(LibraryLoadData);
  if (!out || !code || (n && (!keys || !values)) || (n_lib && (!lib_keys || !lib_values)))
    return CUDA_ERROR_INVALID_VALUE;
  const auto* bytes = static_cast<const unsigned char*>(code);
  const bool elf = bytes[0] == 0x7f && bytes[1] == 'E';
  return load(out, elf ? nullptr : static_cast<const char*>(code), keys, values, n, lib_keys, n_lib);
}

// As the driver: CU_LIBRARY_BINARY_IS_PRESERVED is refused for a file.
CUresult fake_LibraryLoadFromFile(CUlibrary* out, const char* path, CUjit_option* keys, void** values, unsigned int n,
                                  CUlibraryOption* lib_keys, void** lib_values, unsigned int n_lib) {
  FAKE_ENTRY(LibraryLoadFromFile);
  if (!out || !path || (n && (!keys || !values)) || (n_lib && (!lib_keys || !lib_values)))
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n_lib; ++i)
    if (lib_keys[i] == CU_LIBRARY_BINARY_IS_PRESERVED) return CUDA_ERROR_INVALID_VALUE;
  std::FILE* f = std::fopen(path, "rb");
  if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string text;
  char chunk[4096];
  for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, got);
  std::fclose(f);
  if (text.empty()) return CUDA_ERROR_INVALID_IMAGE;
  const bool elf = text[0] == 0x7f && text.size() > 1 && text[1] == 'E';
  return load(out, elf ? nullptr : text.c_str(), keys, values, n, lib_keys, n_lib);
}

CUresult fake_LibraryUnload(CUlibrary l) {
  FAKE_ENTRY(LibraryUnload);
  std::lock_guard lock(mu);
  Library* lib = library(l);
  if (!lib) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (Kernel* k : lib->kernels) {
    live.erase(k);
    delete k;
  }
  for (auto& [c, m] : lib->loaded) remove_module(m);
  remove_module(lib->reading);  // (never live: its variables' memory goes)
  live.erase(lib);
  delete lib;
  return CUDA_SUCCESS;
}

CUresult fake_LibraryGetKernel(CUkernel* out, CUlibrary l, const char* name) {
  FAKE_ENTRY(LibraryGetKernel);
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Library* lib = library(l);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  for (Kernel* k : lib->kernels)
    if (lib->reading->funcs[k->index]->name == name) return *out = reinterpret_cast<CUkernel>(k), CUDA_SUCCESS;
  return CUDA_ERROR_NOT_FOUND;
}

CUresult fake_LibraryGetKernelCount(unsigned int* count, CUlibrary l) {
  FAKE_ENTRY(LibraryGetKernelCount);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Library* lib = library(l);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  *count = static_cast<unsigned>(lib->kernels.size());
  return CUDA_SUCCESS;
}

// As the driver: at most `n` handles, in the order of the image.
CUresult fake_LibraryEnumerateKernels(CUkernel* kernels, unsigned int n, CUlibrary l) {
  FAKE_ENTRY(LibraryEnumerateKernels);
  if (!kernels && n) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Library* lib = library(l);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  for (unsigned i = 0; i < n && i < lib->kernels.size(); ++i) kernels[i] = reinterpret_cast<CUkernel>(lib->kernels[i]);
  return CUDA_SUCCESS;
}

CUresult fake_LibraryGetModule(CUmodule* out, CUlibrary l) {
  FAKE_ENTRY(LibraryGetModule);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Library* lib = library(l);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = need_current_locked()) return r;
  Module* m = in_context(*lib, current());
  if (!m) return CUDA_ERROR_INVALID_CONTEXT;
  *out = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

// A variable of the library: in the current context (each context has its
// own), or for a managed one, the one for every device.
static CUresult variable(CUdeviceptr* dptr, std::size_t* bytes, CUlibrary l, const char* name, bool managed) {
  if (!name || (!dptr && !bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  Library* lib = library(l);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  bool is_managed = false;
  for (const std::string& m : lib->managed) is_managed = is_managed || m == name;
  if (managed && !is_managed) return CUDA_ERROR_NOT_FOUND;
  const Module* m = lib->reading;
  if (!managed) {
    if (const CUresult r = need_current_locked()) return r;
    m = in_context(*lib, current());
    if (!m) return CUDA_ERROR_INVALID_CONTEXT;
  }
  for (const Global& g : m->globals)
    if (g.name == name) {
      if (dptr) *dptr = g.ptr;
      if (bytes) *bytes = g.bytes;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult fake_LibraryGetGlobal(CUdeviceptr* dptr, std::size_t* bytes, CUlibrary l, const char* name) {
  FAKE_ENTRY(LibraryGetGlobal);
  return variable(dptr, bytes, l, name, false);
}

CUresult fake_LibraryGetManaged(CUdeviceptr* dptr, std::size_t* bytes, CUlibrary l, const char* name) {
  FAKE_ENTRY(LibraryGetManaged);
  return variable(dptr, bytes, l, name, true);
}

CUresult fake_KernelGetFunction(CUfunction* out, CUkernel k) {
  FAKE_ENTRY(KernelGetFunction);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (!alive(k, Kind::kernel)) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = need_current_locked()) return r;
  Func* f = kernel_in(reinterpret_cast<CUfunction>(k), current());
  if (!f) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

CUresult fake_KernelGetName(const char** name, CUkernel k) {
  FAKE_ENTRY(KernelGetName);
  if (!name || !k) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  const Func* f = kernel_func(k);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}

CUresult fake_KernelGetParamInfo(CUkernel k, std::size_t index, std::size_t* offset, std::size_t* size) {
  FAKE_ENTRY(KernelGetParamInfo);
  std::lock_guard lock(mu);
  // As driver 580 (H100): the kernel belongs to no context, but the query
  // needs one current.
  if (const CUresult r = need_current_locked()) return r;
  const Func* f = kernel_func(k);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= f->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = f->params[index].offset;
  if (size) *size = f->params[index].size;
  return CUDA_SUCCESS;
}
