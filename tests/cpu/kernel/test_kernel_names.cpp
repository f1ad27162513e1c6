// Issue 24, item 14 on the fake driver: kernels of an image built ahead of
// time (nvcc's, whose C++ kernels have mangled names and no name
// expressions) found by their C++ name or signature, through the driver's
// list of a module's functions (cuModuleGetFunctionCount,
// cuModuleEnumerateFunctions, cuFuncGetName) and the C++ library's
// demangler; a name that no instance matches, and one that names
// overloads, are Errors that list the kernels.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>
#include <vector>

using namespace oxicuda;

namespace {

// PTX as nvcc writes it for C++ kernels (the fake reads the entries' names):
//   template <class T> __global__ void saxpy(T*, const T*, T, unsigned);  // float and double
//   namespace ns { __global__ void scale(float*, int); }
//   __global__ void fill(float*, float); __global__ void fill(double*, double);
const char* const kMangled = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry _Z5saxpyIfEvPT_PKS0_S0_j(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)
{ ret; }
.visible .entry _Z5saxpyIdEvPT_PKS0_S0_j(.param .u64 y, .param .u64 x, .param .f64 a, .param .u32 n)
{ ret; }
.visible .entry _ZN2ns5scaleEPfi(.param .u64 p, .param .u32 n)
{ ret; }
.visible .entry _Z4fillPff(.param .u64 p, .param .f32 v)
{ ret; }
.visible .entry _Z4fillPdd(.param .u64 p, .param .f64 v)
{ ret; }
)";

}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 24 (14): a module's kernels, each symbol and its demangled name") {
  const Module m = Module::from_ptx(ctx, kMangled);
  const std::vector<KernelName> names = m.kernel_names();
  REQUIRE(names.size() == 5);
  CHECK(names[0].symbol == "_Z5saxpyIfEvPT_PKS0_S0_j");
  CHECK(names[0].demangled == "void saxpy<float>(float*, float const*, float, unsigned int)");
  CHECK(names[2].demangled == "ns::scale(float*, int)");
  // An extern "C" kernel's name is its own.
  const std::vector<KernelName> plain = Module::from_ptx(ctx, kFakePtx).kernel_names();
  REQUIRE(plain.size() == 7);
  CHECK(plain[0].symbol == "dbl");
  CHECK(plain[0].demangled == "dbl");
  CHECK(error_of([] { (void)Module().kernel_names(); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (14): Module::function finds a kernel by its C++ name or signature") {
  const Module m = Module::from_ptx(ctx, kMangled);
  Fake& fake = Fake::get();
  fake.reset();
  // The symbol itself: one cuModuleGetFunction, no list.
  CHECK(m.function("_ZN2ns5scaleEPfi").name() == "_ZN2ns5scaleEPfi");
  CHECK(fake.calls("cuModuleEnumerateFunctions") == 0);
  // A template's instance by its C++ name, a namespaced kernel, a signature
  // as the demangler writes it or with other spacing, with or without void.
  CHECK(m.function("saxpy<float>").name() == "_Z5saxpyIfEvPT_PKS0_S0_j");
  CHECK(m.function("saxpy<double>").name() == "_Z5saxpyIdEvPT_PKS0_S0_j");
  CHECK(m.function("ns::scale").name() == "_ZN2ns5scaleEPfi");
  CHECK(m.function("fill(double*, double)").name() == "_Z4fillPdd");
  CHECK(m.function("void fill(float*,float)").name() == "_Z4fillPff");
  CHECK(m.function("void saxpy<float>(float*, float const*, float, unsigned int)").name() ==
        "_Z5saxpyIfEvPT_PKS0_S0_j");
  // Typed, with the layout check against the instance's parameters.
  const auto k = m.kernel<void(float*, const float*, float, unsigned)>("saxpy<float>");
  CHECK(k.function().name() == "_Z5saxpyIfEvPT_PKS0_S0_j");
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (14): an instance the build did not make, or overloads, are Errors listing the kernels") {
  const Module m = Module::from_ptx(ctx, kMangled);
  const Error absent = error_of([&] { (void)m.function("saxpy<int>"); });
  CHECK(absent.code() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(absent.call() == "cuModuleGetFunction");
  CHECK(absent.detail().find("the module has no kernel named 'saxpy<int>': no symbol, C++ name or signature is that "
                             "(a template's instance is in the image only where the build instantiated it)") == 0);
  CHECK(absent.detail().find("its kernels: void saxpy<float>(float*, float const*, float, unsigned int) "
                             "[_Z5saxpyIfEvPT_PKS0_S0_j], ") != std::string::npos);
  CHECK(absent.detail().find("ns::scale(float*, int) [_ZN2ns5scaleEPfi]") != std::string::npos);
  const Error overloads = error_of([&] { (void)m.function("fill"); });
  CHECK(overloads.code() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(overloads.detail() ==
        "'fill' names 2 kernels of the module (overloads): fill(float*, float) [_Z4fillPff], fill(double*, double) "
        "[_Z4fillPdd]; give its signature, as the list writes it, or its symbol");
  // The module is as it was: the next lookups work.
  CHECK(m.function("fill(float*, float)"));
  // A failed list is the driver's Error, with its call.
  Fake& fake = Fake::get();
  fake.reset();
  fake.fail("cuFuncGetName", 1, ffi::CUDA_ERROR_UNKNOWN);
  const Error failed = error_of([&] { (void)m.function("ns::scale"); });
  CHECK(failed.code() == ffi::CUDA_ERROR_UNKNOWN);
  CHECK(failed.call() == "cuFuncGetName");
  CHECK(m.function("ns::scale"));
}
