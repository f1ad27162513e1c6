// The GPU suite: oxicuda on a real driver and device. Exits 77 (meson's
// SKIP) when there is no usable driver or no device, so a machine without a
// GPU reports it skipped, never passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <execinfo.h>

#include <csignal>
#include <doctest/doctest.h>

#include "gpu_common.hpp"
#include "oxicuda.hpp"
#include "two_stream_check.hpp"

#if __has_include("gpu_fixtures.inc")
#include "gpu_fixtures.inc"
#define OXICUDA_HAVE_FIXTURES 1
#else
#define OXICUDA_HAVE_FIXTURES 0
#endif

#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace oxicuda;
using oxicuda_examples::kDoublePtx;

namespace {

using gpu::ctx;

// Spins for about `cycles` clock cycles: a kernel that keeps a stream busy.
constexpr const char* kSpinPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 cycles)
{
    .reg .b64 %rd<5>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [cycles];
    mov.u64 %rd1, %clock64;
$L:
    mov.u64 %rd2, %clock64;
    sub.s64 %rd3, %rd2, %rd1;
    setp.lt.s64 %p0, %rd3, %rd0;
    @%p0 bra $L;
    ret;
}
)";

Function spin_kernel() {
  static Module m = Module::from_ptx(ctx(), kSpinPtx);
  return m.function("spin");
}

Function double_kernel() {
  static Module m = Module::from_ptx(ctx(), kDoublePtx);
  return m.function("dbl");
}

}  // namespace

TEST_CASE("seed: two streams, concurrent and ordered by a cross-stream event (primary context)") {
  const auto r = oxicuda_examples::two_stream_check(ctx());
  INFO(r.message);
  CHECK(r.passed);
}

TEST_CASE("seed: the same in a created context, with another context current") {
  Context created = Context::create(Device::get(0));
  ScopedCurrent outer(ctx());
  const auto r = oxicuda_examples::two_stream_check(created);
  INFO(r.message);
  CHECK(r.passed);
  CHECK(Context::current() == ctx());
}

TEST_CASE("device: properties and attributes") {
  CHECK(Device::count() >= 1);
  const Device d = Device::get(0);
  CHECK_FALSE(d.name().empty());
  CHECK(d.compute_capability() >= ComputeCapability{7, 0});
  CHECK(d.total_memory() > (std::size_t{1} << 30));
  CHECK(d.multiprocessor_count() > 0);
  CHECK(d.max_threads_per_block() == 1024);
  CHECK(d.attribute(ffi::CU_DEVICE_ATTRIBUTE_WARP_SIZE) == 32);
  CHECK(d.uuid().to_string().size() == 40);
  CHECK(d.uuid() != Uuid{});
  CHECK(driver_version() >= 12000);
  try {
    (void)Device::get(Device::count());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_DEVICE);
    CHECK(e.detail().find("is out of range: the driver sees") != std::string::npos);
  }
}

TEST_CASE("context: primary and created, priority range, memory, current restored") {
  CHECK(ctx().kind() == Context::Kind::primary);
  CHECK(Context::primary(Device::get(0)) == ctx());  // the primary context is one per device
  const StreamPriorityRange r = ctx().stream_priority_range();
  CHECK(r.least == 0);
  CHECK(r.greatest < 0);
  const MemoryInfo m = ctx().memory_info();
  CHECK(m.total == Device::get(0).total_memory());
  CHECK(m.free <= m.total);
  CUcontext before = Context::current().raw();
  {
    Context created = Context::create(Device::get(0));
    CHECK(created != ctx());
    CHECK(Context::current().raw() == before);
    created.synchronize();
    CHECK(created.device() == Device::get(0));
    CHECK(Context::borrow(created.raw()).device() == Device::get(0));
  }
  CHECK(Context::current().raw() == before);
}

