// Issue 24, item 15 on the fakes: compile_image, the kernel cache without a
// Context (the target given, no driver call), and module_from_image, which
// loads its image with the name expressions; the bad inputs (no target, a
// virtual one with lto, an image that is none, an empty Context). The cache
// itself, on the real NVRTC, is tests/nvrtc/real_image.cpp.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>

using namespace oxicuda;

namespace {
const std::string kSource = std::string(kFakePtx) +
                            ".visible .entry fake_saxpy_float_(.param .u64 y, .param .u64 x, .param .f32 a, "
                            ".param .u32 n)\n{ ret; }\n";
}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 24 (15): compile_image makes no driver call; module_from_image loads it with its names") {
  FakeToolkit& nvrtc = FakeToolkit::nvrtc();
  Fake& fake = Fake::get();
  nvrtc.reset();
  fake.reset();
  const SourceOptions o{.compile = {.arch = "compute_90"}, .name_expressions = {"saxpy<float>"}};
  const SourceImage image = compile_image(kSource, o);
  CHECK(fake.calls("cuCtxGetCurrent") == 0);
  CHECK(fake.calls("cuDeviceGetAttribute") == 0);
  CHECK(fake.calls("cuModuleLoadDataEx") == 0);
  CHECK(nvrtc.calls("nvrtcCompileProgram") == 1);
  CHECK(image.is_text);
  CHECK(image.arch == "compute_90");
  CHECK_FALSE(image.from_cache);  // (the fakes run with OXICUDA_CACHE=0)
  CHECK(image.image.rfind(".version 7.0", 0) == 0);
  CHECK(image.lowered_name("saxpy<float>") == "fake_saxpy_float_");
  CHECK(image.lowered_name("saxpy<double>").empty());

  const Module m = module_from_image(ctx, image);
  CHECK(m.function("saxpy<float>").name() == "fake_saxpy_float_");
  CHECK(fake.calls("cuModuleLoadDataEx") == 1);
  // A cubin target gives a binary image.
  const SourceImage cubin = compile_image(kSource, {.compile = {.arch = "sm_90"}});
  CHECK_FALSE(cubin.is_text);
  CHECK(cubin.image.rfind("CUBIN:", 0) == 0);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (15): compile_image needs a target; module_from_image refuses what it cannot load") {
  FakeToolkit& nvrtc = FakeToolkit::nvrtc();
  nvrtc.reset();
  const Error no_arch = error_of([] { (void)compile_image(kSource, {}); });
  CHECK(no_arch.code() == ffi::NVRTC_ERROR_INVALID_OPTION);
  CHECK(no_arch.detail().find("SourceOptions::compile.arch is empty: without a Context there is no device") == 0);
  const Error virtual_lto = error_of([] { (void)compile_image(kSource, {.compile = {.arch = "compute_90", .lto = true}}); });
  CHECK(virtual_lto.code() == ffi::NVRTC_ERROR_INVALID_OPTION);
  CHECK(virtual_lto.detail().find("the target 'compute_90' is not a real architecture") == 0);
  CHECK(nvrtc.calls("nvrtcCreateProgram") == 0);
  // lto with a real target links through nvJitLink.
  CHECK(compile_image(kSource, {.compile = {.arch = "sm_90", .lto = true}}).image.find("fake_saxpy_float_") !=
        std::string::npos);

  SourceImage bad;
  bad.image = "not an image";
  const Error refused = error_of([&] { (void)module_from_image(ctx, bad); });
  CHECK(refused.code() == ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(refused.detail().find("the SourceImage cannot be loaded: ") == 0);
  SourceImage names = compile_image(kSource, {.compile = {.arch = "compute_90"}});
  names.names = std::string("saxpy<float>\0", 13);
  CHECK(error_of([&] { (void)module_from_image(ctx, names); }).code() == ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(error_of([&] { (void)module_from_image(Context(), names); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
}
