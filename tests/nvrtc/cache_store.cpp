// The kernel cache's storage (cache.hpp), as a hostile user would use it:
// eviction in one scan by last use and no scan on a hit or a store under
// the limit (counted through opendir), files named like entries that are
// not entries, RLIMIT_FSIZE, leftover temporaries, root with a user's HOME,
// relative XDG_CACHE_HOME and OXICUDA_CACHE_DIR, an entry file too large to
// read, the data synced before the rename (through fsync), kernel_cache_info
// only looking, a corrupt entry replaced by another process before its
// removal (through lstat), the OXICUDA_CACHE and OXICUDA_CACHE_MAX_BYTES
// values, and the cache's own records. The few cases that compile with the
// real NVRTC (on the fake driver) skip with a reason without it; those that
// need root or limits run in a child process and skip with a reason where
// they cannot.
//
// This program defines fsync, opendir and lstat: calls from oxicuda.hpp,
// compiled into it, come here first (the executable's symbols come before
// libc's), and go on to libc's.
#define DOCTEST_CONFIG_IMPLEMENT
#include "fake_driver.hpp"
#include "temp_dirs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

// What the interposed calls saw.
struct Seen {
  bool count_opendir = false;
  int opendirs = 0;
  bool record_fsync = false;
  std::vector<std::string> fsynced;  // the path of each file synced, and whether its entry existed then
  std::vector<bool> entry_existed;
  std::string entry_path;            // the entry the fsync is for
  std::string swap_at;               // lstat of this path first renames swap_from over it
  std::string swap_from;
  int swaps = 0;
};
Seen& seen() {
  static Seen s;
  return s;
}

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {
int fsync(int fd) {
  Seen& s = seen();
  if (s.record_fsync) {
    char path[4096] = {};
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ::ssize_t n = ::readlink(link.c_str(), path, sizeof path - 1);
    s.fsynced.push_back(n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string());
    struct stat st {};
    s.entry_existed.push_back(::stat(s.entry_path.c_str(), &st) == 0);
  }
  static auto next = real<int (*)(int)>("fsync");
  return next(fd);
}

DIR* opendir(const char* name) {
  if (seen().count_opendir) ++seen().opendirs;
  static auto next = real<DIR* (*)(const char*)>("opendir");
  return next(name);
}

int lstat(const char* __restrict path, struct stat* __restrict buf) noexcept {
  Seen& s = seen();
  if (!s.swap_at.empty() && s.swap_at == path) {
    // Another process renames its new entry over the path, just now.
    ++s.swaps;
    s.swap_at.clear();
    std::rename(s.swap_from.c_str(), path);
  }
  static auto next = real<int (*)(const char*, struct stat*)>("lstat");
  return next(path, buf);
}
}

namespace {

const char* const kSource = R"(
extern "C" __global__ void fill(float* y, float v, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = v;
}
)";

// A new empty directory (0700) under TMPDIR, set as OXICUDA_CACHE_DIR.
std::string fresh_dir() {
  const std::string dir = oxicuda_test::scratch_path("oxicuda-cache-store");
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  ::setenv("OXICUDA_CACHE_DIR", dir.c_str(), 1);
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  ::unsetenv("OXICUDA_CACHE");
  return dir;
}

