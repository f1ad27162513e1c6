// oxicuda/compile/cache.hpp — the on-disk cache of compiled kernels: a directory
// private to the user, one file per entry named by the hash of everything
// that made it, written atomically (a temporary file from mkstemp, its data
// synced to disk, then a rename), checked by a checksum when read, and kept
// under a size limit by evicting the entries used longest ago. It never
// throws for a cache problem: it says what happened (the `note`) and the
// caller compiles instead.
//
// Environment: OXICUDA_CACHE=0/off/false/no disables it (1/on/true/yes or
// unset: on; anything else: off, with a note naming the value);
// OXICUDA_CACHE_DIR names the directory (an absolute path; a relative one is
// refused); default $XDG_CACHE_HOME/oxicuda when that is absolute (a relative
// one is ignored, as the XDG specification says), else $HOME/.cache/oxicuda.
// OXICUDA_CACHE_MAX_BYTES is its size limit (default 256 MiB; a number with
// K, M, G, KB, MB, GB, KiB, MiB or GiB after it, any case, all powers of
// 1024; a value that is not one is refused with a note and the default
// kept). POSIX only: on Windows the cache is off.
//
// What a hit costs: one open (through the directory verified once and held
// open: no path is walked again), one read, and the entry's time of last
// use set; nothing else in the directory is read or written. A store adds its
// size to a running total kept in the directory (`total.counter`, updated
// under flock, as ccache keeps its counters); only when the total passes the
// limit (or the counter is missing, or every 1024 stores) is the directory
// scanned, once, and the entries used longest ago removed until it is under.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "cache_dir.hpp"
#include "cache_evict.hpp"
#include "cache_file.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

// How this process has used the kernel cache so far.
struct KernelCacheStats {
  unsigned long hits = 0;    // modules loaded from the cache, without compiling
  unsigned long misses = 0;  // modules compiled because the cache had no usable entry
};
[[nodiscard]] KernelCacheStats kernel_cache_stats() noexcept;

// Where the kernel cache is and what it holds, for a report (oxicuda-doctor).
// Looks only: creates nothing, removes nothing, loads nothing.
struct KernelCacheInfo {
  bool enabled = false;     // OXICUDA_CACHE allows it and a directory could be named
  std::string directory;    // where entries are kept (created at the first compile)
  std::string note;         // when not enabled: why; else any warning (a setting ignored, files skipped)
  unsigned long entries = 0;  // kernels kept (not the cache's own records)
  std::uint64_t bytes = 0;  // the entries' total size
  std::uint64_t limit = 0;  // beyond it, the entries used longest ago are evicted (OXICUDA_CACHE_MAX_BYTES)
  // Files named like entries that eviction leaves alone: not regular files,
  // not yours, or not written by a cache. Not in `entries` or `bytes`; the
  // note names the first.
  unsigned long skipped = 0;
};
[[nodiscard]] KernelCacheInfo kernel_cache_info();

