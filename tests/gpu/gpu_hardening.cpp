// The hardening items that only a real driver can show (issue 9): the
// context stack, host functions' callables, the default streams, zero-size
// operations, fork, and an event of one context recorded on a stream of
// another.
#include <doctest/doctest.h>

#include "gpu_common.hpp"
#include "oxicuda.hpp"
#include "two_stream_check.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

std::vector<Error> reported;
void capture(const Error& e) { reported.push_back(e); }

Function dbl() {
  static Module m = Module::from_ptx(ctx(), oxicuda_examples::kDoublePtx);
  return m.function("dbl");
}

}  // namespace

TEST_CASE("hardening (H200): ScopedCurrent with an empty Context leaves a two-deep context stack intact") {
  CUcontext a = nullptr, b = nullptr;
  REQUIRE(detail::api().CtxCreate(&a, 0, Device::get(0).raw()) == ffi::CUDA_SUCCESS);  // pushes a
  REQUIRE(detail::api().CtxCreate(&b, 0, Device::get(0).raw()) == ffi::CUDA_SUCCESS);  // pushes b: [a, b]
  CHECK_THROWS_AS([] { ScopedCurrent guard{Context()}; }(), Error);
  CHECK_THROWS_AS([] { ScopedCurrent guard{static_cast<CUcontext>(nullptr)}; }(), Error);
  {
    ScopedCurrent guard(ctx());
    CHECK(Context::current() == ctx());
  }
  CUcontext top = nullptr, below = nullptr;
  CHECK(detail::api().CtxPopCurrent(&top) == ffi::CUDA_SUCCESS);
  CHECK(detail::api().CtxPopCurrent(&below) == ffi::CUDA_SUCCESS);
  CHECK(top == b);
  CHECK(below == a);
  CHECK(detail::api().CtxDestroy(a) == ffi::CUDA_SUCCESS);
  CHECK(detail::api().CtxDestroy(b) == ffi::CUDA_SUCCESS);
}

TEST_CASE("hardening (H200): a host function's callable that owns a buffer frees it, off the driver's thread") {
  DiagnosticHook previous = set_diagnostic_hook(capture);
  reported.clear();
  Stream s(ctx());
  constexpr std::size_t bytes = std::size_t{512} << 20;
  s.synchronize();
  const std::size_t free_before = ctx().memory_info().free;
  {
    DeviceBuffer<unsigned char> big(ctx(), bytes);
    CHECK(ctx().memory_info().free + bytes <= free_before + (std::size_t{64} << 20));
    fill_async(s, big, static_cast<unsigned char>(1));
    s.launch_host_func([b = std::move(big)] {});
  }
  s.synchronize();  // the callable is destroyed here, where cuMemFree is allowed
  const std::size_t free_after = ctx().memory_info().free;
  INFO("free before " << free_before << ", after " << free_after);
  CHECK(free_after + (std::size_t{64} << 20) >= free_before);  // the 512 MiB came back
  CHECK(reported.empty());
  // A CUDA call inside a host function is refused by the driver (the fake models this).
  ffi::CUresult inside = ffi::CUDA_SUCCESS;
  s.launch_host_func([&inside] {
    CUcontext c = nullptr;
    inside = detail::api().CtxGetCurrent(&c);
  });
  s.synchronize();
  CHECK(inside == ffi::CUDA_ERROR_NOT_PERMITTED);
  // A callable that throws goes to the hook; the process goes on.
  s.launch_host_func([] { throw std::runtime_error("boom"); });
  s.synchronize();
  REQUIRE(reported.size() == 1);
  CHECK(reported[0].detail() == "while running a host function; the host function threw: boom");
  set_diagnostic_hook(previous);
}

