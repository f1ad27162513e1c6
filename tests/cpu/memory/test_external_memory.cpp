// External memory and semaphores (issue 25, capability 5) on the fake
// driver: memory imported from a descriptor that oxicuda's own VMM export
// made (the fake's only exporter: tests/fake/fake_external.cpp), mapped as
// device buffers that share their bytes with the exported allocation; the
// descriptor's ownership on success (the driver's) and on failure (still the
// caller's); semaphores imported from eventfds (the fake's stand-in for a
// semaphore Vulkan exported), signalled and waited for with values, in
// stream order; bad input refused with a clear Error.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstddef>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

bool says(const Error& e, const char* text) { return std::string(e.what()).find(text) != std::string::npos; }

bool open_fd(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

long open_fds() {
  long n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

FileDescriptor new_eventfd() { return FileDescriptor(::eventfd(0, EFD_CLOEXEC)); }

}  // namespace

TEST_CASE_FIXTURE(StreamTest, "external memory: a VMM export imported, two mapped buffers and the allocation share their bytes") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const long fds_at_start = open_fds();
  {
    const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
    FileDescriptor fd = export_fd(memory);
    const int number = fd.get();
    ExternalMemory ext = ExternalMemory::import_fd(ctx, std::move(fd), g);
    // The driver's now: the FileDescriptor gave it up, and it is still open (the driver closes it).
    CHECK_FALSE(fd);
    CHECK(open_fd(number));
    CHECK(ext);
    CHECK(ext.size() == g);
    CHECK(ext.type() == ExternalMemoryType::opaque_fd);
    CHECK(ext.context() == ctx);
    CHECK(fake.live("external_memory") - at_start.external_memory == 1);

    const std::size_t n = g / sizeof(int);
    DeviceBuffer<int> whole = ext.mapped_buffer<int>(0, n);
    DeviceBuffer<int> half = ext.mapped_buffer<int>(g / 2, n / 2);  // the second half
    CHECK(whole.size() == n);
    CHECK(half.size() == n / 2);
    CHECK(whole.context() == ctx);
    CHECK_FALSE(whole.stream_ordered());
    CHECK(fake.live("memory") - at_start.memory == 2);

    std::vector<int> host(n);
    std::iota(host.begin(), host.end(), 7);
    copy(whole, host);
    std::vector<int> back(n / 2);
    copy(back, half);
    CHECK(std::equal(back.begin(), back.end(), host.begin() + static_cast<long>(n / 2)));
    // And through a VMM mapping of the exported allocation itself.
    const VirtualRange range = VirtualRange::reserve(ctx, g);
    const Mapping mapping(range, 0, memory);
    std::vector<int> through(n);
    copy(through, mapping.span<int>());
    CHECK(through == host);
    fill_async(s, half, 5);
    s.synchronize();
    copy(through, mapping.span<int>());
    CHECK(through[n - 1] == 5);
    CHECK(through[0] == 7);

    // A buffer is freed by cuMemFree; the memory, once, by cuDestroyExternalMemory.
    half.reset();
    CHECK(fake.calls("cuMemFree") == 1);
    ExternalMemory moved = std::move(ext);
    CHECK_FALSE(ext);
    moved.reset();
    CHECK_FALSE(moved);
    moved.reset();
    CHECK(fake.calls("cuDestroyExternalMemory") == 1);
    CHECK_FALSE(open_fd(number));  // the driver closed it
    // (a mapped buffer must not be used after its memory is gone; it is still freed)
  }
  CHECK(open_fds() == fds_at_start);
}

