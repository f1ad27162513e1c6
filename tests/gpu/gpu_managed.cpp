// The GPU suite, part: issue 23's managed memory, limits, registered host
// memory and pointer queries on a real driver.
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

using namespace oxicuda;
using gpu::ctx;

namespace {

const char* const kSaxpy = R"(
extern "C" __global__ void affine(float* y, const float* x, float a, float b, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
extern "C" __global__ void bump(int* p, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1000;
}
)";

}  // namespace

TEST_CASE("issue 23 (2): managed memory with advice and prefetch, against a CPU reference") {
  Stream s(ctx());
  const Device dev = ctx().device();
  const bool concurrent = dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0;
  MESSAGE("concurrent managed access: ", concurrent);
  const Module m = module_from_source(ctx(), kSaxpy);
  const auto affine = m.kernel<void(float*, const float*, float, float, unsigned)>("affine");
  const unsigned n = (1u << 22) + 5;
  ManagedBuffer<float> x(ctx(), n), y(ctx(), n);
  for (unsigned i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.5f;  // the host writes in place
  advise(x, Advice::set_read_mostly, MemoryLocation::device(dev));
  advise(y, Advice::set_preferred_location, MemoryLocation::device(dev));
  advise(y, Advice::set_accessed_by, MemoryLocation::device(dev));
  if (concurrent) {
    prefetch_async(s, x, MemoryLocation::device(dev));
    prefetch_async(s, y, MemoryLocation::device(dev));
  }
  launch(s, affine, {.grid = (n + 255) / 256, .block = 256}, y, x, 3.0f, -1.0f, n);
  if (concurrent) prefetch_async(s, y, MemoryLocation::host());
  s.synchronize();
  std::size_t wrong = 0;
  for (unsigned i = 0; i < n; ++i) wrong += y[i] != 3.0f * (static_cast<float>(i % 1000) * 0.5f) - 1.0f;
  CHECK(wrong == 0);
  // Copies and fills take it as a device range.
  fill(y.subspan(0, 10), 9.0f);
  std::vector<float> back(10);
  copy(back, y.subspan(0, 10));
  CHECK(back[9] == 9.0f);
  CHECK(y[0] == 9.0f);
  // Not managed: the driver refuses a prefetch.
  DeviceBuffer<float> plain(ctx(), 16);
  CHECK_THROWS_AS(prefetch_async(s, plain, MemoryLocation::host()), Error);
  // Attached to the host at first.
  ManagedBuffer<int> h(ctx(), 64, {.attach = Attach::host});
  std::iota(h.begin(), h.end(), 0);
  CHECK(h[63] == 63);
}

TEST_CASE("issue 23 (4): limits on the real driver; a kernel's printf above the default FIFO arrives whole") {
  Context fresh = Context::create(ctx().device());  // (the FIFO is set before any printf kernel runs there)
  const std::size_t fifo = get_limit(fresh, Limit::printf_fifo_size);
  MESSAGE("defaults: stack ", get_limit(fresh, Limit::stack_size), ", printf FIFO ", fifo, ", malloc heap ",
          get_limit(fresh, Limit::malloc_heap_size), ", pending launches ", get_limit(fresh, Limit::device_runtime_pending_launch_count), ", L2 fetch ",
          get_limit(fresh, Limit::max_l2_fetch_granularity), ", persisting L2 ",
          get_limit(fresh, Limit::persisting_l2_cache_size));
  // Gone on compute capability 9.0: an Error naming it (CUDA_ERROR_UNSUPPORTED_LIMIT on the H100).
  try {
    MESSAGE("sync depth: ", get_limit(fresh, Limit::device_runtime_sync_depth));
  } catch (const Error& e) {
    MESSAGE("sync depth: ", std::string(e.what()));
    CHECK(std::string(e.what()).find("device_runtime_sync_depth") != std::string::npos);
  }
  set_limit(fresh, Limit::stack_size, 1000);
  MESSAGE("stack 1000 reads back as ", get_limit(fresh, Limit::stack_size));
  CHECK(get_limit(fresh, Limit::stack_size) >= 1000);
  set_limit(fresh, Limit::printf_fifo_size, 64u << 20);
  CHECK(get_limit(fresh, Limit::printf_fifo_size) >= 64u << 20);
  set_limit(fresh, Limit::malloc_heap_size, 32u << 20);
  CHECK(get_limit(fresh, Limit::malloc_heap_size) >= 32u << 20);
  // A read-only limit: an Error naming it.
  try {
    set_limit(fresh, Limit::shared_memory_size, 4096);
    MESSAGE("setting shared_memory_size was accepted");
  } catch (const Error& e) {
    MESSAGE("setting shared_memory_size: ", std::string(e.what()));
    CHECK(std::string(e.what()).find("shared_memory_size") != std::string::npos);
  }
  set_cache_config(fresh, CacheConfig::prefer_shared);
  MESSAGE("cache config after prefer_shared: ", static_cast<int>(get_cache_config(fresh)));

  // (NVRTC declares the device printf itself: no include, and none on its search path.)
  const char* const source = R"(
extern "C" __global__ void talk(unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) printf("line %u %u %u %u %u %u\n", i, i + 1, i + 2, i + 3, i + 4, i + 5);
}
)";
  const Module m = module_from_source(fresh, source);
  const Function talk_fn = m.function("talk");
  talk_fn.set_cache_config(CacheConfig::prefer_l1);
  talk_fn.set_shared_memory_carveout(25);
  const unsigned n = 200000;  // ~ 200000 records of 7 arguments: well past the 1 MiB default
  Stream s(fresh);
  // Device printf writes to the process's stdout: into a file for the count.
  char path[] = "/tmp/oxicuda-printf-XXXXXX";
  const int file = mkstemp(path);
  REQUIRE(file >= 0);
  std::fflush(stdout);
  const int saved = dup(1);
  dup2(file, 1);
  launch(s, m.kernel<void(unsigned)>("talk"), {.grid = (n + 255) / 256, .block = 256}, n);
  s.synchronize();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.rfind("line ", 0) == 0;
  std::remove(path);
  CHECK(lines == n);
}