TEST_CASE("stream: copies share one queue; priority and flags; borrowed and default streams") {
  ScopedCurrent current(ctx());
  const StreamPriorityRange range = ctx().stream_priority_range();
  Stream s(ctx(), {.priority = range.greatest});
  CHECK(s.priority() == range.greatest);
  CHECK(s.non_blocking());
  Stream copy = s;
  CHECK(copy.is_same_queue(s));
  CHECK(s.use_count() == 2);
  Stream blocking(ctx(), {.non_blocking = false});
  CHECK_FALSE(blocking.non_blocking());
  CHECK(Stream::borrow(s.raw()).context() == ctx());
  // Work on the default streams and on a borrowed handle.
  DeviceBuffer<float> buf(ctx(), 1024);
  std::vector<float> host(1024, 1.0f);
  buf.copy_from(host);
  Function dbl = double_kernel();
  for (const Stream& q : {Stream::legacy_default(ctx()), Stream::per_thread_default(ctx()),
                          Stream::borrow(s.raw(), ctx())}) {
    launch(q, dbl, 4, 256, 0, buf.device_ptr(), 1024u);
    q.synchronize();
    CHECK(q.ready());
  }
  buf.copy_to(host);
  CHECK(host[0] == 8.0f);
  CHECK(host[1023] == 8.0f);
}

TEST_CASE("stream: ready() answers while work runs; host functions run after the work before them") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  std::atomic<int> order{0};
  std::atomic<int> host_saw{-1};
  launch(s, spin_kernel(), 1, 1, 0, static_cast<unsigned long long>(20'000'000));  // ~10 ms
  (void)s.ready();                                                              // must not throw either way
  s.launch_host_func([&] { host_saw = order.fetch_add(1); });
  s.synchronize();
  CHECK(s.ready());
  CHECK(host_saw == 0);
}

TEST_CASE("event: elapsed time across a kernel, timing off, and events never recorded") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  Event start(ctx()), stop(ctx());
  s.record(start);
  launch(s, spin_kernel(), 1, 1, 0, static_cast<unsigned long long>(2'000'000));
  s.record(stop);
  stop.synchronize();
  CHECK(stop.ready());
  CHECK(Event::elapsed(start, stop).count() > 0.0f);
  Event untimed(ctx(), {.timing = false});
  s.record(untimed);
  s.synchronize();
  try {
    (void)Event::elapsed(start, untimed);
    FAIL("no error");
  } catch (const Error& e) {
    MESSAGE("elapsed with timing off: " << e.name());
    CHECK(e.detail().find("{.timing = false}") != std::string::npos);
  }
  Event never(ctx());
  try {
    (void)Event::elapsed(start, never);
    FAIL("no error");
  } catch (const Error& e) {
    MESSAGE("elapsed to a never-recorded event: " << e.name());
    CHECK(e.result() != ffi::CUDA_SUCCESS);
  }
  // Waiting on an event never recorded is a no-op for the driver.
  s.wait(never);
  s.synchronize();
}

TEST_CASE("module: invalid PTX carries ptxas's error log") {
  const char* bad = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k() { frob; }\n";
  try {
    (void)Module::from_ptx(ctx(), bad);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_PTX);
    CHECK(e.detail().find("frob") != std::string::npos);
    MESSAGE("invalid PTX error: " << std::string(e.what()));
  }
}

TEST_CASE("module: function attributes, unknown names, functions keep their module alive") {
  Function f;
  {
    Module m = Module::from_ptx(ctx(), kDoublePtx, {.line_info = true});
    f = m.function("dbl");
    CHECK_THROWS_WITH_AS((void)m.function("dlb"), doctest::Contains("no kernel named 'dlb'"), Error);
  }
  CHECK(f.num_registers() > 0);
  CHECK(f.max_threads_per_block() > 0);
  CHECK(f.max_threads_per_block() <= 1024);
  CHECK(f.static_shared_bytes() == 0);
  CHECK(f.ptx_version() == 70);
  ScopedCurrent current(ctx());
  Stream s(ctx());
  DeviceBuffer<float> buf(ctx(), 256);
  std::vector<float> v(256, 3.0f);
  buf.copy_from(v);
  launch(s, f, 1, 256, 0, buf.device_ptr(), 256u);  // its module is gone from our hands, not from the driver
  s.synchronize();
  buf.copy_to(v);
  CHECK(v[255] == 6.0f);
}

#if OXICUDA_HAVE_FIXTURES
TEST_CASE("module: a cubin and a fatbin from nvcc load and run; a truncated cubin is refused") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  for (auto [data, size, what] : {std::tuple{fixture_cubin, fixture_cubin_size, "cubin"},
                                  std::tuple{fixture_fatbin, fixture_fatbin_size, "fatbin"}}) {
    INFO(what);
    Module m = Module::from_image(ctx(), data, size);
    Function iota = m.function("iota");
    CHECK(iota.binary_version() == 90);
    DeviceBuffer<unsigned> out(ctx(), 1000);
    launch(s, iota, 4, 256, 0, out.data(), 1000u);
    s.synchronize();
    std::vector<unsigned> host(1000);
    out.copy_to(host);
    CHECK(host[0] == 0u);
    CHECK(host[999] == 999u);
  }
  CHECK_THROWS_WITH_AS((void)Module::from_image(ctx(), fixture_cubin, fixture_cubin_size - 1),
                       doctest::Contains("image is truncated"), Error);
}

