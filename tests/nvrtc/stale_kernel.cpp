// The kernel cache never serves a stale kernel (issue 22 defects 1, 2 and
// 5; issue 28 items 4, 9, 11 and "Also found"), with the real NVRTC on the
// fake driver:
// - every way a source reaches a file on disk (a computed include, comments
//   in the directive, the %: digraph, a line splice, #include_next, a form
//   feed or vertical tab, __has_include), the file changed between two runs
//   and between two processes: the second run gets the new kernel;
// - another NVRTC (or nvJitLink) put first in the search: entries made by
//   the old one are not served;
// - a load failure that is not the entry's fault keeps the entry;
// - an entry that decodes badly or that the driver refuses is discarded.
// The kernel's name comes from the header (NAME), so which kernel a module
// holds tells which header made it. Exits 77 (SKIP) without NVRTC.
#define DOCTEST_CONFIG_IMPLEMENT
#include "fake_driver.hpp"
#include "temp_dirs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

using oxicuda_test::tmp_root;

// A new empty directory of ours.
std::string fresh_dir(const char* what) {
  const std::string dir = oxicuda_test::scratch_path(std::string("oxicuda-stale-") + what);
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  return dir;
}

// A new cache directory, set as OXICUDA_CACHE_DIR.
std::string fresh_cache() {
  const std::string dir = fresh_dir("cache") + "/c";
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  return dir;
}

void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() == 36 && name.substr(32) == ".bin") out.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  return out;
}

bool has_kernel(const Module& m, const char* name) {
  try {
    return static_cast<bool>(m.function(name));
  } catch (const Error&) {
    return false;
  }
}

Module load(const std::string& source, SourceOptions o = {}) {
  if (o.compile.arch.empty()) o.compile.arch = "compute_90";
  return module_from_source(Context::primary(Device::get(0)), source, o);
}

// One way to reach the header `@H@` (an absolute path) from the source.
struct Form {
  const char* name;
  const char* directive;
};
const Form forms[] = {
    {"a computed include", "#define HEADER \"@H@\"\n#include HEADER\n"},
    {"a comment between # and include", "# /* a comment */ include \"@H@\"\n"},
    {"#/**/include", "#/**/include \"@H@\"\n"},
    {"#include/**/", "#include/**/\"@H@\"\n"},
    {"the %: digraph", "%:include \"@H@\"\n"},
    {"a line splice inside the directive", "#inc\\\nlude \"@H@\"\n"},
    {"a line splice with CR LF", "#include \\\r\n\"@H@\"\n"},
    {"#include_next", "#include_next \"@H@\"\n"},
    {"a form feed and a vertical tab inside the directive", "#\finclude\v\"@H@\"\n"},
    {"a relative include beside the source's name", "#include \"h.cuh\"\n"},
};
constexpr int form_count = sizeof forms / sizeof forms[0];

// The source of form i, with the header at `header`; its kernel is NAME.
std::string source_of(int i, const std::string& header) {
  std::string d = forms[i].directive;
  const std::size_t at = d.find("@H@");
  if (at != std::string::npos) d.replace(at, 3, header);
  return d + "extern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
}

// __has_include: the header's existence picks the kernel.
std::string probe_source(const std::string& header) {
  return "#if __has_include(\"" + header + "\")\n#define NAME present\n#else\n#define NAME absent\n#endif\n"
         "extern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
}

bool child() { return std::getenv("STALE_CHILD") != nullptr; }

// Runs test case `name` of this program in a child process with `env`
// ("A=1 B=2 ..." before the command); whether it passed.
bool run_child(const std::string& name, const std::string& env) {
  const char* self = std::getenv("OXICUDA_STALE_TESTS");
  REQUIRE(self);
  const std::string log = tmp_root() + "/oxicuda-stale-child-" + std::to_string(::getpid()) + ".log";
  const std::string cmd = "env STALE_CHILD=1 " + env + " '" + self + "' '--test-case=" + name + "' > " + log + " 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  if (!ok) std::system(("cat " + log).c_str());
  std::remove(log.c_str());
  return ok;
}

}  // namespace

