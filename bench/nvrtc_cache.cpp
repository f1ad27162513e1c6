// Kernels from source: what a compile costs against a hit in the kernel
// cache, and the first launch after each. Each figure is the median of the
// rounds (wall time, steady_clock), every round in a fresh cache directory
// for the compile and in a warm one for the hit.
//
//   oxicuda-bench-nvrtc [rounds]     (default 9; on a GPU, or on the fake
//                                     driver with OXICUDA_LIBCUDA_PATH: then
//                                     the launch column is the fake's)
#include "oxicuda.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

using namespace oxicuda;
using Clock = std::chrono::steady_clock;

namespace {

// A typical kernel: a templated, grid-stride axpy with a reduction helper.
const char* const kSource = R"(
template <class T> __device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
template <class T>
__global__ void axpy_sum(T* y, const T* x, T a, unsigned n, T* total) {
  T local = 0;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
    local += y[i];
  }
  local = warp_sum(local);
  if ((threadIdx.x & 31) == 0) atomicAdd(total, local);
}
)";

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
  if (!driver_info().available()) {
    std::printf("no driver: %s\n", driver_info().reason.c_str());
    return 0;
  }
  Context ctx = Context::primary(Device::get(0));
  const bool fake = Device::get(0).name().find("fake") != std::string::npos;
  const SourceOptions options{.name_expressions = {"axpy_sum<float>"}};
  const std::string base = "/tmp/oxicuda-bench-cache-" + std::to_string(::getpid());
  std::vector<double> compile, hit, first_cold, first_hit;
  for (int r = 0; r < rounds; ++r) {
    const std::string dir = base + "-" + std::to_string(r);
    ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
    for (int pass = 0; pass < 2; ++pass) {  // a miss (compile + store + load), then a hit (load)
      const auto t0 = Clock::now();
      Module m = module_from_source(ctx, kSource, options);
      const auto t1 = Clock::now();
      DeviceBuffer<float> y{ctx, 1024}, x{ctx, 1024}, total{ctx, 1};
      Stream s{ctx};
      const auto t2 = Clock::now();
      if (!fake) {  // the fake driver cannot read the cubin's kernels
        auto k = m.kernel<void(float*, const float*, float, unsigned, float*)>("axpy_sum<float>");
        launch(s, k, {.grid = 4, .block = 256}, y, x, 2.0f, 1024u, total);
      }
      s.synchronize();
      const auto t3 = Clock::now();
      (pass == 0 ? compile : hit).push_back(ms(t1 - t0));
      (pass == 0 ? first_cold : first_hit).push_back(ms(t3 - t2));
    }
    std::system(("rm -rf '" + dir + "'").c_str());
  }
  const KernelCacheStats st = kernel_cache_stats();
  std::printf("kernel from source, median of %d rounds (%lu compiled, %lu from the cache); %s, NVRTC %d\n", rounds,
              st.misses, st.hits, Device::get(0).name().c_str(), nvrtc_info().version);
  std::printf("| | ms |\n| --- | ---: |\n");
  std::printf("| module_from_source, compiled (NVRTC + cache write + load) | %.3f |\n", median(compile));
  std::printf("| module_from_source, cache hit (read + checksum + load) | %.3f |\n", median(hit));
  std::printf("| hit / compile | %.2f%% |\n", 100.0 * median(hit) / median(compile));
  if (!fake) {
    std::printf("| kernel lookup + first launch + sync after the compile | %.3f |\n", median(first_cold));
    std::printf("| kernel lookup + first launch + sync after the hit | %.3f |\n", median(first_hit));
  }
  return 0;
}