// Issue 24 (14) on the real driver: nvcc's C++ kernels (tests/gpu/kernels.cu,
// namespace fixture) have mangled names; the driver lists them
// (cuModuleEnumerateFunctions, cuFuncGetName) and oxicuda finds each by its
// C++ name or signature.
TEST_CASE("issue 24 (14): kernels of nvcc's cubin and fatbin by their C++ names and signatures") {
  if (driver_version() < 12040) {
    MESSAGE("skipped: the driver's list of kernels needs CUDA 12.4; this one is ", driver_version());
    return;
  }
  Stream s(ctx());
  for (auto [data, size, what] : {std::tuple{fixture_cubin, fixture_cubin_size, "cubin"},
                                  std::tuple{fixture_fatbin, fixture_fatbin_size, "fatbin"}}) {
    INFO(what);
    const Module m = Module::from_image(ctx(), data, size);
    const std::vector<KernelName> names = m.kernel_names();
    auto listed = [&](const char* symbol, const char* demangled) {
      for (const KernelName& k : names)
        if (k.symbol == symbol) return k.demangled == demangled;
      return false;
    };
    CHECK(listed("iota", "iota"));
    CHECK(listed("_ZN7fixture5scaleIfEEvPT_S1_j", "void fixture::scale<float>(float*, float, unsigned int)"));
    CHECK(listed("_ZN7fixture5scaleIiEEvPT_S1_j", "void fixture::scale<int>(int*, int, unsigned int)"));
    CHECK(listed("_ZN7fixture3addEPffj", "fixture::add(float*, float, unsigned int)"));
    CHECK(listed("_ZN7fixture3addEPiij", "fixture::add(int*, int, unsigned int)"));

    const auto scale_f = m.kernel<void(float*, float, unsigned)>("fixture::scale<float>");
    const auto scale_i = m.kernel<void(int*, int, unsigned)>("void fixture::scale<int>(int*, int, unsigned int)");
    const auto add_f = m.kernel<void(float*, float, unsigned)>("fixture::add(float*, float, unsigned int)");
    const auto add_i = m.kernel<void(int*, int, unsigned)>("fixture::add(int *, int, unsigned int)");
    DeviceBuffer<float> f(ctx(), 1000);
    DeviceBuffer<int> i(ctx(), 1000);
    fill(s, f, 1.5f);
    fill(s, i, 3);
    launch(s, scale_f, {.grid = 4, .block = 256}, f, 2.0f, 1000u);
    launch(s, add_f, {.grid = 4, .block = 256}, f, 0.25f, 1000u);
    launch(s, scale_i, {.grid = 4, .block = 256}, i, -2, 1000u);
    launch(s, add_i, {.grid = 4, .block = 256}, i, 7, 1000u);
    std::vector<float> hf(1000);
    std::vector<int> hi(1000);
    copy(s, hf, f);
    copy(s, hi, i);
    CHECK(hf[0] == 3.25f);
    CHECK(hf[999] == 3.25f);
    CHECK(hi[0] == 1);
    CHECK(hi[999] == 1);

    // Two overloads by one name: an Error naming both; an instance the build did not make: one listing the kernels.
    CHECK_THROWS_WITH_AS((void)m.function("fixture::add"),
                         doctest::Contains("fixture::add(int*, int, unsigned int)"), Error);
    CHECK_THROWS_WITH_AS((void)m.function("fixture::scale<double>"),
                         doctest::Contains("void fixture::scale<float>(float*, float, unsigned int)"), Error);
  }
}
#endif

TEST_CASE("launch: bad shapes are errors that say what was asked") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  Function dbl = double_kernel();
  DeviceBuffer<float> buf(ctx(), 16);
  for (auto [grid, block, shared] : {std::tuple{Dim3{0}, Dim3{32}, 0u}, std::tuple{Dim3{1}, Dim3{0}, 0u},
                                     std::tuple{Dim3{1}, Dim3{2048}, 0u},
                                     std::tuple{Dim3{1}, Dim3{32}, 1u << 20}}) {
    try {
      launch(s, dbl, grid, block, shared, buf.device_ptr(), 16u);
      FAIL("no error");
    } catch (const Error& e) {
      // 1 MiB of shared memory fails when the kernel's limit is raised, before the launch.
      CHECK(e.call() == (shared > 48 * 1024 ? "cuFuncSetAttribute" : "cuLaunchKernel"));
      CHECK(e.detail().find("kernel 'dbl', grid ") == 0);
      MESSAGE(std::string(e.what()));
    }
  }
  s.synchronize();  // the stream is still usable
}

