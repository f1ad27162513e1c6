// Stream on std::shared_ptr (its StreamDeleter, shared(), adopt) and the
// non-owning StreamRef, on the fake driver, which counts the cuStreamDestroy
// calls made on each stream handle.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <atomic>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using namespace oxicuda;

long heap_allocations();  // main.cpp

namespace {
// A stream made by the driver directly, as other code would hold it.
CUstream raw_stream(const Context& ctx) {
  const ScopedCurrent current(ctx);
  CUstream q = nullptr;
  REQUIRE(detail::api().StreamCreate(&q, ffi::CU_STREAM_NON_BLOCKING) == ffi::CUDA_SUCCESS);
  return q;
}
}  // namespace

TEST_CASE_FIXTURE(ContextTest, "stream: copied across 8 threads, the deleter destroys the queue exactly once") {
  Stream s(ctx);
  const CUstream raw = s.raw();
  const std::weak_ptr<CUstream_st> watch = s.shared();
  CHECK(std::get_deleter<StreamDeleter>(s.shared()) != nullptr);
  std::atomic<bool> go{false};
  std::atomic<int> copied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([held = s, &go, &copied, raw] {
      std::vector<Stream> copies(16, held);  // each thread holds copies ...
      Stream moved = std::move(copies.back());
      copies.pop_back();
      CHECK(moved.raw() == raw);
      copied.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      copies.clear();  // ... and drops them, the last drop on one of these threads
    });
  while (copied.load() != 8) std::this_thread::yield();
  CHECK(s.use_count() == 1 + 8 * (1 + 16));  // each thread: its captured handle, 15 copies and the moved one
  s = Stream();  // the first handle goes first
  CHECK(fake.stream_destroys(raw) == 0);
  CHECK_FALSE(watch.expired());
  go.store(true);
  for (std::thread& t : threads) t.join();
  CHECK(fake.stream_destroys(raw) == 1);
  CHECK(watch.expired());  // the weak_ptr from shared() expires with the last handle
}

