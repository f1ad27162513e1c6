// The performance contract, on the fake driver: launch, record, wait and
// query are each exactly one driver call and no heap allocation.
#include <doctest/doctest.h>

#include "fake_driver.hpp"

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

TEST_CASE("hot path: launch, record, wait, query, copy and fill enqueues are one driver call each, and allocate nothing") {
  FakeScope scope;
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx), t(ctx);
  Event e(ctx, {.timing = false});
  Module m = Module::from_ptx(ctx, kFakePtx);
  Function dbl = m.function("dbl");
  DeviceBuffer<float> buf(ctx, 64);
  const ffi::CUdeviceptr p = buf.device_ptr();
  const unsigned n = 64;
  launch(s, dbl, 1, 64, 0, p, n);  // warm: nothing is loaded lazily on the hot path anyway
  {
    Counted c(scope.fake);
    launch(s, dbl, 1, 64, 0, p, n);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(scope.fake);
    s.record(e);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(scope.fake);
    t.wait(e);
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(scope.fake);
    CHECK(s.ready());
    CHECK(e.ready());
    CHECK(c.driver_calls() == 2);
    CHECK(c.heap() == 0);
  }
  {
    Counted c(scope.fake);
    s.synchronize();
    CHECK(c.driver_calls() == 1);
    CHECK(c.heap() == 0);
  }
  {
    // A typed launch (plain configuration), an async copy and an async fill.
    auto typed = m.kernel<void(float*, unsigned)>("dbl");
    std::vector<float> host(64, 1.0f);
    Counted c(scope.fake);
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
    Counted c(scope.fake);
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

TEST_CASE("hot path: creating a stream in the current context is current+create, no switch") {
  FakeScope scope;
  Context ctx = Context::primary(Device::get(0));
  ScopedCurrent current(ctx);
  const long before = scope.fake.calls("*");
  Stream s(ctx);
  CHECK(scope.fake.calls("*") - before == 2);  // cuCtxGetCurrent + cuStreamCreate
  CHECK(scope.fake.calls("cuCtxSetCurrent") == 1);  // the ScopedCurrent above only
}
