// The GPU suite, graphs: capture, explicit building, replays, updates, host
// nodes' callables, conditional while, if/else and switch nodes, graph
// allocations owned outside the graph, and DOT, on a real device.
// The kernels are the fixture module's (tests/gpu/kernels.cu, built by nvcc
// at build time); without nvcc these tests are not built.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#if __has_include("gpu_fixtures.inc")
#include "gpu_fixtures.inc"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace oxicuda;

namespace {

using gpu::ctx;

const Module& fixtures() {
  static const Module m = Module::from_image(ctx(), fixture_cubin, fixture_cubin_size);
  return m;
}

using Saxpy = Kernel<void(float*, const float*, float, unsigned)>;
using Dbl = Kernel<void(float*, unsigned)>;

Saxpy saxpy_kernel() { return fixtures().kernel<void(float*, const float*, float, unsigned)>("saxpy"); }
Dbl dbl_kernel() { return fixtures().kernel<void(float*, unsigned)>("dbl"); }

// Counts a callable's live copies, the copies made of it, and the
// destructions of live ones (a moved-from Tracked is not live) off the test's
// thread.
struct Tracked {
  std::atomic<int>* alive;
  std::atomic<int>* destroyed;
  std::atomic<int>* off_thread;
  std::atomic<int>* copies;
  std::thread::id home = std::this_thread::get_id();
  bool live = true;
  Tracked(std::atomic<int>* a, std::atomic<int>* d, std::atomic<int>* o, std::atomic<int>* c)
      : alive(a), destroyed(d), off_thread(o), copies(c) {
    ++*alive;
  }
  Tracked(const Tracked& t)
      : alive(t.alive), destroyed(t.destroyed), off_thread(t.off_thread), copies(t.copies), home(t.home) {
    ++*alive;
    ++*copies;
  }
  Tracked(Tracked&& t) noexcept
      : alive(t.alive), destroyed(t.destroyed), off_thread(t.off_thread), copies(t.copies), home(t.home) {
    t.live = false;  // the one live callable changes place
  }
  Tracked& operator=(const Tracked&) = delete;
  ~Tracked() {
    if (!live) return;
    --*alive;
    ++*destroyed;
    if (std::this_thread::get_id() != home) ++*off_thread;
  }
};

using gpu::raised_by;

}  // namespace

TEST_CASE("gpu graph: a captured pipeline of copies and kernels, replayed 1000 times, matches the CPU") {
  constexpr unsigned n = 1u << 20;
  constexpr int replays = 1000;
  Stream s{ctx()};
  const Saxpy saxpy = saxpy_kernel();
  const Dbl dbl = dbl_kernel();
  PinnedBuffer<float> hx(ctx(), n), hz(ctx(), n), out_y(ctx(), n), out_z(ctx(), n);
  std::vector<float> y0(n);
  for (unsigned i = 0; i < n; ++i) {
    hx[i] = static_cast<float>(i % 7);
    hz[i] = static_cast<float>(i % 1000);
    y0[i] = static_cast<float>(i % 13);
  }
  DeviceBuffer<float> x(ctx(), n), y(ctx(), n), z(ctx(), n);
  copy(y, y0);
  const LaunchConfig cfg{.grid = 264, .block = 256};
  // Each replay: y += 1 * x (accumulating over replays), z = 2 * hz (fresh).
  Graph g = capture(s, [&](const Stream& q) {
    copy_async(q, x, hx);
    copy_async(q, z, hz);
    launch(q, saxpy, cfg, y, x, 1.0f, n);
    launch(q, dbl, cfg, z, n);
    copy_async(q, out_y, y);
    copy_async(q, out_z, z);
  });
  CHECK(g.node_count() == 6);
  GraphExec exec{g};
  for (int r = 0; r < replays; ++r) exec.launch(s);
  s.synchronize();
  std::vector<float> want_y = y0;
  for (int r = 0; r < replays; ++r)
    for (unsigned i = 0; i < n; ++i) want_y[i] += 1.0f * hx[i];
  unsigned bad = 0;
  for (unsigned i = 0; i < n; ++i) bad += out_y[i] != want_y[i] || out_z[i] != 2.0f * hz[i];
  CHECK(bad == 0);
}

