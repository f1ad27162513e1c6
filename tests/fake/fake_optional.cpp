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