TEST_CASE("hardening (H200): default-stream handles enqueue in their own context, whatever is current") {
  // As NVIDIA's asyncAPI sample: events recorded on the legacy stream from a
  // thread where the context is not current.
  Context created = Context::create(Device::get(0));
  std::vector<float> host(4096, 1.0f);
  DeviceBuffer<float> buf(ctx(), host.size());
  buf.copy_from(host);
  std::thread([&] {
    REQUIRE(Context::current().raw() == nullptr);
    for (const Stream& q : {Stream::legacy_default(ctx()), Stream::per_thread_default(ctx()),
                            Stream::borrow(nullptr, ctx())}) {
      Event start(ctx()), stop(ctx());
      q.record(start);
      launch(q, dbl(), 16, 256, 0, buf.data(), static_cast<unsigned>(host.size()));
      q.record(stop);
      stop.synchronize();
      CHECK(Event::elapsed(start, stop).count() >= 0.0f);
      CHECK(Context::current().raw() == nullptr);
      // Another context current: the work still goes to ctx() (a kernel of
      // ctx()'s module could not run in `created`).
      created.make_current();
      launch(q, dbl(), 16, 256, 0, buf.data(), static_cast<unsigned>(host.size()));
      q.synchronize();
      CHECK(Context::current() == created);
      REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
    }
  }).join();
  buf.copy_to(host);
  CHECK(host[0] == 64.0f);  // doubled six times
  CHECK(host[4095] == 64.0f);
}

TEST_CASE("hardening (H200): zero-size copies and fills in every direction") {
  Stream s(ctx());
  DeviceBuffer<int> a(ctx(), 0), b(ctx(), 0);
  PinnedBuffer<int> pinned(ctx(), 0);
  std::vector<int> host;
  CHECK_NOTHROW(copy(a, host));
  CHECK_NOTHROW(copy(host, a));
  CHECK_NOTHROW(copy(a, b));
  CHECK_NOTHROW(copy_async(s, a, pinned));
  CHECK_NOTHROW(copy_async(s, pinned, a));
  CHECK_NOTHROW(copy_async(s, b, a));
  CHECK_NOTHROW(fill(a, 7));
  CHECK_NOTHROW(fill_bytes(a, 1));
  CHECK_NOTHROW(fill_async(s, a, 7));
  CHECK_NOTHROW(fill_bytes_async(s, a, 1));
  auto c = DeviceBuffer<int>::allocate_async(s, 0);
  CHECK(c.stream_ordered());
  CHECK_NOTHROW(fill_async(s, c, 3));
  CHECK_NOTHROW(s.synchronize());
}

TEST_CASE("hardening (H200): CUDA in a child forked after initialization is an Error that says what to do") {
  (void)Device::count();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 1;
    try {
      (void)Device::count();
    } catch (const Error& e) {
      std::printf("in the forked child: %s\n", e.what());
      status = e.result() == ffi::CUDA_ERROR_NOT_INITIALIZED &&
                       e.detail().find("child forked after the CUDA driver was initialized") != std::string::npos
                   ? 0
                   : 2;
    }
    _exit(status);
  }
  int status = -1;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_NOTHROW((void)Device::count());  // the parent carries on
  const auto r = oxicuda_examples::two_stream_check(ctx());
  CHECK(r.passed);
}

// On the H200 (driver 580) the driver refuses it: cuEventRecord answers
// CUDA_ERROR_INVALID_HANDLE, and oxicuda's Error names that call.
TEST_CASE("bad input (H200): an event of one context recorded on a stream of another") {
  Context other = Context::create(Device::get(0));
  Event e(other);
  Stream s(ctx());
  try {
    s.record(e);
    s.synchronize();
    e.synchronize();
    std::printf("an event of another context recorded on a stream: accepted by the driver\n");
    CHECK(e.ready());
  } catch (const Error& err) {
    std::printf("an event of another context recorded on a stream: %s\n", err.what());
    CHECK(err.call() == "cuEventRecord");
    CHECK((err.result() == ffi::CUDA_ERROR_INVALID_HANDLE || err.result() == ffi::CUDA_ERROR_INVALID_CONTEXT));
  }
  CHECK_NOTHROW(s.synchronize());
}
