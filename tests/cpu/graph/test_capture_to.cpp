// Issue 24, items 1 and 2, on the fake driver: capturing into a graph that
// has nodes already (begin_capture_to, ScopedCapture into a Graph), the
// capture's state while it runs (capture_info) and its dependencies changed
// by hand (update_capture_dependencies). The fake runs the kernels `dbl`
// and `saxpy` on host memory, so results are checked as on a GPU.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {

constexpr const char* kPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry dbl(.param .u64 p, .param .u32 n)
{ ret; }
.visible .entry saxpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)
{ ret; }
.visible .entry countdown(.param .u64 h, .param .u64 c)
{ ret; }
)";

constexpr unsigned N = 32;

struct CaptureToTest : StreamTest {
  Module m = Module::from_ptx(ctx, kPtx);
  Kernel<void(float*, unsigned)> dbl = m.kernel<void(float*, unsigned)>("dbl");
  Kernel<void(float*, const float*, float, unsigned)> saxpy =
      m.kernel<void(float*, const float*, float, unsigned)>("saxpy");
  const LaunchConfig one{.grid = 1, .block = N};
};

std::vector<float> iota(float from) {
  std::vector<float> v(N);
  for (unsigned i = 0; i < N; ++i) v[i] = from + static_cast<float>(i);
  return v;
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (1): work captured into a graph with nodes runs after the given nodes, and ending gives that same Graph") {
  const std::vector<float> hx = iota(1), hy = iota(100);
  PinnedBuffer<float> px(ctx, N), py(ctx, N), out(ctx, N);
  std::copy(hx.begin(), hx.end(), px.begin());
  std::copy(hy.begin(), hy.end(), py.begin());
  DeviceBuffer<float> x(ctx, N), y(ctx, N);

  Graph g{ctx};
  GraphNode up_x = g.add_copy({}, x, px);
  GraphNode up_y = g.add_copy({}, y, py);
  const long handles = g.use_count();
  Graph back;
  {
    ScopedCapture capture{s, g, {up_x, up_y}};
    CHECK(capture_status(s) == CaptureStatus::active);
    CHECK(g.use_count() == handles + 1);  // held until the capture ends
    launch(s, saxpy, one, y, x, 3.0f, N);  // y = y + 3x
    launch(s, dbl, one, y, N);             // y = 2y
    copy_async(s, out, y);
    back = capture.end();
  }
  CHECK(back == g);
  CHECK(back.owns());
  CHECK(g.use_count() == handles + 1);  // `back` shares g's state: no second owner
  CHECK(capture_status(s) == CaptureStatus::none);
  const GraphNodes nodes = g.nodes();
  REQUIRE(nodes.size() == 5);
  // The first captured node depends on both given nodes; the rest form a chain.
  const GraphNode first = nodes[2];
  CHECK(first.type() == ffi::CU_GRAPH_NODE_TYPE_KERNEL);
  const GraphNodes deps = first.dependencies();
  CHECK(deps.size() == 2);
  CHECK(deps.contains(up_x));
  CHECK(deps.contains(up_y));
  CHECK(nodes[3].dependencies().contains(first));
  CHECK(nodes[4].dependencies().contains(nodes[3]));
  CHECK(nodes[4].type() == ffi::CU_GRAPH_NODE_TYPE_MEMCPY);

  GraphExec exec{g};
  for (int replay = 0; replay < 2; ++replay) {
    std::fill(out.begin(), out.end(), 0.0f);
    exec.launch(s);
    s.synchronize();
    for (unsigned i = 0; i < N; ++i) CHECK(out[i] == 2 * (hy[i] + 3 * hx[i]));
  }
  // Nothing ran while capturing: y is as the replays left it, not doubled again.
  std::vector<float> hy_after(N);
  copy(hy_after, y);
  CHECK(hy_after[1] == 2 * (hy[1] + 3 * hx[1]));
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (1): begin_capture_to and end_capture: into a graph again and again, after its last node; the graph outlives its handles until the capture ends") {
  DeviceBuffer<float> x(ctx, N);
  PinnedBuffer<float> out(ctx, N);
  Graph g{ctx};
  GraphNode set = g.add_fill({}, x, 1.0f);
  begin_capture_to(s, g, set);
  launch(s, dbl, one, x, N);
  Graph same = end_capture(s);
  CHECK(same == g);
  CHECK(g.node_count() == 2);
  // Again, after the node the first capture made (the graph's last node).
  const GraphNodes before = g.nodes();
  begin_capture_to(s, g, before[1], CaptureMode::relaxed);
  launch(s, dbl, one, x, N);
  copy_async(s, out, x);
  CHECK(end_capture(s) == g);
  REQUIRE(g.node_count() == 4);
  const GraphNodes all = g.nodes();
  CHECK(all[2].dependencies().contains(before[1]));
  GraphExec exec{g};
  exec.launch(s);
  s.synchronize();
  CHECK(out[0] == 4.0f);  // 1, doubled twice
  CHECK(out[N - 1] == 4.0f);

  // The caller's last handle dropped mid-capture: the capture holds the
  // graph (the driver forbids destroying it), and ending gives it back.
  const long graphs = fake.live("graph");
  {
    Graph mine{ctx};
    begin_capture_to(s, mine, {});
  }
  CHECK(fake.live("graph") == graphs + 1);
  fill_async(s, x, 2.0f);
  Graph kept = end_capture(s);
  CHECK(kept.owns());
  CHECK(kept.use_count() == 1);
  CHECK(kept.node_count() == 1);
  kept = Graph();
  CHECK(fake.live("graph") == graphs);

  // A plain capture on the same stream afterwards makes its own graph.
  Graph own = capture(s, [&] { fill_async(s, x, 3.0f); });
  CHECK_FALSE(own == g);
  CHECK(own.node_count() == 1);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (1): host functions captured into a graph run on every replay; a conditional body is captured into") {
  std::atomic<int> runs{0};
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx};
  GraphNode set = g.add_fill({}, x, 1.0f);
  {
    ScopedCapture capture{s, g, set};
    s.launch_host_func([&runs] { ++runs; });
    (void)capture.end();
  }
  CHECK(g.node_count() == 2);
  CHECK(g.nodes()[1].type() == ffi::CU_GRAPH_NODE_TYPE_HOST);
  {
    GraphExec exec{g};
    exec.launch(s);
    exec.launch(s);
    s.synchronize();
  }
  CHECK(runs == 2);

  // Into a while node's body: the body's kernels, captured.
  Kernel<void(unsigned long long, unsigned*)> countdown = m.kernel<void(unsigned long long, unsigned*)>("countdown");
  DeviceBuffer<unsigned> counter(ctx, 1);
  Graph loop_graph{ctx};
  ConditionalHandle h = loop_graph.conditional_handle(1);
  GraphNode start = loop_graph.add_fill({}, counter, 3u);
  ConditionalNode loop = loop_graph.add_while(start, h);
  ScopedCapture body{s, loop.body, {}};
  launch(s, dbl, one, x, N);
  launch(s, countdown, {.grid = 1, .block = 1}, h, counter);
  Graph filled = body.end();
  CHECK(filled == loop.body);
  CHECK(filled.is_conditional_body());
  CHECK(loop.body.node_count() == 2);
  GraphExec exec{loop_graph};
  fill(x, 1.0f);
  exec.launch(s);
  std::vector<float> host(N);
  copy(host, x);
  CHECK(host[0] == 8.0f);  // doubled 3 times
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (1): a failed capture into a graph takes the graph with it (as driver 580 does); an abandoned one leaves it to its owner") {
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx};
  GraphNode set = g.add_fill({}, x, 1.0f);
  SUBCASE("invalidated") {
    ScopedCapture capture{s, g, set};
    launch(s, dbl, one, x, N);
    CHECK(error_of([&] { s.synchronize(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    const Error end = error_of([&] { (void)capture.end(); });
    CHECK(end.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(std::string(end.what()).find("the driver destroyed that graph with the failed capture") != std::string::npos);
    CHECK(!g.owns());                     // gone with the capture: not destroyed again by its last handle
    CHECK(g.use_count() == 1);            // the capture let go of it
    CHECK(error_of([&] { (void)g.node_count(); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  }
  SUBCASE("an exception leaves the scope") {
    auto abandon = [&] {
      ScopedCapture capture{s, g, set};
      launch(s, dbl, one, x, N);
      throw std::runtime_error("enqueue failed");
    };
    CHECK_THROWS_AS(abandon(), std::runtime_error);
    CHECK(capture_status(s) == CaptureStatus::none);
    CHECK(g.use_count() == 1);
    CHECK(g.node_count() == 2);
  }
  SUBCASE("the stream destroyed while it captures into the graph") {
    {
      Stream doomed{ctx};
      begin_capture_to(doomed, g, set);
      launch(doomed, dbl, one, x, N);
    }
    // The destroy ended the capture: the graph is its owner's alone again.
    CHECK(g.use_count() == 1);
    CHECK(g.node_count() == 2);
    Stream again{ctx};
    Graph own = capture(again, [&] { fill_async(again, x, 2.0f); });
    CHECK(own.node_count() == 1);
    CHECK_FALSE(own == g);
  }
  // The graph is still instantiable and runs (unless the failed capture took it).
  if (!g.owns()) return;
  GraphExec exec{g};
  exec.launch(s);
  s.synchronize();
  CHECK(fake.invalid_destroys() == 0);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (1): edge data on the edges from the given nodes") {
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx};
  GraphNode k = g.add_kernel({}, dbl, one, x, N);
  GraphNode fill_node = g.add_fill({}, x, 1.0f);
  const EdgeData early{EdgePort::launch_order, EdgeType::programmatic};
  {
    const std::vector<EdgeData> edges{early, EdgeData{}};
    ScopedCapture capture{s, g, {k, fill_node}, edges};
    const CaptureInfo info = capture_info(s);
    REQUIRE(info.dependencies.size() == 2);
    CHECK(info.dependencies[0] == k);
    CHECK(info.edges[0] == early);
    CHECK(info.edges[1] == EdgeData{});
    launch(s, dbl, one, x, N);
    const CaptureInfo after = capture_info(s);
    CHECK(after.edges == std::vector<EdgeData>{EdgeData{}});
    (void)capture.end();
  }
  // A port other than completion from a node that is not a kernel: the driver refuses.
  const EdgeData bad{EdgePort::programmatic, EdgeType::programmatic};
  const std::vector<EdgeData> one_bad{bad};
  const long handles = g.use_count();
  const Error refused = error_of([&] { begin_capture_to(s, g, fill_node, one_bad); });
  CHECK(refused.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(refused.call() == "cuStreamBeginCaptureToGraph");
  CHECK(g.use_count() == handles);  // not held by a capture that did not begin
  CHECK(capture_status(s) == CaptureStatus::none);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (1): bad input to begin_capture_to is an Error before the driver, and nothing is held") {
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx}, other{ctx};
  GraphNode a = g.add_fill({}, x, 1.0f);
  GraphNode foreign = other.add_fill({}, x, 1.0f);
  const std::vector<EdgeData> two(2);
  fake.reset();
  auto refused = [&](auto&& f) {
    const Error e = error_of(f);
    CHECK(fake.calls("cuStreamBeginCaptureToGraph") == 0);
    CHECK(capture_status(s) == CaptureStatus::none);
    CHECK(g.use_count() == 1);
    return e;
  };
  const Error empty_stream = refused([&] { begin_capture_to(Stream(), g, a); });
  CHECK(contains(empty_stream.detail(), "oxicuda::Stream"));
  const Error empty_graph = refused([&] { begin_capture_to(s, Graph(), {}); });
  CHECK(contains(empty_graph.detail(), "oxicuda::Graph"));
  const Error empty_node = refused([&] { begin_capture_to(s, g, GraphNode()); });
  CHECK(contains(empty_node.detail(), "oxicuda::GraphNode"));
  const Error not_ours = refused([&] { begin_capture_to(s, g, foreign); });
  CHECK(not_ours.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(contains(not_ours.detail(), "dependency 0 is not a node of the graph to capture into"));
  const Error twice = refused([&] { begin_capture_to(s, g, {a, a}); });
  CHECK(contains(twice.detail(), "dependency 1 repeats dependency 0"));
  const Error count = refused([&] { begin_capture_to(s, g, a, two); });
  CHECK(contains(count.detail(), "2 edge data for 1 dependencies"));
  const Error scoped = refused([&] { ScopedCapture c{s, g, foreign}; });
  CHECK(scoped.call() == "oxicuda::ScopedCapture::ScopedCapture");
  {
    Context elsewhere = Context::create(Device::get(0));
    Graph theirs{elsewhere};
    const Error context = error_of([&] { begin_capture_to(s, theirs, {}); });
    CHECK(context.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
    CHECK(contains(context.detail(), "another context than the stream"));
    CHECK(fake.calls("cuStreamBeginCaptureToGraph") == 0);
  }
  // The driver's refusals, with what they mean.
  const Error legacy = error_of([&] { begin_capture_to(Stream::legacy_default(ctx), g, a); });
  CHECK(contains(legacy.detail(), "cannot be captured"));
  {
    ScopedCapture busy{s, g, a};
    const Error already = error_of([&] { begin_capture_to(s, other, {}); });
    CHECK(already.result() == ffi::CUDA_ERROR_ILLEGAL_STATE);
    CHECK(already.detail() == "the stream is capturing already");
    CHECK(other.use_count() == 1);
    // One capture into a graph at a time.
    Stream second{ctx};
    const long calls = fake.calls("cuStreamBeginCaptureToGraph");
    const Error shared = error_of([&] { begin_capture_to(second, g, a); });
    CHECK(shared.result() == ffi::CUDA_ERROR_ILLEGAL_STATE);
    CHECK(contains(shared.detail(), "another capture is capturing into this graph"));
    CHECK(fake.calls("cuStreamBeginCaptureToGraph") == calls);
    (void)busy.end();
  }
  CHECK(g.use_count() == 1);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (2): capture_info: status, an id stable within a capture and new for the next, the graph, the dependencies after each enqueue") {
  DeviceBuffer<float> x(ctx, N);
  const CaptureInfo idle = capture_info(s);
  CHECK(idle.status == CaptureStatus::none);
  CHECK(idle.id == 0);
  CHECK_FALSE(idle.graph);
  CHECK(idle.dependencies.empty());

  ScopedCapture capture{s};
  const CaptureInfo begun = capture_info(s);
  CHECK(begun.status == CaptureStatus::active);
  CHECK(begun.id != 0);
  REQUIRE(begun.graph);
  CHECK_FALSE(begun.graph.owns());  // the capture's own graph, borrowed until end_capture
  CHECK(begun.dependencies.empty());
  CHECK(begun.edges.empty());
  fill_async(s, x, 1.0f);
  const CaptureInfo one_node = capture_info(s);
  CHECK(one_node.id == begun.id);
  REQUIRE(one_node.dependencies.size() == 1);
  CHECK(one_node.edges.size() == 1);
  CHECK(one_node.dependencies[0].type() == ffi::CU_GRAPH_NODE_TYPE_MEMSET);
  launch(s, dbl, one, x, N);
  const CaptureInfo two_nodes = capture_info(s);
  REQUIRE(two_nodes.dependencies.size() == 1);
  const GraphNode k = two_nodes.dependencies[0];
  CHECK(k.type() == ffi::CU_GRAPH_NODE_TYPE_KERNEL);
  CHECK(k.dependencies().contains(one_node.dependencies[0]));
  CHECK(two_nodes.graph.raw() == begun.graph.raw());

  // A stream forked into the capture: the same capture, its dependencies its own.
  Stream other{ctx};
  Event fork{ctx, {.timing = false}}, join{ctx, {.timing = false}};
  s.record(fork);
  other.wait(fork);
  const CaptureInfo forked = capture_info(other);
  CHECK(forked.status == CaptureStatus::active);
  CHECK(forked.id == begun.id);
  CHECK(forked.dependencies == std::vector<GraphNode>{k});
  fill_async(other, x, 2.0f);
  CHECK_FALSE(capture_info(other).dependencies[0] == k);
  other.record(join);
  s.wait(join);
  CHECK(capture_info(s).dependencies.size() == 2);

  Graph g = capture.end();
  CHECK(g.raw() == begun.graph.raw());
  CHECK(g.node_count() == 3);
  CHECK(capture_info(s).status == CaptureStatus::none);
  CHECK(capture_info(other).status == CaptureStatus::none);

  // The next capture has another id; one into a graph of ours gives that Graph.
  Graph mine{ctx};
  ScopedCapture into{s, mine, {}};
  const CaptureInfo next = capture_info(s);
  CHECK(next.id != begun.id);
  CHECK(next.graph == mine);
  CHECK(next.graph.use_count() == mine.use_count());  // the same state, not a borrowed handle
  CHECK(next.graph.owns());
  // Invalidated: the status alone.
  CHECK(error_of([&] { s.synchronize(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  const CaptureInfo broken = capture_info(s);
  CHECK(broken.status == CaptureStatus::invalidated);
  CHECK(broken.id == 0);
  CHECK_FALSE(broken.graph);
  CHECK(error_of([&] { (void)into.end(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(error_of([&] { (void)capture_info(Stream()); }).detail().find("oxicuda::Stream") != std::string::npos);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (2): a node added by hand mid-capture, the stream's dependencies set to it, and the capture goes on after it") {
  const std::vector<float> hx = iota(1);
  PinnedBuffer<float> px(ctx, N), out(ctx, N);
  std::copy(hx.begin(), hx.end(), px.begin());
  DeviceBuffer<float> x(ctx, N);
  std::atomic<int> host_runs{0};
  Graph g = capture(s, [&] {
    copy_async(s, x, px);
    const CaptureInfo info = capture_info(s);
    // A kernel node and a host node, by hand, after the captured copy.
    GraphNode k = info.graph.add_kernel(info.dependencies, dbl, one, x, N);
    GraphNode h = info.graph.add_host(k, [&host_runs] { ++host_runs; });
    update_capture_dependencies(s, h, CaptureDependencies::set);
    CHECK(capture_info(s).dependencies == std::vector<GraphNode>{h});
    launch(s, dbl, one, x, N);  // captured after the hand-made nodes
    copy_async(s, out, x);
  });
  const GraphNodes nodes = g.nodes();
  REQUIRE(nodes.size() == 5);
  // A chain: copy, kernel (by hand), host (by hand), kernel, copy.
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    CHECK(nodes[i].dependencies().size() == 1);
    CHECK(nodes[i].dependencies().contains(nodes[i - 1]));
  }
  GraphExec exec{g};
  exec.launch(s);
  s.synchronize();
  for (unsigned i = 0; i < N; ++i) CHECK(out[i] == 4 * hx[i]);
  CHECK(host_runs == 1);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (2): update_capture_dependencies adds or sets, with edge data; nodes set aside do not make the capture unjoined") {
  DeviceBuffer<float> x(ctx, N), y(ctx, N);
  ScopedCapture capture{s};
  fill_async(s, x, 1.0f);
  CaptureInfo info = capture_info(s);
  const GraphNode a = info.dependencies[0];
  // A root of its own, by hand, then added to the dependencies: the next
  // captured node joins both branches.
  GraphNode b = info.graph.add_kernel({}, dbl, one, y, N);
  update_capture_dependencies(s, b, CaptureDependencies::add);
  info = capture_info(s);
  CHECK(info.dependencies == std::vector<GraphNode>{a, b});
  // Added again: no duplicate.
  update_capture_dependencies(s, {a, b}, CaptureDependencies::add);
  CHECK(capture_info(s).dependencies.size() == 2);
  launch(s, saxpy, one, x, y, 2.0f, N);
  const GraphNode join = capture_info(s).dependencies[0];
  CHECK(join.dependencies().size() == 2);
  // Set to nothing: the next captured node is a root; `join` is set aside,
  // and ending is no unjoined failure.
  update_capture_dependencies(s, {}, CaptureDependencies::set);
  CHECK(capture_info(s).dependencies.empty());
  fill_async(s, y, 5.0f);
  const GraphNode root = capture_info(s).dependencies[0];
  CHECK(root.dependencies().empty());
  // With edge data: a kernel's launch-order port, programmatic.
  const EdgeData early{EdgePort::launch_order, EdgeType::programmatic};
  const std::vector<EdgeData> edges{early};
  update_capture_dependencies(s, join, edges, CaptureDependencies::set);
  info = capture_info(s);
  CHECK(info.dependencies == std::vector<GraphNode>{join});
  CHECK(info.edges == edges);
  // Edge data a memset node cannot have: the driver refuses.
  const std::vector<EdgeData> bad{EdgeData{EdgePort::programmatic, EdgeType::programmatic}};
  CHECK(error_of([&] { update_capture_dependencies(s, root, bad, CaptureDependencies::add); }).call() ==
        "cuStreamUpdateCaptureDependencies");
  Graph g = capture.end();
  CHECK(g.node_count() == 4);
}

TEST_CASE_FIXTURE(CaptureToTest, "issue 24 (2): bad input to update_capture_dependencies is an Error before the driver") {
  DeviceBuffer<float> x(ctx, N);
  Graph other{ctx};
  GraphNode foreign = other.add_fill({}, x, 1.0f);
  fake.reset();
  const Error idle = error_of([&] { update_capture_dependencies(s, {}, CaptureDependencies::set); });
  CHECK(idle.result() == ffi::CUDA_ERROR_ILLEGAL_STATE);
  CHECK(contains(idle.detail(), "the stream is not capturing"));
  CHECK(contains(error_of([&] { update_capture_dependencies(Stream(), {}, CaptureDependencies::set); }).detail(),
                 "oxicuda::Stream"));
  {
    ScopedCapture capture{s};
    fill_async(s, x, 1.0f);
    const GraphNode a = capture_info(s).dependencies[0];
    const Error not_ours = error_of([&] { update_capture_dependencies(s, foreign, CaptureDependencies::add); });
    CHECK(not_ours.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(contains(not_ours.detail(), "dependency 0 is not a node of the graph being captured into"));
    CHECK(contains(error_of([&] { update_capture_dependencies(s, GraphNode(), CaptureDependencies::add); }).detail(),
                   "oxicuda::GraphNode"));
    CHECK(contains(error_of([&] { update_capture_dependencies(s, {a, a}, CaptureDependencies::set); }).detail(),
                   "repeats"));
    const std::vector<EdgeData> none_for_one;
    const std::vector<EdgeData> two(2);
    CHECK(contains(error_of([&] { update_capture_dependencies(s, a, two, CaptureDependencies::set); }).detail(),
                   "2 edge data for 1 dependencies"));
    CHECK(fake.calls("cuStreamUpdateCaptureDependencies") == 0);
    // (No edge data at all is the default for each.)
    update_capture_dependencies(s, a, none_for_one, CaptureDependencies::set);
    CHECK(fake.calls("cuStreamUpdateCaptureDependencies") == 1);
    // Invalidated: said so, before the driver.
    CHECK(error_of([&] { s.synchronize(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    const Error broken = error_of([&] { update_capture_dependencies(s, a, CaptureDependencies::set); });
    CHECK(broken.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(fake.calls("cuStreamUpdateCaptureDependencies") == 1);
    CHECK(error_of([&] { (void)capture.end(); }).result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
}

TEST_CASE_FIXTURE(CaptureToTest, "fake driver: cuStreamGetCaptureInfo refuses to drop edge data, and wants the dependencies with it, as documented") {
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx};
  GraphNode k = g.add_kernel({}, dbl, one, x, N);
  const std::vector<EdgeData> early{EdgeData{EdgePort::launch_order, EdgeType::programmatic}};
  ScopedCapture capture{s, g, k, early};
  ffi::CUstreamCaptureStatus status{};
  const CUgraphNode* deps = nullptr;
  const ffi::CUgraphEdgeData* edges = nullptr;
  std::size_t n = 0;
  CHECK(detail::api().StreamGetCaptureInfo(s.raw(), &status, nullptr, nullptr, &deps, nullptr, &n) ==
        ffi::CUDA_ERROR_LOSSY_QUERY);
  CHECK(detail::api().StreamGetCaptureInfo(s.raw(), &status, nullptr, nullptr, nullptr, &edges, &n) ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(detail::api().StreamGetCaptureInfo(s.raw(), &status, nullptr, nullptr, &deps, &edges, &n) ==
        ffi::CUDA_SUCCESS);
  CHECK(n == 1);
  CHECK(edges[0].from_port == ffi::graph_kernel_node_port_launch_order);
  (void)capture.end();
}
