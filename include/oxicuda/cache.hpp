// oxicuda/cache.hpp — the on-disk cache of compiled kernels: a directory
// private to the user, one file per entry named by the hash of everything
// that made it, written atomically (a temporary file, then rename), checked
// by a checksum when read, and kept under a size limit by evicting the
// oldest entries. It never throws for a cache problem: it says what happened
// (the `note`) and the caller compiles instead.
//
// Environment: OXICUDA_CACHE=0 disables it; OXICUDA_CACHE_DIR names the
// directory (default $XDG_CACHE_HOME/oxicuda, else ~/.cache/oxicuda);
// OXICUDA_CACHE_MAX_BYTES its size limit (default 256 MiB; "512M" works).
// A writer's temporary file over an hour old is removed. POSIX only: on
// Windows the cache is off.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

#include "error.hpp"

#if !OXICUDA_WINDOWS
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <cerrno>
#endif

OXICUDA_NAMESPACE_BEGIN

// How this process has used the kernel cache so far.
struct KernelCacheStats {
  unsigned long hits = 0;    // modules loaded from the cache, without compiling
  unsigned long misses = 0;  // modules compiled because the cache had no usable entry
};
[[nodiscard]] KernelCacheStats kernel_cache_stats() noexcept;

// Where the kernel cache is and what it holds, for a report (oxicuda-doctor).
// Looks only: creates nothing, loads nothing.
struct KernelCacheInfo {
  bool enabled = false;     // OXICUDA_CACHE is not 0 and a directory could be named
  std::string directory;    // where entries are kept (created at the first compile)
  std::string note;         // when not enabled: why
  unsigned long entries = 0;
  std::uint64_t bytes = 0;  // the entries' total size
  std::uint64_t limit = 0;  // beyond it, the oldest entries are evicted (OXICUDA_CACHE_MAX_BYTES)
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

// 64-bit FNV-1a, run twice with different offset bases for a 128-bit key.
struct KeyHash {
  std::uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  void bytes(const void* data, std::size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      a = (a ^ p[i]) * 0x100000001b3ull;
      b = (b ^ p[i]) * 0x100000001b3ull;
      b ^= b >> 29;
    }
  }
  // A field: its length first, so that ("ab", "c") and ("a", "bc") differ.
  KeyHash& add(std::string_view s) noexcept {
    const std::uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
    return *this;
  }
  [[nodiscard]] std::string hex() const {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(32, '0');
    for (int i = 0; i < 16; ++i) {
      s[static_cast<std::size_t>(15 - i)] = digits[(a >> (4 * i)) & 15];
      s[static_cast<std::size_t>(31 - i)] = digits[(b >> (4 * i)) & 15];
    }
    return s;
  }
};

// An entry's checksum covers its key too, so an entry renamed to another
// key's name does not pass for that key's.
inline std::uint64_t checksum(std::string_view key, std::string_view s) noexcept {
  KeyHash h;
  h.bytes(key.data(), key.size());
  h.bytes(s.data(), s.size());
  return h.a ^ (h.b * 0x9e3779b97f4a7c15ull);
}

// Fields joined into one payload, each as 8 bytes of length and its bytes.
inline void put_field(std::string& out, std::string_view field) {
  const std::uint64_t n = field.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n).append(field.data(), field.size());
}
// The next field of `in`; false when `in` is too short for it.
inline bool take_field(std::string_view& in, std::string_view& field) noexcept {
  std::uint64_t n = 0;
  if (in.size() < sizeof n) return false;
  std::memcpy(&n, in.data(), sizeof n);
  in.remove_prefix(sizeof n);
  if (n > in.size()) return false;
  field = in.substr(0, static_cast<std::size_t>(n));
  in.remove_prefix(static_cast<std::size_t>(n));
  return true;
}

inline constexpr char cache_magic[16] = {'O', 'X', 'I', 'C', 'U', 'D', 'A', '-', 'C', 'A', 'C', 'H', 'E', '-', '1', '\n'};