TEST_CASE("gpu graph: kernel arguments updated between replays, per node and by whole-graph update") {
  constexpr unsigned n = 1u << 16;
  Stream s{ctx()};
  const Saxpy saxpy = saxpy_kernel();
  DeviceBuffer<float> x(ctx(), n), y(ctx(), n), other(ctx(), n);
  fill(x, 1.0f);
  fill(y, 0.0f);
  fill(other, 0.0f);
  const LaunchConfig cfg{.grid = 64, .block = 256};
  Graph g{ctx()};
  GraphNode k = g.add_kernel({}, saxpy, cfg, y, x, 0.0f, n);
  GraphExec exec{g};
  float sum = 0;
  for (int i = 1; i <= 20; ++i) {
    exec.set_kernel(k, saxpy, cfg, y, x, static_cast<float>(i), n);
    exec.launch(s);
    sum += static_cast<float>(i);
  }
  // The whole graph: the same shape, another buffer and scalar.
  Graph g2{ctx()};
  (void)g2.add_kernel({}, saxpy, cfg, other, x, 5.0f, n);
  exec.update(g2);
  exec.launch(s);
  s.synchronize();
  std::vector<float> hy(n), ho(n);
  copy(hy, y);
  copy(ho, other);
  unsigned bad = 0;
  for (unsigned i = 0; i < n; ++i) bad += hy[i] != sum || ho[i] != 5.0f;
  CHECK(bad == 0);
  // After the update, a setter takes the node of the graph the exec was
  // instantiated from, which the exec keeps alive (the driver refuses g2's).
  g = Graph();
  exec.set_kernel(k, saxpy, cfg, other, x, 2.0f, n);
  exec.launch(s);
  s.synchronize();
  copy(ho, other);
  bad = 0;
  for (unsigned i = 0; i < n; ++i) bad += ho[i] != 7.0f;
  CHECK(bad == 0);
  // A refused update names the node and leaves the exec working.
  Graph g3{ctx()};
  (void)g3.add_empty({});
  const UpdateRefusal refused = exec.try_update(g3);
  CHECK(refused);
  exec.launch(s);
  s.synchronize();
}

TEST_CASE("gpu graph: built, instantiated and set on a fresh thread, where no context is current") {
  // With no context current, driver 580 crashes in cuGraphAddKernelNode_v2
  // and cuGraphExecKernelNodeSetParams_v2 and refuses instantiation; oxicuda
  // makes the kernel's (the graph's) context current for those calls.
  constexpr unsigned n = 4096;
  DeviceBuffer<float> x(ctx(), n);
  fill(x, 3.0f);
  bool none_current = false, still_none = false;
  std::string failure;
  std::thread([&] {
    try {
      none_current = !Context::current();
      Stream s{ctx()};
      Graph g{ctx()};
      GraphNode k = g.add_kernel({}, dbl_kernel(), {.grid = n / 256, .block = 256}, x, n);
      GraphExec exec{g};
      exec.set_kernel(k, dbl_kernel(), {.grid = n / 256, .block = 256}, x, n / 2);
      exec.launch(s);
      s.synchronize();
      still_none = !Context::current();
    } catch (const Error& e) {
      failure = e.what();
    }
  }).join();
  CHECK(failure == "");
  CHECK(none_current);
  CHECK(still_none);
  std::vector<float> hx(n);
  copy(hx, x);
  CHECK(hx[0] == 6.0f);
  CHECK(hx[n / 2 - 1] == 6.0f);
  CHECK(hx[n / 2] == 3.0f);
}

