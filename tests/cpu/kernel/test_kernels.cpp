// Typed kernels, launch configuration and occupancy on the fake driver.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstring>
#include <string>

using namespace oxicuda;

namespace {

struct Blob {
  alignas(8) unsigned char bytes[24];
};

// Not trivially copyable, but safe to pass by bytes: opted in below.
struct Handle {
  unsigned long long id = 0;
  Handle() = default;
  Handle(const Handle& o) : id(o.id) {}
  Handle& operator=(const Handle& o) {
    id = o.id;
    return *this;
  }
};

template <class T>
T param_at(const FakeLaunch& l, std::size_t i) {
  T v;
  std::memcpy(&v, l.params + l.param_offsets[i], sizeof v);
  return v;
}

template <class K, class... A>
concept launchable = requires(const Stream& s, const K& k, A&&... a) { launch(s, k, LaunchConfig{}, a...); };

}  // namespace

template <>
struct oxicuda::is_kernel_parameter<Handle> : std::true_type {};

// Compile-time rejections: the launch does not exist for these arguments.
static_assert(launchable<Kernel<void(float*, unsigned)>, float*, int>);
static_assert(launchable<Kernel<void(float*, unsigned)>, DeviceBuffer<float>&, unsigned>);
static_assert(launchable<Kernel<void(const float*, unsigned)>, DeviceSpan<float>, unsigned>);
static_assert(!launchable<Kernel<void(float*, unsigned)>, int*, unsigned>);                   // int* is not float*
static_assert(!launchable<Kernel<void(bool)>, DeviceSpan<float>>);  // a span is a pointer parameter, never a bool
static_assert(!launchable<Kernel<void(bool)>, DeviceBuffer<float>&>);
static_assert(!launchable<Kernel<void(float*, unsigned)>, DeviceBuffer<int>&, unsigned>);      // wrong element type
static_assert(!launchable<Kernel<void(float*, unsigned)>, float*>);                            // too few
static_assert(!launchable<Kernel<void(float*, unsigned)>, float*, unsigned, unsigned>);        // too many
static_assert(!launchable<Kernel<void(unsigned)>, const char*>);                              // no conversion
static_assert(!launchable<Kernel<void(float*)>, const DeviceBuffer<const float>&>);
static_assert(is_kernel_parameter_v<Handle>);
static_assert(!is_kernel_parameter_v<std::string>);
static_assert(!is_kernel_parameter_v<int&>);

TEST_CASE_FIXTURE(LaunchTest, "typed kernel: arguments convert to the declared parameter types") {
  auto saxpy = m.kernel<void(float*, const float*, float, unsigned)>("saxpy");
  CHECK(saxpy.name() == "saxpy");
  DeviceBuffer<float> y(ctx, 16), x(ctx, 16);
  // A DeviceBuffer passes as its T*, a DeviceSpan too, a double as float, an int literal as unsigned.
  launch(s, saxpy, {.grid = 2, .block = 8}, y, x.device_span(), 2.0, 16);
  FakeLaunch l{};
  fake.last_launch(&l);
  CHECK(l.via_ex == 0);
  CHECK(param_at<ffi::CUdeviceptr>(l, 0) == y.device_ptr());
  CHECK(param_at<ffi::CUdeviceptr>(l, 1) == x.device_ptr());
  CHECK(param_at<float>(l, 2) == 2.0f);
  CHECK(param_at<unsigned>(l, 3) == 16u);
  CHECK(l.grid[0] == 2);
  CHECK(l.block[0] == 8);

  auto take_u32 = m.kernel<void(unsigned)>("take_u32");
  launch(s, take_u32, {}, -1);  // converts as in a function call: 4294967295
  fake.last_launch(&l);
  CHECK(param_at<unsigned>(l, 0) == 4294967295u);

  auto blob = m.kernel<void(unsigned, Blob)>("take_blob");
  Blob b{};
  for (int i = 0; i < 24; ++i) b.bytes[i] = static_cast<unsigned char>(100 + i);
  launch(s, blob, {}, 7u, b);
  fake.last_launch(&l);
  CHECK(l.param_offsets[1] == 8);
  CHECK(std::memcmp(l.params + 8, b.bytes, 24) == 0);

  auto none = m.kernel<void()>("none");
  launch(s, none, {.grid = {2, 3, 4}, .block = {4, 4, 4}});
  fake.last_launch(&l);
  CHECK(l.grid[2] == 4);
  CHECK(l.block[1] == 4);
}