TEST_CASE_FIXTURE(ContextTest, "external memory: a refused import leaves the descriptor with the caller, closed once") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const long fds_at_start = open_fds();
  {
    // Not a descriptor any exporter made: the driver refuses it, and it is still ours.
    FileDescriptor bogus(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const int number = bogus.get();
    const Error e = error_of([&] { (void)ExternalMemory::import_fd(ctx, std::move(bogus), g); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.call() == "cuImportExternalMemory");
    CHECK(bogus);
    CHECK(bogus.get() == number);
    CHECK(open_fd(number));

    // A real export that the driver fails to import (an injected failure): the same.
    const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
    FileDescriptor fd = export_fd(memory);
    fake.fail("cuImportExternalMemory", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(error_of([&] { (void)ExternalMemory::import_fd(ctx, std::move(fd), g); }).result() ==
          ffi::CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fd);
    // Bigger than the exported memory: refused by the driver, still ours.
    CHECK(error_of([&] { (void)ExternalMemory::import_fd(ctx, std::move(fd), 2 * g); }).result() ==
          ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(fd);
    CHECK(fake.live("external_memory") == at_start.external_memory);
  }
  CHECK(open_fds() == fds_at_start);  // each closed once, by its FileDescriptor
}

TEST_CASE_FIXTURE(ContextTest, "external memory: bad input is an Error naming the rule, before the driver where oxicuda can tell") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
  const ExternalMemory ext = ExternalMemory::import_fd(ctx, export_fd(memory), g);
  const long maps = fake.calls("cuExternalMemoryGetMappedBuffer");

  Error e = error_of([&] { (void)ext.mapped_buffer<int>(g - 8, 4); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(e, "16 bytes at offset 65528 do not lie inside the external memory's 65536 bytes"));
  CHECK(says(error_of([&] { (void)ext.mapped_buffer<int>(g + 4, 0); }), "do not lie inside"));
  CHECK(says(error_of([&] { (void)ext.mapped_buffer<int>(2, 1); }),
             "offset 2 is not a multiple of the element's alignment, 4 bytes"));
  CHECK_THROWS_AS((void)ext.mapped_buffer<int>(0, std::size_t(-1) / 2), Error);  // bytes overflow
  CHECK(fake.calls("cuExternalMemoryGetMappedBuffer") == maps);
  // No element: an empty buffer, the driver not asked.
  const DeviceBuffer<int> none = ext.mapped_buffer<int>(g, 0);
  CHECK(none.empty());
  CHECK(fake.calls("cuExternalMemoryGetMappedBuffer") == maps);

  const ExternalMemory empty;
  CHECK(says(error_of([&] { (void)empty.mapped_buffer<int>(0, 1); }), "oxicuda::ExternalMemory"));
  FileDescriptor nothing;
  CHECK(says(error_of([&] { (void)ExternalMemory::import_fd(ctx, std::move(nothing), g); }),
             "the FileDescriptor is empty"));
  FileDescriptor fd = export_fd(memory);
  CHECK(says(error_of([&] { (void)ExternalMemory::import_fd(ctx, std::move(fd), g, ExternalMemoryType::d3d12_heap); }),
             "opaque_fd or dmabuf_fd only"));
  CHECK(says(error_of([&] { (void)ExternalMemory::import_fd(ctx, std::move(fd), 0); }), "a size of 0 bytes"));
  CHECK(says(error_of([&] {
               (void)ExternalMemory::import_fd(ctx, std::move(fd), g, ExternalMemoryType::dmabuf_fd, {.dedicated = true});
             }),
             "a dma_buf takes no flags"));
  CHECK(says(error_of([&] { (void)ExternalMemory::import_fd(Context(), std::move(fd), g); }), "oxicuda::Context"));
  CHECK(fd);  // refused before the driver: still ours
  CHECK(says(error_of([&] { (void)ExternalMemory::import_win32(ctx, ExternalMemoryType::opaque_fd, &fd, nullptr, g); }),
             "Win32 and Direct3D types only"));
  CHECK(says(error_of([&] { (void)ExternalMemory::import_win32(ctx, ExternalMemoryType::opaque_win32, nullptr, nullptr, g); }),
             "exactly one of a handle and a name"));
  CHECK(says(error_of([&] { (void)ExternalMemory::import_nvscibuf(ctx, nullptr, g); }), "a null NvSciBufObj"));
  CHECK(fake.calls("cuImportExternalMemory") == 1);
  // A Win32 handle on Linux: the driver's refusal.
  int dummy = 0;
  CHECK(error_of([&] { (void)ExternalMemory::import_win32(ctx, ExternalMemoryType::opaque_win32, &dummy, nullptr, g); })
            .result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  // The dedicated flag reaches the driver (the fake takes it).
  const ExternalMemory dedicated = ExternalMemory::import_fd(ctx, std::move(fd), g, ExternalMemoryType::opaque_fd,
                                                             {.dedicated = true});
  CHECK(dedicated);
}

TEST_CASE_FIXTURE(StreamTest, "external semaphores: a timeline semaphore signalled and waited for with values, in stream order") {
  const long fds_at_start = open_fds();
  {
    FileDescriptor fd = new_eventfd();
    const int number = fd.get();
    ExternalSemaphore sem = ExternalSemaphore::import_fd(ctx, std::move(fd), ExternalSemaphoreType::timeline_fd);
    CHECK_FALSE(fd);
    CHECK(open_fd(number));
    CHECK(sem.type() == ExternalSemaphoreType::timeline_fd);
    CHECK(fake.live("external_semaphore") - at_start.external_semaphore == 1);
    unsigned long long value = 0;
    long blocked = 0;

    sem.signal(s, 5);
    REQUIRE(fake.semaphore(sem.raw(), &value, &blocked) == 0);
    CHECK(value == 5);
    sem.wait(s, 5);
    sem.wait(s, 3);
    REQUIRE(fake.semaphore(sem.raw(), &value, &blocked) == 0);
    CHECK(blocked == 0);
    sem.wait(s, 6);  // a device would hold the stream here
    REQUIRE(fake.semaphore(sem.raw(), &value, &blocked) == 0);
    CHECK(blocked == 1);

    // In stream order: behind held work, the signal waits with it.
    fake.hold(s.raw(), 1);
    sem.signal(s, 9);
    REQUIRE(fake.semaphore(sem.raw(), &value, &blocked) == 0);
    CHECK(value == 5);
    s.synchronize();
    REQUIRE(fake.semaphore(sem.raw(), &value, &blocked) == 0);
    CHECK(value == 9);
    fake.hold(nullptr, 0);

    ExternalSemaphore moved = std::move(sem);
    CHECK_FALSE(sem);
    CHECK(says(error_of([&] { sem.signal(s, 1); }), "oxicuda::ExternalSemaphore"));
    CHECK(says(error_of([&] { sem.wait(s, 1); }), "oxicuda::ExternalSemaphore"));
    moved.reset();
    moved.reset();
    CHECK(fake.calls("cuDestroyExternalSemaphore") == 1);
    CHECK_FALSE(open_fd(number));
  }
  CHECK(open_fds() == fds_at_start);
}

TEST_CASE_FIXTURE(StreamTest, "external semaphores: a batch of any size in one call, a binary semaphore, refusals") {
  std::vector<ExternalSemaphore> sems;
  for (int i = 0; i < 20; ++i)
    sems.push_back(ExternalSemaphore::import_fd(ctx, new_eventfd(), ExternalSemaphoreType::timeline_fd));
  std::vector<SemaphoreValue> values;
  for (int i = 0; i < 20; ++i) values.push_back({sems[static_cast<std::size_t>(i)], 100ull + static_cast<unsigned>(i)});
  signal_all(s, values);
  CHECK(fake.calls("cuSignalExternalSemaphoresAsync") == 1);  // 20 in one call
  unsigned long long value = 0;
  long blocked = 0;
  REQUIRE(fake.semaphore(sems[19].raw(), &value, &blocked) == 0);
  CHECK(value == 119);
  wait_all(s, values);
  CHECK(fake.calls("cuWaitExternalSemaphoresAsync") == 1);
  REQUIRE(fake.semaphore(sems[19].raw(), &value, &blocked) == 0);
  CHECK(blocked == 0);
  signal_all(s, std::span(values).first(16));  // (on the stack, as 20 were on the heap)
  CHECK(fake.calls("cuSignalExternalSemaphoresAsync") == 2);
  signal_all(s, {});  // nothing to signal: no call
  CHECK(fake.calls("cuSignalExternalSemaphoresAsync") == 2);

  // An empty one among them: an Error before any is signalled.
  const ExternalSemaphore empty;
  const SemaphoreValue with_empty[] = {{sems[0], 500}, {empty, 1}};
  CHECK(says(error_of([&] { signal_all(s, with_empty); }), "oxicuda::ExternalSemaphore"));
  REQUIRE(fake.semaphore(sems[0].raw(), &value, &blocked) == 0);
  CHECK(value == 100);

  // A binary semaphore: a signal, then one wait consumes it.
  const ExternalSemaphore binary = ExternalSemaphore::import_fd(ctx, new_eventfd());
  binary.signal(s);
  binary.wait(s);
  binary.wait(s);
  REQUIRE(fake.semaphore(binary.raw(), &value, &blocked) == 0);
  CHECK(blocked == 1);

  // Refused: a descriptor that is no semaphore (still ours), a Win32 handle on Linux, bad input.
  FileDescriptor bogus(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  CHECK(error_of([&] { (void)ExternalSemaphore::import_fd(ctx, std::move(bogus)); }).result() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(bogus);
  int dummy = 0;
  CHECK(error_of([&] {
          (void)ExternalSemaphore::import_win32(ctx, ExternalSemaphoreType::d3d12_fence, &dummy, nullptr);
        }).result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(says(error_of([&] { (void)ExternalSemaphore::import_fd(ctx, std::move(bogus), ExternalSemaphoreType::d3d12_fence); }),
             "opaque_fd or timeline_fd only"));
  CHECK(says(error_of([&] { (void)ExternalSemaphore::import_win32(ctx, ExternalSemaphoreType::timeline_fd, &dummy, nullptr); }),
             "Win32, Direct3D or keyed-mutex type only"));
  CHECK(says(error_of([&] { (void)ExternalSemaphore::import_nvscisync(ctx, nullptr); }), "a null NvSciSyncObj"));
  CHECK(says(error_of([&] { binary.wait(s, 1, std::chrono::milliseconds(-1)); }), "a timeout below 0"));
  CHECK(says(error_of([&] { binary.signal(Stream(), 1); }), "oxicuda::Stream"));

  // A keyed mutex's value is its key (and the wait's timeout goes with it); a fence's, its value.
  using Signal = ffi::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS;
  using Wait = ffi::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS;
  const auto w = detail::semaphore_params<Wait>(ExternalSemaphoreType::d3d11_keyed_mutex, 3, nullptr, 250);
  CHECK(w.params.keyedMutexKey == 3);
  CHECK(w.params.keyedMutexTimeoutMs == 250);
  CHECK(w.params.fenceValue == 0);
  CHECK(detail::semaphore_params<Signal>(ExternalSemaphoreType::d3d12_fence, 4, nullptr).params.fenceValue == 4);
  CHECK(detail::semaphore_params<Signal>(ExternalSemaphoreType::d3d11_keyed_mutex_kmt, 4, nullptr)
            .params.keyedMutexKey == 4);
  // An NvSciSync semaphore's is its fence (the driver fills it on a signal, reads it on a wait).
  int fence = 0;
  const auto sci = detail::semaphore_params<Signal>(ExternalSemaphoreType::nvscisync, 4, &fence);
  CHECK(sci.params.nvSciSync.fence == &fence);
  CHECK(sci.params.fenceValue == 0);
  CHECK(detail::semaphore_params<Wait>(ExternalSemaphoreType::nvscisync, 4, &fence).params.nvSciSync.fence == &fence);
}