TEST_CASE("stale: each way to reach a file on disk; the header changed between two runs") {
  if (child()) return;
  for (int i = 0; i < form_count; ++i) {
    const std::string form = forms[i].name;
    CAPTURE(form);
    (void)fresh_cache();
    const std::string where = fresh_dir("inc");
    const std::string header = where + "/h.cuh";
    SourceOptions o;
    o.name = where + "/k.cu";  // a relative include is looked for beside it
    write_file(header, "#define NAME k111\n");
    const Module first = load(source_of(i, header), o);
    CHECK(has_kernel(first, "k111"));
    CHECK(std::string(first.info_log()).find("kernel cache: not stored, since NVRTC read \"") != std::string::npos);
    write_file(header, "#define NAME k222\n");
    const Module second = load(source_of(i, header), o);
    CHECK(has_kernel(second, "k222"));  // the new kernel,
    CHECK_FALSE(has_kernel(second, "k111"));  // never the old one
  }
}

TEST_CASE("stale: __has_include, a header appearing and disappearing between two runs") {
  if (child()) return;
  (void)fresh_cache();
  const std::string header = fresh_dir("probe") + "/maybe.cuh";
  const Module first = load(probe_source(header));
  CHECK(has_kernel(first, "absent"));
  CHECK(std::string(first.info_log()).find("kernel cache: not used, since the source uses __has_include") !=
        std::string::npos);
  write_file(header, "\n");
  CHECK(has_kernel(load(probe_source(header)), "present"));
  std::remove(header.c_str());
  CHECK(has_kernel(load(probe_source(header)), "absent"));
  // Spelled by a token paste, or across a line splice: still refused.
  const std::string pasted = "#define CAT(a, b) a##b\n#if CAT(__has_, include)(\"" + header +
                             "\")\n#define NAME present\n#else\n#define NAME absent\n#endif\n"
                             "extern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
  CHECK(std::string(load(pasted).info_log()).find("kernel cache: not used, since the source uses the token-paste") !=
        std::string::npos);
  write_file(header, "\n");
  CHECK(has_kernel(load(pasted), "present"));
  const std::string spliced = "#if __has_inc\\\nlude(\"" + header + "\")\n#define NAME present\n#else\n#define NAME "
                              "absent\n#endif\nextern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
  CHECK(std::string(load(spliced).info_log()).find("not used, since the source uses __has_include") !=
        std::string::npos);
  // In a header given in memory, too.
  SourceOptions o;
  o.headers.add("probe.cuh").add(probe_source(header));
  CHECK(std::string(load("#include \"probe.cuh\"\n", o).info_log())
            .find("not used, since a header uses __has_include") != std::string::npos);
}

TEST_CASE("stale: a source whose headers are all given in memory is stored and served") {
  if (child()) return;
  const std::string dir = fresh_cache();
  SourceOptions o;
  o.headers.add("name.cuh").add("#define NAME k333\n");
  const unsigned long hits = kernel_cache_stats().hits;
  const Module first = load("#include \"name.cuh\"\nextern \"C\" __global__ void NAME(int* p) { *p = 1; }\n", o);
  CHECK(std::string(first.info_log()).find("kernel cache:") == std::string::npos);
  CHECK(entries(dir).size() == 1);
  const Module second = load("#include \"name.cuh\"\nextern \"C\" __global__ void NAME(int* p) { *p = 1; }\n", o);
  CHECK(kernel_cache_stats().hits == hits + 1);
  CHECK(has_kernel(second, "k333"));
  // No trace (a temporary file, <key>.bin.tmp.XXXXXX and its .json) is left.
  CHECK(entries(dir).size() == 1);
  std::size_t others = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) others += std::string(e->d_name).find(".tmp.") != std::string::npos;
    ::closedir(d);
  }
  CHECK(others == 0);
}

