// Issue 24, items 12 and 13 on the real NVRTC (the fake driver beneath): the
// toolkit's own headers through CompileOptions::toolkit_includes
// (<cooperative_groups.h>, which under CUDA 13 needs include/cccl for
// <cuda/std/...>), found beside the loaded NVRTC or in a toolkit; the kernel
// cache's rule for them. Where no toolkit headers are found (NVIDIA's NVRTC
// wheel alone ships none) the cases say so and check only the Error.
#include "fake_driver.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

using namespace oxicuda;

namespace {

const char* const kCooperative = R"(#include <cooperative_groups.h>
#include <cuda/std/type_traits>
namespace cg = cooperative_groups;
extern "C" __global__ void synced(int* x) {
  cg::thread_block block = cg::this_thread_block();
  block.sync();
  x[block.thread_rank()] = cuda::std::is_same_v<int, int> ? 1 : 0;
})";

// The toolkit's include directories, or empty with a message saying why.
std::vector<std::string> toolkit_headers() {
  try {
    return toolkit_include_paths();
  } catch (const Error& e) {
    CHECK(e.code() == ffi::CUDA_ERROR_FILE_NOT_FOUND);
    CHECK(e.detail().find("tried ") != std::string::npos);
    MESSAGE("skipped (no toolkit headers beside this NVRTC): ", e.what());
    return {};
  }
}

}  // namespace

TEST_CASE("issue 24 (12), real NVRTC: toolkit_includes compiles <cooperative_groups.h> and <cuda/std/...>") {
  const std::vector<std::string> dirs = toolkit_headers();
  // Without the option, NVRTC has no directory to look in.
  const Error without = error_of([] { (void)Program(kCooperative).compile({.arch = "sm_90"}); });
  CHECK(without.code() == ffi::NVRTC_ERROR_COMPILATION);
  CHECK(std::string(without.what()).find("cooperative_groups.h") != std::string::npos);
  if (dirs.empty()) return;
  const Compiled c = Program(kCooperative).compile({.arch = "sm_90", .toolkit_includes = true});
  CHECK(c.kind == CodeKind::cubin);
  CHECK(c.code.find("synced") != std::string::npos);
  if (nvrtc_version() >= 13000) {
    // CUDA 13 keeps CCCL under include/cccl: include/ alone is not enough.
    REQUIRE(dirs.size() == 2);
    CHECK(dirs[1] == dirs[0] + "/cccl");
    const Error half = error_of([&] { (void)Program(kCooperative).compile({.arch = "sm_90", .include_paths = {dirs[0]}}); });
    CHECK(std::string(half.what()).find("cuda/std/type_traits") != std::string::npos);
  }
}

TEST_CASE("issue 24 (12), real NVRTC: module_from_source with toolkit_includes is compiled, never cached") {
  if (toolkit_headers().empty()) return;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/oxicuda-toolkit-cache-" + std::to_string(::getpid());
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  const Context ctx = Context::primary(Device::get(0));
  const KernelCacheStats before = kernel_cache_stats();
  const SourceOptions o{.compile = {.toolkit_includes = true}};
  const Module a = module_from_source(ctx, kCooperative, o);
  const Module b = module_from_source(ctx, kCooperative, o);
  CHECK(a);
  CHECK(b);
  CHECK(kernel_cache_stats().hits == before.hits);
  CHECK(std::string(b.info_log()).find("kernel cache: not used, since the toolkit's include directories are given") !=
        std::string::npos);
  ::unsetenv("OXICUDA_CACHE_DIR");
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("issue 24 (13), real NVRTC and nvJitLink: LtoLinker::add_device_runtime resolves a device-side launch") {
  try {
    (void)detail::find_device_runtime(SourceLocation::current());
  } catch (const Error& e) {
    MESSAGE("skipped: ", e.what());
    return;
  }
  const char* const parent = R"(extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2; }
extern "C" __global__ void parent(float* x) { child<<<1, 32>>>(x); })";
  const Compiled c = Program(parent).compile({.arch = "sm_90", .relocatable = true});
  LtoLinker link("sm_90", {}, false);
  link.add(c).add_device_runtime();
  const std::string cubin = link.complete();
  CHECK(cubin.substr(0, 4) == "\x7f" "ELF");
  CHECK(cubin.find("parent") != std::string::npos);
  // The same link without it: the device runtime's symbols are unresolved.
  LtoLinker without("sm_90", {}, false);
  without.add(c);
  CHECK(std::string(error_of([&] { (void)without.complete(); }).what()).find("Undefined reference") !=
        std::string::npos);
}
