// Regression tests for the defects a hostile review found in 0.1 (issue 9),
// one test case per defect, on the fake driver. Each failed before its fix.
// (Items only a real driver can show are in tests/gpu/gpu_hardening.cpp.)
#include <doctest/doctest.h>

#include "fixtures.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <string>
#include <thread>
#include <vector>

using namespace oxicuda;

namespace {

void check_empty(const Error& e, const char* type) {
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(e.detail() == std::string("this ") + type +
                          " is empty (default-constructed or moved-from); it has no driver handle");
}

std::vector<Error> reported;
void capture(const Error& e) { reported.push_back(e); }

// Captures what reaches the diagnostic hook for one scope.
struct HookCapture {
  DiagnosticHook previous;
  HookCapture() : previous(set_diagnostic_hook(capture)) { reported.clear(); }
  ~HookCapture() { set_diagnostic_hook(previous); }
};

// Two created contexts pushed on this thread's stack, [a, b] with b current,
// as other code (cuCtxPushCurrent, cuCtxCreate) may leave it.
struct TwoDeepStack {
  CUcontext a = nullptr, b = nullptr;
  TwoDeepStack() {
    REQUIRE(detail::api().CtxCreate(&a, 0, 0) == ffi::CUDA_SUCCESS);
    REQUIRE(detail::api().CtxCreate(&b, 0, 0) == ffi::CUDA_SUCCESS);
  }
  // Pops both and checks they were [a, b], then destroys them.
  void check_intact_and_destroy() {
    CUcontext top = nullptr, below = nullptr;
    CHECK(detail::api().CtxPopCurrent(&top) == ffi::CUDA_SUCCESS);
    CHECK(detail::api().CtxPopCurrent(&below) == ffi::CUDA_SUCCESS);
    CHECK(top == b);
    CHECK(below == a);
    CHECK(Context::current().raw() == nullptr);
    CHECK(detail::api().CtxDestroy(a) == ffi::CUDA_SUCCESS);
    CHECK(detail::api().CtxDestroy(b) == ffi::CUDA_SUCCESS);
  }
};

}  // namespace

