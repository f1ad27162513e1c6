// Stream and Event on the fake driver: shared queues destroyed once, the
// context restored after creation, record/wait/query, borrowed streams.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <sys/wait.h>
#include <unistd.h>
#include <stdexcept>
#include <string>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "stream: N copies share one queue and cost one cuStreamDestroy_v2") {
  {
    Context ctx = Context::primary(Device::get(0));
    Stream s(ctx);
    std::vector<Stream> copies(100, s);
    Stream moved = std::move(copies.back());
    copies.pop_back();
    CHECK(s.use_count() == 101);
    for (const Stream& c : copies) CHECK(c.is_same_queue(s));
    CHECK(moved.raw() == s.raw());
    CHECK(fake.live("stream") == at_start.stream + 1);
    copies.clear();
    CHECK(fake.calls("cuStreamDestroy") == 0);
  }
  CHECK(fake.calls("cuStreamDestroy") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "stream: two streams are two queues") {
  Stream a(ctx), b(ctx);
  CHECK_FALSE(a.is_same_queue(b));
  CHECK(a.owns());
}

TEST_CASE_FIXTURE(ContextTest, "stream: created with its context current; the previous context is current again afterwards") {
  Context other = Context::create(Device::get(0));
  ScopedCurrent outer(ctx);
  Stream s(other);  // created in `other` ...
  CHECK(Context::current() == ctx);  // ... and `ctx` is current again
  CHECK(s.context() == other);
  CHECK(Stream::borrow(s.raw()).context() == other);  // the driver agrees (cuStreamGetCtx)
  // The same when creation fails.
  fake.fail("cuStreamCreate", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_THROWS_AS(Stream{other}, Error);
  CHECK(Context::current() == ctx);
}

TEST_CASE_FIXTURE(FakeTest, "stream: the stream keeps its context alive") {
  Stream s;
  {
    Context ctx = Context::create(Device::get(0));
    s = Stream(ctx);
  }
  CHECK(fake.calls("cuCtxDestroy") == 0);
  CHECK(fake.live("context") == at_start.context + 1);
  s = Stream();
  CHECK(fake.calls("cuStreamDestroy") == 1);
  CHECK(fake.calls("cuCtxDestroy") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "stream: options choose priority and blocking") {
  Stream high(ctx, {.priority = -3});
  CHECK(high.priority() == -3);
  CHECK(high.non_blocking());
  CHECK(fake.calls("cuStreamCreateWithPriority") == 1);
  Stream blocking(ctx, {.non_blocking = false});
  CHECK_FALSE(blocking.non_blocking());
  CHECK(blocking.priority() == 0);
  CHECK(fake.calls("cuStreamCreate") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "stream: borrowed and default streams are never destroyed") {
  Stream owner(ctx);
  {
    Stream b = Stream::borrow(owner.raw(), ctx);
    Stream legacy = Stream::legacy_default(ctx);
    Stream per_thread = Stream::per_thread_default(ctx);
    Stream null = Stream::borrow(nullptr, ctx);
    CHECK_FALSE(b.owns());
    CHECK(b.is_same_queue(owner));
    CHECK(legacy.raw() == ffi::stream_legacy());
    CHECK(per_thread.raw() == ffi::stream_per_thread());
    CHECK(null.is_same_queue(legacy));
    legacy.synchronize();
    per_thread.synchronize();
    Stream copy = b;
    CHECK_FALSE(copy.owns());
    CHECK(copy.use_count() == 2);
  }
  CHECK(fake.calls("cuStreamDestroy") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "stream and event: record, wait, ready, synchronize, elapsed") {
  Stream a(ctx), b(ctx);
  Event start(ctx), stop(ctx);
  CHECK(start.timing());
  a.record(start);
  b.wait(start);
  a.record(stop);
  CHECK(a.ready());
  CHECK(stop.ready());
  stop.synchronize();
  a.synchronize();
  // The fake's clock advances 0.5 ms per record.
  CHECK(Event::elapsed(start, stop).count() == doctest::Approx(0.5));
  CHECK(fake.calls("cuEventRecord") == 2);
  CHECK(fake.calls("cuStreamWaitEvent") == 1);
}

TEST_CASE_FIXTURE(FakeTest, "event: copies share one event, destroyed once, and keep the context alive") {
  {
    Event e;
    {
      Context ctx = Context::create(Device::get(0));
      e = Event(ctx, {.timing = false, .blocking_sync = true});
    }
    Event copy = e;
    CHECK(copy == e);
    CHECK(e.use_count() == 2);
    CHECK_FALSE(e.timing());
    CHECK(fake.live("event") == at_start.event + 1);
  }
  CHECK(fake.calls("cuEventDestroy") == 1);
  CHECK(fake.calls("cuCtxDestroy") == 1);
}

TEST_CASE_FIXTURE(StreamTest, "event: elapsed time explains events without timing, and events never recorded") {
  Event timed(ctx), untimed(ctx, {.timing = false}), never(ctx);
  s.record(timed);
  s.record(untimed);
  {
    const Error e = error_of([&] { (void)Event::elapsed(timed, untimed); });
    CHECK(e.call() == "cuEventElapsedTime");
    CHECK(e.detail() == "the end event was created with {.timing = false}; elapsed time needs timing on both events");
  }
  {
    const Error e = error_of([&] { (void)Event::elapsed(timed, never); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
    CHECK(e.detail() == "both events must have been recorded on a stream before their elapsed time is asked");
  }
}

TEST_CASE_FIXTURE(StreamTest, "stream: a query that fails with something other than NOT_READY is an error") {
  Event e(ctx);
  fake.fail("cuStreamQuery", 1, ffi::CUDA_ERROR_NOT_READY);
  CHECK_FALSE(s.ready());
  fake.fail("cuStreamQuery", 1, ffi::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_THROWS_AS((void)s.ready(), Error);
  fake.fail("cuEventQuery", 1, ffi::CUDA_ERROR_NOT_READY);
  CHECK_FALSE(e.ready());
}

TEST_CASE_FIXTURE(StreamTest, "stream: host functions run, and their exceptions go to the diagnostic hook") {
  std::atomic<int> ran{0};
  s.launch_host_func([&ran] { ++ran; });
  s.synchronize();
  CHECK(ran == 1);
  static int reported = 0;
  DiagnosticHook previous = set_diagnostic_hook([](const Error& e) noexcept {
    reported += std::string(e.what()).find("the host function threw: boom") != std::string::npos;
  });
  s.launch_host_func([] { throw std::runtime_error("boom"); });
  set_diagnostic_hook(previous);
  CHECK(reported == 1);
  // A failed enqueue frees the callable and reports.
  fake.fail("cuLaunchHostFunc", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK_THROWS_AS(s.launch_host_func([] {}), Error);
  CHECK(fake.host_funcs_run() == 2);
}

TEST_CASE_FIXTURE(ContextTest, "handles: copy, move and self-assignment keep the counts; a stream is a shared_ptr and a pointer, an event two pointers") {
  // A Stream: its std::shared_ptr and the pointer to the context in its
  // deleter. An Event: the counted state (handle.hpp) and the raw handle.
  static_assert(sizeof(Stream) == sizeof(std::shared_ptr<CUstream_st>) + sizeof(void*));
  static_assert(sizeof(Event) == 2 * sizeof(void*));
  const long destroys = fake.calls("cuStreamDestroy");
  Stream a(ctx), b(ctx);
  const CUstream b_raw = b.raw();
  a = b;  // a's own queue had one handle: it goes now
  CHECK(fake.calls("cuStreamDestroy") == destroys + 1);
  CHECK((a.raw() == b_raw && a.use_count() == 2 && b.use_count() == 2));
  Stream& same = a;
  a = same;  // self-copy: nothing changes
  CHECK((a.raw() == b_raw && a.use_count() == 2));
  a = std::move(same);  // self-move: the handle stays what it was
  CHECK((a.raw() == b_raw && a.use_count() == 2));
  Stream c = std::move(a);  // a is empty, its count gone to c
  CHECK((!a && a.use_count() == 0 && c.use_count() == 2));
  b = Stream();  // b drops its count; c is the last handle
  CHECK((c.use_count() == 1 && fake.calls("cuStreamDestroy") == destroys + 1));
  c = std::move(a);  // the last handle replaced by an empty one: the queue goes
  CHECK((!c && fake.calls("cuStreamDestroy") == destroys + 2));

  Event e(ctx);
  Event f = e;
  e = Event(ctx);  // e's old state still has f
  CHECK((f.use_count() == 1 && e.use_count() == 1 && e.raw() != f.raw()));
  CHECK(fake.live("event") == at_start.event + 2);
}

// --- issue 30.3: fork() and host functions ---

namespace {
// Sets its flag when destroyed (moves hand the flag on).
struct DestroyFlag {
  std::atomic<bool>* flag;
  explicit DestroyFlag(std::atomic<bool>* f) : flag(f) {}
  DestroyFlag(DestroyFlag&& o) noexcept : flag(std::exchange(o.flag, nullptr)) {}
  DestroyFlag(const DestroyFlag&) = delete;
  DestroyFlag& operator=(const DestroyFlag&) = delete;
  DestroyFlag& operator=(DestroyFlag&&) = delete;
  ~DestroyFlag() {
    if (flag) *flag = true;
  }
};
}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 30.3: a host function's callable whose last Stream handle dropped first is destroyed at the next oxicuda call, on any thread") {
  std::atomic<bool> destroyed{false};
  {
    Stream s(ctx);
    fake.hold(s.raw(), 1);  // the work before the host function is still running
    DeviceBuffer<float> buf(ctx, 256);
    s.launch_host_func([buf = std::move(buf), flag = DestroyFlag(&destroyed)] {});
    CHECK(fake.host_funcs_run() == 0);
  }  // the last handle: cuStreamDestroy returns at once, the work is pending
  CHECK(fake.pending(nullptr) == 1);
  fake.hold(nullptr, 0);  // the GPU gets there: the host function runs on the driver's thread
  CHECK(fake.host_funcs_run() == 1);
  CHECK_FALSE(destroyed);  // never on the driver's thread
  CHECK(fake.live("memory") == at_start.memory + 1);
  // No synchronize: the next oxicuda call, here on another thread, destroys it.
  std::thread([&] { Event e(ctx); }).join();
  CHECK(destroyed);
  CHECK(fake.live("memory") == at_start.memory);
}

TEST_CASE("issue 30.3: in a forked child no call reaches the driver: destructors leak, synchronize and ready are refused with the reason") {
  FakeScope scope;
  Context ctx = Context::primary(Device::get(0));
  std::optional<Stream> s(std::in_place, ctx);
  std::optional<Event> e(std::in_place, ctx);
  std::optional<DeviceBuffer<int>> b(std::in_place, ctx, 16);
  std::optional<PinnedBuffer<int>> p(std::in_place, ctx, 16);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const long before = scope.fake.calls("*");
    int status = 0;
    auto refused = [&](auto&& f, int code) {
      try {
        f();
        status = status ? status : code;  // not refused
      } catch (const Error& err) {
        if (err.result() != ffi::CUDA_ERROR_NOT_INITIALIZED ||
            err.detail().find("this process is a child forked after the CUDA driver was initialized") ==
                std::string::npos)
          status = status ? status : code + 1;
      }
    };
    refused([&] { s->synchronize(); }, 10);
    refused([&] { (void)s->ready(); }, 12);
    refused([&] { e->synchronize(); }, 14);
    refused([&] { (void)e->ready(); }, 16);
    refused([&] { ctx.synchronize(); }, 18);
    refused([&] { copy_async(*s, *b, std::vector<int>(16)); }, 20);
    refused([&] { Stream another(ctx); }, 22);
    s.reset();  // each destructor: no driver call (the driver crashes in cuStreamDestroy there)
    e.reset();
    b.reset();
    p.reset();
    ctx = Context();
    if (status == 0 && scope.fake.calls("*") != before) status = 3;
    _exit(status);
  }
  int status = -1;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_NOTHROW(s->synchronize());  // the parent carries on
}
