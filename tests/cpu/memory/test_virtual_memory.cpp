// Virtual memory (issue 25, capability 4) on the fake driver: reserved
// ranges, physical memory, mappings and their access, GrowableBuffer<T>,
// and memory shared by POSIX file descriptor (with a child process: this
// binary again, the descriptor inherited) or fabric handle. The fake's
// memory is memfds mapped into reserved host ranges (tests/fake/fake_vmm.cpp),
// so two mappings of one allocation share their bytes, here and in a child.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

constexpr const char* kChildCase = "virtual memory: (child process part) an allocation imported from an inherited descriptor";

bool says(const Error& e, const char* text) { return std::string(e.what()).find(text) != std::string::npos; }

long open_fds() {
  long n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace

TEST_CASE_FIXTURE(ContextTest, "virtual memory: reserve, create, map, set access, copy through it, unmap and release") {
  const Device dev = Device::get(0);
  const std::size_t g = allocation_granularity(dev);
  CHECK(g == 64 * 1024);  // the fake's minimum (not the host's page)
  CHECK(allocation_granularity(dev, {}, Granularity::recommended) == 2 * 1024 * 1024);
  CHECK(round_up_to_granularity(1, g) == g);
  CHECK(round_up_to_granularity(2 * g, g) == 2 * g);

  const VirtualRange range = VirtualRange::reserve(ctx, 4 * g);
  CHECK(range);
  CHECK(range.size() == 4 * g);
  CHECK(range.address() % g == 0);
  CHECK(range.granularity() == g);
  CHECK(fake.live("va_range") - at_start.va_range == 1);
  {
    PhysicalMemory memory = PhysicalMemory::create(ctx, 2 * g);
    CHECK(memory.size() == 2 * g);
    CHECK(memory.device() == dev);
    CHECK(memory.granularity() == g);
    CHECK_FALSE(memory.exportable_as(ExportKind::posix_fd));
    CHECK(fake.live("physical") - at_start.physical == 1);

    Mapping mapping(range, g, memory);
    CHECK(mapping.device_ptr() == range.address() + g);
    CHECK(mapping.offset() == g);
    CHECK(mapping.size() == 2 * g);
    CHECK(range.use_count() == 2);  // the mapping holds the range
    CHECK(fake.calls("cuMemMap") == 1);
    CHECK(fake.calls("cuMemSetAccess") == 1);  // given to the memory's device with the mapping
    CHECK(mapping.access(dev) == MemoryAccess::read_write);
    CHECK(fake.live("vmm_mapping") - at_start.vmm_mapping == 1);

    // The driver keeps the memory until its last mapping goes: release it now.
    memory = PhysicalMemory();
    CHECK(fake.calls("cuMemRelease") == 1);
    CHECK(fake.live("physical") - at_start.physical == 0);

    std::vector<int> host(mapping.size() / sizeof(int));
    std::iota(host.begin(), host.end(), 0);
    copy(mapping.span<int>(), host);
    std::vector<int> back(host.size());
    copy(back, mapping.span<int>());
    CHECK(back == host);

    mapping.set_access(dev, MemoryAccess::read);
    CHECK(mapping.access(dev) == MemoryAccess::read);
    Mapping moved = std::move(mapping);
    CHECK_FALSE(mapping);  // NOLINT(bugprone-use-after-move)
    CHECK(moved);
    CHECK(error_of([&] { mapping.set_access(dev, MemoryAccess::read_write); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
    moved.unmap();
    CHECK_FALSE(moved);
    CHECK(fake.calls("cuMemUnmap") == 1);
    CHECK(fake.live("vmm_mapping") - at_start.vmm_mapping == 0);
  }
  CHECK(range.use_count() == 1);
  CHECK(fake.calls("cuMemAddressFree") == 0);
  CHECK(Context::current().raw() == nullptr);  // each call made the context current for itself only
}

TEST_CASE_FIXTURE(ContextTest, "virtual memory: bad input is an Error, before the driver where oxicuda can tell, and leaks nothing") {
  const Device dev = Device::get(0);
  const std::size_t g = allocation_granularity(dev);
  const VirtualRange range = VirtualRange::reserve(ctx, 4 * g);
  const PhysicalMemory memory = PhysicalMemory::create(ctx, g);
  fake.reset();

  // A size that is not a multiple of the granularity.
  Error e = error_of([&] { (void)PhysicalMemory::create(ctx, g + 4096); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(e, "granularity"));
  CHECK(error_of([&] { (void)PhysicalMemory::create(ctx, 0); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { (void)VirtualRange::reserve(ctx, g / 2); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(error_of([&] { (void)VirtualRange::reserve(ctx, g, {.alignment = 3 * g}); }), "power of two"));
  CHECK(fake.calls("cuMemCreate") == 0);
  CHECK(fake.calls("cuMemAddressReserve") == 0);

  // A map that is not aligned to the granularity, or does not fit.
  e = error_of([&] { Mapping m(range, g / 2, memory); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(e, "not aligned to the allocation granularity"));
  CHECK(says(error_of([&] { Mapping m(range, 4 * g, memory); }), "does not fit"));
  CHECK(says(error_of([&] { Mapping m(range, std::size_t(-1) - g + 1, memory); }), "does not fit"));
  CHECK(fake.calls("cuMemMap") == 0);

  // Over a mapping: the driver's Error (the fake's, as documented).
  Mapping first(range, 0, memory);
  e = error_of([&] { Mapping m(range, 0, memory); });
  CHECK(e.call() == "cuMemMap");
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(fake.live("vmm_mapping") - at_start.vmm_mapping == 1);

  // Giving access fails: the mapping is undone before the Error leaves.
  fake.fail("cuMemSetAccess", 1, ffi::CUDA_ERROR_INVALID_DEVICE);
  CHECK(error_of([&] { Mapping m(range, g, memory); }).call() == "cuMemSetAccess");
  CHECK(fake.live("vmm_mapping") - at_start.vmm_mapping == 1);
  CHECK(fake.calls("cuMemUnmap") == 1);
  CHECK(error_of([&] { first.set_access(Device::from_raw(5), MemoryAccess::read); }).result() ==
        ffi::CUDA_ERROR_INVALID_DEVICE);
  CHECK(error_of([&] { first.set_access(dev, static_cast<MemoryAccess>(2)); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);

  // Empty handles.
  CHECK(error_of([&] { Mapping m(VirtualRange(), 0, memory); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { Mapping m(range, g, PhysicalMemory()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)PhysicalMemory::create(Context(), g); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)VirtualRange::reserve(Context(), g); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { (void)export_fd(PhysicalMemory()); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { Mapping().unmap(); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);

  // Export kinds: not made exportable; not supported by the device.
  e = error_of([&] { (void)export_fd(memory); });
  CHECK(says(e, "ExportKind::posix_fd"));
  CHECK(says(error_of([&] { (void)export_fabric(memory); }), "ExportKind::fabric"));
  e = error_of([&] { (void)PhysicalMemory::create(ctx, g, {.exportable = ExportKind::fabric}); });
  CHECK(e.result() == ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(says(e, "HANDLE_TYPE_FABRIC_SUPPORTED"));
  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
  CHECK(error_of([&] { (void)PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd}); }).result() ==
        ffi::CUDA_ERROR_NOT_SUPPORTED);
  CHECK(error_of([&] { (void)import_fd(ctx, -1, g); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(fake.calls("cuMemCreate") == 0);
  CHECK(fake.calls("cuMemExportToShareableHandle") == 0);
  CHECK(fake.calls("cuMemImportFromShareableHandle") == 0);
  // A descriptor the driver did not export: the driver's Error, and nothing kept.
  const int not_memory = ::open("/dev/null", O_RDONLY);
  CHECK(error_of([&] { (void)import_fd(ctx, not_memory, g); }).call() == "cuMemImportFromShareableHandle");
  ::close(not_memory);
  CHECK(fake.live("physical") - at_start.physical == 1);
  CHECK(Context::current().raw() == nullptr);
}

TEST_CASE_FIXTURE(ContextTest, "GrowableBuffer: grows in place twice, keeps its data and address, and running out of its range changes nothing") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const std::size_t per_chunk = g / sizeof(int);
  GrowableBuffer<int> b(ctx, 3 * per_chunk + 10, 100);
  CHECK(b.size() == 100);
  CHECK(b.capacity() == per_chunk);
  CHECK(b.max_size() == 3 * per_chunk + 10);
  CHECK(b.range().size() == 4 * g);  // rounded up to the granularity
  CHECK(b.mapping_count() == 1);
  const int* const address = b.data();
  std::vector<int> host(100);
  std::iota(host.begin(), host.end(), 1);
  copy(b, host);

  b.resize(per_chunk + 1);  // the second mapping
  CHECK(b.data() == address);
  CHECK(b.mapping_count() == 2);
  CHECK(b.capacity() == 2 * per_chunk);
  b.resize(3 * per_chunk);  // the third
  CHECK(b.data() == address);
  CHECK(b.mapping_count() == 3);
  CHECK(fake.calls("cuMemMap") == 3);
  CHECK(fake.live("vmm_mapping") - at_start.vmm_mapping == 3);
  CHECK(fake.live("physical") - at_start.physical == 0);  // released at once: the mappings keep the memory
  // One copy across the three mappings: the data stayed where it was.
  std::vector<int> all(b.size());
  copy(all, b);
  CHECK(std::equal(host.begin(), host.end(), all.begin()));
  std::vector<int> tail(10, 7);
  copy(b.subspan(per_chunk - 5, 10), tail);  // across the first two mappings

  // Running out of the reserved range: an Error, and nothing changed.
  const long creates = fake.calls("cuMemCreate");
  const Error e = error_of([&] { b.resize(b.max_size() + 1); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(says(e, "runs out of the reserved range"));
  CHECK(b.size() == 3 * per_chunk);
  CHECK(b.mapping_count() == 3);
  CHECK(fake.calls("cuMemCreate") == creates);
  b.resize(b.max_size());  // the last few elements fit in the fourth granule
  CHECK(b.mapping_count() == 4);

  // A failed growth leaves the buffer as it was, and nothing behind.
  b.resize(10);
  b.shrink_to_fit();
  CHECK(b.mapping_count() == 1);
  CHECK(b.capacity() == per_chunk);
  fake.fail("cuMemMap", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(error_of([&] { b.resize(2 * per_chunk); }).call() == "cuMemMap");
  CHECK(b.size() == 10);
  CHECK(b.mapping_count() == 1);
  CHECK(fake.live("physical") - at_start.physical == 0);
  CHECK(fake.live("vmm_mapping") - at_start.vmm_mapping == 1);
  std::vector<int> first(10);
  copy(first, b);
  CHECK(std::equal(first.begin(), first.end(), host.begin()));

  GrowableBuffer<int> moved = std::move(b);
  CHECK(moved.data() == address);
  CHECK(b.max_size() == 0);  // NOLINT(bugprone-use-after-move)
  CHECK(error_of([&] { b.resize(1); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
  GrowableBuffer<double> none(ctx, 0);
  CHECK(none.empty());
  CHECK(error_of([&] { none.resize(1); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE_FIXTURE(ContextTest, "GrowableBuffer: a stream-ordered copy over its mappings, refused whole as by driver 580, goes a mapping at a time; other refusals stay Errors") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const std::size_t per_chunk = g / sizeof(int);
  GrowableBuffer<int> b(ctx, 3 * per_chunk, 1);
  b.resize(per_chunk + 1);
  b.resize(3 * per_chunk);
  REQUIRE(b.mapping_count() == 3);
  GrowableBuffer<int> other(ctx, 3 * per_chunk, 1);
  other.resize(3 * per_chunk);  // two mappings, of one and of two granules
  REQUIRE(other.mapping_count() == 2);
  const Stream s(ctx);
  std::vector<int> host(b.size());
  std::iota(host.begin(), host.end(), 1);

  // Host to device and back, over the three mappings: the whole copy is
  // refused, then it goes in three pieces.
  copy(s, b, host);
  CHECK(fake.calls("cuMemcpyHtoDAsync") == 1 + 3);
  std::vector<int> back(b.size());
  copy_async(s, back, b);
  s.synchronize();
  CHECK(fake.calls("cuMemcpyDtoHAsync") == 1 + 3);
  CHECK(back == host);

  // Device to device, the two sides' mappings out of step: pieces of half a
  // granule, a half, a whole and a half.
  copy(s, other.subspan(0, 2 * per_chunk + per_chunk / 2), b.subspan(per_chunk / 2));
  CHECK(fake.calls("cuMemcpyDtoDAsync") == 1 + 4);
  std::vector<int> moved(other.size());
  copy(s, moved, other);
  CHECK(std::equal(moved.begin(), moved.begin() + 2 * per_chunk + per_chunk / 2, host.begin() + per_chunk / 2));

  // Within one mapping, the driver's refusal is the Error, tried once.
  const long dtoh = fake.calls("cuMemcpyDtoHAsync");
  fake.fail("cuMemcpyDtoHAsync", 1, ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(error_of([&] { copy(s, std::span(back).first(10), b.subspan(0, 10)); }).result() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == dtoh + 1);
  // Another refusal than INVALID_VALUE over the mappings: the Error, tried once.
  fake.fail("cuMemcpyDtoHAsync", 1, ffi::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(error_of([&] { copy_async(s, back, b); }).result() == ffi::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == dtoh + 2);
  // A piece refused after one was enqueued: the Error, once the stream has
  // finished the piece before it.
  const long syncs = fake.calls("cuStreamSynchronize");
  fake.fail("cuMemcpyDtoHAsync", 3, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(error_of([&] { copy_async(s, back, b); }).result() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(fake.calls("cuMemcpyDtoHAsync") == dtoh + 5);
  CHECK(fake.calls("cuStreamSynchronize") == syncs + 1);
  // A device destination that is no memory (a span over address 0): the
  // Error of a device-to-device copy, never a copy in another direction.
  const DeviceSpan<int> nowhere{0, b.size(), ctx.raw()};
  CHECK(error_of([&] { copy_async(s, nowhere, b); }).call() == "cuMemcpyDtoDAsync");
  CHECK(fake.calls("cuMemcpyDtoHAsync") == dtoh + 5);
}

TEST_CASE_FIXTURE(ContextTest, "copy_batch over VMM mappings: the batch goes with the stream's context current, copy by copy too") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const std::size_t per_chunk = g / sizeof(int);
  GrowableBuffer<int> b(ctx, 2 * per_chunk, 1);
  b.resize(2 * per_chunk);
  REQUIRE(b.mapping_count() == 2);
  DeviceBuffer<int> plain(ctx, b.size());
  const Stream s(ctx);
  std::vector<int> host(b.size()), back(b.size()), moved(b.size());
  std::iota(host.begin(), host.end(), 7);

  // No context is current here: the fake refuses each batch, as driver 580
  // does, and takes it again with the stream's context current.
  copy_batch(s, {{b, host}});
  copy_batch(s, {{plain, b}, {back, b}});
  CHECK(fake.calls("cuMemcpyBatchAsync") == 2 * 2);
  s.synchronize();
  copy(moved, plain);
  CHECK(back == host);
  CHECK(moved == host);
  // Refused again, for another reason: copy by copy, with that context still
  // current, so that copies over the mappings go whole.
  const long dtoh = fake.calls("cuMemcpyDtoHAsync"), dtod = fake.calls("cuMemcpyDtoDAsync");
  fake.fail("cuMemcpyBatchAsync", 2, ffi::CUDA_ERROR_INVALID_VALUE);
  copy_batch(s, {{back, b}, {plain, b}});
  CHECK(fake.calls("cuMemcpyDtoHAsync") == dtoh + 1);
  CHECK(fake.calls("cuMemcpyDtoDAsync") == dtod + 1);
  CHECK(!Context::current());
}

TEST_CASE_FIXTURE(ContextTest, "virtual memory: exported as a POSIX fd and as a fabric handle, imported, the same bytes") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const long fds_at_start = open_fds();
  {
    const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
    CHECK(memory.exportable_as(ExportKind::posix_fd));
    CHECK_FALSE(memory.exportable_as(ExportKind::fabric));
    FileDescriptor fd = export_fd(memory);
    CHECK(fd);
    const PhysicalMemory imported = import_fd(ctx, fd.get(), g);
    CHECK(imported.size() == g);
    CHECK(imported.device() == Device::get(0));
    // As driver 580 answers in the importing process (H100): no handle type.
    CHECK_FALSE(imported.exportable_as(ExportKind::posix_fd));
    CHECK(imported.raw() != memory.raw());
    fd = FileDescriptor();  // the import does not need it
    CHECK(open_fds() > fds_at_start);  // (the fake's own descriptors, held by the two handles)

    const VirtualRange range = VirtualRange::reserve(ctx, 2 * g);
    const Mapping a(range, 0, memory);
    const Mapping b(range, g, imported);
    std::vector<int> host(g / sizeof(int));
    std::iota(host.begin(), host.end(), 3);
    copy(a.span<int>(), host);
    std::vector<int> back(host.size());
    copy(back, b.span<int>());
    CHECK(back == host);
    CHECK(error_of([&] { (void)import_fd(ctx, export_fd(memory).get(), g + 1); }).result() ==
          ffi::CUDA_ERROR_INVALID_VALUE);  // a size that is not the granularity's: released again
    CHECK(fake.live("physical") - at_start.physical == 2);
  }
  CHECK(open_fds() == fds_at_start);

  fake.set_device_attribute(0, ffi::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 1);
  const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::fabric});
  const FabricHandle handle = export_fabric(memory);
  const PhysicalMemory imported = import_fabric(ctx, handle, g);
  CHECK(imported.exportable_as(ExportKind::fabric));
  const VirtualRange range = VirtualRange::reserve(ctx, 2 * g);
  const Mapping a(range, 0, memory), b(range, g, imported);
  const std::vector<unsigned char> ones(g, 1);
  copy(a.span<unsigned char>(), ones);
  std::vector<unsigned char> back(g);
  copy(back, b.span<unsigned char>());
  CHECK(back == ones);
}

TEST_CASE_FIXTURE(ContextTest, "virtual memory: one allocation shared with a child process through an inherited descriptor") {
  const std::size_t g = allocation_granularity(Device::get(0));
  const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
  const VirtualRange range = VirtualRange::reserve(ctx, g);
  const Mapping mapping(range, 0, memory);
  std::vector<int> host(g / sizeof(int));
  std::iota(host.begin(), host.end(), 0);
  copy(mapping.span<int>(), host);

  const FileDescriptor fd = export_fd(memory);
  const int inherited = ::dup(fd.get());  // (without close-on-exec, for the child)
  REQUIRE(inherited >= 0);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "OXICUDA_VMM_CHILD_FD=" + std::to_string(inherited) + " OXICUDA_VMM_CHILD_BYTES=" +
                          std::to_string(g) + " '" + self + "' '--test-case=" + kChildCase + "' > /dev/null";
  const int status = std::system(cmd.c_str());
  ::close(inherited);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The child doubled every value in place.
  std::vector<int> back(host.size());
  copy(back, mapping.span<int>());
  for (std::size_t i = 0; i < back.size(); ++i) host[i] *= 2;
  CHECK(back == host);
}

TEST_CASE("virtual memory: (child process part) an allocation imported from an inherited descriptor") {
  const char* fd = std::getenv("OXICUDA_VMM_CHILD_FD");
  const char* bytes = std::getenv("OXICUDA_VMM_CHILD_BYTES");
  if (!fd || !bytes) return;  // (run by the test above, in a process of its own)
  FakeTest balanced;
  const Context ctx = Context::primary(Device::get(0));
  const std::size_t n = std::stoul(bytes);
  const PhysicalMemory memory = import_fd(ctx, std::atoi(fd), n);
  const VirtualRange range = VirtualRange::reserve(ctx, n);
  const Mapping mapping(range, 0, memory);
  std::vector<int> host(n / sizeof(int));
  copy(host, mapping.span<int>());
  for (std::size_t i = 0; i < host.size(); ++i) {
    REQUIRE(host[i] == static_cast<int>(i));
    host[i] *= 2;
  }
  copy(mapping.span<int>(), host);
}

TEST_CASE_FIXTURE(ContextTest, "virtual memory: the fake follows the driver's documented rules, so tests can fail") {
  const auto& api = detail::api();
  ffi::CUmemAllocationProp prop{};
  prop.type = ffi::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {ffi::CU_MEM_LOCATION_TYPE_DEVICE, 0};
  std::size_t g = 0;
  REQUIRE(api.MemGetAllocationGranularity(&g, &prop, ffi::CU_MEM_ALLOC_GRANULARITY_MINIMUM) == ffi::CUDA_SUCCESS);
  ffi::CUmemGenericAllocationHandle h = 0;
  CHECK(api.MemCreate(&h, g + 4096, &prop, 0) == ffi::CUDA_ERROR_INVALID_VALUE);  // not a multiple of the granularity
  REQUIRE(api.MemCreate(&h, 2 * g, &prop, 0) == ffi::CUDA_SUCCESS);
  ffi::CUdeviceptr p = 0;
  REQUIRE(api.MemAddressReserve(&p, 4 * g, 0, 0, 0) == ffi::CUDA_SUCCESS);
  CHECK(api.MemMap(p + 4096, 2 * g, 0, h, 0) == ffi::CUDA_ERROR_INVALID_VALUE);  // not aligned
  CHECK(api.MemMap(p + 3 * g, 2 * g, 0, h, 0) == ffi::CUDA_ERROR_INVALID_VALUE);  // past the reservation
  CHECK(api.MemMap(p, 2 * g, g, h, 0) == ffi::CUDA_ERROR_INVALID_VALUE);  // an offset (must be 0 for now)
  REQUIRE(api.MemMap(p, 2 * g, 0, h, 0) == ffi::CUDA_SUCCESS);
  CHECK(api.MemMap(p + g, g, 0, h, 0) == ffi::CUDA_ERROR_INVALID_VALUE);  // over a mapping
  const ffi::CUmemAccessDesc rw{{ffi::CU_MEM_LOCATION_TYPE_DEVICE, 0}, ffi::CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(api.MemSetAccess(p, 3 * g, &rw, 1) == ffi::CUDA_ERROR_INVALID_VALUE);  // not fully mapped
  CHECK(api.MemUnmap(p, g) == ffi::CUDA_ERROR_INVALID_VALUE);  // a part of a mapping
  // No access until cuMemSetAccess: a copy into the mapping is refused.
  std::vector<char> bytes(64, 1);
  CHECK_THROWS_AS(copy(DeviceSpan<char>(p, 64, ctx.raw()), bytes), Error);
  // Released while mapped: the memory stays until the mapping goes.
  CHECK(api.MemRelease(h) == ffi::CUDA_SUCCESS);
  CHECK(fake.live("physical") - at_start.physical == 0);
  REQUIRE(api.MemSetAccess(p, 2 * g, &rw, 1) == ffi::CUDA_SUCCESS);
  copy(DeviceSpan<char>(p + g, 64, ctx.raw()), bytes);
  CHECK(api.MemAddressFree(p, 2 * g) == ffi::CUDA_ERROR_INVALID_VALUE);  // the size must be the reserved one
  REQUIRE(api.MemUnmap(p, 2 * g) == ffi::CUDA_SUCCESS);
  CHECK_THROWS_AS(copy(DeviceSpan<char>(p + g, 64, ctx.raw()), bytes), Error);  // unmapped
  REQUIRE(api.MemAddressFree(p, 4 * g) == ffi::CUDA_SUCCESS);
  // A second release, unmap or free: refused, and counted as a bad destroy.
  CHECK(api.MemRelease(h) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(api.MemUnmap(p, 2 * g) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(api.MemAddressFree(p, 4 * g) == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(fake.invalid_destroys() == 3);
  fake.reset();  // (forgets them: the fixture checks for none)
}