TEST_CASE_FIXTURE(FakeTest, "hardening 1: every handle type, moved from, is empty and says so when used") {
  // The case from the review: the moved-into Context is gone, and the
  // moved-from one must not reach the driver with its destroyed handle.
  Context a = Context::create(Device::get(0));
  Context b = std::move(a);
  CHECK_FALSE(a);  // NOLINT(bugprone-use-after-move)
  CHECK(a.raw() == nullptr);
  CHECK(a.use_count() == 0);
  b = Context();
  const long set_current = fake.calls("cuCtxSetCurrent");
  check_empty(error_of([&] { Stream s{a}; }), "oxicuda::Context");
  CHECK(fake.calls("cuCtxSetCurrent") == set_current);
  // ... and while the moved-into one is alive, the moved-from one makes nothing.
  Context c = Context::create(Device::get(0));
  Context d = std::move(c);
  check_empty(error_of([&] { Stream s{c}; }), "oxicuda::Context");  // NOLINT(bugprone-use-after-move)
  check_empty(error_of([&] { c.synchronize(); }), "oxicuda::Context");
  check_empty(error_of([&] { (void)c.device(); }), "oxicuda::Context");
  Context e;
  e = std::move(d);  // move assignment empties too
  CHECK_FALSE(d);    // NOLINT(bugprone-use-after-move)
  CHECK(e);

  Context ctx = Context::primary(Device::get(0));
  Stream live(ctx);
  Module m = Module::from_ptx(ctx, kFakePtx);
  Module m2 = std::move(m);
  check_empty(error_of([&] { (void)m.function("dbl"); }), "oxicuda::Module");  // NOLINT(bugprone-use-after-move)
  Function f = m2.function("dbl");
  Function f2 = std::move(f);
  CHECK(f.raw() == nullptr);  // NOLINT(bugprone-use-after-move)
  check_empty(error_of([&] { (void)f.num_registers(); }), "oxicuda::Function");
  check_empty(error_of([&] { launch(live, f, {}, static_cast<float*>(nullptr), 1u); }), "oxicuda::Function");
  Kernel<void()> k = m2.kernel<void()>("none");
  Kernel<void()> k2 = std::move(k);
  check_empty(error_of([&] { launch(live, k, {}); }), "oxicuda::Function");  // NOLINT(bugprone-use-after-move)
  Event ev(ctx);
  Event ev2 = std::move(ev);
  check_empty(error_of([&] { live.record(ev); }), "oxicuda::Event");  // NOLINT(bugprone-use-after-move)
  check_empty(error_of([&] { ev.synchronize(); }), "oxicuda::Event");
  Stream moved = std::move(live);
  check_empty(error_of([&] { live.synchronize(); }), "oxicuda::Stream");  // NOLINT(bugprone-use-after-move)
  check_empty(error_of([&] { launch(live, k2, {}); }), "oxicuda::Stream");
  DeviceBuffer<float> buf(ctx, 4);
  DeviceBuffer<float> buf2 = std::move(buf);
  CHECK(buf.device_ptr() == 0);  // NOLINT(bugprone-use-after-move)
  CHECK(buf.size() == 0);
  CHECK_FALSE(buf.context());
  std::vector<float> host(4);
  CHECK(error_of([&] { copy(host, buf); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  PinnedBuffer<float> pin(ctx, 4);
  PinnedBuffer<float> pin2 = std::move(pin);
  CHECK(pin.data() == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(pin.size() == 0);
  CHECK_FALSE(pin.context());
  // A MemoryPool is a non-owning reference to the device's pool, like a
  // pointer: a moved-from one still names that pool.
  MemoryPool pool = MemoryPool::device_default(Device::get(0));
  MemoryPool pool2 = std::move(pool);
  CHECK(pool.raw() == pool2.raw());  // NOLINT(bugprone-use-after-move)
}

TEST_CASE_FIXTURE(LaunchTest, "hardening 2: a moved-from Function or Kernel is an error, also with large shared memory and occupancy") {
  Kernel<void()> k = m.kernel<void()>("none");
  Kernel<void()> taken = std::move(k);
  // Above 48 KiB the launch raises the kernel's limit first: it used to
  // read the moved-from Function's null state there (SIGSEGV).
  check_empty(error_of([&] { launch(s, k, {.shared_bytes = 64 * 1024}); }),  // NOLINT(bugprone-use-after-move)
              "oxicuda::Function");
  Function f = m.function("none");
  Function g = std::move(f);
  check_empty(error_of([&] { (void)f.max_active_blocks_per_multiprocessor(128); }),  // NOLINT
              "oxicuda::Function");
  check_empty(error_of([&] { (void)f.suggested_block_size(); }), "oxicuda::Function");
  check_empty(error_of([&] { f.allow_dynamic_shared_bytes(64 * 1024); }), "oxicuda::Function");
  CHECK(fake.calls("cuLaunchKernel") == 0);
  CHECK(fake.calls("cuFuncSetAttribute") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "hardening 3: JitOptions::log_bytes beyond a 32-bit size is refused; the driver is told what was allocated") {
  for (std::size_t bytes : {SIZE_MAX, JitOptions::max_log_bytes + 1}) {
    const Error e = error_of([&] { (void)Module::from_ptx(ctx, kFakePtx, {.log_bytes = bytes}); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.call() == "oxicuda::Module::load");
    CHECK(e.detail() == "JitOptions::log_bytes is " + std::to_string(bytes) +
                            "; the driver takes a log size as a 32-bit unsigned, so at most 4294967294 (16 KiB is "
                            "the default)");
  }
  CHECK(fake.calls("cuModuleLoadDataEx") == 0);
  // A small log: the driver writes at most that many bytes (NUL included).
  Module m = Module::from_ptx(ctx, kFakePtx, {.log_bytes = 9});
  CHECK(m.info_log() == "fake ptx");
}

TEST_CASE_FIXTURE(FakeTest, "hardening 4: a zero-size stream-ordered buffer is stream-ordered like any other") {
  {
    Context ctx = Context::primary(Device::get(0));
    Stream s(ctx), other(ctx);
    auto b = DeviceBuffer<int>::allocate_async(s, 0);
    CHECK(b.stream_ordered());
    CHECK(b.empty());
    CHECK(b.context() == ctx);
    CHECK_NOTHROW(b.free_on(other));
    CHECK(fake.calls("cuMemAllocAsync") == 0);
    DeviceBuffer<int> sync(ctx, 0);
    CHECK_FALSE(sync.stream_ordered());
    CHECK(error_of([&] { sync.free_on(other); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  }
  CHECK(fake.calls("cuMemFreeAsync") == 0);
}

TEST_CASE_FIXTURE(FakeTest, "hardening 6: ScopedCurrent with an empty Context or a null CUcontext leaves a two-deep stack intact") {
  TwoDeepStack stack;
  check_empty(error_of([] { ScopedCurrent guard{Context()}; }), "oxicuda::Context");
  check_empty(error_of([] { ScopedCurrent guard{static_cast<CUcontext>(nullptr)}; }), "CUcontext (null)");
  Context moved = Context::primary(Device::get(0));
  Context into = std::move(moved);
  check_empty(error_of([&] { Event e(moved); }), "oxicuda::Context");  // NOLINT(bugprone-use-after-move)
  CHECK(fake.calls("cuCtxSetCurrent") == 0);  // refused before any context call
  CHECK(fake.calls("cuCtxGetCurrent") == 0);
  {
    // A real guard over the stack: the top is replaced, then restored.
    ScopedCurrent guard(into);
    CHECK(Context::current() == into);
  }
  CHECK(Context::current().raw() == stack.b);
  into = Context();
  stack.check_intact_and_destroy();
}

TEST_CASE_FIXTURE(FakeTest, "hardening 7: a host function's callable is destroyed off the driver's thread, after it has run") {
  HookCapture hook;
  {
    Context ctx = Context::primary(Device::get(0));
    Stream s(ctx);
    const long before = fake.live("memory");
    const std::thread::id test_thread = std::this_thread::get_id();
    std::atomic<bool> ran{false}, ran_elsewhere{false}, destroyed{false}, destroyed_here{false};
    {
      DeviceBuffer<float> buf(ctx, 256);
      struct Witness {
        std::atomic<bool>* destroyed;
        std::atomic<bool>* destroyed_here;
        std::thread::id thread;
        Witness(std::atomic<bool>* d, std::atomic<bool>* h, std::thread::id t) : destroyed(d), destroyed_here(h), thread(t) {}
        Witness(Witness&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)), destroyed_here(o.destroyed_here), thread(o.thread) {}
        ~Witness() {
          if (!destroyed) return;
          *destroyed = true;
          *destroyed_here = std::this_thread::get_id() == thread;
        }
      };
      // The idiom: keep the buffer alive until the work before it has run.
      s.launch_host_func([b = std::move(buf), w = Witness(&destroyed, &destroyed_here, test_thread), &ran,
                          &ran_elsewhere, test_thread] {
        ran = true;
        ran_elsewhere = std::this_thread::get_id() != test_thread;  // the driver's thread, as on a GPU
      });
    }
    CHECK(ran);
    CHECK(ran_elsewhere);
    CHECK(fake.host_funcs_run() == 1);
    s.synchronize();  // where the callable is destroyed
    CHECK(destroyed);
    CHECK(destroyed_here);
    CHECK(fake.live("memory") == before);  // cuMemFree succeeded: it was not called on the driver's thread
    CHECK(reported.empty());

    // A callable that throws goes to the hook, and everything goes on.
    s.launch_host_func([] { throw std::runtime_error("boom"); });
    s.synchronize();
    REQUIRE(reported.size() == 1);
    CHECK(reported[0].call() == "oxicuda::Stream::launch_host_func");
    CHECK(reported[0].detail() == "while running a host function; the host function threw: boom");

    // CUDA calls inside a host function are refused, and oxicuda says why.
    std::string inside;
    s.launch_host_func([&inside] {
      try {
        (void)Device::count();
      } catch (const Error& e) {
        inside = e.what();
      }
    });
    s.synchronize();
    CHECK(inside.find("cuDeviceGetCount failed: CUDA_ERROR_NOT_PERMITTED (800)") == 0);
    CHECK(inside.find("inside a host function (launch_host_func or a graph host node), on the driver's thread") !=
          std::string::npos);
    // Callables that are never synchronized are reclaimed by the next launch_host_func.
    std::atomic<int> gone{0};
    struct Count {
      std::atomic<int>* n;
      explicit Count(std::atomic<int>* c) : n(c) {}
      Count(Count&& o) noexcept : n(std::exchange(o.n, nullptr)) {}
      ~Count() {
        if (n) ++*n;
      }
    };
    s.launch_host_func([c = Count(&gone)] {});
    CHECK(gone == 0);
    s.launch_host_func([c = Count(&gone)] {});
    CHECK(gone == 1);
  }  // the stream's destruction reclaims the last one
  CHECK(reported.size() == 1);
}

TEST_CASE_FIXTURE(ContextTest, "hardening 8: image size checks cannot be bypassed by integer overflow") {
  // A fatbin header claiming 2^64 - 16 bytes of payload after its 16-byte header.
  std::vector<unsigned char> fatbin(64, 0);
  const std::uint32_t magic = 0xBA55ED50u;
  std::memcpy(fatbin.data(), &magic, 4);
  fatbin[6] = 16;
  const std::uint64_t huge = ~std::uint64_t{0} - 15;
  std::memcpy(fatbin.data() + 8, &huge, 8);
  const Error f = error_of([&] { (void)Module::from_image(ctx, fatbin.data(), fatbin.size()); });
  CHECK(f.result() == ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(f.detail() == "the fatbin image is truncated: its headers describe 16 + 18446744073709551600 bytes but only "
                      "64 were given");
  // An ELF whose section headers lie at 2^64 - 8: offset + size wraps to a small number.
  std::vector<unsigned char> elf(128, 0);
  elf[0] = 0x7f, elf[1] = 'E', elf[2] = 'L', elf[3] = 'F', elf[4] = 2;
  const std::uint64_t shoff = ~std::uint64_t{0} - 7;
  std::memcpy(elf.data() + 40, &shoff, 8);
  elf[58] = 64, elf[60] = 1;  // one section header of 64 bytes
  const Error e = error_of([&] { (void)Module::from_image(ctx, elf.data(), elf.size()); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(e.detail() == "the cubin (ELF) image is truncated: its headers describe 18446744073709551608 + 64 bytes "
                      "but only 128 were given");
  // The same with program headers.
  std::vector<unsigned char> elf2(128, 0);
  std::memcpy(elf2.data(), elf.data(), 8);
  std::memcpy(elf2.data() + 32, &shoff, 8);
  elf2[54] = 56, elf2[56] = 1;
  CHECK(error_of([&] { (void)Module::from_image(ctx, elf2.data(), elf2.size()); }).result() ==
        ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(fake.calls("cuModuleLoadDataEx") == 0);
}

TEST_CASE_FIXTURE(LaunchTest, "hardening 9: the dynamic shared memory limit is not trusted stale") {
  Function f1 = m.function("none"), f2 = m.function("none");
  launch(s, f1, {.shared_bytes = 64 * 1024});
  CHECK(f1.allowed_dynamic_shared_bytes() == 64 * 1024);
  // Lowered through another Function of the same kernel: f1 does not know.
  f2.set_attribute(ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 50 * 1024);
  CHECK(f1.allowed_dynamic_shared_bytes() == 50 * 1024);  // the driver's answer
  CHECK_NOTHROW(launch(s, f1, {.shared_bytes = 60 * 1024}));
  CHECK(f1.allowed_dynamic_shared_bytes() == 60 * 1024);
  // Lowered through the same Function: its own launches follow.
  f1.set_attribute(ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49 * 1024);
  CHECK(f1.allowed_dynamic_shared_bytes() == 49 * 1024);
  const long sets = fake.calls("cuFuncSetAttribute");
  CHECK_NOTHROW(launch(s, f1, {.shared_bytes = 56 * 1024}));
  CHECK(fake.calls("cuFuncSetAttribute") == sets + 1);  // raised before the launch, not after a refusal
  // Through raw(): the refused launch re-reads the limit, raises it and succeeds.
  REQUIRE(detail::api().FuncSetAttribute(f1.raw(), ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         48 * 1024) == ffi::CUDA_SUCCESS);
  CHECK_NOTHROW(launch(s, f1, {.shared_bytes = 52 * 1024}));
  FakeLaunch l{};
  fake.last_launch(&l);
  CHECK(l.shared_bytes == 52 * 1024);
}

TEST_CASE("hardening 11: a throwing diagnostic hook does not end the process") {
  // (The same under OXICUDA_NO_EXCEPTIONS: tests/compile/hook_no_exceptions.cpp.)
  FakeScope scope;
  DiagnosticHook previous = set_diagnostic_hook([](const Error&) { throw std::runtime_error("hook"); });
  {
    Context ctx = Context::primary(Device::get(0));
    Stream s(ctx);
    scope.fake.fail("cuStreamDestroy", 1, ffi::CUDA_ERROR_UNKNOWN);
    Stream gone = std::move(s);
  }  // the destroy fails, the hook throws, the destructor carries on
  set_diagnostic_hook(previous);
  scope.fake.reset();
  CHECK(scope.fake.live("stream") == scope.at_start.stream + 1);  // the fake refused that one destroy
  CHECK(scope.fake.invalid_destroys() == 0);
}

TEST_CASE("hardening 12: an error reported from a destructor says what was destroyed, not an oxicuda line") {
  FakeScope scope;
  HookCapture hook;
  {
    Context ctx = Context::primary(Device::get(0));
    Stream s(ctx);
    Event e(ctx);
    DeviceBuffer<int> b(ctx, 4);
    scope.fake.fail("cuStreamDestroy", 1, ffi::CUDA_ERROR_UNKNOWN);
    scope.fake.fail("cuEventDestroy", 1, ffi::CUDA_ERROR_UNKNOWN);
    scope.fake.fail("cuMemFree", 1, ffi::CUDA_ERROR_UNKNOWN);
  }
  REQUIRE(reported.size() == 3);
  const std::string text = "an unknown internal error has occurred [fake driver]";
  CHECK(std::string(reported[0].what()) ==
        "cuMemFree failed: CUDA_ERROR_UNKNOWN (999): " + text + "\n  while freeing an oxicuda::DeviceBuffer");
  CHECK(std::string(reported[1].what()) ==
        "cuEventDestroy failed: CUDA_ERROR_UNKNOWN (999): " + text + "\n  while destroying an oxicuda::Event");
  CHECK(std::string(reported[2].what()) ==
        "cuStreamDestroy failed: CUDA_ERROR_UNKNOWN (999): " + text + "\n  while destroying an oxicuda::Stream");
  for (const Error& e : reported) CHECK(e.where().line() == 0);
  scope.fake.reset();
  CHECK(scope.fake.live("stream") == scope.at_start.stream + 1);
}

TEST_CASE_FIXTURE(ContextTest, "hardening 13: PTX with an embedded NUL is refused, not cut") {
  std::string ptx = kFakePtx;
  const std::size_t at = ptx.find(".visible");
  ptx.insert(at, 1, '\0');
  const Error e = error_of([&] { (void)Module::from_ptx(ctx, ptx); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_PTX);
  CHECK(e.detail() == "the PTX source of " + std::to_string(ptx.size()) + " bytes has a NUL byte at offset " +
                          std::to_string(at) + "; the driver would read only the text before it");
  CHECK(fake.calls("cuModuleLoadDataEx") == 0);
  // A terminating NUL, as in an embedded file, is fine.
  std::string terminated = kFakePtx;
  terminated.push_back('\0');
  CHECK_NOTHROW((void)Module::from_image(ctx, terminated.data(), terminated.size()));
}

TEST_CASE_FIXTURE(FakeTest, "hardening 14: default-stream handles enqueue in their own context, whatever is current") {
  Context ctx = Context::create(Device::get(0));
  Context other = Context::create(Device::get(0));
  Event e(ctx);
  for (Stream s : {Stream::legacy_default(ctx), Stream::per_thread_default(ctx), Stream::borrow(nullptr, ctx)}) {
    // No context current: the driver alone would refuse (CUDA_ERROR_INVALID_CONTEXT).
    REQUIRE(Context::current().raw() == nullptr);
    CHECK_NOTHROW(s.record(e));
    CHECK(fake.last_context() == ctx.raw());
    CHECK(Context::current().raw() == nullptr);
    // Another context current: the work must not go there.
    other.make_current();
    CHECK_NOTHROW(s.record(e));
    CHECK(fake.last_context() == ctx.raw());
    CHECK_NOTHROW(s.synchronize());
    CHECK(fake.last_context() == ctx.raw());
    CHECK(s.ready());
    CHECK(Context::current() == other);
    REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
  }
  // The raw handle alone follows the driver's rule: the current context.
  CHECK(detail::api().EventRecord(e.raw(), ffi::stream_legacy()) == ffi::CUDA_ERROR_INVALID_CONTEXT);
  // Ordinary streams pay nothing for this: no context call per enqueue.
  Stream plain(ctx);
  const long calls = fake.calls("*");
  plain.record(e);
  CHECK(fake.calls("*") - calls == 1);
}

TEST_CASE_FIXTURE(StreamTest, "fake driver: zero-size copies and fills succeed in every direction, as on the driver") {
  DeviceBuffer<int> a(ctx, 0), b(ctx, 0);
  PinnedBuffer<int> pinned(ctx, 0);
  std::vector<int> host;
  CHECK(a.device_ptr() == 0);
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
  auto c = DeviceBuffer<char>::allocate_async(s, 0);
  CHECK_NOTHROW(fill_async(s, c, 'x'));
  s.synchronize();
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 2);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == 2);
  CHECK(fake.calls("cuMemcpyDtoDAsync") == 2);
  CHECK(fake.calls("cuMemsetD32Async") == 2);
  CHECK(fake.calls("cuMemsetD8Async") == 3);
}

TEST_CASE("bad input: CUDA in a child forked after the driver was loaded") {
  FakeScope scope;
  (void)Device::count();  // the driver is loaded
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 1;
    try {
      (void)Device::count();
    } catch (const Error& e) {
      const std::string d = e.detail();
      status = e.result() == ffi::CUDA_ERROR_NOT_INITIALIZED &&
                       d.find("this process is a child forked after the CUDA driver was initialized in its parent: "
                              "CUDA cannot be used in such a child. Initialize CUDA only after fork(), or exec() a "
                              "new program in the child") == 0
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
}

TEST_CASE_FIXTURE(ContextTest, "bad input: thread_local handles destroyed at thread exit") {
  std::thread t([this] {
    thread_local Stream s(ctx);
    thread_local Event e(ctx);
    thread_local DeviceBuffer<float> b(ctx, 16);
    s.record(e);
    fill_async(s, b, 1.0f);
    s.launch_host_func([] {});
  });
  t.join();
}

void watch_allocations_of(std::size_t bytes, long fail_nth);  // main.cpp
void fail_every_allocation(bool on);                           // main.cpp

namespace {
// A state that owns a string and reports its destruction (what a Module's
// state is: a driver object and its log, taken by value).
struct Probe : oxicuda::detail::Owned {
  std::string text;
  int* released;
  Probe(std::string t, int* r) noexcept : text(std::move(t)), released(r) {}
  ~Probe() { ++*released; }
};
}  // namespace

TEST_CASE("out of memory everywhere: a state that cannot be allocated still gives back what it owns") {
  // With the thread's cache of blocks empty and every allocation failing,
  // Shared<T>::make must give back what its arguments hand over without
  // allocating again: a copy of the string would fail too, and the state
  // that releases would never be made.
  auto& cache = oxicuda::detail::block_cache;
  std::vector<void*> taken;
  taken.reserve(oxicuda::detail::block_cache_limit);
  while (void* b = cache.head) {
    cache.head = *static_cast<void**>(b);
    --cache.count;
    taken.push_back(b);
  }
  int released = 0;
  std::string text(100, 'x');  // not a short string: copying it allocates
  bool threw = false;
  fail_every_allocation(true);
  try {
    (void)oxicuda::detail::Shared<Probe>::make(std::move(text), &released);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  fail_every_allocation(false);
  for (void* b : taken) oxicuda::detail::free_block(b);
  CHECK(threw);
  CHECK(released == 1);
}
long watched_allocations();
std::size_t last_allocation_size();  // main.cpp

TEST_CASE_FIXTURE(ContextTest, "out of memory: a handle whose state cannot be allocated gives its driver object back") {
  // Empty this thread's cache of state blocks, so that each new state needs
  // operator new. For each kind of handle, a first one is made and held (so
  // its block stays taken), counting the allocations of a state's size on
  // the way: the state's block is the last of them. Making a second one,
  // that allocation fails: the driver object made just before must be
  // given back. The fixture checks at the end that the fake is balanced.
  std::vector<Event> drain;
  for (unsigned i = 0; i <= oxicuda::detail::block_cache_limit; ++i) drain.emplace_back(ctx, EventOptions{.timing = false});
  const LiveCounts before = LiveCounts::take(fake);
  auto fails_cleanly = [](auto make, std::size_t state_size = oxicuda::detail::state_bytes) {
    watch_allocations_of(state_size, 0);
    auto held = make();
    const long nth = watched_allocations();
    INFO("allocations of a state's size while making the first: " << nth);
    watch_allocations_of(state_size, nth);
    CHECK_THROWS_AS((void)make(), std::bad_alloc);
    watch_allocations_of(0, 0);
    return held;
  };
  const Event e = fails_cleanly([&] { return Event{ctx}; });
  // A Stream's state is its std::shared_ptr's control block, the last
  // allocation of a Stream's making: when it cannot be allocated, the
  // shared_ptr's constructor calls the deleter, which destroys the stream
  // made just before.
  std::size_t control_block = 0;
  {
    const Stream probe{ctx};
    control_block = last_allocation_size();
  }
  const Stream s = fails_cleanly([&] { return Stream{ctx}; }, control_block);
  const Context created = fails_cleanly([] { return Context::create(Device::get(0)); });
  const Context primary = fails_cleanly([] { return Context::primary(Device::get(0)); });
  const Module m = fails_cleanly([&] { return Module::from_ptx(ctx, kFakePtx); });
  const Graph g = fails_cleanly([&] { return Graph{ctx}; });
  const GraphExec x = fails_cleanly([&] { return GraphExec{g}; });
  const LiveCounts after = LiveCounts::take(fake);
  CHECK(after.event == before.event + 1);
  CHECK(after.stream == before.stream + 1);
  CHECK(after.context == before.context + 1);
  CHECK(after.primary == before.primary + 1);
  CHECK(after.module == before.module + 1);
  CHECK(after.graph == before.graph + 1);
  CHECK(after.graph_exec == before.graph_exec + 1);
}