TEST_CASE("gpu graph: a host node's callable stays alive across 100 replays and is destroyed exactly once") {
  std::atomic<int> alive{0}, destroyed{0}, off_thread{0}, copies{0}, runs{0};
  Stream s{ctx()};
  {
    Graph g{ctx()};
    DeviceBuffer<float> buf(ctx(), 1024);
    fill(buf, 1.0f);
    GraphNode k = g.add_kernel({}, dbl_kernel(), {.grid = 4, .block = 256}, buf, 1024u);
    (void)g.add_host(k, [t = Tracked(&alive, &destroyed, &off_thread, &copies), &runs] { ++runs; });
    GraphExec exec{g};
    GraphExec second{g.clone()};
    for (int i = 0; i < 100; ++i) (i % 2 ? exec : second).launch(s);
    s.synchronize();
    CHECK(runs == 100);
    CHECK(alive == 1);
    s.synchronize();
  }
  // The driver runs the user object's destructor on its own thread, some
  // time after the last graph and exec are gone; it only retires the
  // callable, which the next synchronize destroys on this thread.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (alive != 0 && std::chrono::steady_clock::now() < until) {
    ctx().synchronize();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(alive == 0);
  CHECK(destroyed.load() == 1);  // the one live callable (moved in, never copied by oxicuda), destroyed once
  CHECK(copies.load() == 0);
  CHECK(off_thread.load() == 0);
}

TEST_CASE("gpu graph: launch_host_func captured into a graph runs on every replay") {
  std::atomic<int> runs{0};
  Stream s{ctx()};
  {
    Graph g = capture(s, [&](const Stream& q) { q.launch_host_func([&runs] { ++runs; }); });
    GraphExec exec{g};
    for (int i = 0; i < 10; ++i) exec.launch(s);
    s.synchronize();
  }
  CHECK(runs == 10);
}

TEST_CASE("gpu graph: a conditional while node counts down on the device") {
  if (driver_version() < 12040) {
    MESSAGE("skipped: conditional nodes need a CUDA 12.4 driver");
    return;
  }
  auto countdown = fixtures().kernel<void(unsigned long long, unsigned*)>("countdown");
  Stream s{ctx()};
  DeviceBuffer<unsigned> counter(ctx(), 1);
  DeviceBuffer<float> x(ctx(), 256);
  Graph g{ctx()};
  ConditionalHandle h = g.conditional_handle(1);
  GraphNode start = g.add_fill({}, counter, 10u);
  ConditionalNode loop = g.add_while(start, h);
  GraphNode d = loop.body.add_kernel({}, dbl_kernel(), {.grid = 1, .block = 256}, x, 256u);
  (void)loop.body.add_kernel(d, countdown, {.grid = 1, .block = 32}, h, counter);
  GraphExec exec{g};
  fill(x, 1.0f);
  exec.launch(s);
  s.synchronize();
  std::vector<float> hx(256);
  copy(hx, x);
  CHECK(hx[0] == 1024.0f);  // the body ran 10 times
  CHECK(hx[255] == 1024.0f);
  std::vector<unsigned> hc(1);
  copy(hc, counter);
  CHECK(hc[0] == 0);
}

TEST_CASE("gpu graph: DOT output names the kernels") {
  Stream s{ctx()};
  DeviceBuffer<float> x(ctx(), 256), y(ctx(), 256);
  Graph g = capture(s, [&](const Stream& q) {
    launch(q, saxpy_kernel(), {.grid = 1, .block = 256}, y, x, 2.0f, 256u);
    launch(q, dbl_kernel(), {.grid = 1, .block = 256}, y, 256u);
  });
  const std::string dot = g.dot(ffi::CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE);
  CHECK(dot.find("digraph") != std::string::npos);
  CHECK(dot.find("saxpy") != std::string::npos);
  CHECK(dot.find("dbl") != std::string::npos);
}