TEST_CASE("stale: options that read files are not cached, with a note") {
  if (child()) return;
  (void)fresh_cache();
  const std::string where = fresh_dir("opt");
  write_file(where + "/pre.cuh", "#define NAME k444\n");
  const std::string source = "extern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
  for (const std::string& option : {"-include=" + where + "/pre.cuh", "--pre-include=" + where + "/pre.cuh"}) {
    SourceOptions o;
    o.compile.extra.add(option);
    const Module m = load(source, o);
    CHECK(std::string(m.info_log()).find("kernel cache: not used, since the option '" + option) != std::string::npos);
  }
  SourceOptions o;
  o.compile.extra.add("--fdevice-time-trace=" + where + "/mine");
  CHECK(std::string(load(source + "#define NAME k5\n", o).info_log()).find("may read or write files") !=
        std::string::npos);
}

TEST_CASE("stale: a header given in memory whose name also names a file on disk (review)") {
  // Given "d/x.h" (which includes "y.h") and "d/y.h": NVRTC resolves "y.h"
  // relative to d/x.h on disk first, reads ./d/y.h, and its trace names
  // "d/y.h", the name of a header given. It was stored, and served after
  // ./d/y.h changed.
  if (child()) return;
  (void)fresh_cache();
  const std::string work = fresh_dir("named");
  REQUIRE(::mkdir((work + "/d").c_str(), 0700) == 0);
  write_file(work + "/d/y.h", "#define NAME disk_one\n");
  char old_cwd[4096];
  REQUIRE(::getcwd(old_cwd, sizeof old_cwd));
  REQUIRE(::chdir(work.c_str()) == 0);
  SourceOptions o;
  o.headers.add("d/x.h").add("#include \"y.h\"\n").add("d/y.h").add("#define NAME memory_y\n");
  const std::string source = "#include \"d/x.h\"\nextern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
  const Module first = load(source, o);
  const bool read_disk = has_kernel(first, "disk_one");
  MESSAGE("NVRTC read ", read_disk ? "the file on disk" : "the header given");
  CHECK(std::string(first.info_log()).find("a file by that name exists on disk") != std::string::npos);
  write_file(work + "/d/y.h", "#define NAME disk_two\n");
  const Module second = load(source, o);
  CHECK_FALSE(has_kernel(second, "disk_one"));
  if (read_disk) CHECK(has_kernel(second, "disk_two"));
  REQUIRE(::chdir(old_cwd) == 0);
}

TEST_CASE("stale: __has_include in an option's macro or a name expression is not cached (review)") {
  if (child()) return;
  (void)fresh_cache();
  const std::string header = fresh_dir("probe2") + "/cfg.cuh";
  SourceOptions o;
  o.compile.defines.add("HAS=__has_include(\"" + header + "\")");
  const std::string source = "#if HAS\n#define NAME present\n#else\n#define NAME absent\n#endif\n"
                             "extern \"C\" __global__ void NAME(int* p) { *p = 1; }\n";
  const Module first = load(source, o);
  CHECK(has_kernel(first, "absent"));
  CHECK(std::string(first.info_log()).find("kernel cache: not used, since the option '-DHAS=") != std::string::npos);
  write_file(header, "\n");
  CHECK(has_kernel(load(source, o), "present"));
  SourceOptions n;
  n.name_expressions.add("k<__has_include(\"" + header + "\")>");
  const Module m = load("template <int N> __global__ void k(int* p) { *p = N; }\n", n);
  CHECK(std::string(m.info_log()).find("kernel cache: not used, since the name expression 'k<__has_include(") !=
        std::string::npos);
}

