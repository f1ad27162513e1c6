// The GPU suite, part: issue 24, items 1 and 2 on a real driver: work
// captured into a graph that has nodes already (cuStreamBeginCaptureToGraph),
// the capture's state while it runs (cuStreamGetCaptureInfo_v3) and its
// dependencies changed by hand (cuStreamUpdateCaptureDependencies_v2); every
// result checked against a CPU reference.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <string>
#include <vector>

using namespace oxicuda;
using gpu::ctx;
using gpu::raised_by;

namespace {

const char* const kKernels = R"(
extern "C" __global__ void scale(float* y, float a, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= a;
}
extern "C" __global__ void axpy(float* y, const float* x, float a, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
)";

using Scale = Kernel<void(float*, float, unsigned)>;
using Axpy = Kernel<void(float*, const float*, float, unsigned)>;

struct Kernels {
  Module m = module_from_source(ctx(), kKernels);
  Scale scale = m.kernel<void(float*, float, unsigned)>("scale");
  Axpy axpy = m.kernel<void(float*, const float*, float, unsigned)>("axpy");
};

const Kernels& kernels() {
  static const Kernels k;
  return k;
}

constexpr unsigned n = (1u << 16) + 3;
constexpr LaunchConfig cfg{.grid = (n + 255) / 256, .block = 256};

std::vector<float> ramp(float from, float step) {
  std::vector<float> v(n);
  for (unsigned i = 0; i < n; ++i) v[i] = from + step * static_cast<float>(i % 977);
  return v;
}

std::size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  return bad;
}

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

bool new_enough() {
  if (driver_version() >= 12030) return true;
  MESSAGE("skipped: capture into a graph needs a CUDA 12.3 driver; this one is ", driver_version());
  return false;
}

}  // namespace

TEST_CASE("issue 24 (1): work captured into a graph with nodes runs after them, 10 replays match the CPU; ending gives the same Graph") {
  if (!new_enough()) return;
  const Kernels& k = kernels();
  Stream s{ctx()};
  const std::vector<float> hx = ramp(1.0f, 0.5f), hy = ramp(-3.0f, 0.25f);
  PinnedBuffer<float> px(ctx(), n), py(ctx(), n), out(ctx(), n);
  std::copy(hx.begin(), hx.end(), px.begin());
  std::copy(hy.begin(), hy.end(), py.begin());
  DeviceBuffer<float> x(ctx(), n), y(ctx(), n);

  Graph g{ctx()};
  GraphNode up_x = g.add_copy({}, x, px);
  GraphNode up_y = g.add_copy({}, y, py);
  GraphNode first = g.add_kernel({up_x, up_y}, k.axpy, cfg, y, x, 2.0f, n);  // y = y0 + 2x
  const long handles = g.use_count();
  Graph back;
  {
    ScopedCapture capture{s, g, first};
    CHECK(capture_status(s) == CaptureStatus::active);
    launch(s, k.scale, cfg, y, 3.0f, n);    // y = 3(y0 + 2x)
    launch(s, k.axpy, cfg, y, x, 1.0f, n);  // y += x
    copy_async(s, out, y);
    back = capture.end();
  }
  CHECK(back == g);
  CHECK(back.owns());
  CHECK(g.use_count() == handles + 1);
  const GraphNodes nodes = g.nodes();
  REQUIRE(nodes.size() == 6);
  MESSAGE("nodes after the capture, in the driver's order: ", nodes.size());
  // The first captured node runs after `first`, and only after it.
  std::size_t after_first = 0;
  for (const GraphNode& node : nodes) {
    const GraphNodes deps = node.dependencies();
    if (deps.contains(first)) {
      ++after_first;
      CHECK(deps.size() == 1);
      CHECK(node.type() == ffi::CU_GRAPH_NODE_TYPE_KERNEL);
    }
  }
  CHECK(after_first == 1);

  std::vector<float> want(n);
  for (unsigned i = 0; i < n; ++i) want[i] = 3.0f * (hy[i] + 2.0f * hx[i]) + hx[i];
  GraphExec exec{g};
  for (int replay = 0; replay < 10; ++replay) {
    std::fill(out.begin(), out.end(), 0.0f);
    exec.launch(s);
    s.synchronize();
    CHECK(mismatches(std::vector<float>(out.begin(), out.end()), want) == 0);
  }

  // Again with begin_capture_to / end_capture, after the last node, relaxed.
  const GraphNode last = [&] {
    for (const GraphNode& node : g.nodes())
      if (node.dependents().empty()) return node;
    return GraphNode();
  }();
  REQUIRE(last);
  begin_capture_to(s, g, last, CaptureMode::relaxed);
  launch(s, k.scale, cfg, y, 0.5f, n);
  copy_async(s, out, y);
  CHECK(end_capture(s) == g);
  CHECK(g.node_count() == 8);
  for (unsigned i = 0; i < n; ++i) want[i] *= 0.5f;
  GraphExec again{g};
  again.launch(s);
  s.synchronize();
  CHECK(mismatches(std::vector<float>(out.begin(), out.end()), want) == 0);
}

