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

namespace {

// A kernel that launches a kernel (dynamic parallelism): NVRTC compiles it
// only as relocatable device code, and it loads only linked with the device
// runtime (cudaLaunchDevice, cudaGetParameterBuffer).
const char* const kParent = R"(extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2; }
extern "C" __global__ void parent(float* x) { child<<<1, 32>>>(x); })";

// Whether libcudadevrt.a is where find_device_runtime looks; says so when not.
bool have_device_runtime() {
  try {
    (void)detail::find_device_runtime(SourceLocation::current());
    return true;
  } catch (const Error& e) {
    MESSAGE("skipped: ", e.what());
    return false;
  }
}

}  // namespace

TEST_CASE("issue 22, real NVRTC and nvJitLink: SourceOptions::device_runtime links a kernel that launches a kernel") {
  if (!have_device_runtime()) return;
  // (nvJitLink's link is what fails without the library, below; the fake
  // driver loads the cubin as a module it cannot look into.)
  const Context ctx = Context::primary(Device::get(0));
  for (const bool lto : {false, true}) {
    CAPTURE(lto);
    const Module m = module_from_source(ctx, kParent, {.compile = {.lto = lto}, .cache = false, .device_runtime = true});
    CHECK(m);
  }
  // With a virtual architecture, the PTX is linked for the device's own.
  const Module ptx =
      module_from_source(ctx, kParent, {.compile = {.arch = "compute_90"}, .cache = false, .device_runtime = true});
  CHECK(ptx);
}

TEST_CASE("issue 22, real NVRTC and nvJitLink: without the device runtime, NVRTC's -rdc error or nvJitLink's unresolved symbol") {
  const Context ctx = Context::primary(Device::get(0));
  // Not relocatable: NVRTC refuses the launch from the device.
  const Error plain = error_of([&] { (void)module_from_source(ctx, kParent, {.cache = false}); });
  CHECK(plain.code() == ffi::NVRTC_ERROR_COMPILATION);
  CHECK(std::string(plain.what()).find("device-side kernel launch") != std::string::npos);
  // Relocatable, linked without the library: the device runtime's symbols are unresolved.
  const Compiled c = Program(kParent).compile({.arch = "sm_90", .relocatable = true});
  LtoLinker link("sm_90", {}, false);
  link.add(c);
  const Error unlinked = error_of([&] { (void)link.complete(); });
  CHECK(std::string(unlinked.what()).find("Undefined reference to '__cudaCDP2LaunchDevice") != std::string::npos);
}

TEST_CASE("issue 22: OXICUDA_LIBCUDADEVRT_PATH naming no file is an Error that names it") {
  ::setenv("OXICUDA_LIBCUDADEVRT_PATH", "/nonexistent/oxicuda/libcudadevrt.a", 1);
  const Error e = error_of([] {
    (void)module_from_source(Context::primary(Device::get(0)), kParent, {.cache = false, .device_runtime = true});
  });
  ::unsetenv("OXICUDA_LIBCUDADEVRT_PATH");
  CHECK(e.code() == ffi::CUDA_ERROR_FILE_NOT_FOUND);
  CHECK(std::string(e.what()).find("OXICUDA_LIBCUDADEVRT_PATH='/nonexistent/oxicuda/libcudadevrt.a' names no regular "
                                   "file") != std::string::npos);
}

TEST_CASE("issue 22: the cache key holds the device_runtime option and the library's identity; a second load hits") {
  if (!have_device_runtime()) return;
  SourceOptions with{.device_runtime = true}, without{};
  CHECK(detail::source_key(kParent, with, "sm_90", "lib") != detail::source_key(kParent, without, "sm_90", "lib"));
  with.compile.relocatable = without.compile.relocatable = true;
  CHECK(detail::source_key(kParent, with, "sm_90", "lib") != detail::source_key(kParent, without, "sm_90", "lib"));

  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/oxicuda-devrt-test-" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  std::string notes;
  const detail::DeviceRuntimeLibrary real = detail::find_device_runtime(SourceLocation::current());
  detail::DeviceRuntimeLibrary other = real;
  other.identity += " (another file)";
  const std::string key = detail::cache_slot(kParent, with, "sm_90", real, notes).key;
  CHECK(key.size() == 32);
  CHECK(key != detail::cache_slot(kParent, with, "sm_90", other, notes).key);
  CHECK(key != detail::cache_slot(kParent, without, "sm_90", real, notes).key);
  // A copy of the library at another path is another identity.
  const std::string copy = dir + "-libcudadevrt.a";
  REQUIRE(std::system(("cp '" + real.path + "' '" + copy + "'").c_str()) == 0);
  CHECK(detail::device_runtime_identity(copy) != real.identity);
  CHECK(detail::device_runtime_identity(copy).find(copy) != std::string::npos);

  const Context ctx = Context::primary(Device::get(0));
  const KernelCacheStats s0 = kernel_cache_stats();
  (void)module_from_source(ctx, kParent, with);
  CHECK(kernel_cache_stats().misses == s0.misses + 1);
  const Module hit = module_from_source(ctx, kParent, with);
  CHECK(kernel_cache_stats().hits == s0.hits + 1);
  CHECK(hit);
  // The entry holds the linked cubin, not the relocatable code alone.
  std::string payload, note;
  REQUIRE(detail::cache_read(dir, key, payload, note));
  detail::CacheEntry e;
  REQUIRE(detail::decode_entry(payload, e).empty());
  CHECK_FALSE(e.is_text);
  CHECK(e.image.substr(0, 4) == "\x7f" "ELF");
  CHECK(e.image.find("parent") != std::string_view::npos);
  // The library named by OXICUDA_LIBCUDADEVRT_PATH (the copy) is another key: a miss.
  ::setenv("OXICUDA_LIBCUDADEVRT_PATH", copy.c_str(), 1);
  (void)module_from_source(ctx, kParent, with);
  ::unsetenv("OXICUDA_LIBCUDADEVRT_PATH");
  CHECK(kernel_cache_stats().misses == s0.misses + 2);
  ::unsetenv("OXICUDA_CACHE_DIR");
  std::system(("rm -rf '" + dir + "' '" + copy + "'").c_str());
}