TEST_CASE("stale: a compile under RLIMIT_FSIZE (child)") {
  if (!child() || !std::getenv("STALE_FSIZE")) return;
  struct rlimit rl {2048, 2048};
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &rl) == 0);
  const Module m = load("extern \"C\" __global__ void fsize_kernel(int* p) { *p = 1; }\n");
  CHECK(has_kernel(m, "fsize_kernel"));
  CHECK(std::string(m.info_log()).find("file-size limit (RLIMIT_FSIZE, 2048 bytes)") != std::string::npos);
}

TEST_CASE("stale: NVRTC's trace is not written under RLIMIT_FSIZE, which would end the process (review)") {
  // NVRTC writes its trace itself, before the cache's own limit checks:
  // under `ulimit -f 2` a cacheable compile died of SIGXFSZ.
  if (child()) return;
  (void)fresh_cache();
  CHECK(run_child("stale: a compile under RLIMIT_FSIZE (child)", "STALE_FSIZE=1"));
}

// ---------------------------------------------------------------------------
// Between two processes.

TEST_CASE("stale: one run (child)") {
  if (!child()) return;
  const char* form = std::getenv("STALE_FORM");
  const char* header = std::getenv("STALE_HEADER");
  const char* expect = std::getenv("STALE_EXPECT");
  REQUIRE(form);
  REQUIRE(header);
  REQUIRE(expect);
  const int i = std::atoi(form);
  SourceOptions o;
  const std::string h = header;
  o.name = h.substr(0, h.rfind('/')) + "/k.cu";
  const Module m = load(i < 0 ? probe_source(h) : source_of(i, h), o);
  CHECK(has_kernel(m, expect));
}

TEST_CASE("stale: the header changed between two processes") {
  if (child()) return;
  for (int i = -1; i < form_count; ++i) {
    const std::string form = i < 0 ? "__has_include" : forms[i].name;
    CAPTURE(form);
    const std::string dir = fresh_cache();
    const std::string header = fresh_dir("proc") + "/h.cuh";
    const std::string env = "STALE_FORM=" + std::to_string(i) + " STALE_HEADER='" + header + "' ";
    if (i >= 0) write_file(header, "#define NAME k111\n");
    CHECK(run_child("stale: one run (child)", env + (i < 0 ? "STALE_EXPECT=absent" : "STALE_EXPECT=k111")));
    if (i >= 0)
      write_file(header, "#define NAME k222\n");
    else
      write_file(header, "\n");
    CHECK(run_child("stale: one run (child)", env + (i < 0 ? "STALE_EXPECT=present" : "STALE_EXPECT=k222")));
  }
}

// ---------------------------------------------------------------------------
// Which compiler: the one that is loaded.

namespace {
const char* const kLtoSource = "extern \"C\" __global__ void lto_kernel(float* p) { *p = 1.0f; }\n";
}  // namespace

TEST_CASE("identity: one compile (child)") {
  if (!child()) return;
  SourceOptions o;
  o.compile.arch = std::getenv("IDENTITY_LTO") ? "sm_90" : "compute_90";
  o.compile.lto = std::getenv("IDENTITY_LTO") != nullptr;
  try {
    (void)module_from_source(Context::primary(Device::get(0)), kLtoSource, o);
  } catch (const Error& e) {
    MESSAGE("the compile failed (a fake compiler may make what the fake driver cannot load): ", e.what());
  }
  const KernelCacheStats s = kernel_cache_stats();
  const char* expect = std::getenv("IDENTITY_EXPECT");
  REQUIRE(expect);
  if (std::string(expect) == "miss") {
    CHECK(s.hits == 0);
  } else {
    CHECK(s.hits == 1);
  }
}

