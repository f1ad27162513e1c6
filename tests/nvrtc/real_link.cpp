// Issue 29 and its neighbours on the real NVRTC and nvJitLink (the fake
// driver beneath): the sized PTX input of LtoLinker ends at its size, even
// at a page boundary; what Program::compile produced is what NVRTC made;
// PTX with a NUL inside is refused; a malformed architecture never reaches
// nvJitLink (which ends the process on some: run in a child process here);
// nvJitLink's version.
#include "fake_driver.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

const char* const kKernel = R"(extern "C" __global__ void twice(float* x, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2;
})";

bool in_child() { return std::getenv("OXICUDA_LINK_CHILD") != nullptr; }

// Runs this program's test case `name` in a child process (exec'd afresh);
// its exit status, or -1 when it did not exit (a signal).
int run_child(const char* name) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("OXICUDA_LINK_CHILD", "1", 1);
    ::setenv("OXICUDA_NVRTC_CHILD", "1", 1);
    const std::string filter = std::string("--test-case=") + name;
    ::execl("/proc/self/exe", "oxicuda-nvrtc-tests", filter.c_str(), "--no-intro", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("issue 29 (1), real nvJitLink: PTX added with a size is read to that size, even where a page ends") {
  if (in_child()) return;
  REQUIRE(nvjitlink_info().found);
  const Compiled ptx = Program(kKernel, "twice.cu").compile({.arch = "compute_90"});
  REQUIRE(ptx.kind == CodeKind::ptx);
  // The PTX, with no NUL after it, ends exactly where a readable page ends:
  // the next page is not readable, so a read past the size faults.
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t pages = (ptx.code.size() + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page) + 1;
  void* map = ::mmap(nullptr, pages * static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED);
  char* guard = static_cast<char*>(map) + (pages - 1) * static_cast<std::size_t>(page);
  REQUIRE(::mprotect(guard, static_cast<std::size_t>(page), PROT_NONE) == 0);
  char* text = guard - ptx.code.size();
  std::memcpy(text, ptx.code.data(), ptx.code.size());
  LtoLinker l("sm_90", {}, false);  // PTX alone: no -lto
  l.add(ffi::NVJITLINK_INPUT_PTX, text, ptx.code.size(), "twice.ptx");
  const std::string cubin = l.complete();
  CHECK(cubin.rfind("\x7f" "ELF", 0) == 0);
  ::munmap(map, pages * static_cast<std::size_t>(page));
}

TEST_CASE("issue 29 (5), real nvJitLink: PTX with a NUL inside is refused before nvJitLink reads it") {
  if (in_child()) return;
  const Compiled ptx = Program(kKernel, "twice.cu").compile({.arch = "compute_90"});
  const std::string two = ptx.code + std::string("\0// more", 8);
  LtoLinker l("sm_90");
  const Error e = error_of([&] { l.add(ffi::NVJITLINK_INPUT_PTX, two.data(), two.size(), "two.ptx"); });
  CHECK(e.library() == Library::nvjitlink);
  CHECK(e.code() == ffi::NVJITLINK_ERROR_INVALID_INPUT);
  CHECK(e.detail().find("has a NUL byte at offset " + std::to_string(ptx.code.size())) != std::string::npos);
}

TEST_CASE("issue 29 (4), real NVRTC: -dlto or -arch=sm_XX in .extra gives what NVRTC made, never empty code") {
  if (in_child()) return;
  Program p(kKernel, "twice.cu");
  const Compiled lto = p.compile({.extra = {"-arch=sm_90", "-dlto"}});
  CHECK(lto.kind == CodeKind::ltoir);
  REQUIRE(lto.code.size() > 4);
  CHECK(static_cast<unsigned char>(lto.code[0]) == 0xed);  // LTO-IR's magic, 0x7f4e43ed
  const Compiled lto2 = p.compile({.arch = "sm_90", .extra = {"--dlink-time-opt"}});
  CHECK(lto2.kind == CodeKind::ltoir);
  CHECK_FALSE(lto2.code.empty());
  const Compiled cubin = p.compile({.extra = {"-arch=sm_90"}});
  CHECK(cubin.kind == CodeKind::cubin);
  CHECK(cubin.code.rfind("\x7f" "ELF", 0) == 0);
  const Compiled cubin2 = p.compile({.extra = {"--gpu-architecture=sm_90"}});
  CHECK(cubin2.kind == CodeKind::cubin);
  // The LTO-IR links, and the driver cannot load it as it is: the error says so.
  LtoLinker l("sm_90");
  l.add(lto, "twice");
  CHECK(l.complete().rfind("\x7f" "ELF", 0) == 0);
  const Error e = error_of([&] {
    (void)Module::from_image(Context::primary(Device::get(0)), lto.code.data(), lto.code.size());
  });
  CHECK(e.detail().find("is LTO-IR") != std::string::npos);
}

// (A name without a comma: doctest splits a filter at commas.)
TEST_CASE("issue 22 (5) child: LtoLinker with a malformed architecture") {
  if (!in_child()) return;  // run by the next test, in a process of its own
  bool ok = true;
  for (const char* bad : {"sm_1", "sm_9x", "compute_1"}) {
    try {
      LtoLinker l(bad);
      ok = false;
    } catch (const Error& e) {
      ok = ok && e.code() == ffi::NVJITLINK_ERROR_UNRECOGNIZED_ARCH;
    }
  }
  try {
    LtoLinker l("sm_90", {"-arch=sm_1"});
    ok = false;
  } catch (const Error& e) {
    ok = ok && e.code() == ffi::NVJITLINK_ERROR_UNRECOGNIZED_ARCH;
  }
  std::fflush(nullptr);
  ::_exit(ok ? 42 : 1);  // 42: this test ran and passed (nvJitLink's exit is 1)
}

TEST_CASE("issue 22 (5), real nvJitLink: a malformed architecture is an Error, and the process lives on") {
  if (in_child()) return;
  // Before the check, nvJitLink called exit(1) in the child.
  CHECK(run_child("issue 22 (5) child: LtoLinker with a malformed architecture") == 42);
  CHECK_NOTHROW(LtoLinker{"sm_90"});
}

TEST_CASE("issue 24 (9), real nvJitLink: nvjitlink_info().version is nvJitLinkVersion's") {
  if (in_child()) return;
  REQUIRE(nvjitlink_info().found);
  CHECK(nvjitlink_info().version >= 12030);
  CHECK(nvjitlink_info().version == nvjitlink_version());
}
