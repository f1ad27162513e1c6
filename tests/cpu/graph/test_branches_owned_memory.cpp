// Graphs on the fake driver, issue 24 items 3 and 4: if/else and switch
// conditional nodes (CUDA 12.8), and a graph's allocation owned outside the
// graph (a DeviceBuffer adopting it, freed by cuMemFreeAsync on a stream)
// or freed by another graph's free node. The fake runs the kernels `dbl`
// and `set_handle` on the host (fake_module_launch.cpp), so each branch
// taken is seen in memory.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>
#include <vector>

using namespace oxicuda;

namespace {

using SetHandle = Kernel<void(unsigned long long, const unsigned*)>;

// The fake's module (kFakePtx): `dbl` doubles, `set_handle` sets the handle.
struct BranchTest : LaunchTest {
  Kernel<void(float*, unsigned)> dbl = m.kernel<void(float*, unsigned)>("dbl");
  SetHandle set_handle = m.kernel<void(unsigned long long, const unsigned*)>("set_handle");
};

constexpr unsigned N = 16;

unsigned read_one(const DeviceBuffer<unsigned>& b) {
  std::vector<unsigned> h(1);
  copy(h, b);
  return h[0];
}

}  // namespace

TEST_CASE_FIXTURE(BranchTest, "graph: an if/else node runs then_body when a kernel sets the handle, else_body when it clears it") {
  DeviceBuffer<unsigned> select(ctx, 1), out(ctx, 1);
  Graph g{ctx};
  ConditionalHandle h = g.conditional_handle(0);
  GraphNode set = g.add_kernel({}, set_handle, {.grid = 1, .block = 1}, h, select);
  IfElseNode branch = g.add_if_else(set, h);
  CHECK(branch.node.type() == ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL);
  CHECK(branch.then_body.is_conditional_body());
  CHECK(branch.else_body.is_conditional_body());
  CHECK_FALSE(branch.then_body.owns());
  CHECK(branch.then_body != branch.else_body);
  (void)branch.then_body.add_fill({}, out, 1u);
  (void)branch.else_body.add_fill({}, out, 2u);
  CHECK(g.node_count() == 2);
  CHECK(branch.then_body.node_count() == 1);

  GraphExec exec{g};
  for (const unsigned v : {1u, 0u, 7u, 0u}) {
    CAPTURE(v);
    fill(select, v);
    fill(out, 0u);
    exec.launch(s);
    s.synchronize();
    CHECK(read_one(out) == (v != 0 ? 1u : 2u));
  }
}

TEST_CASE_FIXTURE(BranchTest, "graph: a switch node of 3 bodies runs body i when the handle is i, none when it is 3 or more") {
  DeviceBuffer<unsigned> select(ctx, 1), out(ctx, 1);
  DeviceBuffer<float> x(ctx, N);
  Graph g{ctx};
  ConditionalHandle h = g.conditional_handle(0);
  GraphNode set = g.add_kernel({}, set_handle, {.grid = 1, .block = 1}, h, select);
  SwitchNode sw = g.add_switch(set, h, 3);
  REQUIRE(sw.bodies.size() == 3);
  for (unsigned i = 0; i < 3; ++i) {
    CHECK(sw.bodies[i].is_conditional_body());
    GraphNode f = sw.bodies[i].add_fill({}, out, 10u + i);
    if (i == 2) (void)sw.bodies[i].add_kernel(f, dbl, {.grid = 1, .block = N}, x, N);  // a kernel in a body
  }
  // A switch inside a body: nested conditionals are allowed there.
  SwitchNode inner = sw.bodies[0].add_switch({}, sw.bodies[0].conditional_handle(0), 1);
  (void)inner.bodies[0].add_empty({});

  GraphExec exec{g};
  fill(x, 1.0f);
  for (const unsigned v : {0u, 1u, 2u, 3u, 1000u}) {
    CAPTURE(v);
    fill(select, v);
    fill(out, 99u);
    exec.launch(s);
    s.synchronize();
    CHECK(read_one(out) == (v < 3 ? 10u + v : 99u));  // 3 and more: no body runs
  }
  std::vector<float> hx(N);
  copy(hx, x);
  CHECK(hx[0] == 2.0f);  // body 2 ran once
}

