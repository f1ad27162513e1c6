// The real NVRTC and nvJitLink (found by their search order, or named by
// OXICUDA_LIBNVRTC_PATH / OXICUDA_LIBNVJITLINK_PATH), on the fake driver:
// compiling, a failed compile and its log, headers, options and name
// expressions, PTX, cubin and LTO-IR, an LTO link, and the on-disk cache
// (hits, misses after a change of each part of the key, a corrupt entry,
// refused directories and entries, eviction, several processes writing at
// once, and a hit in a fresh process that does not load NVRTC). Exits 77
// (meson's SKIP) when NVRTC is not found; .ci/run fails then.
#define DOCTEST_CONFIG_IMPLEMENT
#include "fake_driver.hpp"
#include "temp_dirs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dirent.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

const char* const kSource = R"(
#include "scale.cuh"
template <class T>
__global__ void saxpy(T* y, const T* x, T a, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * SCALE + y[i];
}
extern "C" __global__ void fill(float* y, float v, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = v * FACTOR;
}
)";

SourceOptions options() {
  return {.compile = {.arch = "compute_90", .std = "c++17", .defines = {"FACTOR=3"}},
          .headers = {"scale.cuh", "#pragma once\n#define SCALE 1"},
          .name_expressions = {"saxpy<float>", "saxpy<double>"}};
}

// A new empty directory under TMPDIR, set as OXICUDA_CACHE_DIR.
std::string fresh_cache_dir() {
  const std::string dir = oxicuda_test::scratch_path("oxicuda-cache-test");
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  return dir;
}

// The directory's files whose names end with `suffix`.
std::vector<std::string> files(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  return out;
}

// Writes `text` to a new file at `path`.
void write_file(const std::string& path, const char* text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fputs(text, f);
  std::fclose(f);
}

// The cache entry that is not the NVRTC version record: the largest one.
std::string entry_of(const std::string& dir) {
  std::string best;
  long size = -1;
  for (const std::string& f : files(dir, ".bin")) {
    struct stat st {};
    ::stat(f.c_str(), &st);
    if (st.st_size > size) size = st.st_size, best = f;
  }
  return best;
}

// Whether any library with "libnvrtc" in its name is loaded in this process.
bool nvrtc_loaded() {
  int found = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name && std::string(info->dlpi_name).find("libnvrtc") != std::string::npos)
          *static_cast<int*>(data) = 1;
        return 0;
      },
      &found);
  return found != 0;
}

// Whether this process was started by a test below as one of its children.
bool child() { return std::getenv("OXICUDA_NVRTC_CHILD") != nullptr; }

// Runs `n` copies of this program's test case `name` at once, in processes
// of their own; whether all passed.
bool run_children(const std::string& name, int n) {
  const char* self = std::getenv("OXICUDA_NVRTC_TESTS");
  REQUIRE(self);
  std::string cmd = "pids=''; ";
  for (int i = 0; i < n; ++i)
    cmd += std::string("OXICUDA_NVRTC_CHILD=1 '") + self + "' '--test-case=" + name +
           "' > /dev/null 2>&1 & pids=\"$pids $!\"; ";
  cmd += "fail=0; for p in $pids; do wait $p || fail=1; done; exit $fail";
  return std::system(cmd.c_str()) == 0;
}

Module load(const SourceOptions& o = options(), std::string_view source = kSource) {
  return module_from_source(Context::primary(Device::get(0)), source, o);
}

}  // namespace

TEST_CASE("NVRTC: what the loader found, its version and architectures") {
  const LibraryInfo& info = nvrtc_info();
  REQUIRE(info.found);
  CHECK(info.version >= 11020);
  CHECK(nvrtc_version() == info.version);
  CHECK_FALSE(info.path.empty());
  const ArchList archs = supported_archs();
  REQUIRE(archs.count > 0);
  CHECK(archs.contains(90));
  CHECK(arch_for(ComputeCapability{9, 0}, archs).arch == "sm_90");
  CHECK(arch_for(ComputeCapability{99, 0}, archs).arch == "compute_" + std::to_string(archs.archs[archs.count - 1]));
}