TEST_CASE("identity: another NVRTC or nvJitLink first in the search; entries of the old one are not served") {
  if (child()) return;
  const char* fake_nvrtc = std::getenv("FAKE_NVRTC_LIBRARY");
  const char* fake_nvjitlink = std::getenv("FAKE_NVJITLINK_LIBRARY");
  REQUIRE(fake_nvrtc);
  REQUIRE(fake_nvjitlink);
  auto set = [](const char* name) { return std::getenv(name) && *std::getenv(name); };
  if (set("OXICUDA_LIBNVRTC_PATH") || set("OXICUDA_LIBNVJITLINK_PATH")) {
    MESSAGE("skipped: OXICUDA_LIBNVRTC_PATH or OXICUDA_LIBNVJITLINK_PATH names the library; no search to change");
    return;
  }
  for (const bool lto : {false, true}) {
    CAPTURE(lto);
    (void)fresh_cache();
    // A directory on LD_LIBRARY_PATH, empty at first: the search finds
    // the system's library (ld.so.cache or a toolkit directory).
    const std::string first = fresh_dir("lib");
    const std::string env = "LD_LIBRARY_PATH='" + first + "' " + (lto ? "IDENTITY_LTO=1 " : "");
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=miss"));
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=hit"));
    // Another library added to that directory: found first now. (A link:
    // the file it names is another library than the system's.)
    const std::string other = first + (lto ? "/libnvJitLink.so.13" : "/libnvrtc.so.13");
    REQUIRE(::symlink(lto ? fake_nvjitlink : fake_nvrtc, other.c_str()) == 0);
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=miss"));
  }
}

TEST_CASE("identity: OXICUDA_LIBNVRTC_PATH through a directory link re-pointed; a glibc-hwcaps directory (review)") {
  if (child()) return;
  const char* fake_nvrtc = std::getenv("FAKE_NVRTC_LIBRARY");
  REQUIRE(fake_nvrtc);
  const LibraryInfo& real = nvrtc_info();
  REQUIRE(real.found);
  char* real_path = ::realpath(real.path.c_str(), nullptr);
  REQUIRE(real_path);
  const std::string system_nvrtc = real_path;
  std::free(real_path);
  {
    // cur -> v1 (the real NVRTC), then cur -> v2 (another): the variable's
    // text is the same; the library is not.
    (void)fresh_cache();
    const std::string root = fresh_dir("linked");
    REQUIRE(::mkdir((root + "/v1").c_str(), 0700) == 0);
    REQUIRE(::mkdir((root + "/v2").c_str(), 0700) == 0);
    REQUIRE(::symlink(system_nvrtc.c_str(), (root + "/v1/libnvrtc.so.13").c_str()) == 0);
    REQUIRE(::symlink(fake_nvrtc, (root + "/v2/libnvrtc.so.13").c_str()) == 0);
    REQUIRE(::symlink("v1", (root + "/cur").c_str()) == 0);
    const std::string env = "OXICUDA_LIBNVRTC_PATH='" + root + "/cur/libnvrtc.so.13' ";
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=miss"));
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=hit"));
    REQUIRE(::unlink((root + "/cur").c_str()) == 0);
    REQUIRE(::symlink("v2", (root + "/cur").c_str()) == 0);
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=miss"));
  }
  auto set = [](const char* name) { return std::getenv(name) && *std::getenv(name); };
  if (set("OXICUDA_LIBNVRTC_PATH")) {
    MESSAGE("glibc-hwcaps part skipped: OXICUDA_LIBNVRTC_PATH names the library; no search to change");
    return;
  }
  {
    // glibc searches <dir>/glibc-hwcaps/x86-64-v2/ before <dir> itself.
    (void)fresh_cache();
    const std::string first = fresh_dir("hwcaps");
    REQUIRE(::mkdir((first + "/glibc-hwcaps").c_str(), 0700) == 0);
    REQUIRE(::mkdir((first + "/glibc-hwcaps/x86-64-v2").c_str(), 0700) == 0);
    const std::string env = "LD_LIBRARY_PATH='" + first + "' ";
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=miss"));
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=hit"));
    REQUIRE(::symlink(fake_nvrtc, (first + "/glibc-hwcaps/x86-64-v2/libnvrtc.so.13").c_str()) == 0);
    CHECK(run_child("identity: one compile (child)", env + "IDENTITY_EXPECT=miss"));
  }
}

