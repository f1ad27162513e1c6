// Module, Function and launch on the fake driver (which reads PTX entry
// declarations and runs a kernel called `dbl` on the host).
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "module: PTX loads, the JIT's info log is kept, functions are found by name") {
  {
    Context ctx = Context::primary(Device::get(0));
    Module m = Module::from_ptx(ctx, kFakePtx);
    CHECK(m.info_log() == "fake ptxas info: 7 entry function(s)");
    Function f = m.function("dbl");
    CHECK(f.name() == "dbl");
    CHECK(f.module() == m);
    CHECK(f.max_threads_per_block() == 1024);
    CHECK(f.num_registers() == 16);
    CHECK(f.static_shared_bytes() == 0);
    CHECK(f.ptx_version() == 70);
    CHECK(f.binary_version() == 90);
    CHECK(Context::current().raw() == nullptr);
  }
  CHECK(fake.calls("cuModuleUnload") == 1);
}

TEST_CASE_FIXTURE(FakeTest, "module: a function keeps its module alive") {
  Function f;
  {
    Context ctx = Context::primary(Device::get(0));
    Module m = Module::from_ptx(ctx, kFakePtx);
    f = m.function("none");
  }
  CHECK(fake.calls("cuModuleUnload") == 0);
  CHECK(f.num_registers() == 16);
  f = Function();
  CHECK(fake.calls("cuModuleUnload") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "module: invalid PTX fails with the JIT's error log in the Error") {
  const char* bad = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k() { frob; }\n";
  {
    const Error e = error_of([&] { (void)Module::from_ptx(ctx, bad); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_PTX);
    CHECK(e.call() == "cuModuleLoadDataEx");
    CHECK(e.detail() ==
          "PTX source of 74 bytes; JIT error log:\n"
          "ptxas application ptx input, line 4; error   : Not a name of any known instruction: 'frob'");
    const std::string what = e.what();
    CHECK(what.find("\n  PTX source of 74 bytes; JIT error log:\n  ptxas application ptx input, line 4;") !=
          std::string::npos);
  }
}

TEST_CASE_FIXTURE(ContextTest, "module: empty PTX and empty or truncated images are refused before the driver reads them") {
  CHECK_THROWS_WITH_AS((void)Module::from_ptx(ctx, " \n\t"),
                       doctest::Contains("the PTX source is empty"), Error);
  CHECK_THROWS_WITH_AS((void)Module::from_image(ctx, nullptr, 0), doctest::Contains("the image is empty"), Error);
  // A cubin whose section headers lie beyond the bytes given.
  std::vector<unsigned char> elf(64, 0);
  std::memcpy(elf.data(), "\x7f" "ELF", 4);
  elf[4] = 2;
  elf[40] = 0x00, elf[41] = 0x10;  // e_shoff = 4096
  elf[58] = 64, elf[60] = 3;       // 3 section headers of 64 bytes
  CHECK_THROWS_WITH_AS((void)Module::from_image(ctx, elf.data(), elf.size()),
                       doctest::Contains("the cubin (ELF) image is truncated: its headers describe 4288 bytes but "
                                         "only 64 were given"),
                       Error);
  // A fatbin header that promises more than there is.
  std::vector<unsigned char> fat(16, 0);
  fat[0] = 0x50, fat[1] = 0xED, fat[2] = 0x55, fat[3] = 0xBA;
  fat[6] = 16;   // header size
  fat[8] = 100;  // fat size
  CHECK_THROWS_WITH_AS((void)Module::from_image(ctx, fat.data(), fat.size()),
                       doctest::Contains("the fatbin image is truncated: its headers describe 116 bytes"), Error);
  CHECK(fake.calls("cuModuleLoadDataEx") == 0);
  // A whole (if empty) cubin goes to the driver.
  elf[40] = 0, elf[41] = 0, elf[58] = 0, elf[60] = 0;
  Module m = Module::from_image(ctx, elf.data(), elf.size());
  CHECK(fake.calls("cuModuleLoadDataEx") == 1);
}

TEST_CASE_FIXTURE(ContextTest, "module: from_file reads PTX, and a missing file is a clear error") {
  const std::string path = "oxicuda-test-module.ptx";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fputs(kFakePtx, f);
  std::fclose(f);
  {
    Module m = Module::from_file(ctx, path);
    CHECK(m.function("layout").name() == "layout");
  }
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS((void)Module::from_file(ctx, "/nonexistent/k.ptx"),
                       doctest::Contains("cannot open '/nonexistent/k.ptx'"), Error);
}

TEST_CASE_FIXTURE(ModuleTest, "module: an unknown kernel name is an error that names it") {
  {
    const Error e = error_of([&] { (void)m.function("dlb"); });
    CHECK(e.result() == ffi::CUDA_ERROR_NOT_FOUND);
    CHECK(e.call() == "cuModuleGetFunction");
    CHECK(e.detail() == "the module has no kernel named 'dlb': no symbol, C++ name or signature is that (a template's "
                        "instance is in the image only where the build instantiated it); its kernels: dbl, layout, "
                        "saxpy, take_u32, take_blob, none, set_handle");
  }
}

TEST_CASE_FIXTURE(ContextTest, "launch: arguments are passed by address, one cuLaunchKernel with the given shape") {
  ScopedCurrent current(ctx);
  Stream s(ctx);
  Module m = Module::from_ptx(ctx, kFakePtx);
  Function layout = m.function("layout");
  struct Blob {
    alignas(8) unsigned char bytes[24];
  } blob{};
  for (int i = 0; i < 24; ++i) blob.bytes[i] = static_cast<unsigned char>(i + 1);
  const ffi::CUdeviceptr ptr = 0x1234'5678'9abcull;
  launch(s, layout, Dim3{4, 2}, Dim3{128}, 256, ptr, 7u, 2.5f, blob);
  FakeLaunch l{};
  fake.last_launch(&l);
  CHECK(l.function == layout.raw());
  CHECK(l.stream == s.raw());
  CHECK(l.grid[0] == 4);
  CHECK(l.grid[1] == 2);
  CHECK(l.grid[2] == 1);
  CHECK(l.block[0] == 128);
  CHECK(l.shared_bytes == 256);
  REQUIRE(l.param_count == 4);
  CHECK(l.param_offsets[1] == 8);
  CHECK(l.param_offsets[2] == 12);
  CHECK(l.param_offsets[3] == 16);
  ffi::CUdeviceptr got_ptr;
  unsigned got_u;
  float got_f;
  std::memcpy(&got_ptr, l.params + 0, 8);
  std::memcpy(&got_u, l.params + 8, 4);
  std::memcpy(&got_f, l.params + 12, 4);
  CHECK(got_ptr == ptr);
  CHECK(got_u == 7u);
  CHECK(got_f == 2.5f);
  CHECK(std::memcmp(l.params + 16, blob.bytes, 24) == 0);
  launch(s, m.function("none"), 1, 1, 0);
  CHECK(fake.calls("cuLaunchKernel") == 2);
}

TEST_CASE_FIXTURE(LaunchTest, "launch: a failed launch says which kernel, what shape, and why") {
  const unsigned line = __LINE__ + 2;
  {
    const Error e = error_of([&] { launch(s, m.function("none"), Dim3{0}, Dim3{32}, 0); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
    CHECK(e.call() == "cuLaunchKernel");
    CHECK(e.detail() == "kernel 'none', grid 0x1x1, block 32x1x1, 0 bytes of dynamic shared memory: a grid or "
                        "block dimension is zero");
    CHECK(e.where().line() == line);
  }
  CHECK_THROWS_AS(launch(s, m.function("none"), 1, Dim3{2048}, 0), Error);
  CHECK_THROWS_AS(launch(s, Function(), 1, 1, 0), Error);
  CHECK_THROWS_AS(launch(Stream(), m.function("none"), 1, 1, 0), Error);
}

// --- issue 29: launch and link, hardened ------------------------------------

namespace {
// The fake's PTX with a kernel that has 8 KiB of static shared memory.
constexpr const char* kSharedPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry tiled()
{
    .shared .align 4 .b8 tile[8192];
    ret;
}
)";
}  // namespace

TEST_CASE_FIXTURE(ContextTest, "issue 29 (1): both linkers read PTX as `size` bytes, not up to a NUL past them") {
  // PTX followed, past the size given, by more text and no NUL: the driver
  // and nvJitLink read PTX up to a NUL, so they would read "frob" too.
  const std::string ptx = kFakePtx;
  std::string buffer = ptx + ".visible .entry beyond() { frob; }\n";
  {
    Linker l(ctx);
    l.add(LinkInput::ptx, buffer.data(), ptx.size(), "sized.ptx");
    const Module m = l.load();
    CHECK(m.function("dbl"));
    CHECK(error_of([&] { (void)m.function("beyond"); }).result() == ffi::CUDA_ERROR_NOT_FOUND);
  }
  {
    LtoLinker l("sm_90");
    l.add(ffi::NVJITLINK_INPUT_PTX, buffer.data(), ptx.size(), "sized.ptx");
    const std::string cubin = l.complete();
    CHECK(cubin.find("dbl") != std::string::npos);
    CHECK(cubin.find("beyond") == std::string::npos);
  }
  // A std::vector<char> read from a .ptx file: no NUL at all; a terminating
  // NUL inside the size is fine too.
  std::vector<char> file(ptx.begin(), ptx.end());
  CHECK_NOTHROW(Linker(ctx).add(LinkInput::ptx, file.data(), file.size()));
  CHECK_NOTHROW(Linker(ctx).add(LinkInput::ptx, ptx.c_str(), ptx.size() + 1));
}

TEST_CASE_FIXTURE(ContextTest, "issue 29 (5): both linkers refuse PTX with a NUL inside, as Module::from_ptx does") {
  const std::string ptx = std::string(kFakePtx) + std::string("\0.visible .entry lost() { ret; }\n", 32);
  {
    Linker l(ctx);
    const Error e = error_of([&] { l.add_ptx(ptx, "two.ptx"); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_PTX);
    CHECK(e.call() == "oxicuda::Linker::add");
    CHECK(e.detail() == "the PTX input 'two.ptx' of " + std::to_string(ptx.size()) + " bytes has a NUL byte at offset " +
                            std::to_string(std::strlen(kFakePtx)) + "; the driver would read only the text before it");
    CHECK(error_of([&] { l.add(LinkInput::ptx, ptx.data(), ptx.size()); }).result() == ffi::CUDA_ERROR_INVALID_PTX);
    CHECK(error_of([&] { l.add_ptx(" \n"); }).detail() == "the PTX input 'ptx' is empty");
    CHECK(fake.calls("cuLinkAddData") == 0);
  }
  LtoLinker l("sm_90");
  const Error e = error_of([&] { l.add(ffi::NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), "two.ptx"); });
  CHECK(e.library() == Library::nvjitlink);
  CHECK(e.code() == ffi::NVJITLINK_ERROR_INVALID_INPUT);
  CHECK(e.detail().find("has a NUL byte at offset " + std::to_string(std::strlen(kFakePtx)) +
                        "; nvJitLink would read only the text before it") != std::string::npos);
  CHECK(error_of([&] { (void)Module::from_ptx(ctx, ptx); }).result() == ffi::CUDA_ERROR_INVALID_PTX);
}

TEST_CASE_FIXTURE(StreamTest, "issue 29 (2): dynamic shared memory is compared with the kernel's own limit, 48 KiB less its static part") {
  const Module m = Module::from_ptx(ctx, kSharedPtx);
  const Function f = m.function("tiled");
  CHECK(f.static_shared_bytes() == 8192);
  CHECK(f.allowed_dynamic_shared_bytes() == 48 * 1024 - 8192);
  // 44 KiB: above the kernel's 40 KiB, below 48 KiB. The limit is raised first.
  const long reads = fake.calls("cuFuncGetAttribute");
  CHECK_NOTHROW(launch(s, f, {.shared_bytes = 44 * 1024}));
  CHECK(fake.calls("cuFuncSetAttribute") == 1);
  CHECK(f.allowed_dynamic_shared_bytes() == 44 * 1024);
  FakeLaunch l{};
  fake.last_launch(&l);
  CHECK(l.shared_bytes == 44 * 1024);
  // Cached per kernel (per Function): later launches ask the driver nothing more.
  const long after = fake.calls("cuFuncGetAttribute");
  CHECK(after == reads + 2);  // the launch's read, and allowed_dynamic_shared_bytes() above
  CHECK_NOTHROW(launch(s, f, {.shared_bytes = 40 * 1024}));
  CHECK_NOTHROW(launch(s, f, {.shared_bytes = 44 * 1024}));
  CHECK(fake.calls("cuFuncGetAttribute") == after);
  CHECK(fake.calls("cuFuncSetAttribute") == 1);
  // More than the device can give this kernel: both figures in the error.
  const Error e = error_of([&] { launch(s, f, {.shared_bytes = 220 * 1024}); });
  CHECK(e.call() == "cuFuncSetAttribute");
  CHECK(e.detail() == "kernel 'tiled', grid 1x1x1, block 1x1x1, 225280 bytes of dynamic shared memory: raising the "
                      "kernel's dynamic shared memory limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) to "
                      "225280 bytes failed; the device gives a block at most 232448 bytes of shared memory, and the "
                      "kernel has 8192 bytes of static shared memory, so it can have at most 224256 bytes of dynamic "
                      "shared memory, not 225280");
  // A fresh Function of the same kernel reads the limit (44 KiB now) once.
  const Function g = m.function("tiled");
  CHECK_NOTHROW(launch(s, g, {.shared_bytes = 42 * 1024}));
  CHECK(fake.calls("cuFuncSetAttribute") == 2);  // the failed raise above, none here
}

TEST_CASE_FIXTURE(LaunchTest, "issue 29 (3): an empty DeviceBuffer passed to a typed launch is an Error naming its position") {
  auto dbl = m.kernel<void(float*, unsigned)>("dbl");
  auto saxpy = m.kernel<void(float*, const float*, float, unsigned)>("saxpy");
  DeviceBuffer<float> a(ctx, 64);
  DeviceBuffer<float> b = std::move(a);
  {
    const Error e = error_of([&] { launch(s, dbl, {.grid = 1, .block = 64}, a, 64u); });  // NOLINT(bugprone-use-after-move)
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_HANDLE);
    CHECK(e.call() == "oxicuda::launch");
    CHECK(e.detail().find("argument 1 of 2 (") == 0);
    CHECK(e.detail().find("DeviceBuffer<float>) to kernel 'dbl' is an empty buffer (default-constructed or "
                          "moved-from): the kernel would get a null pointer") != std::string::npos);
  }
  const DeviceBuffer<float> none;
  {
    const Error e = error_of([&] { launch(s, saxpy, {.grid = 1, .block = 64}, b, none, 2.0f, 64u); });
    CHECK(e.detail().find("argument 2 of 4 (") == 0);
    CHECK(e.detail().find("DeviceBuffer<float>) to kernel 'saxpy'") != std::string::npos);
  }
  CHECK(fake.calls("cuLaunchKernel") == 0);
  // A buffer of 0 elements made in a context passes (a null pointer with n = 0).
  DeviceBuffer<float> zero(ctx, 0);
  CHECK_NOTHROW(launch(s, dbl, {.grid = 1, .block = 64}, zero, 0u));
  CHECK_NOTHROW(launch(s, dbl, {.grid = 1, .block = 64}, b, 64u));
  CHECK(fake.calls("cuLaunchKernel") == 2);
}

TEST_CASE_FIXTURE(LaunchTest, "issue 29 (6): a cluster with a zero dimension, or that does not divide the grid, is an Error") {
  auto none = m.kernel<void()>("none");
  {
    const Error e = error_of([&] { launch(s, none, {.grid = {4, 4}, .block = 32, .cluster = {0, 2, 1}}); });
    CHECK(e.result() == ffi::CUDA_ERROR_INVALID_CLUSTER_SIZE);
    CHECK(e.call() == "oxicuda::launch");
    CHECK(e.detail() == "kernel 'none': cluster 0x2x1, grid 4x4x1: a cluster dimension is zero beside a non-zero one "
                        "(every dimension of a cluster is at least 1; {0, 0, 0} is no cluster)");
  }
  CHECK(error_of([&] { launch(s, none.function(), {.grid = 4, .cluster = {2, 0, 1}}); }).result() ==
        ffi::CUDA_ERROR_INVALID_CLUSTER_SIZE);
  {
    const Error e = error_of([&] { launch(s, none, {.grid = {4, 3}, .block = 32, .cluster = {2, 2}}); });
    CHECK(e.call() == "oxicuda::launch");
    CHECK(e.detail() == "kernel 'none': cluster 2x2x1, grid 4x3x1: the cluster does not divide the grid (each grid "
                        "dimension must be a multiple of the cluster's)");
  }
  CHECK(fake.calls("cuLaunchKernel") == 0);
  CHECK(fake.calls("cuLaunchKernelEx") == 0);
  CHECK_NOTHROW(launch(s, none, {.grid = {4, 4}, .block = 32, .cluster = {2, 2, 1}}));
  CHECK(fake.calls("cuLaunchKernelEx") == 1);
}

TEST_CASE_FIXTURE(ModuleTest, "issue 29 (7): a kernel name with a NUL byte is refused") {
  const std::string_view name("dbl\0oops", 8);
  const Error e = error_of([&] { (void)m.function(name); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(e.call() == "oxicuda::Module::function");
  CHECK(e.detail() == "the kernel name of 8 bytes has a NUL byte at offset 3; the driver would look up only the name "
                      "before it");
  CHECK(error_of([&] { (void)m.kernel<void(float*, unsigned)>(name); }).call() == "oxicuda::Module::function");
  CHECK(fake.calls("cuModuleGetFunction") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "issue 29: from_image of LTO-IR or of an unknown binary says what it is") {
  const unsigned char lto[] = {0xed, 0x43, 0x4e, 0x7f, 0x01, 0x41, 0x02, 0x62, 0x03, 0x02, 0x07, 0x00, 0x18, 0x00};
  const Error e = error_of([&] { (void)Module::from_image(ctx, lto, sizeof lto); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_IMAGE);
  CHECK(e.detail() == "the image of 14 bytes is LTO-IR (NVRTC's output with CompileOptions::lto), which the driver "
                      "cannot load: link it with an oxicuda::LtoLinker into a cubin, and load that");
  const unsigned char other[] = {0x01, 0x02, 0x03, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60};
  CHECK(error_of([&] { (void)Module::from_image(ctx, other, sizeof other); }).detail() ==
        "the image of 10 bytes is of an unknown format (it starts with 01 02 03 00 10 20 30 40 ...): not PTX text, a "
        "cubin (ELF) or a fatbin");
  CHECK(fake.calls("cuModuleLoadDataEx") == 0);
  CHECK(Module::from_image(ctx, kFakePtx, std::strlen(kFakePtx)).function("dbl"));
}

TEST_CASE_FIXTURE(ContextTest, "issue 29: a cubin input to a Linker that is not relocatable: the error says -rdc") {
  std::vector<unsigned char> elf(64, 0);
  std::memcpy(elf.data(), "\x7f" "ELF", 4);
  elf[4] = 2;
  elf[16] = 2;  // ET_EXEC: a cubin built without -rdc
  Linker l(ctx);
  const Error e = error_of([&] { l.add(LinkInput::cubin, elf.data(), elf.size(), "k.cubin"); });
  CHECK(e.result() == ffi::CUDA_ERROR_NO_BINARY_FOR_GPU);
  CHECK(e.detail().find("adding 'k.cubin' (64 bytes); a cubin input to a Linker must be relocatable device code: "
                        "compile it with -rdc") == 0);
  elf[16] = 1;  // ET_REL
  CHECK_NOTHROW(l.add(LinkInput::cubin, elf.data(), elf.size(), "k.cubin"));
}
