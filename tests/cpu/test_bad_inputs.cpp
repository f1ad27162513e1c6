// The bad-input catalogue: each misuse is a clear Error and leaks nothing.
// (Where the driver decides, the GPU suite checks the same on a device.)
#include <doctest/doctest.h>

#include "fixtures.hpp"

#include <string>
#include <vector>

using namespace oxicuda;

namespace {

std::string head(const Error& e) {  // the first line of what()
  const std::string w = e.what();
  return w.substr(0, w.find('\n'));
}

}  // namespace

TEST_CASE_FIXTURE(ContextTest, "bad input: PTX that is invalid, empty, or not PTX at all") {
  const Error invalid = error_of([&] { (void)Module::from_ptx(ctx, ".version 7.0\n.target sm_70\nfrob;\n"); });
  CHECK(head(invalid) == "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed "
                         "[fake driver]");
  CHECK(invalid.detail().find("line 3; error   : Not a name of any known instruction: 'frob'") != std::string::npos);
  const Error empty = error_of([&] { (void)Module::from_ptx(ctx, ""); });
  CHECK(head(empty) == "oxicuda::Module::from_ptx failed: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation "
                       "failed [fake driver]");
  CHECK(empty.detail() == "the PTX source is empty");
  const Error text = error_of([&] { (void)Module::from_ptx(ctx, "hello"); });
  CHECK(text.detail().find("Missing .version directive") != std::string::npos);
}