TEST_CASE("NVRTC: a compile with headers, options and name expressions; PTX, cubin and LTO-IR") {
  Program p(kSource, "saxpy.cu");
  p.header("scale.cuh", "#pragma once\n#define SCALE 2").name_expression("saxpy<float>").name_expression("saxpy<double>");
  const Compiled ptx = p.compile({.arch = "compute_90", .std = "c++17", .defines = {"FACTOR=3"}, .line_info = true});
  CHECK(ptx.kind == CodeKind::ptx);
  CHECK(ptx.code.find(".target sm_90") != std::string::npos);
  CHECK(ptx.code.find(".entry fill") != std::string::npos);
  const std::string f = std::string(ptx.lowered_name("saxpy<float>"));
  const std::string d = std::string(ptx.lowered_name("saxpy<double>"));
  CHECK(f.rfind("_Z", 0) == 0);
  CHECK(f != d);
  CHECK(ptx.code.find(".entry " + f) != std::string::npos);
  CHECK(ptx.code.find(".entry " + d) != std::string::npos);
  // FACTOR=3 reached the source: the constant 3 (0f40400000) is in fill.
  CHECK(ptx.code.find("0f40400000") != std::string::npos);

  const Compiled cubin = p.compile({.arch = "sm_90", .defines = {"FACTOR=3"}});
  CHECK(cubin.kind == CodeKind::cubin);
  CHECK(cubin.code.rfind("\x7f" "ELF", 0) == 0);
  const Compiled lto = p.compile({.arch = "sm_90", .defines = {"FACTOR=3"}, .relocatable = true, .lto = true});
  CHECK(lto.kind == CodeKind::ltoir);
  CHECK(lto.code.size() > 16);
  CHECK(lto.code.rfind("\x7f" "ELF", 0) != 0);
  // Without the define, FACTOR is undefined: a compile error with its log.
  const Error e = error_of([&] { (void)p.compile({.arch = "compute_90"}); });
  CHECK(e.code() == ffi::NVRTC_ERROR_COMPILATION);
  CHECK(e.call() == "nvrtcCompileProgram");
  CHECK(e.detail().find("compiling 'saxpy.cu'") == 0);
  CHECK(e.detail().find("NVRTC log:\nsaxpy.cu(") != std::string::npos);
  CHECK(e.detail().find("error: identifier \"FACTOR\" is undefined") != std::string::npos);
  // A name expression that names nothing.
  CHECK(error_of([&] { (void)Program(kSource).name_expression("nothing<int>").compile({.defines = {"FACTOR=1"}}); })
            .code() == ffi::NVRTC_ERROR_COMPILATION);
  // An option NVRTC does not know.
  CHECK(error_of([&] { (void)p.compile({.extra = {"--no-such-option"}}); }).code() == ffi::NVRTC_ERROR_INVALID_OPTION);
}

TEST_CASE("nvJitLink: NVRTC's LTO-IR linked into a cubin; an unresolved function is an error with the log") {
  REQUIRE(nvjitlink_info().found);
  const Compiled a = Program(R"(extern __device__ float twice(float);
extern "C" __global__ void k(float* x) { x[0] = twice(x[0]); })", "a.cu").compile({.arch = "sm_90", .relocatable = true, .lto = true});
  const Compiled b = Program("__device__ float twice(float v) { return 2 * v; }", "b.cu")
                         .compile({.arch = "sm_90", .relocatable = true, .lto = true});
  LtoLinker l("sm_90");
  l.add(a, "a").add(b, "b");
  const std::string cubin = l.complete();
  CHECK(cubin.rfind("\x7f" "ELF", 0) == 0);
  LtoLinker alone("sm_90");
  alone.add(a, "a");
  const Error e = error_of([&] { (void)alone.complete(); });
  CHECK(e.library() == Library::nvjitlink);
  CHECK(e.detail().find("nvJitLink error log:") != std::string::npos);
  CHECK(e.detail().find("_Z5twicef") != std::string::npos);
}