TEST_CASE_FIXTURE(ModuleTest, "typed kernel: the parameter layout is checked at lookup and a mismatch is explained") {
  CHECK_NOTHROW((void)m.kernel<void(float*, const float*, float, unsigned)>("saxpy"));
  CHECK_NOTHROW((void)m.kernel<void(Handle, const float*, float, int)>("saxpy"));  // same sizes and offsets
  CHECK_NOTHROW((void)m.kernel<void(unsigned, Blob)>("take_blob"));
  const std::string sig(detail::type_name<void(float*, unsigned)>());
  CHECK((sig == "void(float*, unsigned int)" || sig == "void (float *, unsigned int)"));
  {
    const Error e = error_of([&] { (void)m.kernel<void(float*, unsigned)>("saxpy"); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.call() == "oxicuda::Module::kernel");
    CHECK(e.detail() == "kernel 'saxpy' is declared " + sig +
                            ", 2 parameters (8 bytes at 0, 4 bytes at 8), but the module's kernel takes 4 "
                            "parameters (8 bytes at 0, 8 bytes at 8, 4 bytes at 16, 4 bytes at 20)");
  }
  // Same count, one size differs: a double where the kernel takes a .f32.
  CHECK_THROWS_WITH_AS((void)m.kernel<void(float*, float*, double, unsigned)>("saxpy"),
                       doctest::Contains("8 bytes at 16"), Error);
  // Same sizes, different alignment: the kernel's blob starts at 8, a 4-aligned one at 4.
  struct Six {
    unsigned v[6];
  };
  CHECK_THROWS_WITH_AS((void)m.kernel<void(unsigned, Six)>("take_blob"), doctest::Contains("24 bytes at 4"), Error);
  CHECK_THROWS_AS((void)m.kernel<void(int)>("none"), Error);
  CHECK(fake.calls("cuFuncGetParamInfo") > 0);
}

TEST_CASE_FIXTURE(LaunchTest, "launch config: clusters and cooperative launches go through cuLaunchKernelEx") {
  auto none = m.kernel<void()>("none");
  FakeLaunch l{};
  launch(s, none, {.grid = 8, .block = 32, .cluster = {2}});
  fake.last_launch(&l);
  CHECK(l.via_ex == 1);
  CHECK(l.cluster[0] == 2);
  CHECK(l.cluster[1] == 1);
  CHECK(l.cooperative == 0);
  launch(s, none, {.grid = 4, .block = 32, .cooperative = true});
  fake.last_launch(&l);
  CHECK(l.via_ex == 1);
  CHECK(l.cluster[0] == 0);
  CHECK(l.cooperative == 1);
  CHECK(fake.calls("cuLaunchKernelEx") == 2);
  CHECK(fake.calls("cuLaunchKernel") == 0);
  // A grid that clusters do not divide: refused before the driver sees it.
  {
    const Error e = error_of([&] { launch(s, none, {.grid = 7, .block = 32, .cluster = {2}}); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_CLUSTER_SIZE);
    CHECK(e.call() == "oxicuda::launch");
    CHECK(e.detail() == "kernel 'none': cluster 2x1x1, grid 7x1x1: the cluster does not divide the grid (each grid "
                        "dimension must be a multiple of the cluster's)");
  }
}

TEST_CASE_FIXTURE(LaunchTest, "launch config: dynamic shared memory above 48 KiB raises the kernel's limit once") {
  auto none = m.kernel<void()>("none");
  launch(s, none, {.shared_bytes = 48 * 1024});
  CHECK(fake.calls("cuFuncSetAttribute") == 0);
  launch(s, none, {.shared_bytes = 100 * 1024});
  launch(s, none, {.shared_bytes = 100 * 1024});
  launch(s, none, {.shared_bytes = 64 * 1024});
  CHECK(fake.calls("cuFuncSetAttribute") == 1);
  CHECK(none.function().allowed_dynamic_shared_bytes() == 100 * 1024);
  CHECK(none.function().attribute(ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) == 100 * 1024);
  // The untyped launch does the same, and sees what the typed one set (one Function).
  launch(s, none.function(), 1, 1, 100 * 1024);
  CHECK(fake.calls("cuFuncSetAttribute") == 1);
  // Beyond the device's limit: the attribute call fails and says so.
  CHECK_THROWS_WITH_AS(launch(s, none, {.shared_bytes = 300 * 1024}), doctest::Contains("cuFuncSetAttribute"),
                       Error);
}

TEST_CASE_FIXTURE(ModuleTest, "occupancy: active blocks per multiprocessor and the suggested block size") {
  Function f = m.function("saxpy");
  CHECK(f.max_active_blocks_per_multiprocessor(256) == 8);
  CHECK(f.max_active_blocks_per_multiprocessor(32) == 32);
  CHECK(f.max_active_blocks_per_multiprocessor(256, 100 * 1024) == 2);
  const BlockSizeSuggestion s = f.suggested_block_size();
  CHECK(s.block_size == 64);  // the fake's model: the first size reaching 2048 threads per SM
  CHECK(s.min_grid_size == 132 * 32);
  CHECK(f.suggested_block_size(0, 32).block_size == 32);
  CHECK(Context::current().raw() == nullptr);
}