// The cache directory, ready to use: created (0700) if missing, and
// refused when it is not a directory of this user's that no one else can
// write. Empty when the cache is off or refused; `note` then says why (empty
// when simply off).
// The cache's directory as the environment names it; empty (and why in
// `note`) when it names none.
inline std::string cache_location(std::string& note) {
#if OXICUDA_WINDOWS
  note = "the kernel cache is not available on Windows";
  return {};
#else
  std::string dir = env_string("OXICUDA_CACHE_DIR");
  if (dir.empty()) {
    const std::string xdg = env_string("XDG_CACHE_HOME");
    const std::string home = env_string("HOME");
    if (!xdg.empty())
      dir = cat({xdg, "/oxicuda"});
    else if (!home.empty())
      dir = cat({home, "/.cache/oxicuda"});
    else {
      note = cat({"oxicuda cache: neither OXICUDA_CACHE_DIR, XDG_CACHE_HOME nor HOME is set; compiled without the cache"});
      return {};
    }
  }
  return dir;
#endif
}

inline std::string cache_directory(std::string& note) {
#if OXICUDA_WINDOWS
  return cache_location(note);
#else
  if (env_string("OXICUDA_CACHE") == "0") return {};
  std::string dir = cache_location(note);
  if (dir.empty()) return {};
  // Each missing directory on the way, private to the user.
  for (std::size_t slash = dir.find('/', 1); ; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      note = cat({"oxicuda cache: cannot create ", part, " (", std::strerror(errno), "); compiled without the cache"});
      return {};
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  // A link another user made (in /tmp, say) could point at a directory of
  // yours, whose files eviction would then treat as entries.
  if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid != ::geteuid() && st.st_uid != 0) {
    note = cat({"oxicuda cache: refusing ", dir, ": it is a symbolic link owned by uid ", std::to_string(st.st_uid),
                ", not by you; compiled without the cache"});
    return {};
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    note = cat({"oxicuda cache: ", dir, " is not a directory; compiled without the cache"});
    return {};
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    note = cat({"oxicuda cache: refusing ", dir, ": it is ",
                st.st_uid != ::geteuid() ? cat({"owned by uid ", std::to_string(st.st_uid), ", not by you"})
                                         : cat({"writable by others"}),
                ", so a kernel planted there would run as your code. Compiled without the cache; make it yours "
                "with mode 0700, or set OXICUDA_CACHE_DIR to such a directory"});
    return {};
  }
  // Its parent: whoever may write there could swap the directory for another
  // after these checks; in a sticky one (/tmp) no one renames what is not
  // theirs. It must be yours or root's, and writable by no one else unless
  // sticky.
  const std::size_t end = dir.find_last_not_of('/');
  const std::size_t slash = end == std::string::npos ? std::string::npos : dir.find_last_of('/', end);
  const std::string parent = slash == std::string::npos ? cat({"."}) : slash == 0 ? cat({"/"}) : dir.substr(0, slash);
  if (::stat(parent.c_str(), &st) == 0 &&
      ((st.st_uid != ::geteuid() && st.st_uid != 0) || ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0))) {
    note = cat({"oxicuda cache: refusing ", dir, ": its parent ", parent, " is ",
                st.st_uid != ::geteuid() && st.st_uid != 0
                    ? cat({"owned by uid ", std::to_string(st.st_uid)})
                    : cat({"writable by others and not sticky"}),
                ", who could replace the cache with a directory of their choice. Compiled without the cache"});
    return {};
  }
  return dir;
#endif
}

