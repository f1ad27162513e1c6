// The GPU suite, part: issue 24's launch attributes on a real driver:
// programmatic dependent launch (against the same pair without it), the
// programmatic event, launch priority, the L2 access-policy window on a
// launch, a stream and a graph's kernel node.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <cstddef>
#include <string>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

// The primary spins, writes, then lets its dependents launch; the
// secondary does its own part, then waits for the primary's grid (and its
// memory) before reading what it wrote.
const char* const kPdl = R"(
extern "C" __global__ void primary(float* out, unsigned n, long long spin) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const long long start = clock64();
  while (clock64() - start < spin) {}
  if (i < n) out[i] = 2.0f * (float)i;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
extern "C" __global__ void secondary(const float* in, float* out, float* own, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) own[i] = 5.0f;  // before the wait: work that needs nothing of the primary's
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (i < n) out[i] = in[i] + 1.0f;
}
extern "C" __global__ void add_one(float* p, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}
)";

std::size_t count_wrong(const std::vector<float>& v, float (*expected)(std::size_t)) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) wrong += v[i] != expected(i);
  return wrong;
}

}  // namespace

TEST_CASE("issue 24 (6): programmatic dependent launch gives the results of the same pair without it") {
  const ComputeCapability cc = ctx().device().compute_capability();
  if (cc.major < 9) {
    MESSAGE("compute capability ", cc.major, ".", cc.minor, ": no programmatic dependent launch to test");
    return;
  }
  const Module m = module_from_source(ctx(), kPdl);
  const auto primary = m.kernel<void(float*, unsigned, long long)>("primary");
  const auto secondary = m.kernel<void(const float*, float*, float*, unsigned)>("secondary");
  Stream s(ctx());
  const unsigned n = 1u << 20;
  DeviceBuffer<float> a(ctx(), n), b(ctx(), n), own(ctx(), n);
  for (const bool pdl : {false, true, true, false, true}) {
    INFO("programmatic " << pdl);
    fill(s, a, -1.0f);
    fill(s, b, -1.0f);
    launch(s, primary, {.grid = n / 256, .block = 256}, a, n, 20000LL);
    launch(s, secondary, {.grid = n / 256, .block = 256, .programmatic = pdl}, a, b, own, n);
    std::vector<float> out(n), mine(n);
    copy(s, out, b);
    copy(s, mine, own);
    CHECK(count_wrong(out, [](std::size_t i) { return 2.0f * static_cast<float>(i) + 1.0f; }) == 0);
    CHECK(count_wrong(mine, [](std::size_t) { return 5.0f; }) == 0);
  }
}

TEST_CASE("issue 24 (6): a programmatic event lets another stream go on; priority and the access-policy window") {
  const Device dev = ctx().device();
  const Module m = module_from_source(ctx(), kPdl);
  const auto primary = m.kernel<void(float*, unsigned, long long)>("primary");
  const auto add_one = m.kernel<void(float*, unsigned)>("add_one");
  const unsigned n = 1u << 20;
  DeviceBuffer<float> a(ctx(), n), c(ctx(), n);
  Stream s1(ctx()), s2(ctx());
  if (dev.compute_capability().major >= 9) {
    Event trigger(ctx(), {.timing = false});
    fill(c, 0.0f);
    launch(s1, primary, {.grid = n / 256, .block = 256, .programmatic_event = {.event = trigger}}, a, n, 20000LL);
    s2.wait(trigger);
    launch(s2, add_one, {.grid = n / 256, .block = 256}, c, n);
    s1.synchronize();
    s2.synchronize();
    std::vector<float> out(n);
    copy(out, c);
    CHECK(count_wrong(out, [](std::size_t) { return 1.0f; }) == 0);
    copy(out, a);
    CHECK(count_wrong(out, [](std::size_t i) { return 2.0f * static_cast<float>(i); }) == 0);
  }
  // Priority: the context's most urgent, and the least.
  const StreamPriorityRange range = ctx().stream_priority_range();
  MESSAGE("stream priorities: least ", range.least, ", greatest ", range.greatest);
  fill(c, 0.0f);
  launch(s1, add_one, {.grid = n / 256, .block = 256, .priority = range.greatest}, c, n);
  launch(s1, add_one, {.grid = n / 256, .block = 256, .priority = range.least}, c, n);
  std::vector<float> out(n);
  copy(s1, out, c);
  CHECK(count_wrong(out, [](std::size_t) { return 2.0f; }) == 0);
  // The access-policy window, with some persisting L2 set aside.
  const int most = dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
  const int persisting = dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
  MESSAGE("access-policy window: at most ", most, " bytes; persisting L2 at most ", persisting, " bytes");
  if (most <= 0 || persisting <= 0) return;
  set_limit(ctx(), Limit::persisting_l2_cache_size, static_cast<std::size_t>(persisting) / 2);
  const AccessPolicyWindow w = AccessPolicyWindow::over(c, 0.6f);
  set_access_policy_window(s1, w);
  const AccessPolicyWindow back = access_policy_window(s1);
  CHECK(back.num_bytes == w.num_bytes);
  CHECK(back.base == w.base);
  MESSAGE("the stream's window read back: hit ratio ", back.hit_ratio, ", hit ", static_cast<int>(back.hit), ", miss ",
          static_cast<int>(back.miss));
  launch(s1, add_one, {.grid = n / 256, .block = 256}, c, n);
  launch(s1, add_one, {.grid = n / 256, .block = 256, .access_policy = AccessPolicyWindow::over(c.subspan(0, n / 2))},
         c, n);
  copy(s1, out, c);
  CHECK(count_wrong(out, [](std::size_t) { return 4.0f; }) == 0);
  set_access_policy_window(s1, {});
  CHECK(access_policy_window(s1).empty());
  try {
    launch(s1, add_one,
           {.grid = n / 256, .block = 256,
            .access_policy = {c.device_ptr(), static_cast<std::size_t>(most) + (std::size_t{1} << 20)}},
           c, n);
    s1.synchronize();
    FAIL("a window larger than the device's maximum was accepted");
  } catch (const Error& e) {
    MESSAGE("a window over the maximum: ", std::string(e.what()));
  }
  set_limit(ctx(), Limit::persisting_l2_cache_size, 0);
}

TEST_CASE("issue 24 (6): a graph's kernel node with priority, a window and a cluster") {
  const Module m = module_from_source(ctx(), kPdl);
  const auto add_one = m.kernel<void(float*, unsigned)>("add_one");
  const unsigned n = 1u << 16;
  DeviceBuffer<float> c(ctx(), n);
  fill(c, 0.0f);
  Stream s(ctx());
  Graph g{ctx()};
  const bool clusters = ctx().device().compute_capability().major >= 9;
  const GraphNode k1 = g.add_kernel({}, add_one,
                                    {.grid = n / 256, .block = 256, .cluster = clusters ? Dim3{2} : Dim3{0, 0, 0},
                                     .priority = ctx().stream_priority_range().greatest},
                                    c, n);
  (void)g.add_kernel(k1, add_one, {.grid = n / 256, .block = 256, .access_policy = AccessPolicyWindow::over(c)}, c, n);
  GraphExec exec(g);
  for (int i = 0; i < 3; ++i) exec.launch(s);
  std::vector<float> out(n);
  copy(s, out, c);
  CHECK(count_wrong(out, [](std::size_t) { return 6.0f; }) == 0);
}
