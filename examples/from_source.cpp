// Kernels from source: a CUDA C++ string compiled at run time by NVRTC for
// the GPU at hand, a template kernel found through its name expression, both
// launched typed and checked against the CPU. The compiled module is kept in
// the on-disk cache, so the second run neither compiles nor loads NVRTC.
//
//   oxicuda-from-source        exit 0: results right; 1: wrong; 2: no GPU or no NVRTC
#include "oxicuda.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  using namespace oxicuda;
  if (!driver_info().available() || Device::count() == 0) {
    std::printf("no GPU: %s\n", driver_info().reason.c_str());
    return 2;
  }
  try {
    // [tour]
    const char* source = R"(
      template <class T>
      __global__ void axpy(T* y, const T* x, T a, unsigned n) {
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
          y[i] = a * x[i] + y[i];
      }
      extern "C" __global__ void iota(float* out, unsigned n) {
        const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = float(i);
      })";
    Context ctx = Context::primary(Device::get(0));
    Module m = module_from_source(ctx, source, {.name_expressions = {"axpy<float>"}});  // NVRTC, for this GPU
    auto iota = m.kernel<void(float*, unsigned)>("iota");                       // extern "C": its own name
    auto axpy = m.kernel<void(float*, const float*, float, unsigned)>("axpy<float>");  // a template instance

    const unsigned n = 1 << 20;
    Stream s{ctx};
    DeviceBuffer<float> x{ctx, n}, y{ctx, n};
    launch(s, iota, {.grid = n / 256, .block = 256}, x, n);  // x[i] = i
    fill_async(s, y, 1.0f);
    launch(s, axpy, {.grid = 264, .block = 256}, y, x, 2.0f, n);  // y = 2x + 1
    std::vector<float> host(n);
    copy_async(s, host, y);
    s.synchronize();
    // [/tour]
    for (unsigned i = 0; i < n; ++i)
      if (host[i] != 2.0f * float(i) + 1.0f) {
        std::printf("wrong: y[%u] = %g, not %g\n", i, double(host[i]), 2.0 * i + 1.0);
        return 1;
      }
    std::printf("ok: y = 2x + 1 for %u elements (kernel cache: %lu hit, %lu compiled)\n", n, kernel_cache_stats().hits,
                kernel_cache_stats().misses);
    if (!m.info_log().empty()) std::printf("log:\n%s\n", std::string(m.info_log()).c_str());
  } catch (const Error& e) {
    std::printf("%s\n", e.what());
    return e.library() == Library::driver ? 1 : 2;
  }
  return 0;
}
