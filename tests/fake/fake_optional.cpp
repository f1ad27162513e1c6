// Entry points the fake leaves out of the variant that models an older
// driver: the loader must treat each as missing, and only the calls that
// need one may fail.
#include "fake_cuda.hpp"

#include <mutex>

namespace fake {
extern std::mutex mu;
extern long host_funcs_run;
}  // namespace fake

CUresult fake_LaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  FAKE_ENTRY(LaunchHostFunc);
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  (void)s;
  fn(data);  // the fake's queues are always drained: run it now
  std::lock_guard lock(fake::mu);
  ++fake::host_funcs_run;
  return CUDA_SUCCESS;
}
