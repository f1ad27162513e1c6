// The GPU suite, part: virtual memory (issue 25, capability 4) on a real
// driver. A range reserved, physical memory mapped into it with access set,
// copies and a kernel through it; a GrowableBuffer that grows twice in
// place; the driver's own refusals that oxicuda's checks stand in front of;
// and one allocation shared with a child process: the parent exports it as
// a POSIX file descriptor and runs this binary again (/proc/<pid>/exe with a
// doctest filter naming the test case) with the descriptor inherited and
// its number in OXICUDA_GPU_VMM_CHILD; the child imports, maps, checks the
// parent's values and writes its own; the parent checks those.
#include <doctest/doctest.h>

#include "gpu_common.hpp"
#include "two_stream_check.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace oxicuda;
using gpu::ctx;

namespace {

constexpr const char* kChildCase = "issue 25 (4): one allocation shared with a child process by POSIX file descriptor";

bool vmm_supported() {
  return ctx().device().attribute(ffi::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0;
}

bool fd_supported() {
  return vmm_supported() &&
         ctx().device().attribute(ffi::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0;
}

Function double_kernel() {
  static Module m = Module::from_ptx(ctx(), oxicuda_examples::kDoublePtx);
  return m.function("dbl");
}

// The child's part: import what the parent exported, map it, check the
// parent's values, write new ones.
void child(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  REQUIRE(colon != std::string::npos);
  const int fd = std::stoi(spec.substr(0, colon));
  const std::size_t bytes = std::stoull(spec.substr(colon + 1));
  const PhysicalMemory memory = import_fd(ctx(), fd, bytes);
  ::close(fd);
  // Driver 580 (H100) names no handle type in an imported handle's
  // properties: this process cannot export it again.
  CHECK_FALSE(memory.exportable_as(ExportKind::posix_fd));
  const VirtualRange range = VirtualRange::reserve(ctx(), bytes);
  const Mapping mapping(range, 0, memory);
  std::vector<unsigned> host(bytes / sizeof(unsigned));
  copy(host, mapping.span<unsigned>());
  std::vector<unsigned> expected(host.size());
  std::iota(expected.begin(), expected.end(), 0u);
  CHECK(host == expected);
  fill(mapping.span<unsigned>(), 77u);
  MESSAGE("issue 25 (4) child ", ::getpid(), ": imported ", bytes, " bytes from descriptor ", fd, ", mapped at ",
          mapping.device_ptr(), ", read the parent's values, wrote 77s");
}

}  // namespace

TEST_CASE("issue 25 (4): reserve, create, map, set access; copies and a kernel through the mapping; unmap and release") {
  if (!vmm_supported()) {
    MESSAGE("skipped: the device has no virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
    return;
  }
  const Device dev = ctx().device();
  const std::size_t g = allocation_granularity(dev);
  const std::size_t recommended = allocation_granularity(dev, {}, Granularity::recommended);
  MESSAGE("issue 25 (4): allocation granularity ", g, " bytes (recommended ", recommended, ")");
  CHECK(g > 0);
  CHECK(recommended % g == 0);
  const VirtualRange range = VirtualRange::reserve(ctx(), 4 * g);
  CHECK(range.address() % g == 0);
  Mapping mapping;
  {
    const PhysicalMemory memory = PhysicalMemory::create(ctx(), 2 * g);
    mapping = Mapping(range, g, memory);
  }  // released: the mapping keeps the memory
  CHECK(mapping.access(dev) == MemoryAccess::read_write);
  const std::size_t n = mapping.size() / sizeof(float);
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 0.0f);
  copy(mapping.span<float>(), host);
  Stream s(ctx());
  launch(s, double_kernel(), static_cast<unsigned>((n + 255) / 256), 256, 0, mapping.device_ptr(),
         static_cast<unsigned>(n));
  std::vector<float> back(n);
  copy(s, back, mapping.span<float>());
  for (std::size_t i = 0; i < n; ++i) host[i] *= 2.0f;
  CHECK(back == host);

  // The checks oxicuda makes first, and the driver's own refusals.
  const PhysicalMemory more = PhysicalMemory::create(ctx(), g);
  CHECK(gpu::raised_by([&] { Mapping m(range, g / 2, more); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(gpu::raised_by([&] { (void)PhysicalMemory::create(ctx(), g + 4096); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  const Error over = gpu::raised_by([&] { Mapping m(range, g, more); });  // over the mapping: the driver's
  CHECK(over.call() == "cuMemMap");
  MESSAGE("issue 25 (4): the driver refuses a map over a mapping with ", std::string(over.name()));
  mapping.unmap();
  const Mapping m2(range, 0, more, MemoryAccess::read);
  CHECK(m2.access(dev) == MemoryAccess::read);
}

TEST_CASE("issue 25 (4): a GrowableBuffer grows twice in place and keeps its data; past its range it is an Error") {
  if (!vmm_supported()) {
    MESSAGE("skipped: the device has no virtual memory management");
    return;
  }
  const std::size_t g = allocation_granularity(ctx().device());
  const std::size_t per_chunk = g / sizeof(float);
  GrowableBuffer<float> b(ctx(), 4 * per_chunk, 1000);
  const float* const address = b.data();
  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), 1.0f);
  copy(b, host);
  b.resize(per_chunk + 5);
  b.resize(3 * per_chunk);
  CHECK(b.data() == address);
  CHECK(b.mapping_count() == 3);
  fill(b.subspan(1000), 5.0f);
  Stream s(ctx());
  launch(s, double_kernel(), static_cast<unsigned>((b.size() + 255) / 256), 256, 0, b.device_ptr(),
         static_cast<unsigned>(b.size()));
  std::vector<float> all(b.size());
  copy(s, all, b);
  for (std::size_t i = 0; i < 1000; ++i) CHECK(all[i] == 2.0f * host[i]);
  CHECK(std::count(all.begin() + 1000, all.end(), 10.0f) == static_cast<long>(b.size() - 1000));
  const Error e = gpu::raised_by([&] { b.resize(4 * per_chunk + 1); });
  CHECK(std::string(e.what()).find("runs out of the reserved range") != std::string::npos);
  CHECK(b.size() == 3 * per_chunk);
  CHECK(b.data() == address);
}

TEST_CASE("copy_batch over a GrowableBuffer's two mappings, from a thread with no context current: the copies land") {
  if (!vmm_supported()) {
    MESSAGE("skipped: the device has no virtual memory management");
    return;
  }
  const std::size_t per_chunk = allocation_granularity(ctx().device()) / sizeof(float);
  GrowableBuffer<float> b(ctx(), 2 * per_chunk, per_chunk);
  b.resize(2 * per_chunk);
  REQUIRE(b.mapping_count() == 2);
  DeviceBuffer<float> plain(ctx(), b.size());
  std::vector<float> host(b.size()), back(b.size(), 0.0f), moved(b.size(), 0.0f);
  std::iota(host.begin(), host.end(), 1.0f);
  CUcontext current = reinterpret_cast<CUcontext>(1);
  std::string failure;
  std::thread([&] {  // (a new thread: no context is current there)
    (void)OXICUDA_DRIVER(CtxGetCurrent, &current);
    try {
      const Stream s(ctx());
      copy_batch(s, {{b, host}});
      copy_batch(s, {{plain, b}});
      copy_batch(s, {{back, b}, {moved, plain}});
      s.synchronize();
    } catch (const Error& e) {
      failure = e.what();
    }
  }).join();
  CHECK(current == nullptr);
  CHECK_MESSAGE(failure.empty(), failure);
  CHECK(back == host);
  CHECK(moved == host);
}

TEST_CASE("issue 25 (4): one allocation shared with a child process by POSIX file descriptor") {
  if (const char* spec = std::getenv("OXICUDA_GPU_VMM_CHILD")) {
    child(spec);
    return;
  }
  if (!fd_supported()) {
    MESSAGE("skipped: the device cannot export memory as a POSIX file descriptor "
            "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED or virtual memory management missing)");
    return;
  }
  const std::size_t g = allocation_granularity(ctx().device(), {.exportable = ExportKind::posix_fd});
  const PhysicalMemory memory = PhysicalMemory::create(ctx(), g, {.exportable = ExportKind::posix_fd});
  const VirtualRange range = VirtualRange::reserve(ctx(), g);
  const Mapping mapping(range, 0, memory);
  std::vector<unsigned> host(g / sizeof(unsigned));
  std::iota(host.begin(), host.end(), 0u);
  copy(mapping.span<unsigned>(), host);

  const FileDescriptor fd = export_fd(memory);
  const int inherited = ::dup(fd.get());  // (without close-on-exec, for the child)
  REQUIRE(inherited >= 0);
  const int exit_code =
      gpu::run_self("OXICUDA_GPU_VMM_CHILD=" + std::to_string(inherited) + ":" + std::to_string(g), kChildCase);
  ::close(inherited);
  REQUIRE(exit_code == 0);
  std::vector<unsigned> back(host.size());
  copy(back, mapping.span<unsigned>());
  CHECK(std::count(back.begin(), back.end(), 77u) == static_cast<long>(back.size()));
}