TEST_CASE("module_from_source: the module, with the name expressions as kernel names (fake driver)") {
  ::setenv("OXICUDA_CACHE", "0", 1);
  const Module m = load();
  ::unsetenv("OXICUDA_CACHE");
  // The fake driver reads the PTX's entries and their parameters.
  const auto k = m.kernel<void(float*, const float*, float, unsigned)>("saxpy<float>");
  CHECK(k.function().name().rfind("_Z", 0) == 0);
  CHECK(m.function("fill"));
  CHECK(error_of([&] { (void)m.kernel<void(float*, const float*, float, unsigned)>("saxpy<double>"); }).code() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("cache: a miss then a hit; the directory is private; OXICUDA_CACHE=0 writes nothing") {
  const std::string dir = fresh_cache_dir();
  const KernelCacheStats s0 = kernel_cache_stats();
  const Module a = load();
  CHECK(kernel_cache_stats().misses == s0.misses + 1);
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  const Module b = load();
  CHECK(kernel_cache_stats().hits == s0.hits + 1);
  CHECK(b.function("saxpy<float>").name() == a.function("saxpy<float>").name());
  CHECK(files(dir, ".tmp").empty());

  const std::string off = dir + "-off";
  ::setenv("OXICUDA_CACHE_DIR", off.c_str(), 1);
  ::setenv("OXICUDA_CACHE", "0", 1);
  (void)load();
  ::unsetenv("OXICUDA_CACHE");
  CHECK(::stat(off.c_str(), &st) != 0);
}

TEST_CASE("cache: a change of any part of the key is a miss") {
  (void)fresh_cache_dir();
  (void)load();
  auto misses = [] { return kernel_cache_stats().misses; };
  SourceOptions o = options();
  unsigned long before = misses();
  (void)load(o, std::string(kSource) + "\n// changed");
  CHECK(misses() == before + 1);
  o.headers = {"scale.cuh", "#pragma once\n#define SCALE 1\n#define OTHER 1"};
  before = misses();
  (void)load(o);
  CHECK(misses() == before + 1);
  o = options();
  o.compile.defines = {"FACTOR=4"};
  before = misses();
  (void)load(o);
  CHECK(misses() == before + 1);
  o = options();
  o.compile.arch = "compute_80";
  before = misses();
  (void)load(o);
  CHECK(misses() == before + 1);
  o = options();
  o.name_expressions = {"saxpy<float>"};
  before = misses();
  (void)load(o);
  CHECK(misses() == before + 1);
  // The same again: hits, no more misses.
  before = misses();
  (void)load(o);
  CHECK(misses() == before);
  // Which NVRTC compiles (its file and version) is part of the key.
  CHECK(detail::source_key(kSource, options(), "sm_90", "lib\n13000") !=
        detail::source_key(kSource, options(), "sm_90", "lib\n12080"));
  CHECK(detail::source_key(kSource, options(), "sm_90", "lib\n13000") ==
        detail::source_key(kSource, options(), "sm_90", "lib\n13000"));
}

namespace {
int identity_asks = 0;
std::string identity_file;
const LibraryInfo& identity_info() noexcept {
  static LibraryInfo info;
  ++identity_asks;
  info.found = true;
  info.library = info.path = identity_file;
  info.version = 13000;
  return info;
}
}  // namespace

TEST_CASE("cache: the compiler's identity is its file (path, size, time) and version, read without loading it") {
  const std::string dir = fresh_cache_dir();
  identity_file = dir + "-libfake.so";
  auto write = [](const char* bytes) { write_file(identity_file, bytes); };
  write("one");
  auto identity = [&] {
    return detail::library_identity_for_cache(dir, "test", "OXICUDA_TEST_NO_SUCH_VARIABLE", nullptr, 0,
                                              &identity_info);
  };
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string first = identity();
  CHECK(identity_asks == 1);
  CHECK(first.rfind(identity_file + "\n", 0) == 0);  // path; device, inode, size, time
  CHECK(first.find(" 3 ") != std::string::npos);
  CHECK(first.substr(first.rfind('\n')) == "\n13000");
  CHECK(identity() == first);
  CHECK(identity_asks == 1);  // from the record: the library was not asked again
  write("a patch release");    // same version, another file
  const std::string second = identity();
  CHECK(identity_asks == 2);
  CHECK(second != first);
  std::remove(identity_file.c_str());
}

TEST_CASE("cache: a source that includes files from disk is compiled every time, and says why") {
  (void)fresh_cache_dir();
  const unsigned long misses = kernel_cache_stats().misses, hits = kernel_cache_stats().hits;
  SourceOptions o = options();
  const std::string source = std::string(kSource) + "#include \"on_disk.cuh\"\n";
  o.headers.add("on_disk.cuh").add("#define ON_DISK 1");  // given: the cache may serve it
  (void)load(o, source);
  (void)load(o, source);
  CHECK(kernel_cache_stats().misses == misses + 1);
  CHECK(kernel_cache_stats().hits == hits + 1);
  // Only on disk (NVRTC finds it beside the program's name): not cached.
  const std::string where = oxicuda_test::scratch_path("oxicuda-inc");
  REQUIRE(::mkdir(where.c_str(), 0700) == 0);
  write_file(where + "/disk_only.cuh", "#define DISK_ONLY 1\n");
  SourceOptions d = options();
  d.name = where + "/k.cu";
  const std::string disk_source = std::string(kSource) + "#include \"disk_only.cuh\"\n";
  Module m = load(d, disk_source);
  (void)load(d, disk_source);
  CHECK(kernel_cache_stats().misses == misses + 3);  // looked up, compiled, not stored: twice
  CHECK(kernel_cache_stats().hits == hits + 1);
  const std::string log(m.info_log());
  CHECK(log.find("kernel cache: not stored, since NVRTC read \"") != std::string::npos);
  CHECK(log.find("disk_only.cuh\" from disk (it is not among the headers given)") != std::string::npos);
  d = options();
  d.compile.include_paths = {where};
  CHECK(std::string(load(d).info_log()).find("kernel cache: not used, since include paths are given") !=
        std::string::npos);
  std::system(("rm -rf '" + where + "'").c_str());
}

TEST_CASE("cache: a corrupt or truncated entry is discarded and compiled again") {
  const std::string dir = fresh_cache_dir();
  (void)load();
  const std::string entry = entry_of(dir);
  REQUIRE_FALSE(entry.empty());
  struct stat st {};
  ::stat(entry.c_str(), &st);
  // One byte changed in the middle.
  if (std::FILE* f = std::fopen(entry.c_str(), "r+b")) {
    std::fseek(f, st.st_size / 2, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, st.st_size / 2, SEEK_SET);
    std::fputc(c ^ 0x55, f);
    std::fclose(f);
  }
  unsigned long misses = kernel_cache_stats().misses;
  Module m = load();
  CHECK(kernel_cache_stats().misses == misses + 1);
  CHECK(std::string(m.info_log()).find("oxicuda cache: discarded " + entry) != std::string::npos);
  CHECK(m.function("saxpy<float>"));
  // Truncated.
  REQUIRE(::truncate(entry.c_str(), st.st_size - 10) == 0);
  misses = kernel_cache_stats().misses;
  m = load();
  CHECK(kernel_cache_stats().misses == misses + 1);
  // Rewritten whole: a hit now, whose log does not repeat the notes of the
  // run that rewrote it.
  const unsigned long hits = kernel_cache_stats().hits;
  CHECK(std::string(load().info_log()).find("oxicuda cache:") == std::string::npos);
  CHECK(kernel_cache_stats().hits == hits + 1);
  // An entry whose checksum holds but whose image the driver will not load:
  // discarded and compiled again, not an Error on every run.
  const std::string key = entry.substr(entry.rfind('/') + 1, entry.size() - entry.rfind('/') - 5);
  std::string payload, note;
  const std::string names("saxpy<float>\0_Z1a\0saxpy<double>\0_Z1b\0", 37);  // as the key's name expressions
  payload = detail::encode_entry({true, names, "", "this is not PTX"});
  REQUIRE(detail::cache_write(dir, key, payload, note));
  misses = kernel_cache_stats().misses;
  Module again = load();
  CHECK(kernel_cache_stats().misses == misses + 1);
  CHECK(std::string(again.info_log()).find("oxicuda cache: discarded " + entry + ": the driver did not load it") !=
        std::string::npos);
  CHECK(again.function("saxpy<float>"));
  // An entry copied under another key's name is not that key's entry.
  const std::string other = std::string(16, '0');
  std::system(("cp '" + entry + "' '" + dir + "/" + other + ".bin'").c_str());
  std::string read, read_note;
  CHECK_FALSE(detail::cache_read(dir, other, read, read_note));
  CHECK(read_note.find("truncated or corrupt") != std::string::npos);
  CHECK(detail::cache_read(dir, key, read, read_note));
}

TEST_CASE("cache: a directory or entry others can write, or another user owns, is refused with a message") {
  const std::string dir = fresh_cache_dir();
  (void)load();
  const std::string entry = entry_of(dir);
  REQUIRE(::chmod(entry.c_str(), 0666) == 0);
  unsigned long misses = kernel_cache_stats().misses;
  Module m = load();
  CHECK(kernel_cache_stats().misses == misses + 1);
  CHECK(std::string(m.info_log()).find("oxicuda cache: refusing " + entry) != std::string::npos);
  REQUIRE(::chmod(entry.c_str(), 0600) == 0);

  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  const unsigned long hits = kernel_cache_stats().hits;
  m = load();
  CHECK(kernel_cache_stats().hits == hits);  // compiled, the cache not looked at
  CHECK(std::string(m.info_log()).find("oxicuda cache: refusing " + dir + ": it is writable by others") !=
        std::string::npos);
  REQUIRE(::chmod(dir.c_str(), 0700) == 0);

  if (::geteuid() == 0) {  // only root can give a file away
    REQUIRE(::chown(entry.c_str(), 4242, 4242) == 0);
    misses = kernel_cache_stats().misses;
    m = load();
    CHECK(kernel_cache_stats().misses == misses + 1);
    CHECK(std::string(m.info_log()).find("oxicuda cache: refusing " + entry) != std::string::npos);
    REQUIRE(::chown(dir.c_str(), 4242, 4242) == 0);
    m = load();
    CHECK(std::string(m.info_log()).find("owned by uid 4242, not by you") != std::string::npos);
  } else {
    MESSAGE("not root: entries owned by another user not tried");
  }
}

// What a first use (a thread that holds no verified directory) makes of
// the cache: whether it hit, and the module's log.
std::pair<bool, std::string> first_use() {
  std::pair<bool, std::string> r;
  std::thread([&] {
    const unsigned long hits = kernel_cache_stats().hits;
    const Module m = load();
    r = std::make_pair(kernel_cache_stats().hits == hits + 1, std::string(m.info_log()));
  }).join();
  return r;
}

TEST_CASE("cache: a directory whose parent others could change is refused; a sticky parent (/tmp) is not") {
  const std::string parent = fresh_cache_dir();  // a directory of this user's, made here
  REQUIRE(::mkdir(parent.c_str(), 0700) == 0);
  const std::string dir = parent + "/cache";
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  unsigned long hits = kernel_cache_stats().hits;
  (void)load();
  Module m = load();
  CHECK(kernel_cache_stats().hits == hits + 1);
  REQUIRE(::chmod(parent.c_str(), 0777) == 0);
  const std::string refused = "oxicuda cache: refusing " + dir + ": its parent " + parent +
                              " is writable by others and not sticky";
  // A first use walks the path and refuses it: compiled, the cache not looked at.
  auto [hit, log] = first_use();
  CHECK_FALSE(hit);
  CHECK(log.find(refused) != std::string::npos);
  // This thread holds the directory it verified open, and reads through it:
  // a directory swapped in at the path by whoever may write the parent is
  // never read, so its hits go on ...
  hits = kernel_cache_stats().hits;
  m = load();
  CHECK(kernel_cache_stats().hits == hits + 1);
  // ... but a store walks the path again, and refuses it.
  const std::string other = std::string(kSource) + "\n// another source: a miss, and a store\n";
  m = load(options(), other);
  CHECK(std::string(m.info_log()).find(refused) != std::string::npos);
  REQUIRE(::chmod(parent.c_str(), 01777) == 0);
  std::tie(hit, log) = first_use();
  CHECK(hit);
  REQUIRE(::chmod(parent.c_str(), 0700) == 0);
  if (::geteuid() == 0) {  // only root can give a directory away
    REQUIRE(::chown(parent.c_str(), 4242, 4242) == 0);
    std::tie(hit, log) = first_use();
    CHECK(log.find("its parent " + parent + " is owned by uid 4242") != std::string::npos);
  } else {
    MESSAGE("not root: a parent owned by another user not tried");
  }
}

TEST_CASE("cache: a directory reached by a link of yours is used; a link another user made is refused") {
  const std::string target = fresh_cache_dir();
  (void)load();  // creates the directory, with one entry
  const std::string link = target + "-link";
  std::remove(link.c_str());
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  ::setenv("OXICUDA_CACHE_DIR", link.c_str(), 1);
  unsigned long hits = kernel_cache_stats().hits;
  Module m = load();
  CHECK(kernel_cache_stats().hits == hits + 1);  // ~/.cache -> /scratch/... works
  if (::geteuid() == 0) {  // only root can give a link away
    REQUIRE(::lchown(link.c_str(), 4242, 4242) == 0);
    // A first use walks the path: compiled, the cache not looked at.
    const auto [hit, log] = first_use();
    CHECK_FALSE(hit);
    CHECK(log.find("oxicuda cache: refusing " + link + ": it is a symbolic link owned by uid 4242, not by you") !=
          std::string::npos);
  } else {
    MESSAGE("not root: a link owned by another user not tried");
  }
  std::remove(link.c_str());
}

TEST_CASE("cache: a hit is a use: an entry last used over a second ago gets the time of the hit") {
  const std::string dir = fresh_cache_dir();
  (void)load();
  const std::string entry = entry_of(dir);
  const timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, entry.c_str(), old, 0) == 0);
  const KernelCacheStats s0 = kernel_cache_stats();
  const std::time_t before = std::time(nullptr);
  (void)load();
  CHECK(kernel_cache_stats().hits == s0.hits + 1);
  struct stat st {};
  REQUIRE(::stat(entry.c_str(), &st) == 0);
  CHECK(st.st_mtim.tv_sec >= before);  // used now: the last to be evicted
  // A second hit within the same second leaves the time as it is (one
  // system call less on a hit); the order of eviction is right to a second.
  const std::time_t second = std::time(nullptr);
  const timespec recent[2] = {{0, UTIME_OMIT}, {second, 123}};
  REQUIRE(::utimensat(AT_FDCWD, entry.c_str(), recent, 0) == 0);
  (void)load();
  REQUIRE(::stat(entry.c_str(), &st) == 0);
  if (std::time(nullptr) == second) CHECK(st.st_mtim.tv_nsec == 123);  // (the hit was in that second)
}