TEST_CASE("identity: NVRTC's names its file and its builtins library; a change of either is noticed") {
  if (child()) return;
  const std::string dir = fresh_cache();
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string id = detail::library_identity_for_cache(
      dir, "nvrtc", "OXICUDA_LIBNVRTC_PATH", detail::nvrtc_files,
      sizeof detail::nvrtc_files / sizeof detail::nvrtc_files[0], &nvrtc_info);
  CHECK(id.find("/libnvrtc-builtins.so.") != std::string::npos);
  CHECK(detail::identity_files_unchanged(id));
  // Another fingerprint for the library, or for its builtins: not the same files.
  std::vector<std::string> lines;
  for (std::size_t at = 0; at <= id.size();) {
    const std::size_t end = std::min(id.find('\n', at), id.size());
    lines.push_back(id.substr(at, end - at));
    at = end + 1;
  }
  REQUIRE(lines.size() == 5);
  for (const std::size_t changed : {std::size_t{1}, std::size_t{4}}) {
    std::string forged;
    for (std::size_t k = 0; k < lines.size(); ++k) forged += (k ? "\n" : "") + (k == changed ? "1 2 3 4.5" : lines[k]);
    CHECK_FALSE(detail::identity_files_unchanged(forged));
  }
}

// ---------------------------------------------------------------------------
// What a hit does with an entry it cannot use.