TEST_CASE_FIXTURE(ContextTest, "bad input: a truncated cubin, an unknown kernel name") {
  std::vector<unsigned char> elf(100, 0);
  elf[0] = 0x7f, elf[1] = 'E', elf[2] = 'L', elf[3] = 'F', elf[4] = 2;
  elf[32] = 200;  // program headers at 200, beyond the 100 bytes given
  elf[54] = 56, elf[56] = 1;
  const Error e = error_of([&] { (void)Module::from_image(ctx, elf.data(), elf.size()); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(e.detail() == "the cubin (ELF) image is truncated: its headers describe 256 bytes but only 100 were given");
  Module m = Module::from_ptx(ctx, kFakePtx);
  const Error unknown = error_of([&] { (void)m.kernel<void()>("nonesuch"); });
  CHECK(unknown.detail().find("no kernel named 'nonesuch'") != std::string::npos);
}

TEST_CASE_FIXTURE(LaunchTest, "bad input: zero grid or block, a block above the limit, too much dynamic shared memory") {
  auto none = m.kernel<void()>("none");
  const Error zero_grid = error_of([&] { launch(s, none, {.grid = {4, 0}, .block = 32}); });
  CHECK(zero_grid.detail() == "kernel 'none', grid 4x0x1, block 32x1x1, 0 bytes of dynamic shared memory: a grid "
                              "or block dimension is zero");
  const Error zero_block = error_of([&] { launch(s, none, {.grid = 1, .block = {32, 1, 0}}); });
  CHECK(zero_block.detail().find("block 32x1x0") != std::string::npos);
  const Error big_block = error_of([&] { launch(s, none, {.grid = 1, .block = 2048}); });
  CHECK(big_block.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(big_block.detail() == "kernel 'none', grid 1x1x1, block 2048x1x1, 0 bytes of dynamic shared memory");
  const Error shared = error_of([&] { launch(s, none, {.shared_bytes = 1 << 20}); });
  CHECK(shared.call() == "cuFuncSetAttribute");
  CHECK(shared.detail() == "kernel 'none', grid 1x1x1, block 1x1x1, 1048576 bytes of dynamic shared memory: "
                           "raising the kernel's dynamic shared memory limit "
                           "(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) to 1048576 bytes failed; the device "
                           "gives a block at most 232448 bytes of shared memory, and the kernel has 0 bytes of static "
                           "shared memory, so it can have at most 232448 bytes of dynamic shared memory, not 1048576");
}

TEST_CASE("bad input: device ordinals -1 and count") {
  FakeScope scope;
  CHECK(error_of([] { (void)Device::get(-1); }).result() == ffi::CUDA_ERROR_INVALID_DEVICE);
  const Error e = error_of([] { (void)Device::get(Device::count()); });
  CHECK(head(e) == "oxicuda::Device::get failed: CUDA_ERROR_INVALID_DEVICE (101): the device ordinal supplied by the "
                   "user does not correspond to a valid CUDA device or that the action requested is invalid for the "
                   "specified device [fake driver]");
  CHECK(scope.fake.calls("cuDeviceGet") == 0);  // refused before the driver is asked
}

TEST_CASE_FIXTURE(ContextTest, "bad input: a moved-from or default-constructed handle of every type") {
  Stream live(ctx);
  Module m = Module::from_ptx(ctx, kFakePtx);
  auto check_empty = [](const Error& e, const char* type) {
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
    CHECK(e.detail() == std::string("this ") + type +
                            " is empty (default-constructed or moved-from); it has no driver handle");
  };
  Context c0;
  Stream s0;
  Event e0;
  Module m0;
  Function f0;
  Kernel<void()> k0;
  check_empty(error_of([&] { c0.make_current(); }), "oxicuda::Context");
  check_empty(error_of([&] { (void)Stream(c0); }), "oxicuda::Context");
  check_empty(error_of([&] { s0.synchronize(); }), "oxicuda::Stream");
  check_empty(error_of([&] { live.record(e0); }), "oxicuda::Event");
  check_empty(error_of([&] { live.wait(e0); }), "oxicuda::Event");
  check_empty(error_of([&] { (void)m0.function("dbl"); }), "oxicuda::Module");
  check_empty(error_of([&] { (void)f0.max_threads_per_block(); }), "oxicuda::Function");
  check_empty(error_of([&] { launch(live, k0, {}); }), "oxicuda::Function");
  check_empty(error_of([&] { launch(s0, m.kernel<void()>("none"), {}); }), "oxicuda::Stream");
  Stream moved = std::move(live);
  check_empty(error_of([&] { (void)live.ready(); }), "oxicuda::Stream");  // NOLINT(bugprone-use-after-move)
  {
    // A moved-from handle holds nothing of its state, even after the
    // handle it moved into is gone (ASan would see a read of freed state).
    Event timed(ctx, {.timing = true});
    Event took = std::move(timed);
    Stream from(ctx);
    { Stream into = std::move(from); }
    CHECK_FALSE(from.context());  // NOLINT(bugprone-use-after-move)
    CHECK_FALSE(from.owns());
    CHECK(from.raw() == nullptr);
    CHECK_FALSE(timed.timing());  // NOLINT(bugprone-use-after-move)
    CHECK_FALSE(timed.context());
    CHECK(timed.raw() == nullptr);
  }
  DeviceBuffer<int> buffer(ctx, 8);
  DeviceBuffer<int> taken = std::move(buffer);
  std::vector<int> host(8);
  const Error empty_buffer = error_of([&] { copy(host, buffer); });  // NOLINT(bugprone-use-after-move)
  CHECK(empty_buffer.detail() ==
        "size mismatch: the destination has 8 elements, the source 0 (element size 4 bytes); an empty device "
        "buffer is default-constructed or moved-from");
  PinnedBuffer<int> pinned(ctx, 8);
  PinnedBuffer<int> pinned_taken = std::move(pinned);
  CHECK_THROWS_AS(copy(taken, pinned), Error);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE_FIXTURE(StreamTest, "bad input: events never recorded, and events without timing") {
  Event never(ctx), timed(ctx), untimed(ctx, {.timing = false});
  s.wait(never);  // as for the driver: waiting on an event never recorded waits for nothing
  s.record(timed);
  s.record(untimed);
  const Error e1 = error_of([&] { (void)Event::elapsed(never, timed); });
  CHECK(head(e1) == "cuEventElapsedTime failed: CUDA_ERROR_INVALID_HANDLE (400): a resource handle passed to the API "
                    "call was not valid [fake driver]");
  CHECK(e1.detail() == "both events must have been recorded on a stream before their elapsed time is asked");
  const Error e2 = error_of([&] { (void)Event::elapsed(untimed, timed); });
  CHECK(e2.detail() == "the start event was created with {.timing = false}; elapsed time needs timing on both "
                       "events");
}