TEST_CASE("cache: over its size limit, the oldest entries are evicted") {
  const std::string dir = fresh_cache_dir();
  SourceOptions o = options();
  (void)load(o);
  const std::string first = entry_of(dir);
  struct stat st {};
  ::stat(first.c_str(), &st);
  // Room for about two entries; the first made old.
  ::setenv("OXICUDA_CACHE_MAX_BYTES", std::to_string(st.st_size * 5 / 2 + 200).c_str(), 1);
  const timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  ::utimensat(AT_FDCWD, first.c_str(), old, 0);
  // A file of the user's that is not an entry, older still: never evicted.
  const std::string notes = dir + "/notes.bin";
  write_file(notes, "the user's own file");
  const timespec older[2] = {{500000000, 0}, {500000000, 0}};
  ::utimensat(AT_FDCWD, notes.c_str(), older, 0);
  o.compile.defines = {"FACTOR=5"};
  (void)load(o);
  o.compile.defines = {"FACTOR=6"};
  (void)load(o);
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  CHECK(::stat(first.c_str(), &st) != 0);  // the oldest is gone
  CHECK(::stat(notes.c_str(), &st) == 0);  // not an entry: left alone
  CHECK(files(dir, ".bin").size() >= 3);   // the newest remain, and the notes
  // Named like an entry but not written by a cache (no magic), and the
  // oldest: eviction stops there rather than remove it.
  const std::string lookalike = dir + "/" + std::string(32, 'a') + ".bin";
  write_file(lookalike, "not an entry");
  ::utimensat(AT_FDCWD, lookalike.c_str(), older, 0);
  ::setenv("OXICUDA_CACHE_MAX_BYTES", "1000", 1);
  o.compile.defines = {"FACTOR=8"};
  (void)load(o);
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  CHECK(::stat(lookalike.c_str(), &st) == 0);
  CHECK(::stat(notes.c_str(), &st) == 0);
  std::remove(lookalike.c_str());
  std::remove(notes.c_str());
  // The limit's units; a misread one keeps the default rather than evict all
  // (and the note names it: tests/nvrtc/cache_store.cpp).
  const std::pair<const char*, std::uint64_t> limits[] = {
      {"1000", 1000}, {"512K", 512ull << 10}, {"512M", 512ull << 20}, {"2g", 2ull << 30},
      {"12x", 256ull << 20}, {"lots", 256ull << 20}, {"-5", 256ull << 20}, {"5MB", 5ull << 20}};
  for (const auto& [text, bytes] : limits) {
    ::setenv("OXICUDA_CACHE_MAX_BYTES", text, 1);
    CAPTURE(text);
    CHECK(kernel_cache_info().limit == bytes);
  }
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  // A writer's temporary file left by a dead process, over an hour old, is
  // removed at the next eviction scan (a store past the limit); a fresh one
  // is left to its writer.
  const std::string stale = dir + "/" + std::string(32, '1') + ".bin.tmp.99999.1",
                    fresh = dir + "/" + std::string(32, '2') + ".bin.tmp.99999.2",
                    other = dir + "/data.bin.tmp.99999.3";  // not a writer's: kept
  for (const std::string& t : {stale, fresh, other}) write_file(t, "partial");
  const timespec hours_ago[2] = {{std::time(nullptr) - 7200, 0}, {std::time(nullptr) - 7200, 0}};
  ::utimensat(AT_FDCWD, stale.c_str(), hours_ago, 0);
  ::utimensat(AT_FDCWD, other.c_str(), hours_ago, 0);
  o.compile.defines = {"FACTOR=7"};
  struct stat largest {};
  ::stat(entry_of(dir).c_str(), &largest);
  ::setenv("OXICUDA_CACHE_MAX_BYTES", std::to_string(largest.st_size * 3 / 2).c_str(), 1);
  (void)load(o);  // a miss: written, then the directory scanned for eviction
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  CHECK(::stat(stale.c_str(), &st) != 0);
  CHECK(::stat(fresh.c_str(), &st) == 0);
  CHECK(::stat(other.c_str(), &st) == 0);
  std::remove(fresh.c_str());
  std::remove(other.c_str());
}

