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
#include <cstdint>
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

// A hit against reading the entry's file and loading its image with the
// driver (cuModuleLoadDataEx), side by side, each the median of `n`, in one
// warm cache; then where a hit's time goes, step by step.
void hit_breakdown(const Context& ctx, const SourceOptions& options, int n) {
  const std::string dir = "/tmp/oxicuda-bench-hit-" + std::to_string(::getpid());
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  (void)module_from_source(ctx, kSource, options);  // the entry
  const ComputeCapability cc = ctx.device().compute_capability();
  const std::string arch = "sm_" + std::to_string(cc.major * 10 + cc.minor);
  auto identity = [&] {
    return detail::library_identity_for_cache(dir, "nvrtc", "OXICUDA_LIBNVRTC_PATH", detail::nvrtc_files,
                                              sizeof detail::nvrtc_files / sizeof detail::nvrtc_files[0],
                                              &nvrtc_info);
  };
  const std::string key = detail::source_key(kSource, options, arch, identity());
  const std::string path = dir + "/" + key + ".bin";
  std::string payload, note;
  if (!detail::cache_read(dir, key, payload, note)) {
    std::printf("no entry at %s (%s)\n", path.c_str(), note.c_str());
    return;
  }
  detail::CacheEntry entry;
  if (!detail::decode_entry(payload, entry, &options.name_expressions).empty()) return;
  const std::size_t image_size = entry.image.size();
  auto read_file = [&](std::string& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return;
    std::fseek(f, 0, SEEK_END);
    bytes.resize(static_cast<std::size_t>(std::ftell(f)));
    std::fseek(f, 0, SEEK_SET);
    if (std::fread(bytes.data(), 1, bytes.size(), f) != bytes.size()) bytes.clear();
    std::fclose(f);
  };
  std::vector<double> hit, raw, t_dir, t_uncachable, t_identity, t_key, t_read, t_decode, t_load, t_checksum;
  for (int i = 0; i < n; ++i) {
    {
      const auto t0 = Clock::now();
      Module m = module_from_source(ctx, kSource, options);
      const auto t1 = Clock::now();
      hit.push_back(ms(t1 - t0) * 1000);
    }
    {
      std::string bytes;
      CUmodule raw_module = nullptr;
      ScopedCurrent current(ctx);
      const auto t0 = Clock::now();
      read_file(bytes);
      const detail::Outcome r = OXICUDA_DRIVER(ModuleLoadDataEx, &raw_module,
                                               bytes.data() + bytes.size() - image_size, 0u, nullptr, nullptr);
      const auto t1 = Clock::now();
      if (r.ok()) (void)OXICUDA_DRIVER(ModuleUnload, raw_module);
      raw.push_back(ms(t1 - t0) * 1000);
    }
    // The hit's steps, one at a time.
    auto t0 = Clock::now();
    std::string dir_note;
    (void)detail::cache_directory(dir_note);
    auto t1 = Clock::now();
    t_dir.push_back(ms(t1 - t0) * 1000);
    t0 = Clock::now();
    (void)detail::uncachable(kSource, options);
    t1 = Clock::now();
    t_uncachable.push_back(ms(t1 - t0) * 1000);
    t0 = Clock::now();
    const std::string id = identity();
    t1 = Clock::now();
    t_identity.push_back(ms(t1 - t0) * 1000);
    t0 = Clock::now();
    const std::string k = detail::source_key(kSource, options, arch, id);
    t1 = Clock::now();
    t_key.push_back(ms(t1 - t0) * 1000);
    std::string p;
    t0 = Clock::now();
    (void)detail::cache_read(dir, k, p, note);
    t1 = Clock::now();
    t_read.push_back(ms(t1 - t0) * 1000);
    t0 = Clock::now();
    const std::uint64_t sum = detail::checksum(k, p);
    t1 = Clock::now();
    t_checksum.push_back(ms(t1 - t0) * 1000 + static_cast<double>(sum & 0) );
    detail::CacheEntry e;
    t0 = Clock::now();
    (void)detail::decode_entry(p, e, &options.name_expressions);
    t1 = Clock::now();
    t_decode.push_back(ms(t1 - t0) * 1000);
    Module m;
    std::string jit_error;
    t0 = Clock::now();
    (void)detail::load_entry(ctx, e, options.jit, SourceLocation::current(), m, jit_error);
    t1 = Clock::now();
    t_load.push_back(ms(t1 - t0) * 1000);
  }
  std::printf("\ncache hit against reading the entry's file + cuModuleLoadDataEx of its image (%zu bytes), "
              "median of %d, in one run\n", image_size, n);
  std::printf("| | us |\n| --- | ---: |\n");
  std::printf("| module_from_source, cache hit | %.1f |\n", median(hit));
  std::printf("| read the file + cuModuleLoadDataEx (no oxicuda) | %.1f |\n", median(raw));
  std::printf("| hit / (read + load) | %.3f |\n", median(hit) / median(raw));
  std::printf("| step: uncachable (the source's text rules) | %.1f |\n", median(t_uncachable));
  std::printf("| step: cache_directory (checks of the directory) | %.1f |\n", median(t_dir));
  std::printf("| step: compiler identity (key) | %.1f |\n", median(t_identity));
  std::printf("| step: key hash | %.1f |\n", median(t_key));
  std::printf("| step: cache_read (open, read, checksum, time of use) | %.1f |\n", median(t_read));
  std::printf("| of which the checksum alone | %.1f |\n", median(t_checksum));
  std::printf("| step: decode_entry (bounds, names, image checks) | %.1f |\n", median(t_decode));
  std::printf("| step: load_entry (cuModuleLoadDataEx with JIT logs) | %.1f |\n", median(t_load));
  std::system(("rm -rf '" + dir + "'").c_str());
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
  hit_breakdown(ctx, options, rounds * 20);
  return 0;
}