#if !OXICUDA_WINDOWS
// Writes all of `data` to fd.
inline bool write_all(int fd, std::string_view data) noexcept {
  while (!data.empty()) {
    const ::ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}
#endif

// OXICUDA_CACHE_MAX_BYTES: a number of bytes, or of KiB, MiB or GiB with a
// K, M or G after it ("512M"). Anything else (unset, "lots", "12x") keeps
// the default, 256 MiB, rather than evicting by a misread number.
inline std::uint64_t cache_limit() {
  constexpr std::uint64_t fallback = 256ull << 20;
  const std::string v = env_string("OXICUDA_CACHE_MAX_BYTES");
  if (v.empty() || v[0] < '0' || v[0] > '9') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  const std::string_view unit = end;
  if (unit.empty()) return n;
  if (unit.size() != 1) return fallback;
  const int shift = unit[0] == 'K' || unit[0] == 'k' ? 10 : unit[0] == 'M' || unit[0] == 'm' ? 20
                    : unit[0] == 'G' || unit[0] == 'g' ? 30 : -1;
  if (shift < 0 || n > (~0ull >> shift)) return fallback;
  return static_cast<std::uint64_t>(n) << shift;
}

// The payload of the entry `key`, or false: not there, refused or corrupt
// (a corrupt entry is removed; `note` says which). A hit counts as a use for
// eviction (its time is set to now).
inline bool cache_read(const std::string& dir, const std::string& key, std::string& payload, std::string& note) {
#if OXICUDA_WINDOWS
  (void)dir, (void)key, (void)payload, (void)note;
  return false;
#else
  const std::string path = cat({dir, "/", key, ".bin"});
  // O_NONBLOCK: a FIFO by that name must not block the open (fstat then
  // refuses anything but a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) note = cat({"oxicuda cache: refusing ", path, ": it is a symbolic link; compiled instead"});
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    ::close(fd);
    note = cat({"oxicuda cache: refusing ", path,
                ": it is not a regular file of yours that only you can write; compiled instead"});
    return false;
  }
  if (static_cast<std::uint64_t>(st.st_size) > cache_limit()) {  // (never read into memory)
    ::close(fd);
    note = cat({"oxicuda cache: refusing ", path, ": larger than the cache's size limit; compiled instead"});
    return false;
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ::ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bool ok = got == bytes.size() && bytes.size() >= sizeof cache_magic + 16 &&
            std::memcmp(bytes.data(), cache_magic, sizeof cache_magic) == 0;
  std::uint64_t size = 0, sum = 0;
  if (ok) {
    std::memcpy(&size, bytes.data() + sizeof cache_magic, 8);
    std::memcpy(&sum, bytes.data() + sizeof cache_magic + 8, 8);
    const std::string_view body = std::string_view(bytes).substr(sizeof cache_magic + 16);
    ok = size == body.size() && sum == checksum(key, body);
    if (ok) payload.assign(body.data(), body.size());
  }
  if (ok) {
    ::futimens(fd, nullptr);
  } else {
    ::unlink(path.c_str());
    note = cat({"oxicuda cache: discarded ", path, ": truncated or corrupt (its checksum does not match)"});
  }
  ::close(fd);
  return ok;
#endif
}

// Whether `name` is an entry's: a key (KeyHash::hex, 32 lowercase hex
// digits) and ".bin". Eviction touches no other file.
inline bool entry_name(std::string_view name) noexcept {
  if (name.size() != 36 || name.substr(32) != ".bin") return false;
  for (const char c : name.substr(0, 32))
    if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) return false;
  return true;
}

// What the directory's entries take, and the entry used longest ago.
struct CacheScan {
  unsigned long entries = 0;
  std::uint64_t bytes = 0;
  std::string oldest;
  std::int64_t oldest_time = 0;
};

inline bool cache_scan(const std::string& dir, CacheScan& scan) {
#if !OXICUDA_WINDOWS
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() > 41 && entry_name(name.substr(0, 36)) && name.substr(36, 5) == ".tmp.") {
      // A writer's temporary file (an entry's name, ".tmp.", its process and
      // count); one over an hour old was left by a process that died before
      // its rename: removed.
      const std::string path = cat({dir, "/", name});
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
          now - st.st_mtim.tv_sec > 3600)
        ::unlink(path.c_str());
      continue;
    }
    if (!entry_name(name)) continue;
    std::string path = cat({dir, "/", name});
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    ++scan.entries;
    scan.bytes += static_cast<std::uint64_t>(st.st_size);
    const std::int64_t time = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (scan.oldest.empty() || time < scan.oldest_time) scan.oldest_time = time, scan.oldest = std::move(path);
  }
  ::closedir(d);
  return true;
