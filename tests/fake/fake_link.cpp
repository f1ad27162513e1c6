// The fake driver's JIT linker (cuLink*): PTX inputs are joined, and the
// "cubin" it completes is that PTX text, which the fake's module loading
// (fake_module_launch.cpp) reads; other inputs are taken as they are.
#include "fake_state.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

// "frob" in PTX is an error, as in module loading.
namespace fake {
namespace {
struct Link {
  std::vector<std::pair<CUjit_option, void*>> opts;
  std::string ptx;
  std::string out;
};
}  // namespace
}  // namespace fake

using namespace fake;

CUresult fake_LinkCreate(unsigned int n, CUjit_option* keys, void** values, CUlinkState* out) {
  FAKE_ENTRY(LinkCreate);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  auto* l = new Link{};
  for (unsigned i = 0; i < n; ++i) l->opts.emplace_back(keys[i], values[i]);
  std::lock_guard lock(mu);
  live[l] = Kind::link;
  *out = reinterpret_cast<CUlinkState>(l);
  return CUDA_SUCCESS;
}

namespace {
CUresult add_input(CUlinkState state, CUjitInputType type, const std::string& bytes, const std::string& name) {
  std::lock_guard lock(mu);
  if (!alive(state, Kind::link)) return CUDA_ERROR_INVALID_HANDLE;
  auto* l = reinterpret_cast<Link*>(state);
  // A cubin that is not relocatable (its ELF type not ET_REL) has nothing
  // to link: the driver says "no kernel image".
  if (type == CU_JIT_INPUT_CUBIN && bytes.size() >= 18 && bytes.compare(0, 4, "\x7f" "ELF") == 0 &&
      (static_cast<unsigned char>(bytes[16]) | static_cast<unsigned char>(bytes[17]) << 8) != 1)
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (type != CU_JIT_INPUT_PTX) return CUDA_SUCCESS;
  if (bytes.find("frob") != std::string::npos) {
    write_log(l->opts, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
              "ptxas application ptx input (" + name + "); error   : Unknown instruction 'frob'");
    return CUDA_ERROR_INVALID_PTX;
  }
  l->ptx += bytes.c_str();
  l->ptx += "\n";
  return CUDA_SUCCESS;
}
}  // namespace

CUresult fake_LinkAddData(CUlinkState state, CUjitInputType type, void* data, std::size_t size, const char* name,
                          unsigned int, CUjit_option*, void**) {
  FAKE_ENTRY(LinkAddData);
  if (!data || !size) return CUDA_ERROR_INVALID_VALUE;
  // PTX is read up to its NUL, whatever the size says, as the driver reads it.
  return add_input(state, type,
                   type == CU_JIT_INPUT_PTX ? std::string(static_cast<const char*>(data))
                                            : std::string(static_cast<const char*>(data), size),
                   name ? name : "");
}

CUresult fake_LinkAddFile(CUlinkState state, CUjitInputType type, const char* path, unsigned int, CUjit_option*,
                          void**) {
  FAKE_ENTRY(LinkAddFile);
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  std::FILE* f = std::fopen(path, "rb");
  if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string bytes;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
  std::fclose(f);
  return add_input(state, type, bytes, path);
}

CUresult fake_LinkComplete(CUlinkState state, void** cubin, std::size_t* size) {
  FAKE_ENTRY(LinkComplete);
  std::lock_guard lock(mu);
  if (!alive(state, Kind::link)) return CUDA_ERROR_INVALID_HANDLE;
  if (!cubin || !size) return CUDA_ERROR_INVALID_VALUE;
  auto* l = reinterpret_cast<Link*>(state);
  if (l->ptx.empty()) {
    write_log(l->opts, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "nvlink error   : no input");
    return CUDA_ERROR_INVALID_VALUE;
  }
  l->out = l->ptx;
  *cubin = l->out.data();
  *size = l->out.size() + 1;
  return CUDA_SUCCESS;
}

CUresult fake_LinkDestroy(CUlinkState state) {
  FAKE_ENTRY(LinkDestroy);
  std::lock_guard lock(mu);
  if (!alive(state, Kind::link)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  live.erase(state);
  delete reinterpret_cast<Link*>(state);
  return CUDA_SUCCESS;
}