TEST_CASE("issue 23 (7): registered host memory, mapped, written by a kernel in place and copied at full speed") {
  const Module m = module_from_source(ctx(), kSaxpy);
  std::vector<int> host(4096);
  std::iota(host.begin(), host.end(), 0);
  {
    HostRegistration<int> reg(ctx(), std::span<int>(host), {.device_map = true});
    REQUIRE(reg.mapped());
    Stream s(ctx());
    launch(s, m.kernel<void(int*, unsigned)>("bump"), {.grid = 16, .block = 256}, reg.mapped_span(), 4096u);
    s.synchronize();
    CHECK(host[0] == 1000);
    CHECK(host[4095] == 5095);
    DeviceBuffer<int> dev(ctx(), 4096);
    copy_async(s, dev, reg);
    s.synchronize();
    std::vector<int> back(4096);
    copy(back, dev);
    CHECK(back[17] == 1017);
    CHECK_THROWS_WITH_AS(HostRegistration<int>(ctx(), std::span<int>(host).subspan(100, 10)),
                         doctest::Contains("registered already"), Error);
    const PointerInfo info = pointer_info(host.data() + 5);
    CHECK(info.type == MemoryType::host);
    CHECK(info.range_start == reinterpret_cast<std::uintptr_t>(host.data()));
    CHECK(info.range_size == 4096 * sizeof(int));
  }
  // Unregistered: unknown to the driver again, and registrable again.
  CHECK(!pointer_info(host.data()).known());
  CHECK_NOTHROW(HostRegistration<int>(ctx(), std::span<int>(host)));
}