TEST_CASE("issue 24 (1): what cuStreamEndCapture gives back after cuStreamBeginCaptureToGraph, and a failed capture into a graph") {
  if (!new_enough()) return;
  const Kernels& k = kernels();
  Stream s{ctx()};
  DeviceBuffer<float> y(ctx(), n);
  // The raw calls: the driver's answer for the graph handle.
  CUgraph raw = nullptr;
  REQUIRE(detail::api().GraphCreate(&raw, 0) == ffi::CUDA_SUCCESS);
  REQUIRE(detail::api().StreamBeginCaptureToGraph(s.raw(), raw, nullptr, nullptr, 0, ffi::CU_STREAM_CAPTURE_MODE_GLOBAL) ==
          ffi::CUDA_SUCCESS);
  launch(s, k.scale, cfg, y, 2.0f, n);
  CUgraph given = nullptr;
  REQUIRE(detail::api().StreamEndCapture(s.raw(), &given) == ffi::CUDA_SUCCESS);
  MESSAGE("cuStreamEndCapture after a capture into a graph gave ", given == raw ? "the same CUgraph" : "another CUgraph",
          " (", static_cast<const void*>(given), " for ", static_cast<const void*>(raw), ")");
  CHECK(given == raw);
  std::size_t count = 0;
  CHECK(detail::api().GraphGetNodes(raw, nullptr, &count) == ffi::CUDA_SUCCESS);
  CHECK(count == 1);
  if (given && given != raw) CHECK(detail::api().GraphDestroy(given) == ffi::CUDA_SUCCESS);
  CHECK(detail::api().GraphDestroy(raw) == ffi::CUDA_SUCCESS);

  // Invalidated mid-capture: driver 580 destroys the graph captured into
  // (seen on the H100: its handle is invalid afterwards); the Error says
  // so, and the Graph no longer destroys it.
  {
    Graph g{ctx()};
    GraphNode set = g.add_fill({}, y, 1.0f);
    ScopedCapture capture{s, g, set};
    launch(s, k.scale, cfg, y, 2.0f, n);
    const Error sync = raised_by([&] { s.synchronize(); });
    MESSAGE("a synchronize while capturing into a graph: ", std::string(sync.what()));
    CHECK(capture_status(s) == CaptureStatus::invalidated);
    const Error end = raised_by([&] { (void)capture.end(); });
    CHECK(end.result() == ffi::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(std::string(end.what()).find("the driver destroyed that graph") != std::string::npos);
    CHECK(capture_status(s) == CaptureStatus::none);
    std::size_t count = 0;
    const ffi::CUresult after = detail::api().GraphGetNodes(g.raw(), nullptr, &count);
    MESSAGE("cuGraphGetNodes on the graph after the invalidated capture into it: ", static_cast<int>(after));
    CHECK(after != ffi::CUDA_SUCCESS);
  }
  Graph g{ctx()};
  (void)g.add_fill({}, y, 1.0f);
  // Abandoned (the scope left without end()): the graph is its owner's.
  {
    ScopedCapture abandoned{s, g, {}};
    launch(s, k.scale, cfg, y, 2.0f, n);
  }
  CHECK(capture_status(s) == CaptureStatus::none);
  CHECK(g.use_count() == 1);
  MESSAGE("nodes after an abandoned capture into the graph: ", g.node_count());
}

#if __has_include("gpu_fixtures.inc")
#include "gpu_fixtures.inc"

TEST_CASE("issue 24 (1): a while node's body filled by capture into it counts down on the device") {
  if (driver_version() < 12040) {
    MESSAGE("skipped: conditional nodes need a CUDA 12.4 driver");
    return;
  }
  const Module fixtures = Module::from_image(ctx(), fixture_cubin, fixture_cubin_size);
  auto countdown = fixtures.kernel<void(unsigned long long, unsigned*)>("countdown");
  auto dbl = fixtures.kernel<void(float*, unsigned)>("dbl");
  Stream s{ctx()};
  DeviceBuffer<unsigned> counter(ctx(), 1);
  DeviceBuffer<float> x(ctx(), 256);
  Graph g{ctx()};
  ConditionalHandle h = g.conditional_handle(1);
  GraphNode start = g.add_fill({}, counter, 7u);
  ConditionalNode loop = g.add_while(start, h);
  {
    ScopedCapture body{s, loop.body, {}};
    launch(s, dbl, {.grid = 1, .block = 256}, x, 256u);
    launch(s, countdown, {.grid = 1, .block = 32}, h, counter);
    Graph filled = body.end();
    CHECK(filled == loop.body);
    CHECK(filled.is_conditional_body());
  }
  CHECK(loop.body.node_count() == 2);
  GraphExec exec{g};
  fill(x, 1.0f);
  exec.launch(s);
  s.synchronize();
  std::vector<float> hx(256);
  copy(hx, x);
  CHECK(hx[0] == 128.0f);  // the body ran 7 times
  CHECK(hx[255] == 128.0f);
}
#endif

TEST_CASE("issue 24 (1): edge data and bad input to begin_capture_to on the real driver") {
  if (!new_enough()) return;
  const Kernels& k = kernels();
  Stream s{ctx()};
  DeviceBuffer<float> y(ctx(), n);
  Graph g{ctx()}, other{ctx()};
  GraphNode kn = g.add_kernel({}, k.scale, cfg, y, 1.0f, n);
  GraphNode fl = g.add_fill({}, y, 1.0f);
  GraphNode foreign = other.add_fill({}, y, 1.0f);
  // Before the driver: a node of another graph, one twice, edge data not one per node.
  CHECK(has(raised_by([&] { begin_capture_to(s, g, foreign); }).detail(), "is not a node of the graph to capture into"));
  CHECK(has(raised_by([&] { begin_capture_to(s, g, {kn, kn}); }).detail(), "repeats"));
  const std::vector<EdgeData> two(2);
  CHECK(has(raised_by([&] { begin_capture_to(s, g, kn, two); }).detail(), "edge data for 1"));
  CHECK(has(raised_by([&] { begin_capture_to(s, Graph(), {}); }).detail(), "oxicuda::Graph"));
  CHECK(capture_status(s) == CaptureStatus::none);
  CHECK(g.use_count() == 1);
  // The driver's word on edge data: programmatic from a kernel's
  // launch-order port (compute capability 9.0 and up), and from a memset node.
  const bool hopper = ctx().device().compute_capability() >= ComputeCapability{9, 0};
  const std::vector<EdgeData> early{EdgeData{EdgePort::launch_order, EdgeType::programmatic}};
  try {
    ScopedCapture capture{s, g, kn, early};
    const CaptureInfo info = capture_info(s);
    REQUIRE(info.edges.size() == 1);
    CHECK(info.edges[0] == early[0]);
    launch(s, k.scale, cfg, y, 2.0f, n);
    (void)capture.end();
    MESSAGE("a programmatic edge from a kernel's launch-order port: accepted");
    CHECK(hopper);
  } catch (const Error& e) {
    MESSAGE("a programmatic edge from a kernel's launch-order port: ", std::string(e.what()));
    CHECK_FALSE(hopper);
  }
  const std::vector<EdgeData> bad{EdgeData{EdgePort::programmatic, EdgeType::programmatic}};
  const Error refused = raised_by([&] { begin_capture_to(s, g, fl, bad); });
  MESSAGE("a programmatic edge from a memset node: ", std::string(refused.what()));
  CHECK(refused.call() == "cuStreamBeginCaptureToGraph");
  CHECK(capture_status(s) == CaptureStatus::none);
  CHECK(g.use_count() == 1);
}

TEST_CASE("issue 24 (2): capture_info on the real driver: status, id, graph and the dependencies after each enqueue") {
  if (!new_enough()) return;
  const Kernels& k = kernels();
  Stream s{ctx()};
  DeviceBuffer<float> y(ctx(), n);
  const CaptureInfo idle = capture_info(s);
  CHECK(idle.status == CaptureStatus::none);
  CHECK(idle.dependencies.empty());

  std::uint64_t first_id = 0;
  CUgraph first_graph = nullptr;
  {
    ScopedCapture capture{s};
    const CaptureInfo begun = capture_info(s);
    CHECK(begun.status == CaptureStatus::active);
    CHECK(begun.id != 0);
    REQUIRE(begun.graph);
    CHECK_FALSE(begun.graph.owns());
    CHECK(begun.dependencies.empty());
    first_id = begun.id;
    first_graph = begun.graph.raw();
    fill_async(s, y, 1.0f);
    const CaptureInfo one = capture_info(s);
    CHECK(one.id == first_id);
    REQUIRE(one.dependencies.size() == 1);
    CHECK(one.dependencies[0].type() == ffi::CU_GRAPH_NODE_TYPE_MEMSET);
    CHECK(one.edges == std::vector<EdgeData>{EdgeData{}});
    launch(s, k.scale, cfg, y, 2.0f, n);
    const CaptureInfo two = capture_info(s);
    REQUIRE(two.dependencies.size() == 1);
    CHECK(two.dependencies[0].type() == ffi::CU_GRAPH_NODE_TYPE_KERNEL);
    CHECK(two.dependencies[0].dependencies().contains(one.dependencies[0]));
    // Forked to another stream: the same capture, the same id.
    Stream other{ctx()};
    Event fork{ctx(), {.timing = false}}, join{ctx(), {.timing = false}};
    s.record(fork);
    other.wait(fork);
    const CaptureInfo forked = capture_info(other);
    CHECK(forked.id == first_id);
    CHECK(forked.dependencies == two.dependencies);
    launch(other, k.scale, cfg, y, 1.0f, n);
    other.record(join);
    s.wait(join);
    const CaptureInfo joined = capture_info(s);
    MESSAGE("dependencies after the join: ", joined.dependencies.size());
    CHECK(joined.dependencies.size() >= 1);
    Graph g = capture.end();
    CHECK(g.raw() == first_graph);
    CHECK(g.node_count() == 3);
  }
  CHECK(capture_info(s).status == CaptureStatus::none);
  // The next capture: another id; into a graph of ours, that Graph.
  Graph mine{ctx()};
  ScopedCapture into{s, mine, {}};
  const CaptureInfo next = capture_info(s);
  MESSAGE("capture ids: ", first_id, " then ", next.id);
  CHECK(next.id != first_id);
  CHECK(next.graph == mine);
  CHECK(next.graph.owns());
  // Invalidated: the status alone.
  CHECK_THROWS_AS(s.synchronize(), Error);
  const CaptureInfo broken = capture_info(s);
  CHECK(broken.status == CaptureStatus::invalidated);
  CHECK(broken.dependencies.empty());
  CHECK_THROWS_AS((void)into.end(), Error);
}

TEST_CASE("issue 24 (2): nodes added by hand mid-capture, dependencies set and added, and the capture goes on; results match the CPU") {
  if (!new_enough()) return;
  const Kernels& k = kernels();
  Stream s{ctx()};
  const std::vector<float> hx = ramp(2.0f, 0.125f), hy = ramp(0.5f, 1.0f);
  PinnedBuffer<float> px(ctx(), n), py(ctx(), n), out(ctx(), n);
  std::copy(hx.begin(), hx.end(), px.begin());
  std::copy(hy.begin(), hy.end(), py.begin());
  DeviceBuffer<float> x(ctx(), n), y(ctx(), n);
  Graph g = capture(s, [&] {
    copy_async(s, x, px);
    // A branch by hand: y uploaded and scaled, a root of its own...
    const CaptureInfo info = capture_info(s);
    GraphNode up_y = info.graph.add_copy({}, y, py);
    GraphNode scaled = info.graph.add_kernel(up_y, k.scale, cfg, y, 4.0f, n);  // y = 4 y0
    // ... joined to the captured one: the next captured node runs after both.
    update_capture_dependencies(s, scaled, CaptureDependencies::add);
    CHECK(capture_info(s).dependencies.size() == 2);
    launch(s, k.axpy, cfg, y, x, 2.0f, n);  // y = 4 y0 + 2x
    // A node by hand after the capture's tail, set as the only dependency.
    const CaptureInfo tail = capture_info(s);
    GraphNode mine = tail.graph.add_kernel(tail.dependencies, k.scale, cfg, y, 0.5f, n);  // y = 2 y0 + x
    update_capture_dependencies(s, mine, CaptureDependencies::set);
    CHECK(capture_info(s).dependencies == std::vector<GraphNode>{mine});
    copy_async(s, out, y);
  });
  CHECK(g.node_count() == 6);
  std::vector<float> want(n);
  for (unsigned i = 0; i < n; ++i) want[i] = 0.5f * (4.0f * hy[i] + 2.0f * hx[i]);
  GraphExec exec{g};
  for (int replay = 0; replay < 5; ++replay) {
    std::fill(out.begin(), out.end(), 0.0f);
    exec.launch(s);
    s.synchronize();
    CHECK(mismatches(std::vector<float>(out.begin(), out.end()), want) == 0);
  }
  // Set to none: the next captured node is a root; the node set aside does
  // not make ending the capture fail as unjoined.
  Graph roots = capture(s, [&] {
    fill_async(s, y, 1.0f);
    update_capture_dependencies(s, {}, CaptureDependencies::set);
    CHECK(capture_info(s).dependencies.empty());
    fill_async(s, x, 2.0f);
  });
  std::size_t root_count = 0;
  for (const GraphNode& node : roots.nodes()) root_count += node.dependencies().empty();
  CHECK(root_count == 2);
  // Edge data through an update: a kernel's launch-order port (9.0 and up).
  if (ctx().device().compute_capability() >= ComputeCapability{9, 0}) {
    ScopedCapture capture{s};
    launch(s, k.scale, cfg, y, 1.0f, n);
    const GraphNode kn = capture_info(s).dependencies[0];
    const std::vector<EdgeData> early{EdgeData{EdgePort::launch_order, EdgeType::programmatic}};
    update_capture_dependencies(s, kn, early, CaptureDependencies::set);
    const CaptureInfo info = capture_info(s);
    CHECK(info.dependencies == std::vector<GraphNode>{kn});
    REQUIRE(info.edges.size() == 1);
    CHECK(info.edges[0] == early[0]);
    // The raw query without edge data must not lose it.
    ffi::CUstreamCaptureStatus st{};
    const CUgraphNode* deps = nullptr;
    std::size_t count = 0;
    const ffi::CUresult lossy = detail::api().StreamGetCaptureInfo(s.raw(), &st, nullptr, nullptr, &deps, nullptr, &count);
    MESSAGE("cuStreamGetCaptureInfo without edge data, with a programmatic edge: ", static_cast<int>(lossy));
    CHECK(lossy == ffi::CUDA_ERROR_LOSSY_QUERY);
    launch(s, k.scale, cfg, y, 1.0f, n);
    (void)capture.end();
  }
}

TEST_CASE("issue 24 (2): bad input to update_capture_dependencies on the real driver is an Error before the driver") {
  if (!new_enough()) return;
  Stream s{ctx()};
  DeviceBuffer<float> y(ctx(), 16);
  const Error idle = raised_by([&] { update_capture_dependencies(s, {}, CaptureDependencies::set); });
  CHECK(idle.result() == ffi::CUDA_ERROR_ILLEGAL_STATE);
  CHECK(has(idle.detail(), "not capturing"));
  Graph other{ctx()};
  GraphNode foreign = other.add_fill({}, y, 1.0f);
  ScopedCapture capture{s};
  fill_async(s, y, 2.0f);
  const GraphNode a = capture_info(s).dependencies[0];
  CHECK(has(raised_by([&] { update_capture_dependencies(s, foreign, CaptureDependencies::add); }).detail(),
            "is not a node of the graph being captured into"));
  CHECK(has(raised_by([&] { update_capture_dependencies(s, {a, a}, CaptureDependencies::set); }).detail(), "repeats"));
  CHECK(has(raised_by([&] { update_capture_dependencies(s, GraphNode(), CaptureDependencies::set); }).detail(),
            "oxicuda::GraphNode"));
  CHECK(capture_status(s) == CaptureStatus::active);
  Graph g = capture.end();
  CHECK(g.node_count() == 1);
}
