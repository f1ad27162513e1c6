// Module, Function and launch on the fake driver (which reads PTX entry
// declarations and runs a kernel called `dbl` on the host).
#include <doctest/doctest.h>

#include "fixtures.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace oxicuda;

TEST_CASE_FIXTURE(FakeTest, "module: PTX loads, the JIT's info log is kept, functions are found by name") {
  {
    Context ctx = Context::primary(Device::get(0));
    Module m = Module::from_ptx(ctx, kFakePtx);
    CHECK(m.info_log() == "fake ptxas info: 6 entry function(s)");
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
    CHECK(e.detail() == "the module has no kernel named 'dlb' (a C++ kernel not declared extern \"C\" has a mangled name)");
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