TEST_CASE("gpu graph: GraphedStep of 100 kernels gives what direct launches give") {
  constexpr unsigned n = 4096;
  Stream s{ctx()};
  const Saxpy saxpy = saxpy_kernel();
  DeviceBuffer<float> x(ctx(), n), direct(ctx(), n), graphed(ctx(), n);
  fill(x, 1.0f);
  fill(direct, 0.0f);
  fill(graphed, 0.0f);
  const LaunchConfig cfg{.grid = 16, .block = 256};
  GraphedStep step{[&](const Stream& q, float a) {
    for (int k = 0; k < 100; ++k) launch(q, saxpy, cfg, graphed, x, a, n);
  }};
  for (int i = 0; i < 50; ++i) {
    const float a = i < 25 ? 1.0f : 2.0f;
    step(s, a);
    for (int k = 0; k < 100; ++k) launch(s, saxpy, cfg, direct, x, a, n);
  }
  s.synchronize();
  CHECK(step.stats().captures == 2);
  CHECK(step.stats().updates == 1);
  CHECK(step.stats().instantiations == 1);
  std::vector<float> hd(n), hg(n);
  copy(hd, direct);
  copy(hg, graphed);
  CHECK(hd == hg);
  CHECK(hg[0] == 100.0f * 25 + 200.0f * 25);
}


// --- issue 22 -----------------------------------------------------------------