TEST_CASE("hit: a load failure that is not the entry's fault keeps the entry") {
  if (child()) return;
  const std::string dir = fresh_cache();
  const std::string source = "extern \"C\" __global__ void kept(int* p) { *p = 1; }\n";
  (void)load(source);
  const std::vector<std::string> made = entries(dir);
  REQUIRE(made.size() == 1);
  struct stat before {};
  REQUIRE(::stat(made[0].c_str(), &before) == 0);
  Fake& fake = Fake::get();
  fake.fail("cuModuleLoadDataEx", 1, ffi::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(error_of([&] { (void)load(source); }).code() == ffi::CUDA_ERROR_OUT_OF_MEMORY);
  fake.reset();
  struct stat after {};
  REQUIRE(::stat(made[0].c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);  // the same file: neither removed nor written again
  // A bad JitOptions value is the caller's: an Error, the entry kept.
  SourceOptions bad;
  bad.jit.log_bytes = JitOptions::max_log_bytes + 1;
  CHECK(error_of([&] { (void)load(source, bad); }).code() == ffi::CUDA_ERROR_INVALID_VALUE);
  REQUIRE(::stat(made[0].c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);
  const unsigned long hits = kernel_cache_stats().hits;
  CHECK(has_kernel(load(source), "kept"));
  CHECK(kernel_cache_stats().hits == hits + 1);
}

TEST_CASE("hit: an entry refused by the driver, or by the decoder, is discarded with a note and compiled again") {
  if (child()) return;
  const std::string dir = fresh_cache();
  const std::string source = "extern \"C\" __global__ void again(int* p) { *p = 1; }\n";
  (void)load(source);
  const std::vector<std::string> made = entries(dir);
  REQUIRE(made.size() == 1);
  const std::string key = made[0].substr(made[0].rfind('/') + 1, 32);
  auto plant = [&](const std::string& payload) {
    std::string note;
    REQUIRE(detail::cache_write(dir, key, payload, note));
  };
  struct Bad {
    const char* what;
    std::string payload;
    const char* note;
  };
  std::string elf(200, '\0');
  elf.replace(0, 5, "\x7f" "ELF\x02", 5);
  elf[40] = static_cast<char>(0xC8);  // section headers at 200: past the end (a cubin cut in half)
  elf[58] = 64;
  elf[60] = 3;
  const Bad bad[] = {
      {"PTX the driver refuses", detail::encode_entry({true, "", "", "this is not PTX"}),
       "the driver did not load it (CUDA_ERROR_INVALID_PTX"},
      {"PTX with a NUL inside", detail::encode_entry({true, "", "", std::string(".version 8.0\0.target", 20)}),
       "its PTX has a NUL byte at offset 12"},
      {"a cubin cut in half", detail::encode_entry({false, "", "", elf}), "image is truncated"},
      {"data after the image", detail::encode_entry({true, "", "", ".version 8.0\n"}) + "x",
       "1 bytes follow its image"},
      {"a name expression without its NUL", detail::encode_entry({true, std::string("again", 5), "", ".version 8.0\n"}),
       "does not end with a NUL"},
      {"a field longer than the entry", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8), "runs past its end"},
  };
  for (const Bad& b : bad) {
    const std::string what = b.what;
    CAPTURE(what);
    plant(b.payload);
    const unsigned long misses = kernel_cache_stats().misses;
    const Module m = load(source);
    CHECK(kernel_cache_stats().misses == misses + 1);
    const std::string log(m.info_log());
    CHECK(log.find("oxicuda cache: discarded " + made[0] + ": ") != std::string::npos);
    CHECK(log.find(b.note) != std::string::npos);
    CHECK(has_kernel(m, "again"));
  }
  // An entry with name expressions that are not the key's.
  SourceOptions named;
  named.name_expressions.add("again");
  const std::string with_names = "extern \"C\" __global__ void again(int* p) { *p = 1; }\n// named\n";
  (void)load(with_names, named);
  std::string note;
  for (const std::string& f : entries(dir)) {
    const std::string k = f.substr(f.rfind('/') + 1, 32);
    if (k == key) continue;
    REQUIRE(detail::cache_write(dir, k, detail::encode_entry({true, std::string("other\0again\0", 12), "",
                                                              ".version 8.0\n.target sm_90\n"}),
                                note));
  }
  const std::string log(load(with_names, named).info_log());
  CHECK(log.find("does not hold the name expressions asked for") != std::string::npos);
}

TEST_CASE("an NVRTC without --fdevice-time-trace (child)") {
  if (!child()) return;
  const std::string dir = std::getenv("OXICUDA_CACHE_DIR");
  const std::string ptx = ".version 8.0\n.target sm_90\n.visible .entry fake_k() { ret; }\n";
  const Module m = load(ptx);
  const bool rejects = std::getenv("FAKE_NVRTC_NO_TRACE") != nullptr;
  if (rejects) {
    CHECK(std::string(m.info_log()).find("kernel cache: not stored, since this NVRTC does not take "
                                         "--fdevice-time-trace") != std::string::npos);
    CHECK(entries(dir).empty());
  } else {
    CHECK(entries(dir).size() == 1);
    (void)load(ptx);
    CHECK(kernel_cache_stats().hits == 1);
  }
}

TEST_CASE("an NVRTC without --fdevice-time-trace compiles uncached, with a note (the fake NVRTC)") {
  if (child()) return;
  const char* fake_nvrtc = std::getenv("FAKE_NVRTC_LIBRARY");
  REQUIRE(fake_nvrtc);
  const std::string env = std::string("OXICUDA_LIBNVRTC_PATH='") + fake_nvrtc + "' ";
  (void)fresh_cache();
  CHECK(run_child("an NVRTC without --fdevice-time-trace (child)", env + "FAKE_NVRTC_NO_TRACE=1"));
  (void)fresh_cache();
  CHECK(run_child("an NVRTC without --fdevice-time-trace (child)", env));
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  ::unsetenv("OXICUDA_CACHE");
  if (!child()) {
    const LibraryInfo& info = nvrtc_info();
    if (!info.found) {
      std::fprintf(stderr, "SKIP: no NVRTC: %s\n", info.reason.c_str());
      return 77;
    }
  }
  return context.run();
}
