// Issue 24, items 12 and 13 on the fakes: the toolkit's own directories
// (compile/toolkit_paths.hpp), found through the places NVRTC is searched;
// CompileOptions::toolkit_includes and its Error naming the directories
// tried; an include directory that does not exist; the kernel cache's rule
// (a compile that reads the toolkit's headers is not cached); the device
// runtime found through the same roots. The real headers are compiled in
// tests/nvrtc/real_toolkit.cpp.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

// A fresh directory under TMPDIR, removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp ? tmp : "/tmp") + "/oxicuda-toolkit-XXXXXX";
    REQUIRE(::mkdtemp(path.data()) != nullptr);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  void file(const std::string& name, const std::string& text = "") const {
    std::system(("mkdir -p \"$(dirname '" + path + "/" + name + "')\"").c_str());
    if (std::FILE* f = std::fopen((path + "/" + name).c_str(), "w")) {
      std::fputs(text.c_str(), f);
      std::fclose(f);
    }
  }
};

// Sets an environment variable for one scope, then puts back what was there.
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const std::string& value) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    ::setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had) {
      ::setenv(name.c_str(), old.c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
};

}  // namespace

TEST_CASE("issue 24 (12): the toolkit root of a library; the roots in NVRTC's order") {
  CHECK(detail::root_of_library("/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so.13") ==
        "/usr/local/cuda-13.0/targets/x86_64-linux");
  CHECK(detail::root_of_library("/venv/site-packages/nvidia/cu13/lib/libnvrtc.so.13") ==
        "/venv/site-packages/nvidia/cu13");
  CHECK(detail::root_of_library("libnvrtc.so.13").empty());
  CHECK(detail::root_of_library("/libnvrtc.so.13").empty());

  const ScopedEnv home("CUDA_HOME", "/opt/home-cuda"), path("CUDA_PATH", "/opt/path-cuda"), conda("CONDA_PREFIX", "/c");
  const std::vector<detail::ToolkitRoot> first = detail::toolkit_roots(true), last = detail::toolkit_roots(false);
  std::vector<std::string> dirs;
  for (const detail::ToolkitRoot& r : last) dirs.push_back(r.dir);
  // (the fake NVRTC's own root comes last here, first below)
  REQUIRE(dirs.size() >= 6);
  CHECK(std::vector<std::string>(dirs.begin(), dirs.begin() + 6) ==
        std::vector<std::string>{"/c", "/c/targets/x86_64-linux", "/opt/home-cuda", "/opt/path-cuda",
                                 "/usr/local/cuda", detail::root_of_library(nvrtc_info().path)});
  CHECK(last[2].how == "$CUDA_HOME");
  REQUIRE(first.size() == last.size());
  CHECK(first.front().dir == detail::root_of_library(nvrtc_info().path));
  CHECK(first.front().how.find(nvrtc_info().path) != std::string::npos);
  CHECK(detail::toolkit_roots(false, false).size() == last.size() - 1);
}

