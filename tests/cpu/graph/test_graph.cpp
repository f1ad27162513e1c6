// Graphs on the fake driver: capture, explicit building, instantiate,
// launch, update, host callables' lifetimes, conditional nodes, DOT, the
// one-line step helper. The fake replays an exec's nodes against its
// host-memory model (kernels `dbl`, `saxpy` and `countdown` run on the
// host), so results are checked as they would be on a GPU.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <type_traits>
#include <atomic>
#include <optional>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace oxicuda;

namespace {

// A module with the kernels the fake runs (see fake_module_launch.cpp).
constexpr const char* kGraphPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry dbl(.param .u64 p, .param .u32 n)
{ ret; }
.visible .entry saxpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)
{ ret; }
.visible .entry countdown(.param .u64 h, .param .u64 c)
{ ret; }
)";

using Dbl = Kernel<void(float*, unsigned)>;
using Saxpy = Kernel<void(float*, const float*, float, unsigned)>;
using Countdown = Kernel<void(unsigned long long, unsigned*)>;

struct GraphTest : StreamTest {
  Module m = Module::from_ptx(ctx, kGraphPtx);
  Dbl dbl = m.kernel<void(float*, unsigned)>("dbl");
  Saxpy saxpy = m.kernel<void(float*, const float*, float, unsigned)>("saxpy");
};

constexpr unsigned N = 64;

std::vector<float> iota(float from) {
  std::vector<float> v(N);
  for (unsigned i = 0; i < N; ++i) v[i] = from + static_cast<float>(i);
  return v;
}

// The pipeline both ways compute: y = 2 * (y + a * x), from host x and y.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& y, float a) {
  std::vector<float> r(N);
  for (unsigned i = 0; i < N; ++i) r[i] = 2 * (y[i] + a * x[i]);
  return r;
}

// Counts the copies of a callable that are alive, and where they died.
struct Tracked {
  std::atomic<int>* alive;
  std::atomic<int>* off_thread;  // destroyed on a thread other than `home`
  std::thread::id home;
  Tracked(std::atomic<int>* a, std::atomic<int>* o) : alive(a), off_thread(o), home(std::this_thread::get_id()) {
    ++*alive;
  }
  Tracked(const Tracked& t) : alive(t.alive), off_thread(t.off_thread), home(t.home) { ++*alive; }
  Tracked& operator=(const Tracked&) = delete;
  ~Tracked() {
    --*alive;
    if (std::this_thread::get_id() != home) ++*off_thread;
  }
};

std::vector<Error> reported;
void keep_report(const Error& e) { reported.push_back(e); }

}  // namespace

TEST_CASE_FIXTURE(GraphTest, "graph: a captured pipeline and an explicitly built one give the same result") {
  const std::vector<float> hx = iota(1), hy = iota(100);
  const float a = 3;
  PinnedBuffer<float> px(ctx, N), py(ctx, N), out_captured(ctx, N), out_built(ctx, N);
  std::copy(hx.begin(), hx.end(), px.begin());
  std::copy(hy.begin(), hy.end(), py.begin());
  DeviceBuffer<float> x(ctx, N), y(ctx, N);

  Graph captured = capture(s, [&](const Stream& q) {
    copy_async(q, x, px);
    copy_async(q, y, py);
    launch(q, saxpy, {.grid = 1, .block = N}, y, x, a, N);
    launch(q, dbl, {.grid = 1, .block = N}, y, N);
    copy_async(q, out_captured, y);
  });
  CHECK(captured.node_count() == 5);
  CHECK(captured.owns());

  Graph built{ctx};
  GraphNode cx = built.add_copy({}, x, px);
  GraphNode cy = built.add_copy({}, y, py);
  GraphNode k1 = built.add_kernel({cx, cy}, saxpy, {.grid = 1, .block = N}, y, x, a, N);
  GraphNode k2 = built.add_kernel(k1, dbl, {.grid = 1, .block = N}, y, N);
  (void)built.add_copy(k2, out_built, y);
  CHECK(built.node_count() == 5);
  CHECK(k1.type() == ffi::CU_GRAPH_NODE_TYPE_KERNEL);
  CHECK(cx.type() == ffi::CU_GRAPH_NODE_TYPE_MEMCPY);

  GraphExec e1{captured}, e2{built, {.upload = s}};
  const std::vector<float> want = reference(hx, hy, a);
  for (int replay = 0; replay < 3; ++replay) {  // every replay starts from the host inputs again
    std::fill(out_captured.begin(), out_captured.end(), 0.0f);
    std::fill(out_built.begin(), out_built.end(), 0.0f);
    e1.launch(s);
    e2.upload(s);
    e2.launch(s);
    s.synchronize();
    CHECK(std::vector<float>(out_captured.begin(), out_captured.end()) == want);
    CHECK(std::vector<float>(out_built.begin(), out_built.end()) == want);
  }
  // Nothing ran while capturing: the capture recorded, the launches ran.
  CHECK(capture_status(s) == CaptureStatus::none);
}

TEST_CASE_FIXTURE(GraphTest, "graph: built, instantiated and set with no context current, as from a fresh thread") {
  // With no context current, the H200's driver refuses
  // cuGraphInstantiateWithParams (CUDA_ERROR_INVALID_CONTEXT) and crashes in
  // cuGraphAddKernelNode_v2 and cuGraphExecKernelNodeSetParams_v2; the fake
  // refuses all three. oxicuda makes the kernel's context current for the
  // kernel nodes and the graph's for instantiation, and restores none.
  DeviceBuffer<float> x(ctx, N);
  copy(x, iota(1.0f));
  REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
  REQUIRE(!Context::current());
  Graph g{ctx};
  GraphNode k;
  CHECK_NOTHROW(k = g.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N));
  REQUIRE(!Context::current());  // and left as it was
  std::optional<GraphExec> exec;
  CHECK_NOTHROW(exec.emplace(g));
  CHECK(!Context::current());  // and left as it was
  REQUIRE(exec);
  CHECK_NOTHROW(exec->set_kernel(k, dbl, {.grid = 1, .block = N}, x, N / 2));
  CHECK(!Context::current());
  exec->launch(s);
  s.synchronize();
  std::vector<float> got(N);
  copy(got, x);
  for (unsigned i = 0; i < N; ++i) CHECK(got[i] == (i < N / 2 ? 2.0f : 1.0f) * static_cast<float>(i + 1));
}