TEST_CASE_FIXTURE(BranchTest, "graph: a switch of 0 bodies, and if/else or switch on a driver older than CUDA 12.8, are errors; nothing is added") {
  Graph g{ctx};
  ConditionalHandle h = g.conditional_handle(0);
  const long adds = fake.calls("cuGraphAddNode");

  const Error none = error_of([&] { (void)g.add_switch({}, h, 0); });
  CHECK(none.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(none.call() == "oxicuda::Graph::add_switch");
  CHECK(none.detail().find("a switch node needs at least one body") != std::string::npos);

  fake.set_driver_version(12070);
  const Error if_else = error_of([&] { (void)g.add_if_else({}, h); });
  const Error sw = error_of([&] { (void)g.add_switch({}, h, 3); });
  ConditionalNode plain_if = g.add_if({}, h);  // 12.4's if of one body still works there
  fake.set_driver_version(13000);
  CHECK(if_else.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(if_else.call() == "oxicuda::Graph::add_if_else");
  CHECK(if_else.detail() ==
        "if/else nodes (an if with two bodies) need a CUDA 12.8 driver or newer; the loaded driver is CUDA 12.7");
  CHECK(sw.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(sw.call() == "oxicuda::Graph::add_switch");
  CHECK(sw.detail() == "switch nodes need a CUDA 12.8 driver or newer; the loaded driver is CUDA 12.7");
  CHECK(fake.calls("cuGraphAddNode") == adds + 1);  // only add_if's reached the driver
  CHECK(g.node_count() == 1);
  (void)plain_if;

  // Empty handles are errors, not crashes.
  Graph empty;
  CHECK(error_of([&] { (void)empty.add_if_else({}, h); }).call() == "oxicuda::Graph::add_if_else");
  CHECK(error_of([&] { (void)empty.add_switch({}, h, 2); }).detail().find("oxicuda::Graph") != std::string::npos);
  Graph moved = std::move(g);
  CHECK(error_of([&] { (void)g.add_switch({}, h, 2); }).call() == "oxicuda::Graph::add_switch");  // NOLINT(bugprone-use-after-move)

  // The bodies keep add_if's rule: host, event, alloc and free nodes are refused there.
  IfElseNode ie = moved.add_if_else({}, h);
  SwitchNode s3 = moved.add_switch({}, h, 3);
  Event ev{ctx};
  for (const Graph* body : {&ie.then_body, &ie.else_body, &s3.bodies[2]}) {
    CHECK(error_of([&] { (void)body->add_host({}, [] {}); }).result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
    CHECK(error_of([&] { (void)body->add_event_record({}, ev); }).call() == "oxicuda::Graph::add_event_record");
    CHECK(error_of([&] { (void)body->add_alloc<float>({}, N); }).call() == "oxicuda::Graph::add_alloc");
    CHECK(body->node_count() == 0);
  }
}

TEST_CASE_FIXTURE(BranchTest, "fake driver: conditional sizes and the CUDA 12.8 gate, as the driver documents them") {
  Graph g{ctx};
  ConditionalHandle h = g.conditional_handle(0);
  auto add = [&](ffi::CUgraphConditionalNodeType type, unsigned size) {
    ffi::CUgraphNodeParams p{};
    p.type = ffi::CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h.value;
    p.conditional.type = type;
    p.conditional.size = size;
    p.conditional.ctx = ctx.raw();
    CUgraphNode node = nullptr;
    const ffi::CUresult r = detail::api().GraphAddNode(&node, g.raw(), nullptr, 0, &p);
    if (r == ffi::CUDA_SUCCESS) CHECK(p.conditional.phGraph_out != nullptr);
    return r;
  };
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_WHILE, 2) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_IF, 3) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_SWITCH, 0) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_IF, 2) == ffi::CUDA_SUCCESS);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_SWITCH, 5) == ffi::CUDA_SUCCESS);
  fake.set_driver_version(12060);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_IF, 2) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_SWITCH, 1) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(add(ffi::CU_GRAPH_COND_TYPE_IF, 1) == ffi::CUDA_SUCCESS);
  fake.set_driver_version(13000);
  CHECK(g.node_count() == 3);
}