TEST_CASE("memory: random bytes round-trip through a device buffer") {
  std::mt19937 rng(12345);
  std::vector<std::uint32_t> in(1 << 20), out(1 << 20, 0);
  for (auto& x : in) x = rng();
  DeviceBuffer<std::uint32_t> d(ctx(), in.size());
  d.copy_from(in);
  d.copy_to(out);
  CHECK(in == out);
}

// oxicuda does not switch contexts on the hot path: the driver takes the
// context from the stream. This holds on a thread with no context current.
TEST_CASE("hot path: enqueueing works on a thread with no current context") {
  ScopedCurrent current(ctx());
  Stream s(ctx());
  Event e(ctx());
  Function dbl = double_kernel();
  DeviceBuffer<float> buf(ctx(), 1024);
  fill(buf, 1.0f);  // the kernel reads it (initcheck)
  std::vector<std::string> results;
  std::thread([&] {
    auto attempt = [&](const char* what, auto&& op) {
      try {
        op();
        results.push_back(std::string(what) + ": ok");
      } catch (const Error& err) {
        results.push_back(std::string(what) + ": " + std::string(err.name()));
      }
    };
    CHECK(Context::current().raw() == nullptr);
    attempt("launch", [&] { launch(s, dbl, 4, 256, 0, buf.device_ptr(), 1024u); });
    attempt("record", [&] { s.record(e); });
    attempt("wait", [&] { s.wait(e); });
    attempt("query", [&] { (void)s.ready(); });
    attempt("synchronize", [&] { s.synchronize(); });
    attempt("event synchronize", [&] { e.synchronize(); });
    std::vector<float> host(1024, 1.0f);
    attempt("copy_async H->D", [&] { copy_async(s, buf, host); });
    attempt("fill_async", [&] { fill_async(s, buf, 2.0f); });
    attempt("copy_async D->H", [&] { copy_async(s, host, buf); });
    attempt("copy (sync) H->D", [&] { copy(buf, host); });
    attempt("copy (sync) D->H", [&] { copy(host, buf); });
    attempt("fill (sync)", [&] { fill(buf, 3.0f); });
    attempt("allocate_async + free", [&] { auto b = DeviceBuffer<float>::allocate_async(s, 1024); });
  }).join();
  REQUIRE(results.size() == 13);
  for (const auto& r : results) {
    INFO(r);
    CHECK(r.substr(r.size() - 4) == ": ok");
  }
  s.synchronize();
}

// On a crash, the stack (addresses in this binary resolve with
// `addr2line -e oxicuda-gpu-tests -f -C`): doctest reports the test case,
// then re-raises the signal into this handler.
extern "C" void gpu_crash_backtrace(int sig) {
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, 2);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

int main(int argc, char** argv) {
  ::signal(SIGSEGV, gpu_crash_backtrace);
  ::signal(SIGABRT, gpu_crash_backtrace);
  // A child process (the tests that run this binary again) that ends early
  // closes its pipes: a write to one is then an error, not the end of the
  // whole suite.
  ::signal(SIGPIPE, SIG_IGN);
  const DriverInfo& info = driver_info();
  if (!info.available()) {
    std::printf("SKIP: no usable CUDA driver: %s\n", info.reason.c_str());
    return 77;
  }
  int n = 0;
  try {
    n = Device::count();
  } catch (const Error& e) {
    std::printf("SKIP: %s\n", e.what());
    return 77;
  }
  if (n == 0) {
    std::printf("SKIP: the driver sees no CUDA device\n");
    return 77;
  }
  const Device d = Device::get(0);
  const ComputeCapability cc = d.compute_capability();
  std::printf("GPU suite on %s (compute capability %d.%d, %d multiprocessors), driver %s, CUDA %d.%d\n",
              d.name().c_str(), cc.major, cc.minor, d.multiprocessor_count(), info.library.c_str(),
              info.version / 1000, info.version % 1000 / 10);
  doctest::Context context(argc, argv);
  return context.run();
}
