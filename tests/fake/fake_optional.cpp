// Entry points the fake leaves out of the variant that models an older
// driver: the loader must treat each as missing, and only the calls that
// need one may fail.
#include "fake_state.hpp"

#include <thread>

// As the driver, the function runs on a thread of the driver's, where CUDA
// calls are refused; it runs now, and the call returns once it has, unless
// the stream is held (fake_hold): then it runs with the stream's other work.
CUresult fake_LaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  FAKE_ENTRY(LaunchHostFunc);
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(fake::mu);
    if (const CUresult r = fake::use_stream(s)) return r;
    fake::Work w;
    w.type = CU_GRAPH_NODE_TYPE_HOST;
    w.fn = fn;
    w.data = data;
    bool captured = false;
    if (const CUresult r = fake::capture_work(s, std::move(w), captured); captured) return r;
    if (fake::held(s)) {
      fake::defer(s, [fn, data] { fake::run_host_function(fn, data); });
      return CUDA_SUCCESS;
    }
  }
  std::thread([fn, data] {
    fake::in_host_function = true;
    fn(data);
  }).join();
  std::lock_guard lock(fake::mu);
  ++fake::host_funcs_run;
  return CUDA_SUCCESS;
}

CUresult fake_FuncGetParamInfo(CUfunction fn, std::size_t index, std::size_t* offset, std::size_t* size) {
  FAKE_ENTRY(FuncGetParamInfo);
  std::lock_guard lock(fake::mu);
  if (!fake::alive(fn, fake::Kind::function)) return CUDA_ERROR_INVALID_HANDLE;
  const auto& params = reinterpret_cast<fake::Func*>(fn)->params;
  if (index >= params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = params[index].offset;
  if (size) *size = params[index].size;
  return CUDA_SUCCESS;
}

// As the driver (CUDA 12.4): the module's functions in the order of its
// image; at most `n` handles are written.
CUresult fake_ModuleGetFunctionCount(unsigned int* count, CUmodule mod) {
  FAKE_ENTRY(ModuleGetFunctionCount);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(fake::mu);
  if (!fake::alive(mod, fake::Kind::module)) return CUDA_ERROR_INVALID_HANDLE;
  *count = static_cast<unsigned>(reinterpret_cast<fake::Module*>(mod)->funcs.size());
  return CUDA_SUCCESS;
}

CUresult fake_ModuleEnumerateFunctions(CUfunction* functions, unsigned int n, CUmodule mod) {
  FAKE_ENTRY(ModuleEnumerateFunctions);
  if (!functions && n) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(fake::mu);
  if (!fake::alive(mod, fake::Kind::module)) return CUDA_ERROR_INVALID_HANDLE;
  const auto& funcs = reinterpret_cast<fake::Module*>(mod)->funcs;
  for (unsigned i = 0; i < n && i < funcs.size(); ++i) functions[i] = reinterpret_cast<CUfunction>(funcs[i]);
  return CUDA_SUCCESS;
}

// The name as the image has it (the mangled one of a C++ kernel), valid
// while the module is loaded; a null output or function is INVALID_VALUE.
CUresult fake_FuncGetName(const char** name, CUfunction fn) {
  FAKE_ENTRY(FuncGetName);
  if (!name || !fn) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(fake::mu);
  if (!fake::alive(fn, fake::Kind::function)) return CUDA_ERROR_INVALID_HANDLE;
  *name = reinterpret_cast<fake::Func*>(fn)->name.c_str();
  return CUDA_SUCCESS;
}