std::string key_of(int i) { return detail::KeyHash().add("cache-store-test").add(std::to_string(i)).hex(); }
std::string entry_path(const std::string& dir, const std::string& key) { return dir + "/" + key + ".bin"; }

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void set_time(const std::string& path, std::time_t t) {
  const timespec times[2] = {{t, 0}, {t, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

// The directory's files: name and inode.
std::map<std::string, ino_t> listing(const std::string& dir) {
  std::map<std::string, ino_t> out;
  const bool counting = seen().count_opendir;
  seen().count_opendir = false;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') out[e->d_name] = e->d_ino;
    ::closedir(d);
  }
  seen().count_opendir = counting;
  return out;
}

// The total size of the files named like entries that begin as entries.
std::uint64_t entry_bytes(const std::string& dir) {
  std::uint64_t total = 0;
  for (const auto& [name, ino] : listing(dir)) {
    (void)ino;
    const std::string path = dir + "/" + name;
    if (detail::entry_name(name) && detail::starts_as_entry(path)) {
      struct stat st {};
      ::stat(path.c_str(), &st);
      total += static_cast<std::uint64_t>(st.st_size);
    }
  }
  return total;
}

// Runs `body` in a child process (fork); what it returns is its failure
// ("" passes). The child's death by a signal is a failure that names it.
std::string in_child(const std::function<std::string()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string failure;
    try {
      failure = body();
    } catch (const std::exception& e) {
      failure = std::string("an exception escaped: ") + e.what();
    } catch (...) {
      failure = "an exception escaped";
    }
    (void)!::write(fds[1], failure.data(), failure.size());
    ::close(fds[1]);
    ::_exit(failure.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  std::string failure;
  char buf[512];
  for (::ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) failure.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return "the child died of signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")" +
           (failure.empty() ? "" : ": " + failure);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return failure.empty() ? "the child failed" : failure;
  return {};
}

bool have_nvrtc() { return nvrtc_info().found; }

Module load(std::string_view source = kSource) {
  SourceOptions o;
  o.compile.arch = "compute_90";
  return module_from_source(Context::primary(Device::get(0)), source, o);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool asan = true;
#else
constexpr bool asan = false;
#endif
#else
constexpr bool asan = false;
#endif

// Sets RLIMIT_AS to what the process maps now and `more` bytes: an
// allocation past it fails.
bool limit_memory(std::uint64_t more) {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return false;
  unsigned long pages = 0;
  const bool ok = std::fscanf(f, "%lu", &pages) == 1;
  std::fclose(f);
  if (!ok) return false;
  const rlim_t bytes = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + more;
  const rlimit rl{bytes, bytes};
  return ::setrlimit(RLIMIT_AS, &rl) == 0;
}

// Writes an entry file for `key` that claims `size` bytes of payload, its
// header whole and its data a hole (sparse).
bool sparse_entry(const std::string& path, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  char header[32] = {};
  std::memcpy(header, detail::cache_magic, 16);
  std::memcpy(header + 16, &size, 8);
  const bool ok = ::write(fd, header, sizeof header) == static_cast<::ssize_t>(sizeof header) &&
                  ::ftruncate(fd, static_cast<off_t>(32 + size)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("cache store: an evicting store scans the directory once and removes the entries used longest ago") {
  const std::string dir = fresh_dir();
  const std::string payload(1000, 'x');
  std::string note;
  for (int i = 0; i < 60; ++i) REQUIRE(detail::cache_write(dir, key_of(i), payload, note));
  // Last used in an order that is neither the names' nor the inodes': entry
  // i at time (i * 37) % 60.
  for (int i = 0; i < 60; ++i) set_time(entry_path(dir, key_of(i)), 1000000000 + (i * 37) % 60);
  const std::uint64_t size = 1000 + 32;
  ::setenv("OXICUDA_CACHE_MAX_BYTES", std::to_string(size * 40 + 10).c_str(), 1);
  seen().opendirs = 0;
  seen().count_opendir = true;
  REQUIRE(detail::cache_write(dir, key_of(100), payload, note));  // 61 entries: the 21 used longest ago go
  seen().count_opendir = false;
  CHECK(seen().opendirs == 1);  // one scan for all 21, not one a removal
  CHECK(entry_bytes(dir) <= size * 40 + 10);
  int kept = 0, wrong = 0;
  for (int i = 0; i < 60; ++i) {
    const bool old = (i * 37) % 60 < 21;
    kept += exists(entry_path(dir, key_of(i)));
    wrong += exists(entry_path(dir, key_of(i))) == old;
  }
  CHECK(kept == 39);
  CHECK(wrong == 0);
  CHECK(exists(entry_path(dir, key_of(100))));  // the newest stays
}

TEST_CASE("cache store: a store under the limit and a hit scan nothing; a hit writes only the entry's time") {
  const std::string dir = fresh_dir();
  const std::string payload(500, 'y');
  std::string note, read;
  for (int i = 0; i < 50; ++i) REQUIRE(detail::cache_write(dir, key_of(i), payload, note));
  // A writer's temporary file left by a dead process: a scan would remove it.
  const std::string stale = entry_path(dir, key_of(7)) + ".tmp.AbCdEf";
  write_file(stale, "partial");
  set_time(stale, std::time(nullptr) - 7200);
  seen().opendirs = 0;
  seen().count_opendir = true;
  REQUIRE(detail::cache_write(dir, key_of(60), payload, note));
  REQUIRE(detail::cache_write(dir, key_of(61), payload, note));
  CHECK(seen().opendirs == 0);
  CHECK(exists(stale));  // no scan saw it
  set_time(entry_path(dir, key_of(3)), 1000000000);
  const auto before = listing(dir);
  REQUIRE(detail::cache_read(dir, key_of(3), read, note));
  CHECK(read == payload);
  CHECK(listing(dir) == before);  // nothing created, removed or replaced
  struct stat st {};
  ::stat(entry_path(dir, key_of(3)).c_str(), &st);
  CHECK(st.st_mtime > 1000000000);  // a use: now
  seen().count_opendir = false;
  CHECK(seen().opendirs == 0);
  // The running total (total.counter) is what the entries take.
  std::string counter;
  if (std::FILE* f = std::fopen((dir + "/total.counter").c_str(), "r")) {
    char line[128] = {};
    if (std::fgets(line, sizeof line, f)) counter = line;
    std::fclose(f);
  }
  CHECK(counter.rfind("oxicuda-cache-total " + std::to_string(entry_bytes(dir)) + " ", 0) == 0);
  // A scan (here the limit passed) removes the stale temporary file and keeps
  // a fresh one (its writer may be alive).
  const std::string fresh = entry_path(dir, key_of(8)) + ".tmp.GhIjKl";
  write_file(fresh, "partial");
  ::setenv("OXICUDA_CACHE_MAX_BYTES", "20000", 1);
  REQUIRE(detail::cache_write(dir, key_of(62), payload, note));
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  CHECK_FALSE(exists(stale));
  CHECK(exists(fresh));
  CHECK(entry_bytes(dir) <= 20000);
}

TEST_CASE("cache store: a hit through module_from_source in a full cache reads its entry and writes nothing else") {
  if (!have_nvrtc()) {
    MESSAGE("SKIP: no NVRTC (" << nvrtc_info().reason << ")");
    return;
  }
  const std::string dir = fresh_dir();
  std::string note;
  for (int i = 0; i < 200; ++i) REQUIRE(detail::cache_write(dir, key_of(i), std::string(300, 'z'), note));
  (void)load();  // a miss: compiled (NVRTC is loaded now) and stored
  const unsigned long hits = kernel_cache_stats().hits;
  const auto before = listing(dir);
  seen().opendirs = 0;
  seen().count_opendir = true;
  (void)load();
  seen().count_opendir = false;
  CHECK(kernel_cache_stats().hits == hits + 1);
  CHECK(seen().opendirs == 0);   // no scan
  CHECK(listing(dir) == before);  // no record rewritten, nothing created
}

TEST_CASE("cache store: files named like entries that are not entries do not stop eviction") {
  const std::string dir = fresh_dir();
  const std::string payload(1000, 'x');
  std::string note;
  for (int i = 0; i < 10; ++i) REQUIRE(detail::cache_write(dir, key_of(i), payload, note));
  for (int i = 0; i < 10; ++i) set_time(entry_path(dir, key_of(i)), 1000000000 + i);
  // Older than every entry: a crash's empty file, a header cut short, a
  // user's short text file, and (as root) a file of another user's.
  const std::string empty = entry_path(dir, std::string(32, 'a')), cut = entry_path(dir, std::string(32, 'b')),
                    text = entry_path(dir, std::string(32, 'c')), theirs = entry_path(dir, std::string(32, 'd'));
  write_file(empty, "");
  write_file(cut, std::string(detail::cache_magic, 7));
  write_file(text, "not an entry at all, but the user's notes");
  write_file(theirs, std::string(5000, 'q'));
  const bool root = ::geteuid() == 0;
  if (root) REQUIRE(::chown(theirs.c_str(), 4242, 4242) == 0);
  for (const std::string& f : {empty, cut, text, theirs}) set_time(f, 900000000);
  const KernelCacheInfo info = kernel_cache_info();
  CHECK(info.entries == 10);
  CHECK(info.skipped == 4);
  CHECK(info.note.find(dir + "/") != std::string::npos);
  CHECK(info.note.find("not entries") != std::string::npos);
  ::setenv("OXICUDA_CACHE_MAX_BYTES", "5000", 1);
  REQUIRE(detail::cache_write(dir, key_of(20), payload, note));
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  CHECK(entry_bytes(dir) <= 5000);  // the limit holds
  CHECK(exists(entry_path(dir, key_of(20))));
  CHECK(exists(entry_path(dir, key_of(9))));  // the newest older ones stay
  CHECK_FALSE(exists(entry_path(dir, key_of(0))));
  CHECK_FALSE(exists(empty));  // debris
  CHECK_FALSE(exists(cut));
  CHECK(exists(text));  // not ours to remove
  CHECK(exists(theirs));
  CHECK(kernel_cache_info().skipped == 2);
}

TEST_CASE("cache store: a store past RLIMIT_FSIZE is skipped with a note, and the process lives") {
  const std::string dir = fresh_dir();
  const std::string failure = in_child([&]() -> std::string {
    const rlimit rl{4096, RLIM_INFINITY};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return "setrlimit failed";
    std::string note;
    if (!detail::cache_write(dir, key_of(1), std::string(1000, 's'), note))
      return "a store under the limit failed: " + note;
    if (detail::cache_write(dir, key_of(2), std::string(64 * 1024, 'b'), note)) return "a store past the limit passed";
    if (note.find("RLIMIT_FSIZE") == std::string::npos) return "no note on RLIMIT_FSIZE: " + note;
    note.clear();
    if (detail::cache_record_write(dir, "big-record", std::string(8192, 'r'), note)) return "a record past the limit";
    if (note.find("RLIMIT_FSIZE") == std::string::npos) return "no note on RLIMIT_FSIZE for a record: " + note;
    struct sigaction sa {};
    if (::sigaction(SIGXFSZ, nullptr, &sa) != 0 || sa.sa_handler != SIG_DFL) return "a SIGXFSZ handler was installed";
    if (exists(entry_path(dir, key_of(2)))) return "the entry exists";
    return {};
  });
  CHECK_MESSAGE(failure.empty(), failure);
}

TEST_CASE("cache store: leftover temporary files of any name do not block a store") {
  const std::string dir = fresh_dir();
  const std::string key = key_of(5);
  const std::string failure = in_child([&]() -> std::string {
    // The names a writer of this process would have used before: the
    // entry's name, ".tmp.", the process id and a counter.
    for (int c = 0; c < 4096; ++c) {
      const int fd = ::open((entry_path(dir, key) + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(c)).c_str(),
                            O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (fd < 0) return "cannot plant a temporary file";
      ::close(fd);
    }
    std::string note, read;
    if (!detail::cache_write(dir, key, "payload", note)) return "the store failed: " + note;
    if (!detail::cache_read(dir, key, read, note) || read != "payload") return "no hit after the store";
    return {};
  });
  CHECK_MESSAGE(failure.empty(), failure);
}

TEST_CASE("cache store: root with another user's HOME disables the cache and creates nothing") {
  if (::geteuid() != 0) {
    MESSAGE("SKIP: not root: only root can give a directory to another user");
    return;
  }
  const std::string base = fresh_dir();
  const std::string home = base + "/home";
  REQUIRE(::mkdir(home.c_str(), 0755) == 0);
  REQUIRE(::chown(home.c_str(), 4242, 4242) == 0);
  const std::string failure = in_child([&]() -> std::string {
    ::unsetenv("OXICUDA_CACHE_DIR");
    ::unsetenv("XDG_CACHE_HOME");
    ::setenv("HOME", home.c_str(), 1);
    std::string note;
    const std::string dir = detail::cache_directory(note);
    if (!dir.empty()) return "the cache is on, in " + dir;
    if (note.find(home + " is owned by uid 4242, not by you") == std::string::npos) return "the note: " + note;
    if (exists(home + "/.cache")) return home + "/.cache was created";
    const KernelCacheInfo info = kernel_cache_info();
    if (info.enabled) return "kernel_cache_info says enabled";
    // The same when ~/.cache is the user's too, and when a directory of
    // OXICUDA_CACHE_DIR is.
    if (::mkdir((home + "/.cache").c_str(), 0700) != 0 || ::chown((home + "/.cache").c_str(), 4242, 4242) != 0)
      return "cannot make ~/.cache";
    note.clear();
    if (!detail::cache_directory(note).empty() || exists(home + "/.cache/oxicuda")) return "created in ~/.cache";
    ::setenv("OXICUDA_CACHE_DIR", (home + "/mine/cache").c_str(), 1);
    note.clear();
    if (!detail::cache_directory(note).empty() || exists(home + "/mine")) return "created under OXICUDA_CACHE_DIR";
    if (note.find("owned by uid 4242") == std::string::npos) return "the note: " + note;
    return {};
  });
  CHECK_MESSAGE(failure.empty(), failure);
}

TEST_CASE("cache store: a relative XDG_CACHE_HOME is ignored with a note; a relative OXICUDA_CACHE_DIR is refused") {
  const std::string base = fresh_dir();
  const std::string failure = in_child([&]() -> std::string {
    ::unsetenv("OXICUDA_CACHE_DIR");
    ::setenv("HOME", base.c_str(), 1);
    ::setenv("XDG_CACHE_HOME", "relative/cache", 1);
    std::string note;
    std::string dir = detail::cache_location(note);
    if (dir != base + "/.cache/oxicuda") return "the directory: " + dir;
    if (note.find("XDG_CACHE_HOME='relative/cache' is a relative path") == std::string::npos) return "note: " + note;
    note.clear();
    dir = detail::cache_directory(note);
    if (dir != base + "/.cache/oxicuda" || note.find("XDG_CACHE_HOME") == std::string::npos)
      return "cache_directory: " + dir + " / " + note;
    if (kernel_cache_info().note.find("XDG_CACHE_HOME") == std::string::npos) return "kernel_cache_info's note";
    ::setenv("OXICUDA_CACHE_DIR", "rel/oxicuda", 1);
    note.clear();
    dir = detail::cache_directory(note);
    if (!dir.empty()) return "a relative OXICUDA_CACHE_DIR was used: " + dir;
    if (note.find("OXICUDA_CACHE_DIR='rel/oxicuda' is a relative path") == std::string::npos) return "note: " + note;
    if (kernel_cache_info().enabled) return "kernel_cache_info says enabled";
    return {};
  });
  CHECK_MESSAGE(failure.empty(), failure);
}

TEST_CASE("cache store: an entry file larger than any entry written is a miss, never read") {
  if (asan) {
    MESSAGE("SKIP: under AddressSanitizer, RLIMIT_AS cannot be set");
    return;
  }
  const std::string dir = fresh_dir();
  const std::string failure = in_child([&]() -> std::string {
    // 100 GiB, sparse, under a limit that allows it.
    ::setenv("OXICUDA_CACHE_MAX_BYTES", "200G", 1);
    if (!sparse_entry(entry_path(dir, key_of(1)), 100ull << 30)) return "cannot make a sparse file of 100 GiB";
    if (!limit_memory(1ull << 30)) return "cannot set RLIMIT_AS";
    std::string note, read;
    if (detail::cache_read(dir, key_of(1), read, note)) return "a hit";
    if (note.find("not read") == std::string::npos) return "the note: " + note;
    // Within the bound, but more than the memory there is: a miss too.
    ::setenv("OXICUDA_CACHE_MAX_BYTES", "1G", 1);
    if (!sparse_entry(entry_path(dir, key_of(2)), 600ull << 20)) return "cannot make a sparse file of 600 MiB";
    if (!limit_memory(128ull << 20)) return "cannot set RLIMIT_AS";
    note.clear();
    if (detail::cache_read(dir, key_of(2), read, note)) return "a hit of 600 MiB";
    if (note.find("no memory") == std::string::npos) return "the note: " + note;
    return {};
  });
  CHECK_MESSAGE(failure.empty(), failure);
  // A store larger than an entry may be is refused, so no entry is ever
  // one that a read refuses.
  ::setenv("OXICUDA_CACHE_MAX_BYTES", "4K", 1);
  std::string note;
  CHECK_FALSE(detail::cache_write(dir, key_of(3), std::string(5000, 'x'), note));
  CHECK(note.find("more than an entry may") != std::string::npos);
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
}

TEST_CASE("cache store: the data is synced to disk before the rename") {
  const std::string dir = fresh_dir();
  seen().fsynced.clear();
  seen().entry_existed.clear();
  seen().entry_path = entry_path(dir, key_of(1));
  seen().record_fsync = true;
  std::string note;
  const bool stored = detail::cache_write(dir, key_of(1), "payload", note);
  seen().record_fsync = false;
  REQUIRE(stored);
  bool synced = false;
  for (std::size_t i = 0; i < seen().fsynced.size(); ++i)
    if (seen().fsynced[i].rfind(seen().entry_path + ".tmp.", 0) == 0 && !seen().entry_existed[i]) synced = true;
  CHECK(synced);
}

TEST_CASE("cache store: kernel_cache_info only looks") {
  const std::string dir = fresh_dir();
  std::string note;
  REQUIRE(detail::cache_write(dir, key_of(1), "payload", note));
  const std::string stale = entry_path(dir, key_of(2)) + ".tmp.99999.1";
  write_file(stale, "partial");
  set_time(stale, std::time(nullptr) - 7200);
  const std::string empty = entry_path(dir, key_of(3));
  write_file(empty, "");
  const auto before = listing(dir);
  const KernelCacheInfo info = kernel_cache_info();
  CHECK(info.entries == 1);
  CHECK(listing(dir) == before);
  CHECK(exists(stale));
  // Nor does it create the directory.
  ::setenv("OXICUDA_CACHE_DIR", (dir + "/not-yet").c_str(), 1);
  CHECK(kernel_cache_info().enabled);
  CHECK_FALSE(exists(dir + "/not-yet"));
}

TEST_CASE("cache store: a hit reads through the directory verified and held open; one swapped in at its path is verified first") {
  const std::string dir = fresh_dir();
  std::string note, read;
  REQUIRE(detail::cache_directory(note) == dir);
  REQUIRE(detail::cache_write(dir, key_of(1), "first", note));
  CHECK(detail::cache_read(dir, key_of(1), read, note));
  CHECK(read == "first");
  // Another directory at the path: the one verified and held is still read.
  const std::string held = dir + "-held";
  REQUIRE(std::rename(dir.c_str(), held.c_str()) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(detail::cache_write(dir, key_of(1), "second", note));
  REQUIRE(detail::cache_write(dir, key_of(2), "only in the new one", note));
  CHECK(detail::cache_read(dir, key_of(1), read, note));
  CHECK(read == "first");
  // An entry the held directory lacks: the path is verified again, and the
  // directory there now read, and held.
  CHECK(detail::cache_read(dir, key_of(2), read, note));
  CHECK(read == "only in the new one");
  CHECK(detail::cache_read(dir, key_of(1), read, note));
  CHECK(read == "second");
  // One that anybody may write, swapped in: never read, and the note says why.
  REQUIRE(detail::cache_directory(note) == dir);
  const std::string second = dir + "-second";
  REQUIRE(std::rename(dir.c_str(), second.c_str()) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(detail::cache_write(dir, key_of(3), "planted", note));
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  note.clear();
  CHECK_FALSE(detail::cache_read(dir, key_of(3), read, note));
  CHECK(note.find("writable by others") != std::string::npos);
  CHECK(detail::cache_read(dir, key_of(1), read, note));
  CHECK(read == "second");
  std::system(("rm -rf '" + held + "' '" + second + "'").c_str());
}

TEST_CASE("cache store: a held directory's descriptor that the program closed and reused is let go, not closed") {
  const std::string dir = fresh_dir();
  std::string note, read;
  REQUIRE(detail::cache_directory(note) == dir);
  REQUIRE(detail::cache_write(dir, key_of(1), "payload", note));
  const int held = detail::verified_cache_dir.fd;
  REQUIRE(held >= 0);
  // As a program that closes every descriptor (a daemon) and opens its own.
  REQUIRE(::close(held) == 0);
  const int other = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(other >= 0);
  REQUIRE(::dup2(other, held) == held);
  ::close(other);
  REQUIRE(detail::cache_directory(note) == dir);  // verified again, and held anew
  CHECK(detail::verified_cache_dir.fd != held);
  CHECK(detail::cache_read(dir, key_of(1), read, note));
  CHECK(read == "payload");
  detail::verified_cache_dir.drop();
  CHECK(::fcntl(held, F_GETFD) != -1);  // the program's descriptor is still open
  ::close(held);
}

TEST_CASE("cache store: a corrupt entry is removed only if it is still the file that was read") {
  const std::string dir = fresh_dir();
  // Whether a call of lstat here comes to this program's lstat (glibc 2.33
  // and later; before, the header's lstat is an inline call of __lxstat).
  const std::string probe = dir + "/probe", probe_from = dir + "/probe-from";
  write_file(probe_from, "x");
  seen().swaps = 0;
  seen().swap_from = probe_from;
  seen().swap_at = probe;
  struct stat st {};
  (void)::lstat(probe.c_str(), &st);
  seen().swap_at.clear();
  if (seen().swaps == 0) {
    MESSAGE("SKIP: lstat is not interposable here");
    return;
  }
  std::string note, read;
  const std::string path = entry_path(dir, key_of(1));
  REQUIRE(detail::cache_write(dir, key_of(1), "the good payload", note));
  // A good entry for the same key, ready to be renamed in by "another process".
  const std::string good = dir + "/good-copy";
  REQUIRE(std::rename(path.c_str(), good.c_str()) == 0);
  write_file(path, std::string(detail::cache_magic, 16) + std::string(16, '\0') + "corrupt");
  seen().swaps = 0;
  seen().swap_from = good;
  seen().swap_at = path;
  const bool hit = detail::cache_read(dir, key_of(1), read, note);
  seen().swap_at.clear();
  CHECK_FALSE(hit);
  CHECK(seen().swaps == 1);  // the path was looked at again before any removal
  CHECK(note.find("ignored " + path) != std::string::npos);
  REQUIRE(exists(path));  // the new entry, not removed
  CHECK(detail::cache_read(dir, key_of(1), read, note));
  CHECK(read == "the good payload");
  // A corrupt entry nobody replaced is removed.
  write_file(path, std::string(detail::cache_magic, 16) + std::string(16, '\0') + "corrupt");
  note.clear();
  CHECK_FALSE(detail::cache_read(dir, key_of(1), read, note));
  CHECK(note.find("discarded " + path) != std::string::npos);
  CHECK_FALSE(exists(path));
}

TEST_CASE("cache store: OXICUDA_CACHE turns the cache off with 0, off, false, no, in any case; a value of neither kind is named") {
  (void)fresh_dir();
  const char* const off[] = {"0", "off", "OFF", "Off", "false", "FALSE", "no", "No"};
  const char* const on[] = {"1", "on", "ON", "true", "True", "yes", "YES"};
  std::string note;
  for (const char* v : off) {
    const std::string shown = v;
    CAPTURE(shown);
    ::setenv("OXICUDA_CACHE", v, 1);
    note.clear();
    CHECK(detail::cache_directory(note).empty());
    CHECK(note.empty());
    CHECK_FALSE(kernel_cache_info().enabled);
  }
  for (const char* v : on) {
    const std::string shown = v;
    CAPTURE(shown);
    ::setenv("OXICUDA_CACHE", v, 1);
    note.clear();
    CHECK_FALSE(detail::cache_directory(note).empty());
    CHECK(note.empty());
    CHECK(kernel_cache_info().enabled);
  }
  ::setenv("OXICUDA_CACHE", "disable", 1);
  note.clear();
  CHECK(detail::cache_directory(note).empty());
  CHECK(note.find("OXICUDA_CACHE='disable'") != std::string::npos);
  const KernelCacheInfo info = kernel_cache_info();
  CHECK_FALSE(info.enabled);
  CHECK(info.note.find("OXICUDA_CACHE='disable'") != std::string::npos);
  ::unsetenv("OXICUDA_CACHE");
}

TEST_CASE("cache store: OXICUDA_CACHE_MAX_BYTES takes K, M, G, KB, MB, GB, KiB, MiB, GiB; anything else is named") {
  (void)fresh_dir();
  const std::pair<const char*, std::uint64_t> good[] = {
      {"1000", 1000},          {"512K", 512ull << 10},  {"512k", 512ull << 10},   {"512KB", 512ull << 10},
      {"512KiB", 512ull << 10}, {"512M", 512ull << 20}, {"512MB", 512ull << 20},  {"512mb", 512ull << 20},
      {"512MiB", 512ull << 20}, {"2G", 2ull << 30},     {"2gb", 2ull << 30},      {"2GiB", 2ull << 30},
      {"2 GiB", 2ull << 30},    {"0", 0}};
  for (const auto& [text, bytes] : good) {
    const std::string shown = text;
    CAPTURE(shown);
    ::setenv("OXICUDA_CACHE_MAX_BYTES", text, 1);
    const KernelCacheInfo info = kernel_cache_info();
    CHECK(info.limit == bytes);
    CHECK(info.note.find("OXICUDA_CACHE_MAX_BYTES") == std::string::npos);
  }
  const char* const bad[] = {"lots", "12x", "-5", "5TB", "M", "1.5G", "99999999999999999999", "18446744073709551615G"};
  for (const char* text : bad) {
    const std::string shown = text;
    CAPTURE(shown);
    ::setenv("OXICUDA_CACHE_MAX_BYTES", text, 1);
    const KernelCacheInfo info = kernel_cache_info();
    CHECK(info.limit == 256ull << 20);
    CHECK(info.note.find(std::string("OXICUDA_CACHE_MAX_BYTES='") + text + "' is not a size") != std::string::npos);
  }
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
}

TEST_CASE("cache store: kernel_cache_info().entries counts kernels, not the cache's NVRTC record") {
  if (!have_nvrtc()) {
    MESSAGE("SKIP: no NVRTC (" << nvrtc_info().reason << ")");
    return;
  }
  const std::string dir = fresh_dir();
  (void)load();
  const KernelCacheInfo info = kernel_cache_info();
  CHECK(info.entries == 1);
  CHECK(info.skipped == 0);
}

TEST_CASE("cache store: records are kept apart from entries: not counted, never evicted, checked") {
  const std::string dir = fresh_dir();
  std::string note, read;
  CHECK_FALSE(detail::cache_record_read(dir, "nvrtc-identity", read, note));
  CHECK(note.empty());  // missing: no note
  REQUIRE(detail::cache_record_write(dir, "nvrtc-identity", "which NVRTC", note));
  REQUIRE(detail::cache_record_read(dir, "nvrtc-identity", read, note));
  CHECK(read == "which NVRTC");
  CHECK(exists(dir + "/nvrtc-identity.record"));
  CHECK_FALSE(detail::entry_name("nvrtc-identity.record"));
  // Rewritten in place.
  REQUIRE(detail::cache_record_write(dir, "nvrtc-identity", "another NVRTC", note));
  REQUIRE(detail::cache_record_read(dir, "nvrtc-identity", read, note));
  CHECK(read == "another NVRTC");
  // Not an entry: not counted, not evicted when every entry is.
  REQUIRE(detail::cache_write(dir, key_of(1), std::string(2000, 'e'), note));
  set_time(dir + "/nvrtc-identity.record", 900000000);
  CHECK(kernel_cache_info().entries == 1);
  ::setenv("OXICUDA_CACHE_MAX_BYTES", "2100", 1);
  REQUIRE(detail::cache_write(dir, key_of(2), std::string(2000, 'e'), note));
  ::unsetenv("OXICUDA_CACHE_MAX_BYTES");
  CHECK_FALSE(exists(entry_path(dir, key_of(1))));
  REQUIRE(detail::cache_record_read(dir, "nvrtc-identity", read, note));
  // Names: [a-z0-9-] only.
  note.clear();
  CHECK_FALSE(detail::cache_record_write(dir, "../escape", "x", note));
  CHECK(note.find("not a record's name") != std::string::npos);
  CHECK_FALSE(detail::cache_record_write(dir, "Upper", "x", note));
  CHECK_FALSE(detail::cache_record_write(dir, "", "x", note));
  // Bounded: a record over 1 MiB is neither written nor read.
  note.clear();
  CHECK_FALSE(detail::cache_record_write(dir, "big", std::string(2u << 20, 'b'), note));
  CHECK(note.find("1 MiB") != std::string::npos);
  {
    const int fd = ::open((dir + "/huge.record").c_str(), O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 64 << 20) == 0);
    ::close(fd);
  }
  note.clear();
  CHECK_FALSE(detail::cache_record_read(dir, "huge", read, note));
  CHECK(note.find("not read") != std::string::npos);
  // Checked: a corrupt record is a miss with a note (and left to be written over).
  write_file(dir + "/bad.record", std::string(detail::record_magic, 16) + std::string(16, '\0') + "x");
  note.clear();
  CHECK_FALSE(detail::cache_record_read(dir, "bad", read, note));
  CHECK(note.find("corrupt") != std::string::npos);
  // An entry's file is not a record, nor a record's an entry (their magics differ).
  write_file(dir + "/copied.record", "");
  std::system(("cp '" + entry_path(dir, key_of(2)) + "' '" + dir + "/copied.record'").c_str());
  CHECK_FALSE(detail::cache_record_read(dir, "copied", read, note));
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return context.run();
}