TEST_CASE_FIXTURE(FakeTest, "stream: the deleter keeps the context alive, and a weak_ptr keeps neither the queue nor the context") {
  Stream s;
  {
    const Context ctx = Context::create(Device::get(0));
    s = Stream(ctx);
  }
  CHECK(fake.live("context") == at_start.context + 1);
  const CUstream raw = s.raw();
  const std::weak_ptr<CUstream_st> watch = s.shared();
  s = Stream();
  CHECK(watch.expired());
  CHECK(fake.stream_destroys(raw) == 1);
  CHECK(fake.live("context") == at_start.context);  // released by the deleter's call, the weak_ptr still held
  CHECK(fake.calls("cuCtxDestroy") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "stream: a borrowed stream's deleter never destroys it") {
  const CUstream foreign = raw_stream(ctx);
  {
    const Stream b = Stream::borrow(foreign, ctx);
    const Stream asked = Stream::borrow(foreign);  // the context from the driver
    CHECK_FALSE(b.owns());
    CHECK(asked.context().raw() == ctx.raw());
    std::vector<Stream> copies(8, b);
    const Stream legacy = Stream::legacy_default(ctx);
    const Stream per_thread = Stream::per_thread_default(ctx);
    CHECK_FALSE(legacy.owns());
    const StreamDeleter* d = std::get_deleter<StreamDeleter>(per_thread.shared());
    REQUIRE(d != nullptr);
    CHECK_FALSE(d->owns());
  }
  CHECK(fake.stream_destroys(foreign) == 0);
  CHECK(fake.stream_destroys(ffi::stream_legacy()) == 0);
  CHECK(fake.stream_destroys(ffi::stream_per_thread()) == 0);
  CHECK(fake.calls("cuStreamDestroy") == 0);
  REQUIRE(detail::api().StreamDestroy(foreign) == ffi::CUDA_SUCCESS);
  CHECK(fake.stream_destroys(foreign) == 1);
}

TEST_CASE_FIXTURE(ContextTest, "stream: adopt keeps the user's shared_ptr and runs the user's deleter, never ours") {
  const CUstream raw = raw_stream(ctx);
  int user_deletes = 0;
  std::shared_ptr<CUstream_st> mine(raw, [&user_deletes](CUstream_st* q) {
    ++user_deletes;
    CHECK(detail::api().StreamDestroy(q) == ffi::CUDA_SUCCESS);
  });
  Event e(ctx);
  {
    const Stream a = Stream::adopt(mine, ctx);
    const Stream b = Stream::adopt(mine);  // the context from the driver (cuStreamGetCtx)
    CHECK(a.raw() == raw);
    CHECK(a.context() == ctx);
    CHECK(b.context().raw() == ctx.raw());
    CHECK_FALSE(a.owns());
    CHECK(a.is_same_queue(b));
    mine.reset();  // the Streams hold the user's pointer now
    CHECK(user_deletes == 0);
    a.record(e);
    b.wait(e);
    const std::weak_ptr<CUstream_st> watch = a.shared();
    // Each adopt is a pointer of its own over the user's one: the same
    // stream, another count.
    CHECK((a.shared().owner_before(b.shared()) || b.shared().owner_before(a.shared())));
    CHECK(a.use_count() == 1);
    CHECK(user_deletes == 0);
  }
  CHECK(user_deletes == 1);
  CHECK(fake.stream_destroys(raw) == 1);  // the user's one call: ours made none
  CHECK_THROWS_AS((void)Stream::adopt(std::shared_ptr<CUstream_st>{}, ctx), Error);
  CHECK_THROWS_AS((void)Stream::adopt(std::shared_ptr<CUstream_st>{}), Error);
}

TEST_CASE_FIXTURE(LaunchTest, "stream: an empty or moved-from Stream is an Error on use, not a crash") {
  Event e(ctx);
  Function dbl = m.function("dbl");
  Stream a(ctx);
  Stream b = std::move(a);
  Stream c;
  c = std::move(b);
  auto refused = [&](const Stream& x) {
    CHECK_FALSE(x);
    CHECK(x.raw() == nullptr);
    CHECK_FALSE(x.shared());
    CHECK(x.use_count() == 0);
    CHECK_FALSE(x.owns());
    CHECK_FALSE(x.context());
    CHECK_THROWS_AS(x.record(e), Error);
    CHECK_THROWS_AS(x.wait(e), Error);
    CHECK_THROWS_AS(x.synchronize(), Error);
    CHECK_THROWS_AS((void)x.ready(), Error);
    CHECK_THROWS_AS((void)x.priority(), Error);
    CHECK_THROWS_AS(x.launch_host_func([] {}), Error);
    CHECK_THROWS_AS(launch(x, dbl, 1, 64, 0, ffi::CUdeviceptr{}, 64u), Error);
    const StreamRef r = x;
    CHECK_FALSE(r);
    CHECK_THROWS_AS(r.record(e), Error);
  };
  refused(a);  // moved from
  refused(b);  // moved from by assignment
  refused(Stream());
  CHECK(c.use_count() == 1);
  CHECK(c.context() == ctx);
  const CUstream raw = c.raw();
  c = Stream();
  CHECK(fake.stream_destroys(raw) == 1);
}

TEST_CASE_FIXTURE(LaunchTest, "StreamRef: a raw stream and a context, launched and recorded through, allocate nothing and destroy nothing") {
  static_assert(std::is_trivially_copyable_v<StreamRef>);
  static_assert(sizeof(StreamRef) == 2 * sizeof(void*));
  static_assert(std::is_convertible_v<const Stream&, StreamRef>);
  static_assert(!std::is_constructible_v<StreamRef, CUstream, Context&&>, "a temporary Context would dangle");
  Event e(ctx, {.timing = false});
  Function dbl = m.function("dbl");
  auto k = m.kernel<void(float*, unsigned)>("dbl");
  DeviceBuffer<float> buf(ctx, 64);
  const CUstream foreign = raw_stream(ctx);
  launch(s, dbl, 1, 64, 0, buf.data(), 64u);  // warm
  {
    const long calls = fake.calls("*"), heap = heap_allocations();
    const StreamRef r(foreign, ctx);
    launch(r, dbl, 1, 64, 0, buf.data(), 64u);
    launch(r, k, {.grid = 1, .block = 64}, buf, 64);
    r.record(e);
    r.wait(e);
    fill_bytes_async(r, buf, 0);
    CHECK(r.ready());
    CHECK(fake.calls("*") - calls == 6);
    CHECK(heap_allocations() - heap == 0);  // no handle, no control block
  }
  CHECK(fake.stream_destroys(foreign) == 0);
  // A Stream's view: the same queue, its context, for free.
  const StreamRef view = s;
  CHECK(view.raw() == s.raw());
  CHECK(view.context() == ctx);
  CHECK(view.is_same_queue(s));
  CHECK_FALSE(view.is_same_queue(StreamRef(foreign, ctx)));
  // A null raw stream is the legacy default stream, in the given context.
  const StreamRef legacy(nullptr, ctx);
  CHECK(legacy.raw() == ffi::stream_legacy());
  REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
  legacy.record(e);  // the view's context made current around the call ...
  CHECK(fake.last_context() == ctx.raw());
  CUcontext now = ctx.raw();
  REQUIRE(detail::api().CtxGetCurrent(&now) == ffi::CUDA_SUCCESS);
  CHECK(now == nullptr);  // ... and none again after it
  CHECK_THROWS_AS(StreamRef().record(e), Error);
  CHECK_THROWS_AS(launch(StreamRef(), dbl, 1, 64, 0, buf.data(), 64u), Error);
  REQUIRE(detail::api().StreamDestroy(foreign) == ffi::CUDA_SUCCESS);
  CHECK(fake.stream_destroys(foreign) == 1);
}

TEST_CASE_FIXTURE(LaunchTest, "EventRef: another library's event, recorded and waited on through a view, allocates nothing and is never destroyed") {
  static_assert(std::is_trivially_copyable_v<EventRef>);
  static_assert(sizeof(EventRef) == sizeof(void*));
  static_assert(std::is_convertible_v<const Event&, EventRef>);
  static_assert(!std::is_convertible_v<CUevent, EventRef>, "a raw event is viewed on purpose, EventRef(raw)");
  CUevent raw = nullptr;
  {
    ScopedCurrent guard(ctx);
    REQUIRE(detail::api().EventCreate(&raw, 0) == ffi::CUDA_SUCCESS);
  }
  s.record(EventRef(raw));  // warm
  const long calls = fake.calls("*"), heap = heap_allocations();
  s.record(EventRef(raw));
  s.wait(EventRef(raw));
  const StreamRef view = s;
  view.record(EventRef(raw));
  CHECK(fake.calls("*") - calls == 3);
  CHECK(heap_allocations() - heap == 0);
  // An Event is viewed for free; an empty view is an Error naming the type.
  Event e(ctx);
  CHECK(EventRef(e) == EventRef(e.raw()));
  CHECK_THROWS_WITH_AS(s.record(EventRef()), doctest::Contains("oxicuda::Event"), Error);
  Event taken = std::move(e);
  CHECK_THROWS_WITH_AS(s.wait(e), doctest::Contains("oxicuda::Event"), Error);  // NOLINT(bugprone-use-after-move)
  // Never destroyed by oxicuda: the owner's destroy still finds it.
  CHECK(detail::api().EventDestroy(raw) == ffi::CUDA_SUCCESS);
}
