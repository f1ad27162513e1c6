// The GPU suite, issue 24 items 3 and 4 on a real device: if/else and switch
// conditional nodes (CUDA 12.8 drivers) whose branch a kernel chooses, and
// a graph's allocation owned after the launch by a DeviceBuffer (freed with
// cuMemFreeAsync on a stream) or freed by another graph's free node. The
// kernels are the fixture module's (tests/gpu/kernels.cu, built by nvcc at
// build time); without nvcc these tests are not built.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#if __has_include("gpu_fixtures.inc")
#include "gpu_fixtures.inc"

#include <string>
#include <vector>

using namespace oxicuda;

namespace {

using gpu::ctx;

const Module& fixtures() {
  static const Module m = Module::from_image(ctx(), fixture_cubin, fixture_cubin_size);
  return m;
}

Kernel<void(unsigned long long, const unsigned*)> set_handle_kernel() {
  return fixtures().kernel<void(unsigned long long, const unsigned*)>("set_handle");
}
Kernel<void(unsigned*, unsigned)> mark_kernel() { return fixtures().kernel<void(unsigned*, unsigned)>("mark"); }
Kernel<void(float*, unsigned)> dbl_kernel() { return fixtures().kernel<void(float*, unsigned)>("dbl"); }

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
  const Error none = gpu::raised_by([&] { (void)g.add_switch({}, h, 0); });
  CHECK(none.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(none.call() == "oxicuda::Graph::add_switch");
  CHECK(g.node_count() == 0);
  if (driver_version() < 12080) {
    const Error old = gpu::raised_by([&] { (void)g.add_if_else({}, h); });
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
  CHECK(gpu::raised_by([&] { (void)DeviceBuffer<float>::adopt_async(DeviceSpan<float>(), s); }).call() ==
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
