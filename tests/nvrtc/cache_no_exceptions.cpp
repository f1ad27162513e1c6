// Built with -fno-exceptions: a cache lookup whose entry is too large for
// the memory there is (RLIMIT_AS), or larger than any entry written, is a
// miss with a note, never an abort. Exits 0 when so, 1 with a message when
// not, 77 (meson's SKIP) where RLIMIT_AS cannot be set.
#include "oxicuda.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace {

bool sparse_entry(const std::string& path, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  char header[32] = {};
  std::memcpy(header, oxicuda::detail::cache_magic, 16);
  std::memcpy(header + 16, &size, 8);
  const bool ok = ::write(fd, header, sizeof header) == static_cast<::ssize_t>(sizeof header) &&
                  ::ftruncate(fd, static_cast<off_t>(32 + size)) == 0;
  ::close(fd);
  return ok;
}

int fail(const char* what, const std::string& note) {
  std::fprintf(stderr, "FAIL: %s (note: %s)\n", what, note.c_str());
  return 1;
}

}  // namespace

int main() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/oxicuda-cache-noexc-" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  if (::mkdir(dir.c_str(), 0700) != 0) return fail("cannot make the directory", dir);
  const std::string big = oxicuda::detail::KeyHash().add("big").hex(), huge = oxicuda::detail::KeyHash().add("huge").hex();
  ::setenv("OXICUDA_CACHE_MAX_BYTES", "200G", 1);
  if (!sparse_entry(dir + "/" + big + ".bin", 600ull << 20) || !sparse_entry(dir + "/" + huge + ".bin", 100ull << 30))
    return fail("cannot make the sparse files", dir);
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (!f || std::fscanf(f, "%lu", &pages) != 1) {
    std::printf("SKIP: no /proc/self/statm\n");
    return 77;
  }
  std::fclose(f);
  const rlim_t bytes = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (128ull << 20);
  const rlimit rl{bytes, bytes};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) {
    std::printf("SKIP: RLIMIT_AS cannot be set\n");
    return 77;
  }
  std::string payload, note;
  if (oxicuda::detail::cache_read(dir, huge, payload, note)) return fail("a hit of 100 GiB", note);
  if (note.find("not read") == std::string::npos) return fail("no note on the 100 GiB file", note);
  note.clear();
  if (oxicuda::detail::cache_read(dir, big, payload, note)) return fail("a hit of 600 MiB", note);
  if (note.find("no memory") == std::string::npos) return fail("no note on the memory", note);
  std::system(("rm -rf '" + dir + "'").c_str());
  std::printf("a lookup past the memory there is, and one past any entry written, are misses with a note\n");
  return 0;
}
