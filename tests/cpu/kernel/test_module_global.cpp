// Module::global (issue 23, item 3) on the fake driver, which reads the
// PTX's module-scope .global and .const variables and backs each with
// zeroed memory of its own for as long as the module lives.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {

const char* const kGlobalsPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .global .align 4 .b8 table[64];
.visible .const .align 8 .f64 scale;
.global .align 4 .u32 counter;
.visible .global .align 4 .b8 _ZN2ns5countE[4];
.visible .entry touch(.param .u64 p) { ret; }
)";

}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 23 (3): Module::global is a span over a __device__ or __constant__ variable, copied to and from") {
  {
    const Module m = Module::from_ptx(ctx, kGlobalsPtx);
    const DeviceSpan<float> table = m.global<float>("table");
    CHECK(table.size() == 16);
    CHECK(table.device_ptr() != 0);
    CHECK(table.context() == ctx.raw());
    const DeviceSpan<double> scale = m.global<double>("scale");
    CHECK(scale.size() == 1);
    // The same variable, viewed as bytes: the whole of it.
    CHECK(m.global<unsigned char>("table").size() == 64);

    std::vector<float> in(16), out(16);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
    copy(table, in);
    copy(out, table);
    CHECK(out == in);
    const std::vector<double> one{2.5};
    copy(scale, one);
    std::vector<double> back(1);
    copy(back, m.global<const double>("scale"));
    CHECK(back[0] == 2.5);
    fill(table.subspan(4, 2), -1.0f);
    copy(out, table);
    CHECK(out[3] == 1.5f);
    CHECK(out[4] == -1.0f);
    CHECK(out[5] == -1.0f);
    CHECK(out[6] == 3.0f);
    CHECK(Context::current().raw() == nullptr);  // the lookup made the module's context current only for the call
  }
  CHECK(fake.calls("cuModuleGetGlobal") == 4);
  CHECK(fake.calls("cuModuleUnload") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (3): Module::global refuses a missing variable, a size that is not whole T, a NUL, an empty module") {
  const Module m = Module::from_ptx(ctx, kGlobalsPtx);
  const Error missing = error_of([&] { (void)m.global<float>("tabel"); });
  CHECK(missing.result() == ffi::CUDA_ERROR_NOT_FOUND);
  CHECK(missing.detail().find("the module has no __device__ or __constant__ variable named 'tabel'") !=
        std::string::npos);
  const Error size = error_of([&] { (void)m.global<double>("counter"); });
  CHECK(size.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(size.call() == "oxicuda::Module::global");
  CHECK(size.detail() == "the variable 'counter' is 4 bytes (not a whole number of 8-byte elements): not a span of T");
  const Error nul = error_of([&] { (void)m.global<float>(std::string_view("table\0x", 7)); });
  CHECK(nul.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(nul.detail().find("the variable name of 7 bytes has a NUL byte at offset 5") == 0);
  const Module empty;
  const Error none = error_of([&] { (void)empty.global<float>("table"); });
  CHECK(none.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(none.detail().find("oxicuda::Module is empty") != std::string::npos);
  CHECK(fake.calls("cuModuleGetGlobal") == 2);  // the NUL and the empty module never reach the driver
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (3): a name expression compiled with the module stands for the variable's lowered name") {
  const std::string names("&ns::count\0_ZN2ns5countE\0", 25);
  const Module m = detail::ModuleAccess::load(ctx, kGlobalsPtx, std::char_traits<char>::length(kGlobalsPtx), true, {},
                                              SourceLocation::current(), names, {});
  const DeviceSpan<std::uint32_t> count = m.global<std::uint32_t>("&ns::count");
  CHECK(count.size() == 1);
  CHECK(count.device_ptr() == m.global<std::uint32_t>("_ZN2ns5countE").device_ptr());
}