namespace detail {

struct CacheCounters {
  std::atomic<unsigned long> hits{0}, misses{0};
};
inline CacheCounters& cache_counters() noexcept {
  static CacheCounters c;
  return c;
}

// Which file a read found (its device and inode): an entry its reader then
// rejects is removed only while its path still names that file.
struct CacheFileId {
  std::uint64_t dev = 0, ino = 0;
};

// The payload of the entry `key`, or false: not there, refused or corrupt
// (`note` says which, but for not there). A corrupt entry is removed, when
// the path still names the file that was read. An entry over the bound
// (cache_entry_bound) is refused unread. A hit writes nothing but the
// entry's time of last use (now). Throws nothing: a failed allocation is a
// miss.
inline bool cache_read(const std::string& dir, const std::string& key, std::string& payload, std::string& note,
                       CacheFileId* found = nullptr) {
#if OXICUDA_DETAIL_WINDOWS
  (void)dir, (void)key, (void)payload, (void)note, (void)found;
  return false;
#else
#if OXICUDA_EXCEPTIONS
  try {
#endif
    std::string limit_note;
    const std::uint64_t bound = cache_entry_bound(cache_limit(limit_note));
    struct stat st {};
    const std::string name = cat({key, ".bin"});
    // Through the directory this thread verified and holds (cache_directory),
    // when `dir` is that one. An entry missing there may be in a directory
    // that replaced it at the path since: that one is verified (as a store
    // would) and read once.
    const int held = verified_cache_dir_fd(dir);
    CacheRead r = read_checked(dir, name, cache_magic, key, bound, true, true, payload, note, &st, held);
    if (r == CacheRead::missing && held >= 0) {
      const VerifiedCacheDir& memo = verified_cache_dir;
      const dev_t dev = memo.dev;
      const ino_t ino = memo.ino;
      std::string again_note;
      if (cache_directory(again_note, true, true) == dir) {
        if (memo.dev != dev || memo.ino != ino)
          r = read_checked(dir, name, cache_magic, key, bound, true, true, payload, note, &st,
                           verified_cache_dir_fd(dir));
      } else {
        note = std::move(again_note);  // the directory now at the path is refused: why
      }
    }
    const bool ok = r == CacheRead::ok;
    if (ok && found) *found = {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
    return ok;
#if OXICUDA_EXCEPTIONS
  } catch (...) {  // out of memory for a path or a note: a miss
    return false;
  }
#endif
#endif
}

// Discards the entry `key` that cache_read found as `read` and its reader
// rejected: removed only when the path still names that file, since another
// process may have renamed a good entry there in between (that one is left
// alone). Returns a note that says which happened.
inline std::string cache_discard(const std::string& dir, std::string_view key, const CacheFileId& read,
                                 std::string_view why) {
  const std::string path = cat({dir, "/", key, ".bin"});
  bool removed = false;
#if !OXICUDA_DETAIL_WINDOWS
  struct stat expected {};
  expected.st_dev = static_cast<dev_t>(read.dev);
  expected.st_ino = static_cast<ino_t>(read.ino);
  removed = remove_if_same(path, expected);
#else
  (void)read;
#endif
  return cat({"oxicuda cache: ", removed ? "discarded " : "ignored (and kept: it was replaced since it was read) ",
              path, ": ", why});
}

// Stores `payload` as the entry `key` (write_atomically: a reader sees the
// old entry, the new one, or none, never part of one), then adds it to the
// running total, which evicts only past the limit. An entry over the bound
// (cache_entry_bound) or past RLIMIT_FSIZE is not stored. Returns false
// (and says why in `note`) when it could not.
inline bool cache_write(const std::string& dir, const std::string& key, std::string_view payload, std::string& note) {
#if OXICUDA_DETAIL_WINDOWS
  (void)dir, (void)key, (void)payload, (void)note;
  return false;
#else
  std::string limit_note;
  const std::uint64_t limit = cache_limit(limit_note);
  const std::uint64_t bytes = cache_header_size + payload.size();
  if (bytes > cache_entry_bound(limit)) {
    note = cat({"oxicuda cache: not stored: the entry ", key, " would take ", std::to_string(bytes),
                " bytes, more than an entry may (the cache's size limit, ", std::to_string(limit),
                " bytes, and never over 1 GiB)"});
    return false;
  }
  std::uint64_t replaced = 0;
  if (!write_atomically(dir, cat({key, ".bin"}), cache_magic, key, payload, note, &replaced)) return false;
  cache_account(dir, static_cast<std::int64_t>(bytes) - static_cast<std::int64_t>(replaced), limit);
  return true;
#endif
}

}  // namespace detail

inline KernelCacheInfo kernel_cache_info() {
  KernelCacheInfo info;
  std::string limit_note;
  info.limit = detail::cache_limit(limit_note);
  auto add_note = [&](std::string_view text) {
    info.note = info.note.empty() ? std::string(text) : detail::cat({info.note, "\n", text});
  };
  if (!detail::cache_enabled(info.note)) {
    if (info.note.empty()) info.note = detail::cat({"disabled by OXICUDA_CACHE=", detail::env_string("OXICUDA_CACHE")});
    return info;
  }
  info.directory = detail::cache_location(info.note);
  std::string why;
  info.enabled = !info.directory.empty() && !detail::cache_directory(why, false).empty();
  if (!why.empty()) info.note = why;
  if (!limit_note.empty()) add_note(limit_note);
#if !OXICUDA_DETAIL_WINDOWS
  // Looks only: every file named like an entry, and its first bytes.
  DIR* d = info.enabled ? ::opendir(info.directory.c_str()) : nullptr;
  if (!d) return info;
  const int dfd = ::dirfd(d);
  const uid_t me = ::geteuid();
  std::string first_skipped;
  while (const dirent* e = ::readdir(d)) {
    if (!detail::entry_name(e->d_name)) continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    bool entry = false;
    if (S_ISREG(st.st_mode) && st.st_uid == me) {
      const int fd = ::openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      char head[sizeof detail::cache_magic] = {};
      entry = fd >= 0 && ::read(fd, head, sizeof head) == static_cast<::ssize_t>(sizeof head) &&
              std::memcmp(head, detail::cache_magic, sizeof head) == 0;
      if (fd >= 0) ::close(fd);
    }
    if (entry) {
      ++info.entries;
      info.bytes += static_cast<std::uint64_t>(st.st_size);
    } else {
      if (info.skipped++ == 0) first_skipped = e->d_name;
    }
  }
  ::closedir(d);
  if (info.skipped)
    add_note(detail::cat({"oxicuda cache: ", std::to_string(info.skipped), " file(s) named like entries are not entries "
                          "(not a regular file of yours, empty, or not written by a cache), for example ",
                          info.directory, "/", first_skipped, "; eviction skips them (an empty one it removes)"}));
#endif
  return info;
}

inline KernelCacheStats kernel_cache_stats() noexcept {
  const detail::CacheCounters& c = detail::cache_counters();
  return {c.hits.load(std::memory_order_relaxed), c.misses.load(std::memory_order_relaxed)};
}

OXICUDA_DETAIL_NAMESPACE_END