TEST_CASE("issue 24 (12): the include directories of the first root with the runtime's headers; an Error lists those tried") {
  const TempDir empty, old_toolkit, toolkit;
  old_toolkit.file("include/cuda_runtime.h");  // CUDA 12: no include/cccl
  toolkit.file("include/cuda_runtime.h");
  toolkit.file("include/cccl/cuda/std/type_traits");
  const SourceLocation here = SourceLocation::current();
  CHECK(detail::find_toolkit_includes({{empty.path, "first"}, {toolkit.path, "second"}}, here) ==
        std::vector<std::string>{toolkit.path + "/include", toolkit.path + "/include/cccl"});
  CHECK(detail::find_toolkit_includes({{old_toolkit.path, "old"}, {toolkit.path, "new"}}, here) ==
        std::vector<std::string>{old_toolkit.path + "/include"});

  const Error none = error_of([&] {
    (void)detail::find_toolkit_includes({{empty.path, "$CUDA_HOME"}, {"/nonexistent/oxicuda", "$CUDA_PATH"}}, here);
  });
  CHECK(none.code() == ffi::CUDA_ERROR_FILE_NOT_FOUND);
  CHECK(none.detail().find("tried " + empty.path + "/include ($CUDA_HOME), /nonexistent/oxicuda/include ($CUDA_PATH)") !=
        std::string::npos);
  CHECK(none.detail().find("CompileOptions::toolkit_includes") != std::string::npos);
  CHECK(error_of([&] { (void)detail::find_toolkit_includes({}, here); }).detail().find("no toolkit root is known") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (12): toolkit_includes gives NVRTC the toolkit's directories; never cached") {
  const TempDir toolkit;
  toolkit.file("include/cuda_runtime.h");
  toolkit.file("include/cccl/cuda/std/type_traits");
  const ScopedEnv home("CUDA_HOME", toolkit.path), conda("CONDA_PREFIX", "/nonexistent/oxicuda-conda");
  const CompileOptions o{.arch = "sm_90", .include_paths = {toolkit.path}, .toolkit_includes = true};
  // (the fake NVRTC's root, the build directory, comes first and has no include/)
  CHECK(toolkit_include_paths() == std::vector<std::string>{toolkit.path + "/include", toolkit.path + "/include/cccl"});
  CHECK(o.arguments() == StringList{"-arch=sm_90", "-I" + toolkit.path, "-I" + toolkit.path + "/include",
                                    "-I" + toolkit.path + "/include/cccl"});

  FakeToolkit& nvrtc = FakeToolkit::nvrtc();
  nvrtc.reset();
  const Compiled c = Program(kFakePtx).compile(o);
  CHECK(c.kind == CodeKind::cubin);
  // The cache's rule: the headers NVRTC reads there are not in the key.
  SourceOptions s{.compile = {.toolkit_includes = true}};
  CHECK(detail::uncachable("", s).find("toolkit's include directories are given") != std::string::npos);
  s.compile.toolkit_includes = false;
  CHECK(detail::uncachable("", s).empty());
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (12): an include directory that does not exist is an Error before NVRTC runs") {
  FakeToolkit& nvrtc = FakeToolkit::nvrtc();
  nvrtc.reset();
  const CompileOptions o{.include_paths = {"/nonexistent/oxicuda-include"}};
  const Error e = error_of([&] { (void)Program(kFakePtx).compile(o); });
  CHECK(e.code() == ffi::NVRTC_ERROR_INVALID_OPTION);
  CHECK(e.detail() ==
        "CompileOptions::include_paths names '/nonexistent/oxicuda-include', which is not a directory (NVRTC would "
        "ignore it without a word)");
  CHECK(nvrtc.calls("nvrtcCreateProgram") == 0);
  const TempDir dir;
  dir.file("a-file");
  const Error file = error_of([&] {
    (void)module_from_source(ctx, kFakePtx, {.compile = {.include_paths = {dir.path + "/a-file"}}, .cache = false});
  });
  CHECK(file.code() == ffi::NVRTC_ERROR_INVALID_OPTION);
  CHECK(std::string(file.what()).find("oxicuda::module_from_source") != std::string::npos);
  CHECK(nvrtc.calls("nvrtcCreateProgram") == 0);
  // A directory that exists is passed on.
  CHECK(Program(kFakePtx).compile({.include_paths = {dir.path}}).kind == CodeKind::ptx);
}

TEST_CASE("issue 24 (13): the device runtime is found through the same roots, in NVRTC's order") {
  const TempDir conda, home;
  conda.file("lib/libcudadevrt.a", "conda's");
  home.file("lib64/libcudadevrt.a", "the toolkit's");
  const ScopedEnv c("CONDA_PREFIX", conda.path), h("CUDA_HOME", home.path);
  const SourceLocation here = SourceLocation::current();
  CHECK(detail::find_device_runtime(here).path == conda.path + "/lib/libcudadevrt.a");
  {
    const ScopedEnv no_conda("CONDA_PREFIX", "/nonexistent/oxicuda-conda");
    const detail::DeviceRuntimeLibrary lib = detail::find_device_runtime(here);
    CHECK(lib.path == home.path + "/lib64/libcudadevrt.a");
    CHECK(lib.identity == detail::device_runtime_identity(lib.path));
  }
  // The override is the only place looked at; the Error names the call.
  const ScopedEnv own("OXICUDA_LIBCUDADEVRT_PATH", "/nonexistent/oxicuda/libcudadevrt.a");
  const Error e = error_of([&] { (void)detail::find_device_runtime(here, "oxicuda::LtoLinker::add_device_runtime"); });
  CHECK(e.code() == ffi::CUDA_ERROR_FILE_NOT_FOUND);
  CHECK(std::string(e.what()).find("oxicuda::LtoLinker::add_device_runtime") != std::string::npos);
  CHECK(e.detail().find("OXICUDA_LIBCUDADEVRT_PATH='/nonexistent/oxicuda/libcudadevrt.a' names no regular file") == 0);
}

TEST_CASE_FIXTURE(ContextTest, "issue 24 (13): LtoLinker::add_device_runtime adds libcudadevrt.a as a library input") {
  FakeToolkit& jitlink = FakeToolkit::nvjitlink();
  jitlink.reset();
  const TempDir home;
  home.file("lib64/libcudadevrt.a", "DEVICE-RUNTIME-ARCHIVE");
  const ScopedEnv h("OXICUDA_LIBCUDADEVRT_PATH", home.path + "/lib64/libcudadevrt.a");
  const Compiled c = Program(kFakePtx).compile({.arch = "sm_90", .relocatable = true});
  LtoLinker l("sm_90", {}, false);
  l.add(c).add_device_runtime();
  CHECK(jitlink.calls("nvJitLinkAddData") == 2);
  CHECK(l.complete().find("DEVICE-RUNTIME-ARCHIVE") != std::string::npos);
  // Not found: an Error that loses nothing (the link goes on without it).
  {
    const ScopedEnv none("OXICUDA_LIBCUDADEVRT_PATH", home.path + "/nothing.a");
    LtoLinker other("sm_90", {}, false);
    other.add(c);
    CHECK(error_of([&] { other.add_device_runtime(); }).code() == ffi::CUDA_ERROR_FILE_NOT_FOUND);
    CHECK(other.complete().find("DEVICE-RUNTIME-ARCHIVE") == std::string::npos);
  }
  // A moved-from linker is an Error, before any search.
  LtoLinker moved = std::move(l);
  CHECK(error_of([&] { l.add_device_runtime(); }).code() == ffi::CUDA_ERROR_INVALID_HANDLE);
}
