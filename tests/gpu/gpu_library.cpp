// The GPU suite, part: KernelLibrary (issue 25, capability 2) on a real
// driver. nvcc's fatbin (tests/gpu/kernels.cu) loaded once as a library, of
// no context; its typed kernel `dbl` launched in the primary context and in
// a created one (each runs the kernel's function in the stream's context,
// which the driver loads there on first use), with dynamic shared memory
// (the limit raised on the function of the stream's context), and as a
// graph's kernel node; occupancy in each context; the library's variable
// `fixture_bias` by name, one per context; the library from a file. Skips
// where the driver has no libraries (CUDA 12.0) or the fixtures were not
// built (no nvcc).
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#if __has_include("gpu_fixtures.inc")
#include "gpu_fixtures.inc"
#define OXICUDA_HAVE_LIBRARY_FIXTURES 1
#else
#define OXICUDA_HAVE_LIBRARY_FIXTURES 0
#endif

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#if OXICUDA_HAVE_LIBRARY_FIXTURES
using namespace oxicuda;
using gpu::ctx;

namespace {

// Whether the libraries' tests can run here; says why not.
bool libraries_here() {
  if (!libraries_available()) {
    MESSAGE("SKIPPED: this driver has no libraries (cuLibraryLoadData, CUDA 12.0)");
    return false;
  }
  return true;
}

// n floats 0, 1, 2, ... in a buffer of `c`, doubled `times` by `k` on a
// stream of `c` (the last time with `shared` bytes of dynamic shared
// memory); the values read back.
std::vector<float> doubled(const Context& c, const Kernel<void(float*, unsigned)>& k, unsigned n, int times,
                           unsigned shared) {
  Stream s(c);
  std::vector<float> host(n);
  for (unsigned i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  DeviceBuffer<float> buf(c, n);
  copy(s, buf, host);
  for (int t = 0; t < times; ++t)
    launch(s, k, {.grid = 4, .block = 256, .shared_bytes = t + 1 == times ? shared : 0u}, buf, n);
  copy(s, host, buf);
  s.synchronize();
  return host;
}

}  // namespace

TEST_CASE("issue 25 (2): a library's typed kernel runs in the primary context and in a created one") {
  if (!libraries_here()) return;
  const KernelLibrary lib = KernelLibrary::from_image(fixture_fatbin, fixture_fatbin_size);
  const auto k = lib.kernel<void(float*, unsigned)>("dbl");  // checked where the driver has cuKernelGetParamInfo
  CHECK_FALSE(k.function().context());
  const Context created = Context::create(Device::get(0));
  const Context* contexts[] = {&ctx(), &created};
  for (const Context* c : contexts) {
    INFO((c == &ctx() ? "primary context" : "created context"));
    const std::vector<float> v = doubled(*c, k, 1000, 2, 0);
    CHECK(v[0] == 0.0f);
    CHECK(v[1] == 4.0f);
    CHECK(v[999] == 3996.0f);
    // With dynamic shared memory over 48 KiB: the limit of the kernel's
    // function in the stream's context is raised first.
    const std::vector<float> w = doubled(*c, k, 1000, 1, 64 * 1024);
    CHECK(w[999] == 1998.0f);
    const Function in_c = k.function().for_context(*c);
    CHECK(in_c.context() == *c);
    CHECK(in_c.allowed_dynamic_shared_bytes() >= 64 * 1024);
    CHECK(in_c.max_active_blocks_per_multiprocessor(256) > 0);
    {
      const ScopedCurrent current(*c);  // the kernel of no context: the current context's figures
      CHECK(k.function().max_active_blocks_per_multiprocessor(256) == in_c.max_active_blocks_per_multiprocessor(256));
      CHECK(k.function().num_registers() == in_c.num_registers());
    }
  }
  CHECK(k.function().for_context(ctx()).raw() != k.function().for_context(created).raw());
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE("issue 25 (2): a library kernel as a graph's kernel node, in two contexts") {
  if (!libraries_here()) return;
  const KernelLibrary lib = KernelLibrary::from_image(fixture_fatbin, fixture_fatbin_size);
  const auto k = lib.kernel<void(float*, unsigned)>("dbl");
  const Context created = Context::create(Device::get(0));
  const Context* contexts[] = {&ctx(), &created};
  for (const Context* c : contexts) {
    INFO((c == &ctx() ? "primary context" : "created context"));
    Stream s(*c);
    std::vector<float> host(512, 1.5f);
    DeviceBuffer<float> buf(*c, host.size());
    copy(s, buf, host);
    Graph g(*c);
    const GraphNode first = g.add_kernel({}, k, {.grid = 2, .block = 256}, buf, 512u);
    (void)g.add_kernel(first, k.function(), {.grid = 2, .block = 256}, buf.data(), 512u);
    GraphExec e(g);
    e.launch(s);
    e.launch(s);
    copy(s, host, buf);
    s.synchronize();
    CHECK(host[0] == 24.0f);
    CHECK(host[511] == 24.0f);
  }
}

TEST_CASE("issue 25 (2): a library's variable by name, one per context; the library from a file") {
  if (!libraries_here()) return;
  const KernelLibrary lib = KernelLibrary::from_image(fixture_fatbin, fixture_fatbin_size);
  const Context created = Context::create(Device::get(0));
  const DeviceSpan<float> bias = lib.global<float>(ctx(), "fixture_bias");
  const DeviceSpan<float> bias2 = lib.global<float>(created, "fixture_bias");
  REQUIRE(bias.size() == 4);
  REQUIRE(bias2.size() == 4);
  CHECK(bias.context() == ctx().raw());
  std::vector<float> host(4);
  copy(host, bias);
  CHECK(host == std::vector<float>{1, 2, 3, 4});
  const std::vector<float> nines(4, 9.0f);
  copy(bias2, nines);
  copy(host, bias);
  CHECK(host == std::vector<float>{1, 2, 3, 4});  // the primary context's copy is its own
  copy(host, bias2);
  CHECK(host == nines);
  CHECK(gpu::raised_by([&] { (void)lib.global<float>(ctx(), "no_such_variable"); }).code() ==
        ffi::CUDA_ERROR_NOT_FOUND);

  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/oxicuda-gpu-library-XXXXXX";
  const int fd = ::mkstemp(path.data());
  REQUIRE(fd >= 0);
  const bool written = ::write(fd, fixture_fatbin, fixture_fatbin_size) == static_cast<ssize_t>(fixture_fatbin_size);
  ::close(fd);
  REQUIRE(written);
  {
    const KernelLibrary from_file = KernelLibrary::from_file(path);
    const std::vector<float> v = doubled(ctx(), from_file.kernel<void(float*, unsigned)>("dbl"), 256, 1, 0);
    CHECK(v[255] == 510.0f);
    if (driver_version() >= 12040) {
      bool listed = false;
      for (const KernelName& name : from_file.kernel_names()) listed = listed || name.symbol == "dbl";
      CHECK(listed);
    }
  }
  std::remove(path.c_str());
}
#endif