#else
  (void)dir, (void)scan;
  return false;
#endif
}

// Removes the entry for `key`; returns its path (for a note).
inline std::string cache_remove(const std::string& dir, std::string_view key) {
  std::string path = cat({dir, "/", key, ".bin"});
#if !OXICUDA_WINDOWS
  ::unlink(path.c_str());
#endif
  return path;
}

// Whether the file at `path` begins as an entry does (cache_magic): what
// eviction removes was written by a cache, not merely named like it (else
// eviction stops, over the limit).
inline bool starts_as_entry(const std::string& path) noexcept {
#if !OXICUDA_WINDOWS
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char head[sizeof cache_magic] = {};
  const bool ok = ::read(fd, head, sizeof head) == static_cast<::ssize_t>(sizeof head) &&
                  std::memcmp(head, cache_magic, sizeof head) == 0;
  ::close(fd);
  return ok;
#else
  (void)path;
  return false;
#endif
}

// Evicts the oldest entries (by time of last use) until the directory's
// entries take at most `limit` bytes. One scan a removal: eviction is rare,
// a cache directory small.
inline void cache_evict(const std::string& dir, std::uint64_t limit) {
#if !OXICUDA_WINDOWS
  for (;;) {
    CacheScan scan;
    if (!cache_scan(dir, scan) || scan.bytes <= limit || scan.oldest.empty() || !starts_as_entry(scan.oldest) ||
        ::unlink(scan.oldest.c_str()) != 0)
      return;
  }
#else
  (void)dir, (void)limit;
#endif
}

// Stores `payload` as the entry `key`: written to a temporary file of this
// process, then renamed over the entry, so a reader sees the old entry, the
// new one, or none, never part of one. Then evicts down to the limit.
// Returns false (and says why in `note`) when it could not.
inline bool cache_write(const std::string& dir, const std::string& key, std::string_view payload, std::string& note) {
#if OXICUDA_WINDOWS
  (void)dir, (void)key, (void)payload, (void)note;
  return false;
#else
  static std::atomic<unsigned> counter{0};
  const std::string path = cat({dir, "/", key, ".bin"});
  const std::string tmp = cat({path, ".tmp.", std::to_string(process_id()), ".", std::to_string(counter++)});
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    note = cat({"oxicuda cache: cannot write ", tmp, " (", std::strerror(errno), ")"});
    return false;
  }
  std::string header(cache_magic, sizeof cache_magic);
  const std::uint64_t size = payload.size(), sum = checksum(key, payload);
  header.append(reinterpret_cast<const char*>(&size), 8).append(reinterpret_cast<const char*>(&sum), 8);
  const bool written = write_all(fd, header) && write_all(fd, payload);
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || ::rename(tmp.c_str(), path.c_str()) != 0) {
    note = cat({"oxicuda cache: cannot write ", path, " (", std::strerror(errno), ")"});
    ::unlink(tmp.c_str());
    return false;
  }
  cache_evict(dir, cache_limit());
  return true;
#endif
}

}  // namespace detail

inline KernelCacheInfo kernel_cache_info() {
  KernelCacheInfo info;
  info.limit = detail::cache_limit();
  if (detail::env_string("OXICUDA_CACHE") == "0") {
    info.note = detail::cat({"disabled by OXICUDA_CACHE=0"});
    return info;
  }
  info.directory = detail::cache_location(info.note);
  info.enabled = !info.directory.empty();
  detail::CacheScan scan;
  if (info.enabled && detail::cache_scan(info.directory, scan)) {
    info.entries = scan.entries;
    info.bytes = scan.bytes;
  }
  return info;
}

inline KernelCacheStats kernel_cache_stats() noexcept {
  const detail::CacheCounters& c = detail::cache_counters();
  return {c.hits.load(std::memory_order_relaxed), c.misses.load(std::memory_order_relaxed)};
}

OXICUDA_NAMESPACE_END
