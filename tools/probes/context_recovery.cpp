// Raw driver probe for issue 30.2 (a context destroyed while current on another
// thread) and 30.5 (recovering from a device-side assert). Each scenario runs
// in its own child, forked before the parent touches CUDA. Not part of the
// build; with the toolkit here:
//   cd tools/probes && nvcc -ptx -arch=compute_90 context_recovery_kernels.cu -o k.ptx &&
//   python3 -c "open('ptx.inc','w').write('R\"PTX(' + open('k.ptx').read() + ')PTX\"')" &&
//   g++ -std=c++20 -O1 -I/usr/local/cuda/include context_recovery.cpp -o ../../.device/probe30 -ldl -lpthread
// What it printed on an H100 with driver 580.159.04 is in CHANGELOG (issue 30.2 and 30.5).
#include <cuda.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
static const char* kPtx =
#include "ptx.inc"
    ;
#define F(name) static decltype(&::name) p_##name;
#define LOAD(name, sym) p_##name = (decltype(&::name))dlsym(h, sym)
F(cuInit) F(cuDeviceGet) F(cuCtxCreate_v4) F(cuCtxDestroy_v2) F(cuCtxGetCurrent) F(cuCtxSetCurrent) F(cuCtxGetDevice)
F(cuStreamCreate) F(cuStreamDestroy_v2) F(cuDevicePrimaryCtxRetain) F(cuDevicePrimaryCtxRelease_v2)
F(cuDevicePrimaryCtxReset_v2) F(cuCtxPopCurrent_v2) F(cuCtxPushCurrent_v2) F(cuModuleLoadData) F(cuModuleGetFunction)
F(cuLaunchKernel) F(cuCtxSynchronize) F(cuMemAlloc_v2) F(cuMemcpyHtoD_v2) F(cuMemcpyDtoH_v2) F(cuGetErrorName)
F(cuMemFree_v2) F(cuModuleUnload) F(cuStreamSynchronize) F(cuCtxGetId)
static const char* nm(CUresult r) { const char* s = "?"; p_cuGetErrorName(r, &s); return s; }
#define SAY(expr) do { CUresult r_ = (expr); std::printf("  %-60s -> %s\n", #expr, nm(r_)); std::fflush(stdout); } while (0)
#define GET(expr) ([&] { CUresult r_ = (expr); std::printf("  %-60s -> %s\n", #expr, nm(r_)); std::fflush(stdout); return r_; }())
static CUdevice dev;
static CUcontext create_ctx() { CUcontext c = nullptr; CUctxCreateParams p{}; SAY(p_cuCtxCreate_v4(&c, &p, 0, dev)); return c; }
// Work in the current context: n floats doubled. Returns whether right.
static bool work() {
  CUmodule m; CUfunction f; CUdeviceptr a = 0, b = 0; unsigned n = 4096;
  if (GET(p_cuModuleLoadData(&m, kPtx))) return false;
  if (GET(p_cuModuleGetFunction(&f, m, "twice"))) return false;
  if (GET(p_cuMemAlloc_v2(&a, n * 4)) || GET(p_cuMemAlloc_v2(&b, n * 4))) return false;
  std::vector<float> h(n, 1.5f), back(n);
  if (GET(p_cuMemcpyHtoD_v2(a, h.data(), n * 4))) return false;
  void* args[] = {&b, &a, &n};
  if (GET(p_cuLaunchKernel(f, 16, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr))) return false;
  if (GET(p_cuMemcpyDtoH_v2(back.data(), b, n * 4))) return false;
  unsigned right = 0; for (float x : back) right += x == 3.0f;
  std::printf("  work: %u of %u right\n", right, n); std::fflush(stdout);
  p_cuMemFree_v2(a); p_cuMemFree_v2(b); p_cuModuleUnload(m);
  return right == n;
}
static void do_assert() {
  CUmodule m; CUfunction f; unsigned one = 1; void* args[] = {&one};
  SAY(p_cuModuleLoadData(&m, kPtx)); SAY(p_cuModuleGetFunction(&f, m, "boom"));
  SAY(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  SAY(p_cuCtxSynchronize());
}
// 30.2: C created and current here, destroyed on another thread.
static CUcontext destroyed_elsewhere() {
  CUcontext c = create_ctx();
  unsigned long long id0 = 0; SAY(p_cuCtxGetId(nullptr, &id0));
  std::thread([c] { SAY(p_cuCtxDestroy_v2(c)); }).join();
  CUcontext cur = nullptr; SAY(p_cuCtxGetCurrent(&cur));
  std::printf("  current == destroyed: %d\n", cur == c);
  CUdevice d = -1; SAY(p_cuCtxGetDevice(&d));
  unsigned long long id1 = 0; SAY(p_cuCtxGetId(nullptr, &id1));
  std::printf("  id before %llu, after %llu\n", id0, id1);
  return c;
}
static void s_stream_in_primary() {
  destroyed_elsewhere(); CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev));
  SAY(p_cuCtxSetCurrent(p)); CUstream s; SAY(p_cuStreamCreate(&s, 0)); SAY(p_cuStreamDestroy_v2(s));
  std::printf("  work: %d\n", work());
}
static void s_stream_guarded() {  // as oxicuda's guard: switch to primary, create, restore none, destroy under the guard
  destroyed_elsewhere(); CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev));
  SAY(p_cuCtxSetCurrent(p)); CUstream s; SAY(p_cuStreamCreate(&s, 0)); SAY(p_cuCtxSetCurrent(nullptr));
  SAY(p_cuCtxSetCurrent(p)); SAY(p_cuStreamDestroy_v2(s)); SAY(p_cuCtxSetCurrent(nullptr));
}
static void s_restore_destroyed() {  // the guard restoring the destroyed one
  CUcontext c = destroyed_elsewhere(); CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev));
  SAY(p_cuCtxSetCurrent(p)); CUstream s; SAY(p_cuStreamCreate(&s, 0)); SAY(p_cuCtxSetCurrent(c));
  SAY(p_cuCtxSetCurrent(p)); SAY(p_cuStreamDestroy_v2(s));
}
static void s_pop() {
  destroyed_elsewhere(); CUcontext x = nullptr; SAY(p_cuCtxPopCurrent_v2(&x));
  CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev)); SAY(p_cuCtxPushCurrent_v2(p));
  CUstream s; SAY(p_cuStreamCreate(&s, 0)); SAY(p_cuStreamDestroy_v2(s)); std::printf("  work: %d\n", work());
}
static void s_stream_destroy_with_dangling_current() {  // oxicuda's deleter: no switch
  destroyed_elsewhere(); CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev));
  SAY(p_cuCtxSetCurrent(p)); CUstream s; SAY(p_cuStreamCreate(&s, 0)); SAY(p_cuCtxSetCurrent(nullptr));
  SAY(p_cuStreamDestroy_v2(s));
}
static void s_destroy_under_destroyed() {  // the crash seen: destroy with the destroyed context current
  CUcontext c = destroyed_elsewhere(); CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev));
  SAY(p_cuCtxSetCurrent(p)); CUstream s; SAY(p_cuStreamCreate(&s, 0)); SAY(p_cuCtxSetCurrent(c));
  SAY(p_cuStreamDestroy_v2(s));
}
static void s_new_created() {
  destroyed_elsewhere(); CUcontext n = create_ctx(); (void)n; CUstream s; SAY(p_cuStreamCreate(&s, 0));
  SAY(p_cuStreamDestroy_v2(s)); std::printf("  work: %d\n", work());
}
// 30.5
static void r_primary_reset_retained() {
  CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev)); SAY(p_cuCtxSetCurrent(p)); do_assert();
  SAY(p_cuDevicePrimaryCtxReset_v2(dev)); CUcontext q; SAY(p_cuDevicePrimaryCtxRetain(&q, dev));
  std::printf("  same handle %d\n", p == q); SAY(p_cuCtxSetCurrent(q)); std::printf("  work: %d\n", work());
}
static void r_primary_release_reset() {
  CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev)); SAY(p_cuCtxSetCurrent(p)); do_assert();
  SAY(p_cuCtxSetCurrent(nullptr)); SAY(p_cuDevicePrimaryCtxRelease_v2(dev)); SAY(p_cuDevicePrimaryCtxReset_v2(dev));
  CUcontext q; SAY(p_cuDevicePrimaryCtxRetain(&q, dev)); SAY(p_cuCtxSetCurrent(q)); std::printf("  work: %d\n", work());
}
static void r_primary_release_only() {
  CUcontext p; SAY(p_cuDevicePrimaryCtxRetain(&p, dev)); SAY(p_cuCtxSetCurrent(p)); do_assert();
  SAY(p_cuCtxSetCurrent(nullptr)); SAY(p_cuDevicePrimaryCtxRelease_v2(dev));
  CUcontext q; SAY(p_cuDevicePrimaryCtxRetain(&q, dev)); SAY(p_cuCtxSetCurrent(q)); std::printf("  work: %d\n", work());
}
static void r_created() {
  CUcontext c = create_ctx(); do_assert(); SAY(p_cuCtxDestroy_v2(c));
  CUcontext n = create_ctx(); (void)n; std::printf("  work: %d\n", work());
}
static void r_created_then_primary() {
  CUcontext c = create_ctx(); do_assert(); SAY(p_cuCtxDestroy_v2(c));
  CUcontext q; SAY(p_cuDevicePrimaryCtxRetain(&q, dev)); SAY(p_cuCtxSetCurrent(q)); std::printf("  work: %d\n", work());
}
int main() {
  struct { const char* name; void (*f)(); } all[] = {
      {"30.2 stream in primary after", s_stream_in_primary}, {"30.2 guarded like oxicuda", s_stream_guarded},
      {"30.2 restore the destroyed one", s_restore_destroyed}, {"30.2 pop then push primary", s_pop},
      {"30.2 a new created context", s_new_created},
      {"30.2 stream destroyed with none current", s_stream_destroy_with_dangling_current},
      {"30.2 stream destroyed with the destroyed one current", s_destroy_under_destroyed},
      {"30.5 primary: reset while retained", r_primary_reset_retained},
      {"30.5 primary: release, reset, retain", r_primary_release_reset},
      {"30.5 primary: release, retain (no reset)", r_primary_release_only},
      {"30.5 created: destroy, create another", r_created},
      {"30.5 created: destroy, then the primary", r_created_then_primary}};
  for (auto& s : all) {
    std::printf("== %s\n", s.name); std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      void* h = dlopen("libcuda.so.1", RTLD_NOW);
      if (!h) { std::printf("no libcuda\n"); _exit(3); }
      LOAD(cuInit, "cuInit"); LOAD(cuDeviceGet, "cuDeviceGet"); LOAD(cuCtxCreate_v4, "cuCtxCreate_v4");
      LOAD(cuCtxDestroy_v2, "cuCtxDestroy_v2"); LOAD(cuCtxGetCurrent, "cuCtxGetCurrent"); LOAD(cuCtxSetCurrent, "cuCtxSetCurrent");
      LOAD(cuCtxGetDevice, "cuCtxGetDevice"); LOAD(cuStreamCreate, "cuStreamCreate"); LOAD(cuStreamDestroy_v2, "cuStreamDestroy_v2");
      LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"); LOAD(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2");
      LOAD(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset_v2"); LOAD(cuCtxPopCurrent_v2, "cuCtxPopCurrent_v2");
      LOAD(cuCtxPushCurrent_v2, "cuCtxPushCurrent_v2"); LOAD(cuModuleLoadData, "cuModuleLoadData");
      LOAD(cuModuleGetFunction, "cuModuleGetFunction"); LOAD(cuLaunchKernel, "cuLaunchKernel"); LOAD(cuCtxSynchronize, "cuCtxSynchronize");
      LOAD(cuMemAlloc_v2, "cuMemAlloc_v2"); LOAD(cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2"); LOAD(cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2");
      LOAD(cuGetErrorName, "cuGetErrorName"); LOAD(cuMemFree_v2, "cuMemFree_v2"); LOAD(cuModuleUnload, "cuModuleUnload");
      LOAD(cuStreamSynchronize, "cuStreamSynchronize"); LOAD(cuCtxGetId, "cuCtxGetId");
      p_cuInit(0); p_cuDeviceGet(&dev, 0);
      s.f();
      std::printf("  (returned)\n"); std::fflush(stdout);
      _exit(0);
    }
    int st = 0; waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) std::printf("  CHILD KILLED BY SIGNAL %d\n", WTERMSIG(st));
    else std::printf("  child exit %d\n", WEXITSTATUS(st));
    std::fflush(stdout);
  }
}
