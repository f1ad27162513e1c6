// The GPU suite, part: external memory and semaphores (issue 25,
// capability 5) on a real driver. No Vulkan on the GPU machine, and CUDA
// cannot export a semaphore itself: the only exporter at hand is oxicuda's
// own virtual memory (export_fd). So:
//   - a VMM allocation exported as a POSIX file descriptor is imported as
//     OPAQUE_FD external memory and mapped as a buffer; bytes written
//     through the VMM mapping are read through the buffer, and the other way
//     round, and a kernel doubles them in place through the buffer. Whether
//     driver 580 accepts a VMM export as OPAQUE_FD external memory is not
//     documented: a refusal fails the test, printing the driver's error;
//   - the same across processes: a child (this binary again, the descriptor
//     inherited) imports it as external memory, checks, writes;
//   - semaphores: only the refusals can be tried (a descriptor that is no
//     semaphore is refused with a clear Error, and stays the caller's).
//     Signal and wait against a real Vulkan semaphore are NOT tested.
#include <doctest/doctest.h>

#include "gpu_common.hpp"
#include "two_stream_check.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

using namespace oxicuda;
using gpu::ctx;

namespace {

constexpr const char* kChildCase = "issue 25 (5): a VMM export imported as external memory in a child process";

bool fd_supported() {
  return ctx().device().attribute(ffi::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0 &&
         ctx().device().attribute(ffi::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0;
}

// The import, or a failed test that prints the driver's refusal in full.
ExternalMemory import_or_fail(FileDescriptor&& fd, std::size_t bytes) {
  try {
    return ExternalMemory::import_fd(ctx(), std::move(fd), bytes);
  } catch (const Error& e) {
    FAIL("the driver refused a VMM allocation exported with cuMemExportToShareableHandle "
         "(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) as CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD external memory: "
         << std::string(e.what()));
  }
  return {};
}

void child(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  REQUIRE(colon != std::string::npos);
  const int fd = std::stoi(spec.substr(0, colon));
  const std::size_t bytes = std::stoull(spec.substr(colon + 1));
  const ExternalMemory ext = import_or_fail(FileDescriptor(fd), bytes);  // the driver takes the descriptor
  DeviceBuffer<unsigned> buffer = ext.mapped_buffer<unsigned>(0, bytes / sizeof(unsigned));
  std::vector<unsigned> host(buffer.size());
  copy(host, buffer);
  std::vector<unsigned> expected(host.size());
  std::iota(expected.begin(), expected.end(), 0u);
  CHECK(host == expected);
  fill(buffer, 77u);
  MESSAGE("issue 25 (5) child ", ::getpid(), ": imported ", bytes, " bytes as external memory from descriptor ", fd,
          ", read the parent's values, wrote 77s");
}

}  // namespace

TEST_CASE("issue 25 (5): a VMM export imported as OPAQUE_FD external memory; the same bytes through both") {
  if (!fd_supported()) {
    MESSAGE("skipped: the device cannot export memory as a POSIX file descriptor");
    return;
  }
  REQUIRE(external_memory_available());
  const std::size_t g = allocation_granularity(ctx().device(), {.exportable = ExportKind::posix_fd});
  const PhysicalMemory memory = PhysicalMemory::create(ctx(), 2 * g, {.exportable = ExportKind::posix_fd});
  const VirtualRange range = VirtualRange::reserve(ctx(), 2 * g);
  const Mapping mapping(range, 0, memory);
  const std::size_t n = 2 * g / sizeof(float);
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 1.0f);
  copy(mapping.span<float>(), host);

  FileDescriptor fd = export_fd(memory);
  const int number = fd.get();
  const ExternalMemory ext = import_or_fail(std::move(fd), 2 * g);
  CHECK_FALSE(fd);  // the driver's now
  MESSAGE("issue 25 (5): driver accepted descriptor ", number, " (", 2 * g,
          " bytes) as OPAQUE_FD external memory");
  DeviceBuffer<float> whole = ext.mapped_buffer<float>(0, n);
  DeviceBuffer<float> second = ext.mapped_buffer<float>(g, n / 2);
  std::vector<float> back(n);
  copy(back, whole);
  CHECK(back == host);

  // A kernel doubles the second half through the second buffer; the VMM mapping sees it.
  Stream s(ctx());
  static Module m = Module::from_ptx(ctx(), oxicuda_examples::kDoublePtx);
  launch(s, m.function("dbl"), static_cast<unsigned>((n / 2 + 255) / 256), 256, 0, second.device_ptr(),
         static_cast<unsigned>(n / 2));
  s.synchronize();
  copy(back, mapping.span<float>());
  for (std::size_t i = n / 2; i < n; ++i) host[i] *= 2.0f;
  CHECK(back == host);

  // Out of range: oxicuda's Error, before the driver.
  CHECK(gpu::raised_by([&] { (void)ext.mapped_buffer<float>(g, n); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("issue 25 (5): a VMM export imported as external memory in a child process") {
  if (const char* spec = std::getenv("OXICUDA_GPU_EXTERNAL_CHILD")) {
    child(spec);
    return;
  }
  if (!fd_supported()) {
    MESSAGE("skipped: the device cannot export memory as a POSIX file descriptor");
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
  const int exit_code = gpu::run_self(
      "OXICUDA_GPU_EXTERNAL_CHILD=" + std::to_string(inherited) + ":" + std::to_string(g), kChildCase);
  ::close(inherited);
  REQUIRE(exit_code == 0);
  std::vector<unsigned> back(host.size());
  copy(back, mapping.span<unsigned>());
  CHECK(std::count(back.begin(), back.end(), 77u) == static_cast<long>(back.size()));
}

TEST_CASE("issue 25 (5): a descriptor that is no semaphore (or no memory) is refused with a clear Error, and stays ours") {
  // No Vulkan here and no CUDA export of a semaphore: this is all that can
  // be tried of semaphores on this machine.
  for (const auto type : {ExternalSemaphoreType::opaque_fd, ExternalSemaphoreType::timeline_fd}) {
    FileDescriptor bogus(::eventfd(0, EFD_CLOEXEC));
    REQUIRE(bogus);
    const int number = bogus.get();
    const Error e = gpu::raised_by([&] { (void)ExternalSemaphore::import_fd(ctx(), std::move(bogus), type); });
    CHECK(e.result() != ffi::CUDA_SUCCESS);
    CHECK(e.call() == "cuImportExternalSemaphore");
    CHECK(bogus.get() == number);  // refused: still ours
    CHECK(::fcntl(number, F_GETFD) != -1);
    MESSAGE("issue 25 (5): an eventfd imported as ",
            std::string(type == ExternalSemaphoreType::opaque_fd ? "an OPAQUE_FD" : "a TIMELINE_SEMAPHORE_FD"),
            " semaphore: ", std::string(e.what()));
  }
  FileDescriptor null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(null);
  const Error e = gpu::raised_by([&] { (void)ExternalMemory::import_fd(ctx(), std::move(null), 1 << 20); });
  CHECK(e.call() == "cuImportExternalMemory");
  CHECK(null);
  MESSAGE("issue 25 (5): /dev/null imported as OPAQUE_FD external memory: ", std::string(e.what()));
  int dummy = 0;
  const Error w = gpu::raised_by([&] {
    (void)ExternalSemaphore::import_win32(ctx(), ExternalSemaphoreType::d3d12_fence, &dummy, nullptr);
  });
  MESSAGE("issue 25 (5): a Win32 handle on Linux: ", std::string(w.what()));
}
