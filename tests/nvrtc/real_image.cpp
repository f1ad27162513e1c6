// Issue 24, item 15 on the real NVRTC: compile_image fills the kernel cache
// without a Context and without the driver (this machine may have no GPU),
// for a target given; a second compile_image hits; module_from_source on a
// "GPU machine" (the fake driver) with the same source, options and target
// hits the same entry; what NVRTC read from disk is not cached (issue 22's
// rule, as for module_from_source).
#include "fake_driver.hpp"

#include <cstdlib>
#include <string>

#include <unistd.h>

using namespace oxicuda;

namespace {
const char* const kTwice = R"(template <class T>
__global__ void twice(T* x, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2;
})";
}  // namespace

TEST_CASE("issue 24 (15), real NVRTC: compile_image without a Context; its entry serves module_from_source") {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/oxicuda-image-cache-" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  const SourceOptions o{.compile = {.arch = "sm_90"}, .name_expressions = {"twice<float>"}};
  const KernelCacheStats s0 = kernel_cache_stats();
  const SourceImage made = compile_image(kTwice, o);
  CHECK_FALSE(made.from_cache);
  CHECK_FALSE(made.is_text);
  CHECK(made.image.substr(0, 4) == "\x7f" "ELF");
  CHECK(made.lowered_name("twice<float>") == "_Z5twiceIfEvPT_j");
  CHECK(kernel_cache_stats().misses == s0.misses + 1);
  const SourceImage hit = compile_image(kTwice, o);
  CHECK(hit.from_cache);
  CHECK(hit.image == made.image);
  CHECK(hit.names == made.names);
  CHECK(kernel_cache_stats().hits == s0.hits + 1);
  // A PTX target is another entry.
  const SourceImage ptx = compile_image(kTwice, {.compile = {.arch = "compute_90"}, .name_expressions = {"twice<float>"}});
  CHECK(ptx.is_text);
  CHECK_FALSE(ptx.from_cache);
  // The same source, options and target on a machine with a driver: a hit.
  const Module m = module_from_source(Context::primary(Device::get(0)), kTwice, o);
  CHECK(m);
  CHECK(kernel_cache_stats().hits == s0.hits + 2);
  CHECK(module_from_image(Context::primary(Device::get(0)), hit));
  // A name expression that does not instantiate is NVRTC's Error, as for module_from_source.
  const Error bad = error_of([] {
    (void)compile_image(kTwice, {.compile = {.arch = "sm_90"}, .name_expressions = {"twice<no_such_type>"}});
  });
  CHECK(bad.code() == ffi::NVRTC_ERROR_COMPILATION);
  ::unsetenv("OXICUDA_CACHE_DIR");
  std::system(("rm -rf '" + dir + "'").c_str());
}