TEST_CASE_FIXTURE(BranchTest, "graph: an allocation the graph does not free, owned after the launch by a DeviceBuffer freed with cuMemFreeAsync") {
  Graph g{ctx};
  GraphAllocation<float> mem = g.add_alloc<float>({}, N);
  GraphNode set = g.add_fill(mem.node, mem.span, 3.0f);
  (void)g.add_kernel(set, dbl, {.grid = 1, .block = N}, mem.span, N);
  GraphExec exec{g};
  const long memory_before = fake.live("memory");
  for (int round = 0; round < 2; ++round) {  // relaunched once the buffer has freed it
    CAPTURE(round);
    exec.launch(s);
    CHECK(fake.live("memory") == memory_before + 1);  // live from the launch on
    const long frees = fake.calls("cuMemFreeAsync");
    {
      DeviceBuffer<float> owned = DeviceBuffer<float>::adopt_async(mem.span, s);
      CHECK(owned.size() == N);
      CHECK(owned.device_ptr() == mem.span.device_ptr());
      CHECK(owned.stream_ordered());
      CHECK(owned.context() == ctx);
      std::vector<float> host(N);
      copy(host, owned);  // ordered on `s`, after the launch
      CHECK(host[0] == 6.0f);
      CHECK(host[N - 1] == 6.0f);
      // Its span is a stream-ordered buffer's: adopting it again is refused (two owners).
      const Error twice = error_of([&] { (void)DeviceBuffer<float>::adopt_async(owned.device_span(), s); });
      CHECK(twice.result() == ffi::CUDA_ERROR_INVALID_VALUE);
      CHECK(twice.detail().find("has an owner already") != std::string::npos);
      DeviceBuffer<float> moved = std::move(owned);  // one owner: the move leaves `owned` empty
      CHECK(owned.empty());  // NOLINT(bugprone-use-after-move)
    }
    CHECK(fake.calls("cuMemFreeAsync") == frees + 1);  // freed once, on `s`
    CHECK(fake.live("memory") == memory_before);
  }
  // Not freed: a relaunch finds the allocation still live, as the driver refuses it.
  exec.launch(s);
  CHECK(error_of([&] { exec.launch(s); }).call() == "cuGraphLaunch");
  DeviceBuffer<float> last = DeviceBuffer<float>::adopt_async(mem.span, s);
}

TEST_CASE_FIXTURE(BranchTest, "graph: a graph's allocation freed by another graph's free node") {
  Graph g{ctx};
  GraphAllocation<float> mem = g.add_alloc<float>({}, N);
  (void)g.add_fill(mem.node, mem.span, 1.0f);
  GraphExec exec{g};
  Graph frees{ctx};
  (void)frees.add_free({}, mem.span);  // an allocation of another graph (the driver allows it)
  // Freeing it twice in one graph is refused (the driver's documented rule).
  CHECK(error_of([&] { (void)frees.add_free({}, mem.span); }).call() == "cuGraphAddMemFreeNode");
  GraphExec free_exec{frees};
  const long memory_before = fake.live("memory");
  exec.launch(s);
  CHECK(fake.live("memory") == memory_before + 1);
  free_exec.launch(s);
  CHECK(fake.live("memory") == memory_before);
  exec.launch(s);  // allocated again: it was freed
  free_exec.launch(s);
  s.synchronize();
}

TEST_CASE_FIXTURE(BranchTest, "DeviceBuffer::adopt_async refuses an empty span, a buffer's, an empty or per-thread stream, another context's memory; frees nothing") {
  DeviceBuffer<float> real(ctx, N);
  const long frees = fake.calls("cuMemFreeAsync");
  constexpr const char* op = "oxicuda::DeviceBuffer::adopt_async";
  const Error empty = error_of([&] { (void)DeviceBuffer<float>::adopt_async(DeviceSpan<float>(), s); });
  CHECK(empty.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(empty.call() == op);
  CHECK(empty.detail().find("the span is empty") != std::string::npos);
  DeviceBuffer<float> gone = std::move(real);
  CHECK(error_of([&] { (void)DeviceBuffer<float>::adopt_async(real.device_span(), s); }).call() == op);  // NOLINT(bugprone-use-after-move)
  CHECK(error_of([&] { (void)DeviceBuffer<float>::adopt_async(gone.subspan(0, 0), s); }).call() == op);
  const Error no_stream = error_of([&] { (void)DeviceBuffer<float>::adopt_async(gone.device_span(), Stream()); });
  CHECK(no_stream.call() == op);
  CHECK(no_stream.detail().find("oxicuda::Stream") != std::string::npos);
  Stream per_thread = Stream::per_thread_default(ctx);
  CHECK(error_of([&] { (void)DeviceBuffer<float>::adopt_async(gone.device_span(), per_thread); })
            .detail()
            .find("per-thread default stream") != std::string::npos);
  Context other = Context::create(Device::get(0));
  Stream theirs{other};
  const Error elsewhere = error_of([&] { (void)DeviceBuffer<float>::adopt_async(gone.device_span(), theirs); });
  CHECK(elsewhere.result() == ffi::CUDA_ERROR_INVALID_CONTEXT);
  CHECK(elsewhere.call() == op);
  DeviceBuffer<float> ordered = DeviceBuffer<float>::allocate_async(s, N);
  CHECK(error_of([&] { (void)DeviceBuffer<float>::adopt_async(ordered.subspan(1), s); })
            .detail()
            .find("stream-ordered DeviceBuffer's") != std::string::npos);
  CHECK(fake.calls("cuMemFreeAsync") == frees);  // nothing was owned, nothing freed
  CHECK(fake.calls("cuMemFree") == 0);
}
