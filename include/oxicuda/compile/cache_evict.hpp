// oxicuda/compile/cache_evict.hpp — keeping the kernel cache under its size
// limit: a running total of the entries' size in the directory
// (`total.counter`, updated under flock), and the scan that removes a dead
// writer's temporary files and evicts the entries used longest ago when the
// total passes the limit.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "cache_file.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// Stores between two scans that check the running total against the disk.
inline constexpr unsigned cache_rescan_every = 1024;

// Whether `name` is a writer's temporary file: an entry's or a record's
// name, ".tmp." and mkstemp's letters.
inline bool temporary_name(std::string_view name) noexcept {
  const std::size_t at = name.find(".tmp.");
  if (at == std::string_view::npos) return false;
  return entry_name(name.substr(0, at)) || record_file_name(name.substr(0, at));
}

#if !OXICUDA_DETAIL_WINDOWS
// Removes `name` in `dir_fd` only when it is still the file `expected` (by
// device and inode): another process may have renamed a new entry there.
inline bool remove_if_same(int dir_fd, const char* name, const struct stat& expected) noexcept {
  struct stat now {};
  if (::fstatat(dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (now.st_dev != expected.st_dev || now.st_ino != expected.st_ino) return false;
  return ::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT;
}
#endif

// One scan of the directory: removes a writer's temporary file over an hour
// old (its writer died before its rename) and a zero-length file named like
// an entry (a crash's debris: no entry is ever empty), then, when the
// entries take more than `limit`, removes them in the order of their last
// use, oldest first, until they take at most `limit`. A file named like an
// entry that it may not remove (not a regular file of yours, or not begun as
// an entry is: no cache wrote it) is skipped, not counted, and eviction goes
// on to the next. `total`: the entries' size after. False when the directory
// cannot be read.
inline bool cache_evict(const std::string& dir, std::uint64_t limit, std::uint64_t& total) {
  total = 0;
#if !OXICUDA_DETAIL_WINDOWS
  struct File {
    std::int64_t time;
    std::uint64_t size;
    struct stat st;
    std::string name;
  };
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  const int dfd = ::dirfd(d);
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  const uid_t me = ::geteuid();
  std::vector<File> files;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    const bool temporary = temporary_name(name);
    if (!temporary && !entry_name(name)) continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != me) continue;
    if (temporary) {
      if (now - st.st_mtim.tv_sec > 3600) (void)remove_if_same(dfd, e->d_name, st);
      continue;
    }
    if (st.st_size == 0) {
      (void)remove_if_same(dfd, e->d_name, st);
      continue;
    }
    files.push_back({static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                     static_cast<std::uint64_t>(st.st_size), st, std::string(name)});
    total += static_cast<std::uint64_t>(st.st_size);
  }
  if (total > limit) {
    // Oldest first. std::qsort over (time, index) pairs rather than
    // std::sort: <algorithm> alone costs a translation unit 0.12x of a
    // typical unit's compile (BENCHMARKS.md, "Include cost").
    struct Order {
      std::int64_t time;
      std::size_t index;
    };
    std::vector<Order> order(files.size());
    for (std::size_t i = 0; i < files.size(); ++i) order[i] = {files[i].time, i};
    std::qsort(order.data(), order.size(), sizeof(Order), [](const void* x, const void* y) {
      const std::int64_t a = static_cast<const Order*>(x)->time, b = static_cast<const Order*>(y)->time;
      return a < b ? -1 : a > b ? 1 : 0;
    });
    for (const Order& o : order) {
      const File& f = files[o.index];
      if (total <= limit) break;
      const int fd = ::openat(dfd, f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) {
        if (errno == ENOENT) total -= f.size;  // gone already
        continue;
      }
      struct stat st {};
      char head[sizeof cache_magic] = {};
      const bool same = ::fstat(fd, &st) == 0 && st.st_dev == f.st.st_dev && st.st_ino == f.st.st_ino;
      const ::ssize_t n = same ? ::read(fd, head, sizeof head) : -1;
      ::close(fd);
      if (!same) continue;  // replaced since the scan: a fresh entry, left alone
      // An entry, or the debris of one whose header a crash cut short.
      const bool ours = n == static_cast<::ssize_t>(sizeof head)
                            ? std::memcmp(head, cache_magic, sizeof head) == 0
                            : n >= 0 && static_cast<std::uint64_t>(st.st_size) < sizeof head &&
                                  std::memcmp(head, cache_magic, static_cast<std::size_t>(n)) == 0;
      if (!ours || remove_if_same(dfd, f.name.c_str(), f.st)) total -= f.size;  // removed, or skipped: not an entry
    }
  }
  ::closedir(d);
  return true;
#else
  (void)dir, (void)limit;
  return false;
#endif
}
inline void cache_evict(const std::string& dir, std::uint64_t limit) {
  std::uint64_t total = 0;
  (void)cache_evict(dir, limit, total);
}

// The running total: `total.counter` in the directory holds the entries'
// size and the stores since the last scan, updated under flock by every
// store. A store that leaves the total under the limit scans nothing; one
// that passes it scans and evicts once (cache_evict), and so does the
// first store without a counter and every cache_rescan_every-th, which
// catches up with what others changed (a user's rm, an older oxicuda).
inline constexpr char cache_counter_name[] = "total.counter";

inline void cache_account(const std::string& dir, std::int64_t delta, std::uint64_t limit) {
#if !OXICUDA_DETAIL_WINDOWS
  const std::string path = cat({dir, "/", cache_counter_name});
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    if (fd >= 0) ::close(fd);
    cache_evict(dir, limit);  // no total to keep: a scan each store
    return;
  }
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  char text[96] = {};
  const ::ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  unsigned long long total = 0, stores = 0;
  char tail = 0;
  const bool known = n > 0 && std::sscanf(text, "oxicuda-cache-total %llu %llu%c", &total, &stores, &tail) == 3 &&
                     tail == '\n';
  if (known) {
    total = delta < 0 && static_cast<unsigned long long>(-delta) > total ? 0 : total + static_cast<unsigned long long>(delta);
    ++stores;
  }
  bool write = true;
  if (!known || total > limit || stores >= cache_rescan_every) {
    std::uint64_t scanned = 0;
    write = cache_evict(dir, limit, scanned);
    total = scanned, stores = 0;
  }
  if (write) {
    const int len = std::snprintf(text, sizeof text, "oxicuda-cache-total %llu %llu\n", total, stores);
    std::string ignored;
    if (len > 0 && fits_file_size_limit(static_cast<std::uint64_t>(len), path, ignored) &&
        ::pwrite(fd, text, static_cast<std::size_t>(len), 0) == len)
      (void)::ftruncate(fd, len);
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
#else
  (void)dir, (void)delta, (void)limit;
#endif
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