TEST_CASE_FIXTURE(GraphTest, "graph: whole-graph and per-node updates take effect; a refusal names the node") {
  DeviceBuffer<float> x(ctx, N), y(ctx, N), z(ctx, N);
  PinnedBuffer<float> host(ctx, N);
  fill(x, 1.0f);
  auto build = [&](float a, DeviceBuffer<float>& target) {
    Graph g{ctx};
    GraphNode f = g.add_fill({}, target, 10.0f);
    (void)g.add_kernel(f, saxpy, {.grid = 1, .block = N}, target, x, a, N);
    return g;
  };
  Graph g1 = build(2, y);
  GraphExec exec{g1};
  exec.launch(s);
  copy(host, y);
  CHECK(host[5] == 12.0f);  // 10 + 2 * 1

  // The same topology with another scalar and another buffer: updated in place.
  Graph g2 = build(5, z);
  exec.update(g2);
  CHECK(exec.graph() == g2);
  exec.launch(s);
  copy(host, z);
  CHECK(host[5] == 15.0f);

  // Per node: the kernel's arguments (converted as launch() converts: 7 is a float),
  // the fill's value. The nodes are those of the graph the exec was
  // instantiated from, which it keeps (as on the H200, the updated-from
  // graph's nodes are refused).
  auto nodes_of = [](const Graph& g) {
    std::size_t n = g.node_count();
    std::vector<CUgraphNode> raw(n);
    REQUIRE(detail::api().GraphGetNodes(g.raw(), raw.data(), &n) == ffi::CUDA_SUCCESS);
    return std::vector<GraphNode>{GraphNode(raw[0]), GraphNode(raw[1])};
  };
  CHECK(exec.origin() == g1);
  const std::vector<GraphNode> nodes = nodes_of(g1);
  CHECK(error_of([&] { exec.set_fill(nodes_of(g2)[0], z, 1.0f); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  g1 = Graph();  // the exec keeps it
  CHECK(exec.origin());
  exec.set_kernel(nodes[1], saxpy, {.grid = 1, .block = N}, z, x, 7, N);
  exec.set_fill(nodes[0], z, 1.0f);
  exec.launch(s);
  copy(host, z);
  CHECK(host[5] == 8.0f);  // 1 + 7 * 1

  // Another topology: refused, with the driver's reason and the node; the exec is unchanged.
  Graph g3 = build(1, y);
  (void)g3.add_empty({});
  const Error e = error_of([&] { exec.update(g3); });
  CHECK(e.result() == ffi::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(e.call() == "cuGraphExecUpdate");
  CHECK(e.detail().find("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED") != std::string::npos);
  CHECK(e.detail().find("offending node: node 2 of 3 (empty)") != std::string::npos);
  const UpdateRefusal refusal = exec.try_update(g3);
  CHECK(refusal.reason == ffi::CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CHECK(exec.graph() == g2);
  exec.launch(s);
  copy(host, z);
  CHECK(host[5] == 8.0f);

  // A node of another kind at the same place.
  Graph g4{ctx};
  GraphNode f4 = g4.add_fill({}, y, 0.0f);
  (void)g4.add_fill(f4, y, 0.0f);
  const Error kind = error_of([&] { exec.update(g4); });
  CHECK(kind.detail().find("CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED") != std::string::npos);
  CHECK(kind.detail().find("node 1 of 2 (memset)") != std::string::npos);

  // A copy node's addresses.
  PinnedBuffer<float> a(ctx, N), b(ctx, N);
  std::fill(a.begin(), a.end(), 4.0f);
  std::fill(b.begin(), b.end(), 9.0f);
  Graph gc{ctx};
  GraphNode c = gc.add_copy({}, y, a);
  GraphExec ec{gc};
  ec.set_copy(c, y, b);
  ec.launch(s);
  copy(host, y);
  CHECK(host[0] == 9.0f);
  CHECK(error_of([&] { ec.set_copy(c, b, y); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);  // other direction
}

TEST_CASE_FIXTURE(GraphTest, "graph: a host node's callable lives across replays, in clones and execs, and dies once, off the driver's thread") {
  std::atomic<int> alive{0}, off_thread{0}, runs{0};
  {
    Graph g{ctx};
    DeviceBuffer<float> y(ctx, N);
    GraphNode k = g.add_kernel({}, dbl, {.grid = 1, .block = N}, y, N);
    (void)g.add_host(k, [t = Tracked(&alive, &off_thread), &runs] { ++runs; });
    CHECK(alive == 1);
    Graph copy = g.clone();
    Graph parent{ctx};
    (void)parent.add_child({}, g);  // a copy of g's nodes, host node included
    GraphExec e1{g};
    GraphExec e2{copy};
    GraphExec e3{parent};
    parent = Graph();
    e3.launch(s);
    CHECK(runs == 1);
    e3 = GraphExec();
    g = Graph();  // the graph's handle goes; its clone and the execs remain
    for (int i = 0; i < 5; ++i) e1.launch(s);
    for (int i = 0; i < 3; ++i) e2.launch(s);
    s.synchronize();
    CHECK(runs == 9);
    CHECK(alive == 1);  // never copied, never destroyed while something can run it
    e1 = GraphExec();
    copy = Graph();
    s.synchronize();
    CHECK(alive == 1);  // e2 can still run it
    e2.launch(s);
    CHECK(runs == 10);
  }
  // The last exec is gone: destroyed once, on this thread (the fake runs the
  // user object's destructor on a driver thread, which only retires it).
  CHECK(alive == 0);
  CHECK(off_thread == 0);
}

TEST_CASE_FIXTURE(GraphTest, "graph: launch_host_func while capturing: the callable runs on every replay and dies once; outside capture it is one-shot") {
  std::atomic<int> alive{0}, off_thread{0}, runs{0};
  {
    Graph g = capture(s, [&](const Stream& q) { q.launch_host_func([t = Tracked(&alive, &off_thread), &runs] { ++runs; }); });
    CHECK(runs == 0);
    CHECK(alive == 1);
    GraphExec e{g};
    for (int i = 0; i < 4; ++i) e.launch(s);
    s.synchronize();
    CHECK(runs == 4);
    CHECK(alive == 1);
  }
  CHECK(alive == 0);
  CHECK(off_thread == 0);
  // Outside capture: run once, destroyed after the next synchronize.
  s.launch_host_func([t = Tracked(&alive, &off_thread), &runs] { ++runs; });
  s.synchronize();
  CHECK(runs == 5);
  CHECK(alive == 0);
  CHECK(off_thread == 0);
}

TEST_CASE_FIXTURE(GraphTest, "capture: invalidated captures are errors that say what happened and what to do") {
  SUBCASE("a synchronizing call on the capturing stream") {
    ScopedCapture scope{s};
    const Error sync = error_of([&] { s.synchronize(); });
    CHECK(sync.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(sync.detail().find("a stream is capturing") != std::string::npos);
    CHECK(capture_status(s) == CaptureStatus::invalidated);
    const Error end = error_of([&] { (void)scope.end(); });
    CHECK(end.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(end.call() == "cuStreamEndCapture");
    CHECK(end.detail().find("the capture was invalidated before it ended") != std::string::npos);
    CHECK(capture_status(s) == CaptureStatus::none);
  }
  SUBCASE("a synchronous allocation during a global capture, allowed in relaxed mode") {
    {
      ScopedCapture scope{s};
      CHECK(error_of([&] { DeviceBuffer<float> b(ctx, 4); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
      CHECK(error_of([&] { (void)scope.end(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    ScopedCapture relaxed{s, CaptureMode::relaxed};
    DeviceBuffer<float> b(ctx, 4);
    Graph g = relaxed.end();
    CHECK(g.node_count() == 0);
  }
  SUBCASE("per-thread mode forbids unsafe calls on the capturing thread only") {
    ScopedCapture scope{s, CaptureMode::per_thread};
    std::thread([&] { DeviceBuffer<float> elsewhere(ctx, 4); }).join();  // another thread: allowed
    CHECK(capture_status(s) == CaptureStatus::active);
    CHECK(error_of([&] { DeviceBuffer<float> here(ctx, 4); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(capture_status(s) == CaptureStatus::invalidated);
  }
  SUBCASE("the legacy default stream while a blocking stream captures") {
    Stream blocking{ctx, {.non_blocking = false}};
    DeviceBuffer<float> b(ctx, N);
    ScopedCapture scope{blocking};
    const Error legacy = error_of([&] { fill_async(Stream::legacy_default(ctx), b, 1.0f); });
    CHECK(legacy.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CHECK(legacy.detail().find("legacy default stream") != std::string::npos);
    CHECK(error_of([&] { (void)scope.end(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  SUBCASE("a stream forked into the capture and not joined back") {
    Stream other{ctx};
    Event fork{ctx, {.timing = false}}, join{ctx, {.timing = false}};
    DeviceBuffer<float> b(ctx, N);
    {
      ScopedCapture scope{s};
      s.record(fork);
      other.wait(fork);
      fill_async(other, b, 1.0f);
      const Error end = error_of([&] { (void)scope.end(); });
      CHECK(end.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
      CHECK(end.detail().find("was not joined back") != std::string::npos);
    }
    // Joined back: a graph of both streams' work.
    Graph g = capture(s, [&] {
      s.record(fork);
      other.wait(fork);
      fill_async(other, b, 1.0f);
      fill_async(s, b, 2.0f);
      other.record(join);
      s.wait(join);
    });
    CHECK(g.node_count() == 2);
  }
  SUBCASE("ending a capture never begun, or on the wrong stream") {
    CHECK(error_of([&] { (void)end_capture(s); }).detail().find("the stream is not capturing") != std::string::npos);
    CHECK(error_of([&] { begin_capture(Stream::legacy_default(ctx)); }).detail().find("cannot be captured") !=
          std::string::npos);
  }
}

TEST_CASE_FIXTURE(GraphTest, "capture: a finished host callable that owns device memory is destroyed during a capture without invalidating it") {
  // Found by review and measured on the H200: cuMemFree during a global
  // capture is refused and invalidates the capture. oxicuda destroys
  // finished callables with the thread's capture mode relaxed.
  Stream other{ctx};
  std::atomic<bool> ran{false};
  {
    DeviceBuffer<float> owned(ctx, N);
    other.launch_host_func([b = std::move(owned), &ran] { ran = b.size() == N; });
  }
  // The callable has run and is retired, not yet destroyed (a raw
  // synchronize does not reclaim).
  REQUIRE(detail::api().StreamSynchronize(other.raw()) == ffi::CUDA_SUCCESS);
  REQUIRE(ran);
  const long before = fake.live("memory");
  ScopedCapture scope{s};
  s.launch_host_func([] {});  // reclaims the finished callable: its buffer is freed here
  CHECK(fake.live("memory") == before - 1);
  CHECK(capture_status(s) == CaptureStatus::active);
  Graph g;
  CHECK_NOTHROW(g = scope.end());
  CHECK(g.node_count() == 1);
  // And the thread's mode is global again: an unsafe call still invalidates.
  ScopedCapture again{s};
  CHECK(error_of([&] { DeviceBuffer<float> b(ctx, 4); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK(error_of([&] { (void)again.end(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

TEST_CASE_FIXTURE(GraphTest, "capture: an exception never leaves the stream capturing") {
  DeviceBuffer<float> b(ctx, N);
  CHECK_THROWS_AS(
      {
        Graph g = capture(s, [&](const Stream& q) {
          fill_async(q, b, 1.0f);
          throw std::runtime_error("enqueue failed");
        });
      },
      std::runtime_error);
  CHECK(capture_status(s) == CaptureStatus::none);
  // And the stream captures again as usual.
  Graph g = capture(s, [&](const Stream& q) { fill_async(q, b, 2.0f); });
  CHECK(g.node_count() == 1);
  ScopedCapture twice{s};
  CHECK(error_of([&] { begin_capture(s); }).detail() == "the stream is capturing already");
  (void)twice.end();
  CHECK(error_of([&] { (void)twice.end(); }).result() == ffi::CUDA_ERROR_ILLEGAL_STATE);
  // end() from another thread (global mode) is refused and leaves the
  // capture active: the ScopedCapture still ends it when it goes.
  {
    ScopedCapture other_thread{s};
    std::optional<Error> refused;
    std::thread([&] { refused.emplace(error_of([&] { (void)other_thread.end(); })); }).join();
    REQUIRE(refused);
    CHECK(refused->result() == ffi::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CHECK(capture_status(s) == CaptureStatus::active);
  }
  CHECK(capture_status(s) == CaptureStatus::none);
}

TEST_CASE_FIXTURE(GraphTest, "graph: every node kind, dependencies, clone and node count") {
  DeviceBuffer<float> x(ctx, N);
  PinnedBuffer<float> host(ctx, N);
  Event done{ctx};
  std::atomic<int> runs{0};
  Graph child{ctx};
  (void)child.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N);

  Graph g{ctx};
  GraphAllocation<float> tmp = g.add_alloc<float>({}, N);
  CHECK(tmp.span.size() == N);
  GraphNode set = g.add_fill(tmp.node, tmp.span, 3.0f);
  GraphNode to_x = g.add_copy(set, x, tmp.span);
  GraphNode freed = g.add_free(to_x, tmp.span);
  GraphNode twice = g.add_child(freed, child);
  GraphNode join = g.add_empty({twice});
  GraphNode rec = g.add_event_record(join, done);
  GraphNode wait = g.add_event_wait(rec, done);
  GraphNode host_fn = g.add_host(wait, [&runs] { ++runs; });
  GraphNode back = g.add_copy(host_fn, host, x);
  (void)back;
  CHECK(g.node_count() == 10);
  // A graph with allocation nodes cannot be cloned (driver 580 on the H200,
  // and the fake); one without can.
  CHECK(error_of([&] { (void)g.clone(); }).result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  Graph copy = child.clone();
  CHECK(copy.node_count() == 1);
  CHECK(copy != child);

  GraphExec exec{g};
  exec.launch(s);
  exec.launch(s);  // the allocation was freed in the graph: a relaunch is fine
  s.synchronize();
  CHECK(runs == 2);
  CHECK(host[7] == 6.0f);
  CHECK(done.ready());

  // More dependencies than Dependencies holds inline, from a span.
  Graph wide{ctx};
  std::vector<GraphNode> roots;
  for (int i = 0; i < 12; ++i) roots.push_back(wide.add_empty({}));
  GraphNode all = wide.add_empty(std::span<const GraphNode>(roots));
  CHECK(wide.node_count() == 13);
  CHECK(error_of([&] { wide.depend(roots[11], all); }).call() == "cuGraphAddDependencies");  // already a dependency
  GraphExec{wide}.launch(s);

  // Dependencies added later: a cycle, which instantiation reports with the node.
  Graph cyclic{ctx};
  GraphNode a = cyclic.add_empty({});
  GraphNode b = cyclic.add_kernel(a, dbl, {.grid = 1, .block = N}, x, N);
  cyclic.depend(b, a);
  const Error e = error_of([&] { GraphExec bad{cyclic}; });
  CHECK(e.call() == "cuGraphInstantiateWithParams");
  CHECK(e.detail().find("CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE") != std::string::npos);
  CHECK(e.detail().find(" of 2 (") != std::string::npos);
  CHECK(error_of([&] { cyclic.depend(b, a); }).call() == "cuGraphAddDependencies");  // already there
}

TEST_CASE_FIXTURE(GraphTest, "capture: a stream-ordered buffer allocated and freed in the capture becomes the graph's alloc and free nodes") {
  DeviceBuffer<float> x(ctx, N);
  std::vector<float> host(N);
  Graph g = capture(s, [&](const Stream& q) {
    auto tmp = DeviceBuffer<float>::allocate_async(q, N);
    fill_async(q, tmp, 2.0f);
    copy_async(q, x, tmp);
  });  // tmp's destructor freed it on q, inside the capture
  CHECK(g.node_count() == 4);
  CHECK(fake.live("memory") == at_start.memory + 1);  // x only: nothing was allocated yet
  GraphExec exec{g};
  for (int i = 0; i < 2; ++i) {
    fill(x, 0.0f);
    exec.launch(s);
    copy(host, x);
    CHECK(host[N - 1] == 2.0f);
  }
  CHECK(fake.live("memory") == at_start.memory + 1);  // freed by the graph's free node
}

TEST_CASE_FIXTURE(GraphTest, "graph: an exec keeps its kernels' modules, events and host callables alive") {
  DeviceBuffer<float> x(ctx, N);
  fill(x, 1.0f);
  GraphExec exec;
  {
    Module own = Module::from_ptx(ctx, kGraphPtx);
    Graph g{ctx};
    Event e{ctx};
    GraphNode k = g.add_kernel({}, own.kernel<void(float*, unsigned)>("dbl"), {.grid = 1, .block = N}, x, N);
    (void)g.add_event_record(k, e);
    exec = GraphExec{g};
  }
  CHECK(fake.live("module") == at_start.module + 2);  // the fixture's and the exec's
  CHECK(fake.live("event") == at_start.event + 1);
  exec.launch(s);
  std::vector<float> host(N);
  copy(host, x);
  CHECK(host[3] == 2.0f);
  exec = GraphExec();
  CHECK(fake.live("module") == at_start.module + 1);
  CHECK(fake.live("event") == at_start.event);
  CHECK(fake.live("graph") == at_start.graph);
}

TEST_CASE_FIXTURE(GraphTest, "graph: a conditional while node runs its body until a kernel clears the handle") {
  Countdown countdown = m.kernel<void(unsigned long long, unsigned*)>("countdown");
  DeviceBuffer<unsigned> counter(ctx, 1);
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx};
  ConditionalHandle h = g.conditional_handle(1);
  GraphNode start = g.add_fill({}, counter, 5u);
  ConditionalNode loop = g.add_while(start, h);
  CHECK_FALSE(loop.body.owns());
  GraphNode d = loop.body.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N);
  (void)loop.body.add_kernel(d, countdown, {.grid = 1, .block = 1}, h, counter);
  ConditionalNode once = g.add_if(loop.node, h);  // the handle is 0 by now: skipped
  (void)once.body.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N);

  GraphExec exec{g};
  fill(x, 1.0f);
  exec.launch(s);
  std::vector<float> host(N);
  copy(host, x);
  CHECK(host[0] == 32.0f);  // doubled 5 times
  exec.launch(s);           // the handle starts at 1 again
  copy(host, x);
  CHECK(host[0] == 1024.0f);
}

TEST_CASE_FIXTURE(GraphTest, "graph: conditional nodes on a driver older than CUDA 12.4 are an error naming both versions") {
  Graph g{ctx};
  fake.set_driver_version(12030);
  const Error handle = error_of([&] { (void)g.conditional_handle(); });
  const Error node = error_of([&] { (void)g.add_while({}, ConditionalHandle{1}); });
  fake.set_driver_version(13000);
  for (const Error& e : {handle, node}) {
    CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
    CHECK(e.detail() == "conditional nodes need a CUDA 12.4 driver or newer; the loaded driver is CUDA 12.3");
  }
  CHECK(handle.call() == "oxicuda::Graph::conditional_handle");
  CHECK(node.call() == "oxicuda::Graph::add_while");
  CHECK(g.node_count() == 0);
}

TEST_CASE_FIXTURE(GraphTest, "graph: DOT names the kernels, to a string and to a file") {
  DeviceBuffer<float> x(ctx, N), y(ctx, N);
  Graph g = capture(s, [&](const Stream& q) {
    launch(q, saxpy, {.grid = 1, .block = N}, y, x, 2.0f, N);
    launch(q, dbl, {.grid = 1, .block = N}, y, N);
  });
  const std::string text = g.dot();
  CHECK(text.rfind("digraph", 0) == 0);
  CHECK(text.find("saxpy") != std::string::npos);
  CHECK(text.find("dbl") != std::string::npos);
  CHECK(g.dot(ffi::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE).find("grid (1,1,1) block (64,1,1)") != std::string::npos);
  const std::string path = "oxicuda-test-graph.dot";
  g.write_dot(path);
  std::FILE* f = std::fopen(path.c_str(), "r");
  REQUIRE(f);
  std::fclose(f);
  std::remove(path.c_str());
  const Error e = error_of([&] { g.write_dot("/nonexistent-dir/x.dot"); });
  CHECK(e.call() == "cuGraphDebugDotPrint");
  CHECK(e.detail().find("/nonexistent-dir/x.dot") != std::string::npos);
}

TEST_CASE_FIXTURE(GraphTest, "GraphedStep: captures once, replays, updates in place on new arguments, re-instantiates on a new topology") {
  DeviceBuffer<float> x(ctx, N), y(ctx, N);
  fill(x, 1.0f);
  fill(y, 0.0f);
  GraphedStep step{[&](const Stream& q, float a, int kernels) {
    for (int i = 0; i < kernels; ++i) launch(q, saxpy, {.grid = 1, .block = N}, y, x, a, N);
  }};
  const long launches_before = fake.calls("cuLaunchKernel");
  step(s, 1.0f, 2);
  step(s, 1.0f, 2);
  step(s, 1.0f, 2);
  // Two launches made once, into the capture; the replays make none.
  CHECK(fake.calls("cuLaunchKernel") == launches_before + 2);
  CHECK(fake.calls("cuGraphLaunch") == 3);
  CHECK(step.stats().captures == 1);
  CHECK(step.stats().instantiations == 1);
  CHECK(step.stats().launches == 3);
  std::vector<float> host(N);
  copy(host, y);
  CHECK(host[0] == 6.0f);

  step(s, 10.0f, 2);  // same topology, another scalar: updated in place
  CHECK(step.stats().captures == 2);
  CHECK(step.stats().updates == 1);
  CHECK(step.stats().instantiations == 1);
  copy(host, y);
  CHECK(host[0] == 26.0f);

  step(s, 10.0f, 3);  // three kernels: a new exec
  CHECK(step.stats().instantiations == 2);
  CHECK(step.graph().node_count() == 3);
  copy(host, y);
  CHECK(host[0] == 56.0f);

  step.reset();
  step(s, 10.0f, 3);
  CHECK(step.stats().captures == 4);
  CHECK(step.stats().updates == 2);
  CHECK(step.stats().launches == 6);
}

TEST_CASE_FIXTURE(GraphTest, "graph: empty and moved-from graphs, execs and nodes are errors, not crashes") {
  Graph g{ctx};
  Graph moved = std::move(g);
  CHECK_FALSE(g);  // NOLINT(bugprone-use-after-move)
  const Error e = error_of([&] { (void)g.node_count(); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(e.detail().find("this oxicuda::Graph is empty") != std::string::npos);
  CHECK(error_of([&] { (void)g.add_empty({}); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)g.add_host({}, [] {}); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { GraphExec x{g}; }).detail().find("oxicuda::Graph is empty") != std::string::npos);
  CHECK(error_of([&] { (void)moved.add_child({}, g); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { Graph none{Context()}; }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);

  GraphExec exec{moved};
  GraphExec other = std::move(exec);
  CHECK_FALSE(exec);  // NOLINT(bugprone-use-after-move)
  CHECK(error_of([&] { exec.launch(s); }).detail().find("oxicuda::GraphExec is empty") != std::string::npos);
  CHECK(error_of([&] { exec.update(moved); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { other.launch(Stream()); }).detail().find("oxicuda::Stream is empty") != std::string::npos);
  CHECK(error_of([&] { (void)GraphNode().type(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { moved.depend(GraphNode(), GraphNode()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)capture_status(Stream()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);

  // Borrowed handles are never destroyed by oxicuda.
  CUgraph raw = nullptr;
  REQUIRE(detail::api().GraphCreate(&raw, 0) == ffi::CUDA_SUCCESS);
  {
    Graph b = Graph::borrow(raw, ctx);
    CHECK_FALSE(b.owns());
    (void)b.add_empty({});
    GraphExec eb = GraphExec::borrow(GraphExec{b}.raw(), ctx);  // dangling once its owner drops: not used
    CHECK_FALSE(eb.owns());
  }
  CHECK(fake.live("graph") == at_start.graph + 2);  // `moved` and the borrowed one
  REQUIRE(detail::api().GraphDestroy(raw) == ffi::CUDA_SUCCESS);
}

TEST_CASE_FIXTURE(GraphTest, "graph: bad inputs are errors that say why, and nothing is lost") {
  DeviceBuffer<float> x(ctx, N), small(ctx, N / 2);
  std::vector<float> host(N);
  Graph g{ctx};
  const Error size = error_of([&] { (void)g.add_copy({}, small, x); });
  CHECK(size.call() == "oxicuda::Graph::add_copy");
  CHECK(size.detail().find("size mismatch") != std::string::npos);
  // Programmatic dependent launch is a stream's, not a kernel node's (issue 24 (6): clusters are a node's now).
  const Error pdl = error_of([&] { (void)g.add_kernel({}, dbl, {.grid = 2, .block = 32, .programmatic = true}, x, N); });
  CHECK(pdl.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(pdl.detail().find("capture the launches into the graph instead") != std::string::npos);
  const Error zero = error_of([&] { (void)g.add_kernel({}, dbl, {.grid = 0, .block = 32}, x, N); });
  CHECK(zero.call() == "cuGraphAddKernelNode");
  CHECK(zero.detail().find("a grid or block dimension is zero") != std::string::npos);
  Graph other{ctx};
  GraphNode foreign = other.add_empty({});
  CHECK(error_of([&] { (void)g.add_empty(foreign); }).call() == "cuGraphAddEmptyNode");
  CHECK(error_of([&] { (void)g.add_event_record({}, Event()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)g.add_free({}, x.device_span()); }).call() == "cuGraphAddMemFreeNode");
  // A host node the driver refuses: the callable is destroyed, not leaked.
  std::atomic<int> alive{0}, off_thread{0};
  fake.fail("cuGraphAddHostNode", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { (void)g.add_host({}, [t = Tracked(&alive, &off_thread)] {}); }).call() == "cuGraphAddHostNode");
  g = Graph();  // the user object the graph took goes with it
  CHECK(alive == 0);
  fake.fail("cuUserObjectCreate", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(error_of([&] { (void)other.add_host({}, [t = Tracked(&alive, &off_thread)] {}); }).call() == "cuUserObjectCreate");
  CHECK(alive == 0);
  CHECK(off_thread == 0);
  // A failing destroy reaches the diagnostic hook, never a throw.
  DiagnosticHook previous = set_diagnostic_hook(keep_report);
  reported.clear();
  fake.fail("cuGraphDestroy", 1, ffi::CUDA_ERROR_UNKNOWN);
  CUgraph leaked = other.raw();
  other = Graph();
  set_diagnostic_hook(previous);
  REQUIRE(reported.size() == 1);
  CHECK(std::string(reported[0].what()).find("destroying an oxicuda::Graph") != std::string::npos);
  REQUIRE(detail::api().GraphDestroy(leaked) == ffi::CUDA_SUCCESS);
}

void watch_allocations_of(std::size_t bytes, long fail_nth);  // main.cpp

TEST_CASE_FIXTURE(GraphTest, "graph: out of memory while adding or setting a node leaves no node using what nothing holds") {
  // What a node uses (its kernel's module, its event, a child's kernels) is
  // held before the driver call that adds or changes the node: failing the
  // first allocation of a kept entry's size (which must then come before any
  // the driver makes) leaves the graph, and the exec, as they were.
  constexpr std::size_t entry = sizeof(detail::KeepOf<Function>);
  static_assert(sizeof(detail::KeepOf<Event>) == entry);
  DeviceBuffer<float> x(ctx, N);
  Event e(ctx);
  Graph child{ctx};
  (void)child.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N);
  Graph g{ctx};
  auto refused = [&](auto add) {
    watch_allocations_of(entry, 1);
    CHECK_THROWS_AS(add(), std::bad_alloc);
    watch_allocations_of(0, 0);
    CHECK(g.node_count() == 0);
  };
  refused([&] { (void)g.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N); });
  refused([&] { (void)g.add_event_record({}, e); });
  refused([&] { (void)g.add_child({}, child); });
  GraphNode k = g.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N);  // with memory, as usual
  CHECK(g.node_count() == 1);

  // The exec holds nothing for k yet: setting it to saxpy needs an entry,
  // and with none to be had, the node still runs dbl.
  GraphExec exec(g);
  DeviceBuffer<float> y(ctx, N);
  copy(x, iota(1.0f));
  copy(y, iota(0.0f));
  watch_allocations_of(entry, 1);
  CHECK_THROWS_AS(exec.set_kernel(k, saxpy, {.grid = 1, .block = N}, y, x, 3.0f, N), std::bad_alloc);
  watch_allocations_of(0, 0);
  exec.launch(s);
  s.synchronize();
  std::vector<float> got(N);
  copy(got, x);
  std::vector<float> doubled = iota(1.0f);
  for (float& f : doubled) f *= 2;
  CHECK(got == doubled);
  copy(got, y);
  CHECK(got == iota(0.0f));
}

// --- issue 22 -----------------------------------------------------------------

TEST_CASE_FIXTURE(GraphTest, "GraphedStep: move-only (copies would share one exec), and a moved-from step is an Error") {
  DeviceBuffer<float> x(ctx, N);
  auto body = [&](const Stream& q, float v) { fill_async(q, x, v); };
  using Step = GraphedStep<decltype(body)>;
  // A copy shared the exec: after the copy updated it with its arguments,
  // the original replayed them. Copies are refused now.
  CHECK_FALSE(std::is_copy_constructible_v<Step>);
  CHECK_FALSE(std::is_copy_assignable_v<Step>);
  CHECK(std::is_nothrow_move_constructible_v<Step>);
  Step step{body};
  step(s, 1.0f);
  Step moved = std::move(step);
  moved(s, 2.0f);  // the exec moved with it: updated in place
  CHECK(moved.stats().captures == 2);
  CHECK(moved.stats().updates == 1);
  std::vector<float> host(N);
  copy(host, x);
  CHECK(host[0] == 2.0f);
  const Error e = error_of([&] { step(s, 3.0f); });  // NOLINT(bugprone-use-after-move)
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(e.detail().find("this oxicuda::GraphedStep is empty") != std::string::npos);
  CHECK_FALSE(step.exec());
  copy(host, x);
  CHECK(host[0] == 2.0f);  // nothing ran
}

TEST_CASE_FIXTURE(GraphTest, "GraphedStep: arguments of other types with the same bytes are another key") {
  DeviceBuffer<float> x(ctx, N);
  GraphedStep step{[&](const Stream& q, auto v) { fill_async(q, x, static_cast<float>(v)); }};
  step(s, 1.0f);
  std::vector<float> host(N);
  copy(host, x);
  CHECK(host[0] == 1.0f);
  // The int with the bytes of 1.0f: the same bytes, another type. Compared
  // by bytes alone, the step replayed the fill of 1.0f.
  const int same_bytes = std::bit_cast<int>(1.0f);
  step(s, same_bytes);
  CHECK(step.stats().captures == 2);
  copy(host, x);
  CHECK(host[0] == static_cast<float>(same_bytes));
  step(s, same_bytes);  // the same type and bytes: replayed
  CHECK(step.stats().captures == 2);
  CHECK(step.stats().launches == 3);
}

TEST_CASE_FIXTURE(GraphTest, "graph: a conditional body refuses, when they are added, the node kinds the driver refuses at instantiation") {
  DeviceBuffer<float> x(ctx, N);
  Event ev{ctx};
  std::atomic<int> alive{0}, off_thread{0};
  Graph g{ctx};
  ConditionalHandle h = g.conditional_handle(1);
  ConditionalNode loop = g.add_while({}, h);
  CHECK(loop.body.is_conditional_body());
  CHECK_FALSE(g.is_conditional_body());
  Graph with_host{ctx};
  (void)with_host.add_host({}, [] {});
  Graph nests_host{ctx};  // a host node one child graph down
  (void)nests_host.add_child({}, with_host);

  struct Case {
    const char* call;
    const char* kind;
    std::function<void()> add;
  };
  const Case cases[] = {
      {"oxicuda::Graph::add_host", "a host function node",
       [&] { (void)loop.body.add_host({}, [t = Tracked(&alive, &off_thread)] {}); }},
      {"oxicuda::Graph::add_event_record", "an event record node", [&] { (void)loop.body.add_event_record({}, ev); }},
      {"oxicuda::Graph::add_event_wait", "an event wait node", [&] { (void)loop.body.add_event_wait({}, ev); }},
      {"oxicuda::Graph::add_alloc", "a mem alloc node", [&] { (void)loop.body.add_alloc<float>({}, N); }},
      {"oxicuda::Graph::add_child", "a child graph holding a host node", [&] { (void)loop.body.add_child({}, with_host); }},
      {"oxicuda::Graph::add_child", "a child graph's child holding a host node",
       [&] { (void)loop.body.add_child({}, nests_host); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.kind);
    const Error e = error_of(c.add);
    CHECK(e.call() == c.call);
    CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
    CHECK(e.detail().find("a conditional node's body may hold only kernel, empty, memset, memcpy, child graph and "
                          "conditional nodes") != std::string::npos);
    CHECK(loop.body.node_count() == 0);  // nothing was added
  }
  CHECK(alive == 0);  // the refused host callable was destroyed, not leaked
  CHECK(off_thread == 0);
  // A free: of an allocation made in the graph, before the conditional node.
  Graph g2{ctx};
  GraphAllocation<float> mem = g2.add_alloc<float>({}, N);
  ConditionalNode once = g2.add_if(mem.node, g2.conditional_handle(1));
  CHECK(error_of([&] { (void)once.body.add_free({}, mem.span); }).call() == "oxicuda::Graph::add_free");
  (void)g2.add_free(once.node, mem.span);

  // What the driver allows there is added, nested bodies and child graphs included.
  Graph plain{ctx};
  (void)plain.add_fill({}, x, 1.0f);
  GraphNode k = loop.body.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N);
  GraphNode f = loop.body.add_fill(k, x, 3.0f);
  GraphNode c = loop.body.add_child(f, plain);
  GraphNode e = loop.body.add_empty(c);
  ConditionalNode inner = loop.body.add_if(e, loop.body.conditional_handle(0));
  CHECK(inner.body.is_conditional_body());
  CHECK(error_of([&] { (void)inner.body.add_host({}, [] {}); }).call() == "oxicuda::Graph::add_host");
  (void)inner.body.add_empty({});
  CHECK(loop.body.node_count() == 5);
  GraphExec exec{g2};
  (void)exec;
}

TEST_CASE_FIXTURE(GraphTest, "fake driver: a host node in a conditional body is refused at instantiation, as on the H200") {
  Graph g{ctx};
  ConditionalNode once = g.add_if({}, g.conditional_handle(0));
  // Added with the raw driver call (oxicuda refuses it): the driver accepts it here.
  const ffi::CUDA_HOST_NODE_PARAMS p{[](void*) {}, nullptr};
  CUgraphNode node = nullptr;
  REQUIRE(detail::api().GraphAddHostNode(&node, once.body.raw(), nullptr, 0, &p) == ffi::CUDA_SUCCESS);
  const Error e = error_of([&] { GraphExec exec{g}; });
  CHECK(e.call() == "cuGraphInstantiateWithParams");
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE_FIXTURE(GraphTest, "graph: every graph gives its nodes, their kinds, dependencies and dependents, captured ones too") {
  DeviceBuffer<float> x(ctx, N), y(ctx, N);
  std::vector<float> host = iota(1.0f);
  Graph captured = capture(s, [&](const Stream& q) {
    copy_async(q, x, host);
    launch(q, dbl, {.grid = 1, .block = N}, x, N);
    launch(q, saxpy, {.grid = 1, .block = N}, y, x, 2.0f, N);
  });
  const GraphNodes nodes = captured.nodes();
  REQUIRE(nodes.size() == 3);
  int kernels = 0, copies = 0;
  for (const GraphNode& n : nodes) {
    kernels += n.type() == ffi::CU_GRAPH_NODE_TYPE_KERNEL;
    copies += n.type() == ffi::CU_GRAPH_NODE_TYPE_MEMCPY;
  }
  CHECK(kernels == 2);
  CHECK(copies == 1);
  // The chain: each node's dependencies and dependents, as captured in order.
  const GraphNode* first = nullptr;
  for (const GraphNode& n : nodes)
    if (n.dependencies().empty()) first = &n;
  REQUIRE(first);
  CHECK(first->type() == ffi::CU_GRAPH_NODE_TYPE_MEMCPY);
  const GraphNodes second = first->dependents();
  REQUIRE(second.size() == 1);
  CHECK(second[0].dependencies().contains(*first));
  const GraphNodes third = second[0].dependents();
  REQUIRE(third.size() == 1);
  CHECK(third[0].dependents().empty());
  CHECK(nodes.contains(third[0]));

  // Built by hand: the handles the add calls gave, joins included.
  Graph g{ctx};
  GraphNode a = g.add_empty({});
  GraphNode b = g.add_empty({});
  GraphNode join = g.add_empty({a, b});
  const GraphNodes deps = join.dependencies();
  CHECK(deps.size() == 2);
  CHECK(deps.contains(a));
  CHECK(deps.contains(b));
  CHECK(a.dependents().contains(join));
  CHECK(g.nodes().size() == 3);
  CHECK(error_of([&] { (void)GraphNode().dependencies(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)Graph().nodes(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE_FIXTURE(GraphTest, "graph: a host callable is destroyed once, on a thread of ours, at the first reclaim point after the driver releases it") {
  std::atomic<int> alive{0}, off_thread{0}, runs{0};
  SUBCASE("the driver releases it when the last graph and exec are destroyed (the fake, at once)") {
    Graph g{ctx};
    (void)g.add_host({}, [t = Tracked(&alive, &off_thread), &runs] { ++runs; });
    GraphExec exec{g};
    g = Graph();
    exec.launch(s);
    s.synchronize();
    CHECK(runs == 1);
    CHECK(alive == 1);
    exec = GraphExec();  // the last handle: released, and destroyed by its destruction, here
    CHECK(alive == 0);
  }
  SUBCASE("the driver releases it later, on its own thread: the next reclaim point destroys it") {
    fake.hold_user_object_destructors(1);
    {
      Graph g = capture(s, [&](const Stream& q) { q.launch_host_func([t = Tracked(&alive, &off_thread), &runs] { ++runs; }); });
      GraphExec exec{g};
      exec.launch(s);
      s.synchronize();
    }
    CHECK(runs == 1);
    CHECK(alive == 1);  // all handles gone, not yet released by the driver
    s.synchronize();
    CHECK(alive == 1);  // nothing to reclaim yet
    fake.hold_user_object_destructors(0);  // the driver's thread releases it: only handed over
    CHECK(alive == 1);
    ctx.synchronize();  // a reclaim point: destroyed here
    CHECK(alive == 0);
  }
  CHECK(off_thread == 0);
}

TEST_CASE_FIXTURE(GraphTest, "issue 29 in graph kernel nodes: an empty DeviceBuffer and a cluster with a zero dimension are Errors") {
  // The typed launch refused both (issue 29, defects 3 and 6); a kernel node
  // took them: a null pointer for the kernel, and {0, 2, 1} as no cluster.
  DeviceBuffer<float> x(ctx, N);
  DeviceBuffer<float> moved = std::move(x);
  Graph g{ctx};
  {
    const Error e = error_of([&] { (void)g.add_kernel({}, dbl, {.grid = 1, .block = N}, x, N); });  // NOLINT(bugprone-use-after-move)
    CHECK(e.call() == "oxicuda::Graph::add_kernel");
    CHECK(e.detail().find("argument 1 of 2 (") == 0);
    CHECK(e.detail().find("is an empty buffer (default-constructed or moved-from)") != std::string::npos);
  }
  {
    const Error e = error_of([&] { (void)g.add_kernel({}, dbl, {.grid = 2, .block = N, .cluster = {0, 2, 1}}, moved, N); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_CLUSTER_SIZE);
    CHECK(e.detail().find("a cluster dimension is zero beside a non-zero one") != std::string::npos);
  }
  GraphNode k = g.add_kernel({}, dbl, {.grid = 1, .block = N}, moved, N);
  GraphExec exec{g};
  {
    const Error e = error_of([&] { exec.set_kernel(k, dbl, {.grid = 1, .block = N}, x, N); });  // NOLINT(bugprone-use-after-move)
    CHECK(e.call() == "oxicuda::GraphExec::set_kernel");
    CHECK(e.detail().find("argument 1 of 2 (") == 0);
  }
  CHECK_NOTHROW(exec.set_kernel(k, dbl, {.grid = 1, .block = N}, moved, N));
}

TEST_CASE_FIXTURE(GraphTest, "graph: the node-kind traits table has a row for every kind the fake makes, named as the errors name them") {
  // The table itself: one row per CUgraphNodeType, in the enum's order, each named once.
  std::set<std::string> names;
  for (std::size_t i = 0; i < std::size(detail::node_kinds); ++i) {
    const detail::NodeKindRow& row = detail::node_kinds[i];
    CAPTURE(row.name);
    CHECK(static_cast<std::size_t>(row.type) == i);
    CHECK(detail::node_kind(row.type) == &row);
    CHECK(std::string(row.driver_name).rfind("CU_GRAPH_NODE_TYPE_", 0) == 0);
    CHECK(names.insert(row.name).second);
  }
  CHECK(detail::node_kind(static_cast<ffi::CUgraphNodeType>(99)) == nullptr);
  CHECK(std::string(detail::node_kind_name(static_cast<ffi::CUgraphNodeType>(99))) == "other");
  CHECK(std::is_same_v<detail::NodeKind<ffi::CU_GRAPH_NODE_TYPE_KERNEL>::params, ffi::CUDA_KERNEL_NODE_PARAMS_v2>);

  // Every kind oxicuda (and the fake) can make, in one graph.
  DeviceBuffer<float> x(ctx, N);
  PinnedBuffer<float> host(ctx, N);
  Event ev{ctx};
  Graph child{ctx};
  (void)child.add_empty({});
  Graph g{ctx};
  GraphAllocation<float> mem = g.add_alloc<float>({}, N);
  GraphNode k = g.add_kernel(mem.node, dbl, {.grid = 1, .block = N}, x, N);
  GraphNode f = g.add_fill(k, mem.span, 1.0f);
  GraphNode c = g.add_copy(f, x, mem.span);
  GraphNode fr = g.add_free(c, mem.span);
  GraphNode ch = g.add_child(fr, child);
  GraphNode rec = g.add_event_record(ch, ev);
  GraphNode w = g.add_event_wait(rec, ev);
  GraphNode h = g.add_host(w, [] {});
  GraphNode e = g.add_empty(h);
  (void)g.add_if(e, g.conditional_handle(0));

  const std::string dot = g.dot();
  std::set<ffi::CUgraphNodeType> seen;
  for (const GraphNode& node : g.nodes()) {
    const ffi::CUgraphNodeType t = node.type();
    const detail::NodeKindRow* row = detail::node_kind(t);
    REQUIRE(row != nullptr);
    CAPTURE(row->name);
    seen.insert(t);
    // The name errors give the node is the table's (kernels with their name).
    const std::string described = detail::describe_node(g.raw(), node.raw(), detail::GraphAccess::keep(g));
    CHECK(described.find(std::string("(") + row->name) != std::string::npos);
    if (t == ffi::CU_GRAPH_NODE_TYPE_KERNEL) CHECK(described.find("(kernel 'dbl')") != std::string::npos);
    // The fake's DOT labels a node with its enumerator's name, less the prefix.
    CHECK(dot.find(std::string("label=\"") + (row->driver_name + std::strlen("CU_GRAPH_NODE_TYPE_"))) != std::string::npos);
  }
  CHECK(seen.size() == 11);

  // The body column is the fake's rule (the driver's): a kind the table keeps
  // out of a body, added there with the raw driver call, fails instantiation.
  for (const detail::NodeKindRow& row : detail::node_kinds) {
    if (!seen.count(row.type)) continue;
    CAPTURE(row.name);
    if (row.in_conditional_body)  // the rule's text lists every kind a body may hold
      CHECK(detail::body_rule("").find(row.name) != std::string::npos);
    Graph outer{ctx};
    ConditionalNode cond = outer.add_if({}, outer.conditional_handle(0));
    CUgraphNode raw = nullptr;
    const ffi::CUDA_HOST_NODE_PARAMS hp{[](void*) {}, nullptr};
    switch (row.type) {
      case ffi::CU_GRAPH_NODE_TYPE_EMPTY:
        REQUIRE(detail::api().GraphAddEmptyNode(&raw, cond.body.raw(), nullptr, 0) == ffi::CUDA_SUCCESS);
        break;
      case ffi::CU_GRAPH_NODE_TYPE_HOST:
        REQUIRE(detail::api().GraphAddHostNode(&raw, cond.body.raw(), nullptr, 0, &hp) == ffi::CUDA_SUCCESS);
        break;
      case ffi::CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        REQUIRE(detail::api().GraphAddEventRecordNode(&raw, cond.body.raw(), nullptr, 0, ev.raw()) == ffi::CUDA_SUCCESS);
        break;
      case ffi::CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        REQUIRE(detail::api().GraphAddEventWaitNode(&raw, cond.body.raw(), nullptr, 0, ev.raw()) == ffi::CUDA_SUCCESS);
        break;
      case ffi::CU_GRAPH_NODE_TYPE_GRAPH:
        REQUIRE(detail::api().GraphAddChildGraphNode(&raw, cond.body.raw(), nullptr, 0, child.raw()) ==
                ffi::CUDA_SUCCESS);
        break;
      default: continue;  // (made with oxicuda's own checks, or not alone)
    }
    bool instantiates = true;
    try {
      GraphExec exec{outer};
    } catch (const Error&) {
      instantiates = false;
    }
    CHECK(instantiates == row.in_conditional_body);
    // And oxicuda's refusal names the kind as the table does.
    if (!row.in_conditional_body) {
      const Error refused = error_of([&] { detail::refuse_in_body(row.type, "test", SourceLocation::current()); });
      CHECK(refused.detail().find(std::string("so a ") + row.name + " node cannot be added") != std::string::npos);
    }
  }
}