TEST_CASE("gpu graph: the host-callable guarantee: alive while any exec can run it, then destroyed once, on a thread of ours, by a reclaim point") {
  std::atomic<int> alive{0}, destroyed{0}, off_thread{0}, copies{0}, runs{0}, runs_at_destruction{-1};
  constexpr int launches = 200;
  Stream s{ctx()};
  DeviceBuffer<float> buf(ctx(), 1u << 24);  // 64 MiB: each launch's fill takes a while
  {
    Graph g{ctx()};
    GraphNode k = g.add_fill({}, buf, 2.0f);
    struct Probe {
      Tracked t;
      std::atomic<int>* runs;
      std::atomic<int>* at_destruction;
      Probe(Tracked tr, std::atomic<int>* r, std::atomic<int>* a) : t(std::move(tr)), runs(r), at_destruction(a) {}
      Probe(Probe&& o) noexcept : t(std::move(o.t)), runs(o.runs), at_destruction(o.at_destruction) {}
      Probe(const Probe&) = default;
      Probe& operator=(const Probe&) = delete;
      ~Probe() {
        if (t.live) at_destruction->store(runs->load());
      }
      void operator()() const { ++*runs; }
    };
    (void)g.add_host(k, Probe(Tracked(&alive, &destroyed, &off_thread, &copies), &runs, &runs_at_destruction));
    GraphExec exec{g};
    g = Graph();  // the exec alone holds it now
    exec.launch(s);
    s.synchronize();
    ctx().synchronize();
    CHECK(alive == 1);  // reclaim points passed; the exec can still run it
    // Dropped with launches still in flight: the driver keeps it until they finish.
    for (int i = 0; i < launches; ++i) exec.launch(s);
  }
  const auto start = std::chrono::steady_clock::now();
  const bool at_once = alive == 0;
  int reclaim_points = 0;
  const auto until = start + std::chrono::seconds(10);
  while (alive != 0 && std::chrono::steady_clock::now() < until) {
    s.synchronize();  // a reclaim point (and the launches' end)
    ++reclaim_points;
    if (alive != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("host callable: destroyed " << (at_once ? "by the last handle's destruction"
                                                  : "at reclaim point " + std::to_string(reclaim_points))
                                      << ", " << ms << " ms after the last handle dropped");
  CHECK_MESSAGE(alive == 0, "not destroyed within 10 s of the last handle, through repeated synchronizes");
  CHECK(destroyed == 1);
  CHECK(copies == 0);
  CHECK(off_thread == 0);  // never on the driver's thread
  CHECK(runs == launches + 1);
  CHECK(runs_at_destruction == launches + 1);  // never before the in-flight launches had run it
}

TEST_CASE("gpu graph: a host node in a conditional body: oxicuda refuses it when added; the driver only at instantiation") {
  if (driver_version() < 12040) {
    MESSAGE("skipped: conditional nodes need a CUDA 12.4 driver");
    return;
  }
  Graph g{ctx()};
  ConditionalNode once = g.add_if({}, g.conditional_handle(0));
  const Error refused = raised_by([&] { (void)once.body.add_host({}, [] {}); });
  CHECK(refused.call() == "oxicuda::Graph::add_host");
  CHECK(refused.detail().find("a conditional node's body may hold only") != std::string::npos);
  CHECK(once.body.node_count() == 0);
  // What the fake driver models: the raw call accepts the node, instantiation refuses the graph.
  const ffi::CUDA_HOST_NODE_PARAMS p{[](void*) {}, nullptr};
  CUgraphNode node = nullptr;
  CHECK(detail::api().GraphAddHostNode(&node, once.body.raw(), nullptr, 0, &p) == ffi::CUDA_SUCCESS);
  const Error late = raised_by([&] { GraphExec exec{g}; });
  MESSAGE("instantiation with a host node in a body: " << std::string(late.what()));
  CHECK(late.call() == "cuGraphInstantiateWithParams");
  CHECK(late.result() == ffi::CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("gpu graph: a captured graph gives its nodes, their kinds, dependencies and dependents") {
  Stream s{ctx()};
  DeviceBuffer<float> x(ctx(), 256), y(ctx(), 256);
  std::vector<float> host(256, 1.0f);
  Graph g = capture(s, [&](const Stream& q) {
    copy_async(q, x, host);
    fill_async(q, y, 2.0f);
    copy_async(q, host, y);
  });
  const GraphNodes nodes = g.nodes();
  REQUIRE(nodes.size() == 3);
  const GraphNode* root = nullptr;
  int copies = 0;
  for (const GraphNode& n : nodes) {
    copies += n.type() == ffi::CU_GRAPH_NODE_TYPE_MEMCPY;
    if (n.dependencies().empty()) root = &n;
  }
  CHECK(copies == 2);
  REQUIRE(root);
  CHECK(root->type() == ffi::CU_GRAPH_NODE_TYPE_MEMCPY);
  const GraphNodes next = root->dependents();
  REQUIRE(next.size() == 1);
  CHECK(next[0].type() == ffi::CU_GRAPH_NODE_TYPE_MEMSET);
  CHECK(next[0].dependencies().contains(*root));
  const GraphNodes last = next[0].dependents();
  REQUIRE(last.size() == 1);
  CHECK(last[0].dependents().empty());
}

TEST_CASE("gpu graph: clone, child, second exec and update of a graph with allocation nodes") {
  // What README says the driver does with such graphs (its documented rules).
  auto build = [] {
    Graph g{ctx()};
    GraphAllocation<float> tmp = g.add_alloc<float>({}, 1024);
    GraphNode set = g.add_fill(tmp.node, tmp.span, 1.0f);
    (void)g.add_free(set, tmp.span);
    return g;
  };
  Stream s{ctx()};
  Graph g = build();
  GraphExec exec{g};
  exec.launch(s);
  s.synchronize();
  const Error clone = raised_by([&] { (void)g.clone(); });
  MESSAGE("clone: " << std::string(clone.what()));
  CHECK(clone.call() == "cuGraphClone");
  Graph parent{ctx()};
  const Error child = raised_by([&] { (void)parent.add_child({}, g); });
  MESSAGE("add_child: " << std::string(child.what()));
  CHECK(child.call() == "cuGraphAddChildGraphNode");
  const Error second = raised_by([&] { GraphExec again{g}; });
  MESSAGE("second exec: " << std::string(second.what()));
  CHECK(second.call() == "cuGraphInstantiateWithParams");
  const UpdateRefusal refused = exec.try_update(build());
  MESSAGE("update from another graph with allocation nodes: reason " << static_cast<int>(refused.reason));
  // Driver 580 (H200) refuses with the generic CU_GRAPH_EXEC_UPDATE_ERROR,
  // not ..._ERROR_NOT_SUPPORTED as its documentation suggests.
  CHECK(refused.reason != ffi::CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CHECK((refused.reason == ffi::CU_GRAPH_EXEC_UPDATE_ERROR ||
         refused.reason == ffi::CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED));
  CHECK(clone.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(child.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(second.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  exec.launch(s);  // unchanged, still runs
  s.synchronize();
}

// --- issue 24 (3) and (4): if/else and switch nodes (CUDA 12.8 drivers) whose
// branch a kernel picks; a graph's allocation owned after the launch by a
// DeviceBuffer (cuMemFreeAsync on a stream), or freed by another graph.

namespace {

Kernel<void(unsigned long long, const unsigned*)> set_handle_kernel() {
  return fixtures().kernel<void(unsigned long long, const unsigned*)>("set_handle");
}
Kernel<void(unsigned*, unsigned)> mark_kernel() { return fixtures().kernel<void(unsigned*, unsigned)>("mark"); }

unsigned read_one(const DeviceBuffer<unsigned>& b) {
  std::vector<unsigned> h(1);
  copy(h, b);
  return h[0];
}

bool has_12_8() {
  if (driver_version() >= 12080) return true;
  MESSAGE("skipped: if/else and switch nodes need a CUDA 12.8 driver; this one is " << driver_version());
  return false;
}

}  // namespace

TEST_CASE("issue 24 (3): an if/else node takes then_body when a kernel sets the handle, else_body when it clears it") {
  if (!has_12_8()) return;
  Stream s{ctx()};
  DeviceBuffer<unsigned> select(ctx(), 1), out(ctx(), 1);
  Graph g{ctx()};
  ConditionalHandle h = g.conditional_handle(0);
  GraphNode set = g.add_kernel({}, set_handle_kernel(), {.grid = 1, .block = 32}, h, select);
  IfElseNode branch = g.add_if_else(set, h);
  (void)branch.then_body.add_kernel({}, mark_kernel(), {.grid = 1, .block = 32}, out, 1u);
  (void)branch.else_body.add_kernel({}, mark_kernel(), {.grid = 1, .block = 32}, out, 2u);
  GraphExec exec{g};
  for (const unsigned v : {1u, 0u, 5u, 0u, 1u}) {
    CAPTURE(v);
    fill(select, v);
    fill(out, 0u);
    exec.launch(s);
    s.synchronize();
    CHECK(read_one(out) == (v != 0 ? 1u : 2u));
  }
}

TEST_CASE("issue 24 (3): a switch node of 3 bodies runs body i when a kernel sets the handle to i, none for 3 or more") {
  if (!has_12_8()) return;
  Stream s{ctx()};
  DeviceBuffer<unsigned> select(ctx(), 1), out(ctx(), 1);
  DeviceBuffer<float> x(ctx(), 256);
  Graph g{ctx()};
  ConditionalHandle h = g.conditional_handle(0);
  GraphNode set = g.add_kernel({}, set_handle_kernel(), {.grid = 1, .block = 32}, h, select);
  SwitchNode sw = g.add_switch(set, h, 3);
  REQUIRE(sw.bodies.size() == 3);
  for (unsigned i = 0; i < 3; ++i) (void)sw.bodies[i].add_kernel({}, mark_kernel(), {.grid = 1, .block = 32}, out, 10u + i);
  (void)sw.bodies[2].add_kernel({}, dbl_kernel(), {.grid = 1, .block = 256}, x, 256u);  // two roots in one body
  GraphExec exec{g};
  fill(x, 1.0f);
  for (const unsigned v : {0u, 1u, 2u, 3u, 1000u, 2u}) {
    CAPTURE(v);
    fill(select, v);
    fill(out, 99u);
    exec.launch(s);
    s.synchronize();
    CHECK(read_one(out) == (v < 3 ? 10u + v : 99u));
  }
  std::vector<float> hx(256);
  copy(hx, x);
  CHECK(hx[0] == 4.0f);  // body 2 ran twice
  CHECK(hx[255] == 4.0f);
}

TEST_CASE("issue 24 (3): a switch of 0 bodies is an Error before the driver; if/else and switch on this driver") {
  Graph g{ctx()};
  if (driver_version() < 12040) {
    MESSAGE("skipped: conditional nodes need a CUDA 12.4 driver");
    return;
  }
  ConditionalHandle h = g.conditional_handle(0);
  const Error none = raised_by([&] { (void)g.add_switch({}, h, 0); });
  CHECK(none.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(none.call() == "oxicuda::Graph::add_switch");
  CHECK(g.node_count() == 0);
  if (driver_version() < 12080) {
    const Error old = raised_by([&] { (void)g.add_if_else({}, h); });
    MESSAGE("if/else on this driver: " << std::string(old.what()));
    CHECK(old.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
    CHECK(g.node_count() == 0);
  } else {
    // The driver's own answer to a count it does not take, for the record.
    ffi::CUgraphNodeParams p{};
    p.type = ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h.value;
    p.conditional.type = ffi::CU_GRAPH_COND_TYPE_SWITCH;
    p.conditional.size = 0;
    p.conditional.ctx = ctx().raw();
    CUgraphNode node = nullptr;
    const ffi::CUresult raw_zero = detail::api().GraphAddNode(&node, g.raw(), nullptr, 0, &p);
    MESSAGE("the driver's answer to a switch of 0 bodies: " << static_cast<int>(raw_zero));
    CHECK(raw_zero != ffi::CUDA_SUCCESS);
  }
}

TEST_CASE("issue 24 (4): a graph's allocation, owned after each launch by a DeviceBuffer, freed with cuMemFreeAsync on a stream") {
  Stream s{ctx()};
  Graph g{ctx()};
  GraphAllocation<float> mem = g.add_alloc<float>({}, 4096);
  GraphNode set = g.add_fill(mem.node, mem.span, 3.0f);
  (void)g.add_kernel(set, dbl_kernel(), {.grid = 16, .block = 256}, mem.span, 4096u);
  GraphExec exec{g};
  for (int round = 0; round < 3; ++round) {  // each relaunch needs the last allocation freed
    CAPTURE(round);
    exec.launch(s);
    DeviceBuffer<float> owned = DeviceBuffer<float>::adopt_async(mem.span, s);
    CHECK(owned.size() == 4096);
    std::vector<float> host(4096);
    copy(host, owned);  // on `s`, after the launch
    CHECK(host[0] == 6.0f);
    CHECK(host[4095] == 6.0f);
  }  // each owner frees it with cuMemFreeAsync on `s`
  s.synchronize();
  // Refused before the driver: an empty span.
  CHECK(raised_by([&] { (void)DeviceBuffer<float>::adopt_async(DeviceSpan<float>(), s); }).call() ==
        "oxicuda::DeviceBuffer::adopt_async");
}

TEST_CASE("issue 24 (4): a graph's allocation freed by another graph's free node, then allocated again by a relaunch") {
  Stream s{ctx()};
  Graph g{ctx()};
  GraphAllocation<float> mem = g.add_alloc<float>({}, 4096);
  (void)g.add_fill(mem.node, mem.span, 1.0f);
  GraphExec exec{g};
  Graph frees{ctx()};
  DeviceBuffer<float> out(ctx(), 4096);
  GraphNode use = frees.add_kernel({}, dbl_kernel(), {.grid = 16, .block = 256}, mem.span, 4096u);
  GraphNode back = frees.add_copy(use, out, mem.span);
  (void)frees.add_free(back, mem.span);  // another graph's allocation: the driver allows it
  GraphExec free_exec{frees};
  for (int round = 0; round < 3; ++round) {  // each relaunch needs the last allocation freed
    CAPTURE(round);
    fill(out, 0.0f);
    exec.launch(s);       // allocates and fills with 1
    free_exec.launch(s);  // doubles it, copies it out, frees it
    s.synchronize();
    std::vector<float> host(4096);
    copy(host, out);
    CHECK(host[0] == 2.0f);
    CHECK(host[4095] == 2.0f);
  }
}

#endif  // gpu_fixtures.inc