TEST_CASE("cache: one of several writers") {
  if (!child()) return;  // run by the next test, in processes of its own, at once
  const Module m = load();
  CHECK(m.function("saxpy<float>"));
}

TEST_CASE("cache: several processes writing the same entry at once, then a hit") {
  if (child()) return;
  const std::string dir = fresh_cache_dir();
  CHECK(run_children("cache: one of several writers", 6));
  std::size_t tmp = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) tmp += std::string(e->d_name).find(".tmp.") != std::string::npos;
    ::closedir(d);
  }
  CHECK(tmp == 0);
  CHECK(files(dir, ".bin").size() == 1);  // the entry (NVRTC's record is a .record)
  const unsigned long hits = kernel_cache_stats().hits;
  (void)load();
  CHECK(kernel_cache_stats().hits == hits + 1);
}

TEST_CASE("cache: a hit in a fresh process") {
  if (!child()) return;  // run by the next test, in a process of its own
  const Module m = load();
  CHECK(kernel_cache_stats().hits == 1);
  CHECK(kernel_cache_stats().misses == 0);
  CHECK(m.function("saxpy<float>"));
  CHECK_FALSE(nvrtc_loaded());
}

TEST_CASE("cache: a hit in a fresh process neither compiles nor loads NVRTC") {
  if (child()) return;
  (void)fresh_cache_dir();
  (void)load();
  CHECK(run_children("cache: a hit in a fresh process", 1));
  // A change of NVRTC (another file where it was found) makes the process
  // load it to read its version: the recorded one no longer stands.
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  if (!child()) {
    const LibraryInfo& info = nvrtc_info();
    if (!info.found) {
      std::fprintf(stderr, "SKIP: no NVRTC: %s\n", info.reason.c_str());
      return 77;
    }
  }
  return context.run();
}
