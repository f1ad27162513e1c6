// The performance contract, on the fake driver: launch, record, wait and
// query are each exactly one driver call and no heap allocation.
#include <doctest/doctest.h>

#include "fixtures.hpp"

#include <vector>

using namespace oxicuda;

namespace {
struct Counted {
  Fake& fake;
  long calls, allocations;
  explicit Counted(Fake& f) : fake(f), calls(f.calls("*")), allocations(heap_allocations()) {}
  long driver_calls() const { return fake.calls("*") - calls; }
  long heap() const { return heap_allocations() - allocations; }
};
}  // namespace

TEST_CASE_FIXTURE(LaunchTest, "hot path: launch, record, wait, query, copy and fill enqueues are one driver call each, and allocate nothing") {
  Stream t(ctx);
  Event e(ctx, {.timing = false});
  Function dbl = m.function("dbl");
  DeviceBuffer<float> buf(ctx, 64);
  const ffi::CUdeviceptr p = buf.device_ptr();
  const unsigned n = 64;
  launch(s, dbl, 1, 64, 0, p, n);  // warm: nothing is loaded lazily on the hot path anyway
  {
    Counted c(fake);
    launch(s, dbl, 1, 64, 0, p, n);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(fake);
    s.record(e);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(fake);
    t.wait(e);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(fake);
    CHECK(s.ready());
    CHECK(e.ready());
    CHECK(c.driver_calls() == 2);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(fake);
    s.synchronize();
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    // A typed launch (plain configuration), an async copy and an async fill.
    auto typed = m.kernel<void(float*, unsigned)>("dbl");
    std::vector<float> host(64, 1.0f);
    Counted c(fake);
    launch(s, typed, {.grid = 1, .block = 64}, buf, 64);
    CHECK(c.driver_calls() == 1);
    copy_async(s, buf, host);
    CHECK(c.driver_calls() == 2);
    fill_async(s, buf, 0.0f);
    CHECK(c.driver_calls() == 3);
    copy_async(s, host, buf);
    CHECK(c.driver_calls() == 4);
    CHECK(c.heap() == 0);
  }
  {
    // Copying and dropping a handle: no driver call, no allocation.
    Counted c(fake);
    {
      Stream copy = s;
      Event ecopy = e;
      Function fcopy = dbl;
      (void)copy;
    }
    CHECK(c.driver_calls() == 0);
    CHECK(c.heap() == 0);
  }
}

TEST_CASE_FIXTURE(LaunchTest, "hot path: a graph launch, and a GraphedStep replay, are one driver call each, and allocate nothing") {
  auto dbl = m.kernel<void(float*, unsigned)>("dbl");
  DeviceBuffer<float> buf(ctx, 64);
  Graph g{ctx};
  (void)g.add_kernel({}, dbl, {.grid = 1, .block = 64}, buf, 64);
  GraphExec exec{g};
  exec.launch(s);
  {
    Counted c(fake);
    exec.launch(s);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    // A per-node setter called again for the same node: oxicuda allocates
    // nothing (the function it keeps alive for the node is replaced, not
    // added). With the kernel's context already current, the one call more
    // than the setter is the check of it (cuCtxGetCurrent): the driver
    // crashes in the setter when no context is current.
    const ScopedCurrent current(ctx);
    std::size_t count = 1;
    CUgraphNode raw = nullptr;
    REQUIRE(detail::api().GraphGetNodes(g.raw(), &raw, &count) == ffi::CUDA_SUCCESS);
    exec.set_kernel(GraphNode(raw), dbl, {.grid = 1, .block = 64}, buf, 32);
    Counted c(fake);
    exec.set_kernel(GraphNode(raw), dbl, {.grid = 1, .block = 64}, buf, 16);
    CHECK(c.driver_calls() == 2);
    CHECK(c.heap() == 1);  // the fake's own copy of the argument bytes (fake_graph.cpp's pack_args)
  }
  GraphedStep step{[&](const Stream& q, unsigned n) { launch(q, dbl, {.grid = 1, .block = 64}, buf, n); }};
  step(s, 64u);  // captured and instantiated
  {
    Counted c(fake);
    step(s, 64u);  // the same arguments: replayed
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  CHECK(step.stats().launches == 2);
}

TEST_CASE_FIXTURE(ContextTest, "hot path: creating a stream in the current context is current+create, no switch") {
  ScopedCurrent current(ctx);
  const long before = fake.calls("*");
  Stream s(ctx);
  CHECK(fake.calls("*") - before == 2);  // cuCtxGetCurrent + cuStreamCreate
  CHECK(fake.calls("cuCtxSetCurrent") == 1);  // the ScopedCurrent above only
}
