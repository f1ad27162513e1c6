// Thread safety on the fake driver: shared handles copied and dropped from
// many threads are destroyed exactly once; streams created concurrently in
// different contexts leave each thread's current context intact.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <atomic>
#include <thread>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "threads: 16 threads x 10,000 copies and drops of shared handles; one destroy each") {
  {
    Context ctx = Context::create(Device::get(0));
    Stream s(ctx);
    Event e(ctx);
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 10000; ++i) {
          Stream sc = s;
          Event ec = e;
          Context cc = ctx;
          Stream moved = std::move(sc);
          (void)moved;
        }
      });
    for (auto& t : threads) t.join();
    CHECK(s.use_count() == 1);
    CHECK(e.use_count() == 1);
    CHECK(fake.calls("cuStreamDestroy") == 0);
  }
  CHECK(fake.calls("cuStreamDestroy") == 1);
  CHECK(fake.calls("cuEventDestroy") == 1);
  CHECK(fake.calls("cuCtxDestroy") == 1);
}

TEST_CASE_FIXTURE(FakeTest, "threads: the last handle may drop on any thread") {
  {
    Context ctx = Context::primary(Device::get(0));
    std::vector<Stream> streams;
    for (int i = 0; i < 64; ++i) streams.emplace_back(ctx);
    std::vector<std::thread> threads;
    std::atomic<int> next{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&] {
        for (int i; (i = next++) < 64;) streams[static_cast<std::size_t>(i)] = Stream();
      });
    for (auto& t : threads) t.join();
  }
  CHECK(fake.calls("cuStreamDestroy") == 64);
}

TEST_CASE_FIXTURE(FakeTest, "threads: streams created concurrently in different contexts keep each thread's context") {
  {
    std::vector<Context> contexts;
    for (int i = 0; i < 4; ++i) contexts.push_back(Context::create(Device::get(0)));
    Context primary = Context::primary(Device::get(0));
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t)
      threads.emplace_back([&, t] {
        // Half the threads have a context current, half have none.
        Context mine = (t % 2) ? primary : Context();
        if (mine) mine.make_current();
        for (int i = 0; i < 200; ++i) {
          Stream s(contexts[static_cast<std::size_t>((t + i) % 4)]);
          if (Context::current().raw() != mine.raw()) ++wrong;
          if (Stream::borrow(s.raw()).context() != s.context()) ++wrong;
        }
      });
    for (auto& t : threads) t.join();
    CHECK(wrong == 0);
  }
  CHECK(fake.calls("cuStreamCreate") == 16 * 200);
  CHECK(fake.calls("cuStreamDestroy") == 16 * 200);
}

TEST_CASE_FIXTURE(ContextTest, "issue 30.2: a context destroyed while current on this thread, by another thread, is an Error here, not a crash") {
  Context created = Context::create(Device::get(0));
  const CUcontext raw = created.raw();
  created.make_current();  // keeps no reference
  std::thread([c = std::move(created)]() mutable { c = Context(); }).join();  // the last handle: cuCtxDestroy
  REQUIRE(Context::current().raw() == raw);  // as on the driver: still current here, destroyed
  // The driver's answers with it current (driver 580, measured): cuCtxGetDevice
  // still answers with the device, cuCtxGetId and the rest do not...
  ffi::CUdevice device = -1;
  CHECK(detail::api().CtxGetDevice(&device) == ffi::CUDA_SUCCESS);
  unsigned long long id = 0;
  CHECK(detail::api().CtxGetId(nullptr, &id) == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  ffi::CUdeviceptr d = 0;
  CHECK(detail::api().MemAlloc(&d, 16) == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  // ... and oxicuda's guards do not make it current again (the driver
  // crashes there: a double free on the H200): an Error that says why.
  const Error e = error_of([&] { Stream s(ctx); });
  CHECK(e.result() == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK(e.detail().find("the calling thread's current context was destroyed while it was current here") == 0);
  CHECK(error_of([&] { DeviceBuffer<int> b(ctx, 4); }).result() == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK(error_of([&] { ScopedCurrent guard(ctx); }).result() == ffi::CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK(Context::current().raw() == raw);
  CHECK(fake.calls("cuStreamCreate") == 0);
  // Recovery: make a live context current.
  ctx.make_current();
  CHECK_NOTHROW((void)Stream(ctx));
  REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
}

TEST_CASE_FIXTURE(ContextTest, "issue 30.2: a live context that another library created with a destroyed one's handle is not refused") {
  // oxicuda destroys a context; a raw cuCtxCreate (another library's, say)
  // is then given the same handle, as the driver may: it is alive, current
  // here, and a guard over it must work (a CPU suite run under load found
  // the guard refusing it as destroyed).
  Context created = Context::create(Device::get(0));
  const CUcontext old = created.raw();
  const unsigned long long old_id = created.id();
  REQUIRE(Context::current().raw() == nullptr);  // (Context::create leaves the current one alone)
  created = Context();  // the last handle: cuCtxDestroy; oxicuda lists it
  CUcontext reused = nullptr;
  REQUIRE(detail::api().CtxCreate(&reused, 0, 0) == ffi::CUDA_SUCCESS);
  REQUIRE_MESSAGE(reused == old, "the fake gave the new context a fresh handle, not the destroyed one's");
  // The same handle, another context: its id tells them apart.
  CHECK(Context::borrow(reused).id() != old_id);
  CHECK(Context::borrow(reused).id() != ctx.id());
  CHECK(error_of([] { (void)Context().id(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  REQUIRE(Context::current().raw() == old);  // the new one, current (created contexts are pushed)
  CHECK_NOTHROW((void)Stream(ctx));  // a guard over it: ctx current for the call, the new one restored
  CHECK(Context::current().raw() == old);
  {
    ScopedCurrent guard(ctx);
    CHECK(Context::current() == ctx);
  }
  CHECK(Context::current().raw() == old);
  REQUIRE(detail::api().CtxDestroy(reused) == ffi::CUDA_SUCCESS);
  while (Context::current().raw() != nullptr) REQUIRE(detail::api().CtxPopCurrent(nullptr) == ffi::CUDA_SUCCESS);
}
