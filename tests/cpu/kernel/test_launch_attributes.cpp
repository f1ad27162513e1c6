// Launch attributes (issue 24, item 6) on the fake driver: programmatic
// dependent launch and its event, priority, and the L2 access-policy
// window, on a launch, on a stream and on a graph's kernel node.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>
#include <vector>

using namespace oxicuda;

namespace {
bool mentions(const Error& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }
}  // namespace

TEST_CASE_FIXTURE(LaunchTest, "issue 24 (6): launch attributes reach cuLaunchKernelEx; a plain launch stays cuLaunchKernel") {
  auto dbl = m.kernel<void(float*, unsigned)>("dbl");
  std::vector<float> host(64, 1.0f);
  DeviceBuffer<float> x(ctx, 64);
  copy(x, host);
  launch(s, dbl, {.grid = 1, .block = 64}, x, 64u);
  CHECK(fake.calls("cuLaunchKernel") == 1);
  CHECK(fake.calls("cuLaunchKernelEx") == 0);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PRIORITY) == -1);

  launch(s, dbl, {.grid = 1, .block = 64, .programmatic = true}, x, 64u);
  CHECK(fake.calls("cuLaunchKernelEx") == 1);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) == 1);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PRIORITY) == -1);

  launch(s, dbl, {.grid = 1, .block = 64, .priority = -3}, x, 64u);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PRIORITY) == -3);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) == -1);
  launch(s, dbl, {.grid = 1, .block = 64, .priority = 0}, x, 64u);  // 0 is a priority, not "unset"
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PRIORITY) == 0);

  Event done(ctx, {.timing = false});
  launch(s, dbl,
         {.grid = 1, .block = 64, .programmatic_event = {.event = done, .trigger_at_block_start = true},
          .access_policy = AccessPolicyWindow::over(x, 0.5f)},
         x, 64u);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT) == 2);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) == 256);
  // All at once, with a cluster: six attributes.
  launch(s, dbl,
         {.grid = 2, .block = 32, .cluster = {2}, .programmatic = true, .programmatic_event = {.event = done},
          .priority = -1, .access_policy = AccessPolicyWindow::over(x)},
         x, 64u);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) == 2);
  CHECK(fake.last_launch_attribute(ffi::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT) == 1);
  CHECK(fake.calls("cuLaunchKernelEx") == 5);
  s.synchronize();
  std::vector<float> back(64);
  copy(back, x);
  CHECK(back[0] == 64.0f);  // the kernel ran each time: 1 doubled six times
}

TEST_CASE_FIXTURE(LaunchTest, "issue 24 (6): bad attributes are Errors that say why; the driver's refusals are explained") {
  auto dbl = m.kernel<void(float*, unsigned)>("dbl");
  DeviceBuffer<float> x(ctx, 64);
  const long ex = fake.calls("cuLaunchKernelEx");
  // Checked before the driver sees them.
  Error e = error_of([&] {
    launch(s, dbl, {.grid = 1, .block = 64, .access_policy = AccessPolicyWindow::over(x, 1.5f)}, x, 64u);
  });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(mentions(e, "hit_ratio is 1.5"));
  AccessPolicyWindow persisting_miss = AccessPolicyWindow::over(x);
  persisting_miss.miss = AccessProperty::persisting;
  e = error_of([&] { launch(s, dbl, {.grid = 1, .block = 64, .access_policy = persisting_miss}, x, 64u); });
  CHECK(mentions(e, "miss property is persisting"));
  CHECK(fake.calls("cuLaunchKernelEx") == ex);
  // A window larger than the device's maximum: the driver's Error, with the maximum.
  const AccessPolicyWindow huge{x.device_ptr(), std::size_t{1} << 30};
  e = error_of([&] { launch(s, dbl, {.grid = 1, .block = 64, .access_policy = huge}, x, 64u); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(mentions(e, "an access-policy window of at most 134213632 bytes"));
  // PDL on a device before compute capability 9.0.
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 8);
  e = error_of([&] { launch(s, dbl, {.grid = 1, .block = 64, .programmatic = true}, x, 64u); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(mentions(e, "programmatic dependent launch needs compute capability 9.0 or later"));
  CHECK(mentions(e, "programmatic (PDL)"));
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9);
  // A moved-from event is no programmatic event: the driver's invalid handle.
  Event gone(ctx, {.timing = false});
  const EventRef stale(gone.raw());
  { Event taken = std::move(gone); }
  e = error_of([&] { launch(s, dbl, {.grid = 1, .block = 64, .programmatic_event = {.event = stale}}, x, 64u); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(mentions(e, "a programmatic event"));
}

TEST_CASE_FIXTURE(StreamTest, "issue 24 (6): a stream's access-policy window is set, read and cleared") {
  DeviceBuffer<float> x(ctx, 1024);
  CHECK(access_policy_window(s).empty());
  const AccessPolicyWindow w = AccessPolicyWindow::over(x.subspan(256), 0.75f);
  set_access_policy_window(s, w);
  const AccessPolicyWindow back = access_policy_window(s);
  CHECK(back == w);
  CHECK(back.num_bytes == 768 * sizeof(float));
  CHECK(back.hit == AccessProperty::persisting);
  CHECK(back.miss == AccessProperty::streaming);
  set_access_policy_window(s, {});
  CHECK(access_policy_window(s).empty());
  AccessPolicyWindow bad = w;
  bad.hit_ratio = -0.1f;
  CHECK(error_of([&] { set_access_policy_window(s, bad); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(fake.calls("cuStreamSetAttribute") == 2);
  CHECK(error_of([&] { set_access_policy_window(Stream(), w); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE_FIXTURE(LaunchTest, "issue 24 (6): a graph's kernel node takes priority, a window and a cluster; PDL and updates refuse") {
  auto dbl = m.kernel<void(float*, unsigned)>("dbl");
  DeviceBuffer<float> x(ctx, 64);
  fill(x, 1.0f);
  Graph g{ctx};
  const GraphNode k = g.add_kernel({}, dbl,
                                   {.grid = 2, .block = 32, .cluster = {2}, .priority = -2,
                                    .access_policy = AccessPolicyWindow::over(x)},
                                   x, 64u);
  CHECK(fake.calls("cuGraphKernelNodeSetAttribute") == 3);
  const Error e = error_of([&] { (void)g.add_kernel({}, dbl, {.grid = 1, .block = 64, .programmatic = true}, x, 64u); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(mentions(e, "programmatic dependent launch is an attribute of a launch on a stream"));
  CHECK(g.node_count() == 1);
  GraphExec exec(g);
  exec.launch(s);
  s.synchronize();
  std::vector<float> back(64);
  copy(back, x);
  CHECK(back[63] == 2.0f);
  // Updating the node: its grid and arguments, not its attributes.
  CHECK_NOTHROW(exec.set_kernel(k, dbl, {.grid = 1, .block = 64}, x, 64u));
  const Error u = error_of([&] { exec.set_kernel(k, dbl, {.grid = 1, .block = 64, .priority = 1}, x, 64u); });
  CHECK(u.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(mentions(u, "keeps the launch attributes it was added with"));
}