TEST_CASE("issue 23 (8): pointer queries on the real driver") {
  DeviceBuffer<int> dev(ctx(), 256);
  PinnedBuffer<int> pinned(ctx(), 256);
  ManagedBuffer<int> managed(ctx(), 256);
  std::vector<int> plain(256);
  const PointerInfo d = pointer_info(dev.subspan(8));
  CHECK(d.type == MemoryType::device);
  CHECK(!d.managed);
  CHECK(d.device == ctx().device().raw());
  CHECK(d.context == ctx());
  CHECK(d.range_start == dev.device_ptr());
  CHECK(d.range_size >= 256 * sizeof(int));
  CHECK(d.device_ptr == dev.device_ptr() + 8 * sizeof(int));
  CHECK(d.buffer_id != 0);
  MESSAGE("device: host_ptr ", d.host_ptr, ", mapped ", d.mapped, ", range size ", d.range_size);
  const PointerInfo p = pointer_info(pinned.data());
  CHECK(p.type == MemoryType::host);
  CHECK(p.host_ptr == pinned.data());
  CHECK(p.buffer_id != d.buffer_id);
  MESSAGE("pinned: device_ptr ", p.device_ptr, ", context ", p.context.raw(), ", device ", p.device);
  const PointerInfo mg = pointer_info(managed);
  CHECK(mg.managed);
  CHECK(mg.device_ptr == managed.device_ptr());
  MESSAGE("managed: type ", static_cast<int>(mg.type), ", host_ptr ", mg.host_ptr, ", device ", mg.device);
  const PointerInfo none = pointer_info(plain.data());
  CHECK(!none.known());
  CHECK(none.device == -1);
}

TEST_CASE("issue 23 (1): peer access; with one GPU, only what one GPU can show") {
  const std::vector<Device> all = Device::all();
  CHECK(static_cast<int>(all.size()) == Device::count());
  CHECK(!can_access_peer(all[0], all[0]));
  try {
    enable_peer_access(ctx(), ctx());
    FAIL("peer access from a context to itself was accepted");
  } catch (const Error& e) {
    MESSAGE("peer access to itself: ", std::string(e.what()));
  }
  if (all.size() < 2) {
    MESSAGE("one GPU: peer access between two devices is not verified here");
    return;
  }
  Context c1 = Context::primary(all[1]);
  MESSAGE("0 -> 1: can access ", can_access_peer(all[0], all[1]), ", rank ", peer_attributes(all[0], all[1]).performance_rank);
  if (can_access_peer(all[0], all[1])) {
    enable_peer_access(ctx(), c1);
    CHECK_NOTHROW(enable_peer_access(ctx(), c1));
  }
  std::vector<int> host(1 << 20);
  std::iota(host.begin(), host.end(), 0);
  DeviceBuffer<int> a(ctx(), host.size()), b(c1, host.size());
  copy(a, host);
  Stream s1(c1);
  copy_peer_async(s1, b, a);
  Event done(c1);
  s1.record(done);
  Stream s0(ctx());
  s0.wait(done);  // a stream on device 0 waits for an event of device 1
  fill_async(s0, a, 0);
  copy_peer_async(s0, a, b);
  std::vector<int> back(host.size());
  copy(s0, back, a);
  CHECK(back == host);
  if (can_access_peer(all[0], all[1])) disable_peer_access(ctx(), c1);
}

TEST_CASE("issue 23 (11): DevicePool over the real devices, work spread in turn and waited for") {
  const DevicePool pool = DevicePool::all();
  CHECK(static_cast<int>(pool.size()) == Device::count());
  std::vector<DeviceBuffer<int>> parts;
  std::vector<Module> modules;
  for (const PoolMember& member : pool) modules.push_back(module_from_source(member.context, kSaxpy));
  const unsigned n = 1 << 16;
  for (int chunk = 0; chunk < 8; ++chunk) {
    const PoolMember& member = pool.next();
    const std::size_t i = static_cast<std::size_t>(&member - &pool[0]);
    parts.emplace_back(member.context, n);
    fill_async(member.stream, parts.back(), chunk);
    launch(member.stream, modules[i].kernel<void(int*, unsigned)>("bump"), {.grid = n / 256, .block = 256}, parts.back(), n);
  }
  pool.synchronize();
  std::vector<int> host(n);
  for (std::size_t chunk = 0; chunk < parts.size(); ++chunk) {
    copy(host, parts[chunk]);
    CHECK(host[n - 1] == static_cast<int>(chunk) + 1000);
  }
  MESSAGE("most free memory: device ", pool.most_free_memory().device.raw());
}
