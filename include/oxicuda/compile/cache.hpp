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
// What a hit costs: one open, one read, and the entry's time of last use
// set; nothing else in the directory is read or written. A store adds its
// size to a running total kept in the directory (`total.counter`, updated
// under flock, as ccache keeps its counters); only when the total passes the
// limit (or the counter is missing, or every 1024 stores) is the directory
// scanned, once, and the entries used longest ago removed until it is under.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "../core/check.hpp"

#if !OXICUDA_WINDOWS
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
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
// key's name does not pass for that key's. It guards against a torn or
// damaged file, not against a forger (anyone can recompute it): eight bytes
// at a time in four independent lanes, each a multiply and a shift, so a
// hit's check costs a fraction of a microsecond per 8 KiB, where KeyHash's
// byte at a time took tens.
inline std::uint64_t checksum(std::string_view key, std::string_view s) noexcept {
  constexpr std::uint64_t m = 0x9e3779b97f4a7c15ull;
  KeyHash k;
  k.add(key);
  std::uint64_t h[4] = {k.a, k.b, k.a ^ 0xc2b2ae3d27d4eb4full, k.b ^ 0x165667b19e3779f9ull};
  const char* p = s.data();
  std::size_t n = s.size();
  for (; n >= 32; p += 32, n -= 32)
    for (int lane = 0; lane < 4; ++lane) {
      std::uint64_t v;
      std::memcpy(&v, p + 8 * lane, 8);
      h[lane] = (h[lane] ^ v) * m;
      h[lane] ^= h[lane] >> 31;
    }
  for (; n > 0; --n, ++p) h[0] = (h[0] ^ static_cast<unsigned char>(*p)) * 0x100000001b3ull;
  std::uint64_t r = s.size();
  for (const std::uint64_t lane : h) {
    r = (r ^ lane) * m;
    r ^= r >> 29;
  }
  return r;
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

// A file's first 32 bytes: the magic (an entry's or a record's), the
// payload's size and its checksum.
inline constexpr char cache_magic[16] = {'O', 'X', 'I', 'C', 'U', 'D', 'A', '-', 'C', 'A', 'C', 'H', 'E', '-', '1', '\n'};
inline constexpr char record_magic[16] = {'O', 'X', 'I', 'C', 'U', 'D', 'A', '-', 'R', 'E', 'C', 'O', 'R', 'D', '1', '\n'};
inline constexpr std::size_t cache_header_size = sizeof cache_magic + 16;

// The most any entry may take, whatever OXICUDA_CACHE_MAX_BYTES says: no
// image we write comes near it, and a read never allocates more.
inline constexpr std::uint64_t cache_entry_cap = 1ull << 30;
// The most a record (cache_record_write) may take.
inline constexpr std::uint64_t cache_record_cap = 1ull << 20;
// Stores between two scans that check the running total against the disk.
inline constexpr unsigned cache_rescan_every = 1024;

// OXICUDA_CACHE: whether the cache is on. Unset or empty, 1/on/true/yes (any
// case): on; 0/off/false/no: off; anything else: off, and `note` names it.
inline bool cache_enabled(std::string& note) {
  const std::string v = env_string("OXICUDA_CACHE");
  if (v.empty()) return true;
  std::string lower = v;
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  for (const char* on : {"1", "on", "true", "yes"})
    if (lower == on) return true;
  for (const char* off : {"0", "off", "false", "no"})
    if (lower == off) return false;
  note = cat({"oxicuda cache: OXICUDA_CACHE='", v,
              "' is none of 0, off, false, no (off) or 1, on, true, yes (on); the cache is off"});
  return false;
}

// OXICUDA_CACHE_MAX_BYTES: a number of bytes, or of KiB, MiB or GiB with
// K/KB/KiB, M/MB/MiB or G/GB/GiB after it (any case; all are powers of 1024;
// spaces between allowed): "512M", "512MB", "2 GiB". Unset or empty: 256
// MiB. Anything else ("lots", "12x", "-5", too large) is refused with a
// note naming it, and the default kept rather than evict by a misread number.
inline std::uint64_t cache_limit(std::string& note) {
  constexpr std::uint64_t fallback = 256ull << 20;
  const std::string v = env_string("OXICUDA_CACHE_MAX_BYTES");
  if (v.empty()) return fallback;
  auto refuse = [&] {
    note = cat({"oxicuda cache: OXICUDA_CACHE_MAX_BYTES='", v,
                "' is not a size (a number of bytes, or one with K, M, G, KB, MB, GB, KiB, MiB or GiB after it); "
                "the default limit, 256 MiB, is used"});
    return fallback;
  };
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(v[i] - '0');
    if (n > (~0ull - digit) / 10) return refuse();
    n = n * 10 + digit;
    ++i;
  }
  if (i == 0) return refuse();
  while (i < v.size() && v[i] == ' ') ++i;
  std::string unit = v.substr(i);
  for (char& c : unit)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  int shift = -1;
  if (unit.empty() || unit == "b") shift = 0;
  for (const auto& [letter, bits] : {std::pair<char, int>{'k', 10}, {'m', 20}, {'g', 30}})
    if (unit == std::string(1, letter) || unit == cat({std::string_view(&letter, 1), "b"}) ||
        unit == cat({std::string_view(&letter, 1), "ib"}))
      shift = bits;
  if (shift < 0 || n > (~0ull >> shift)) return refuse();
  return n << shift;
}
inline std::uint64_t cache_limit() {
  std::string note;
  return cache_limit(note);
}

// The most an entry's file may take under `limit`.
inline std::uint64_t cache_entry_bound(std::uint64_t limit) noexcept { return std::min(limit, cache_entry_cap); }

// The cache's directory as the environment names it; empty (and why in
// `note`) when it names none. `note` also tells of a setting ignored.
inline std::string cache_location(std::string& note) {
#if OXICUDA_WINDOWS
  note = "the kernel cache is not available on Windows";
  return {};
#else
  const std::string own = env_string("OXICUDA_CACHE_DIR");
  if (!own.empty()) {
    if (own[0] != '/') {
      note = cat({"oxicuda cache: OXICUDA_CACHE_DIR='", own,
                  "' is a relative path, which would put the cache wherever the program runs; refused, so "
                  "compiled without the cache. Give an absolute path"});
      return {};
    }
    return own;
  }
  const std::string xdg = env_string("XDG_CACHE_HOME");
  if (!xdg.empty()) {
    if (xdg[0] == '/') return cat({xdg, "/oxicuda"});
    note = cat({"oxicuda cache: XDG_CACHE_HOME='", xdg,
                "' is a relative path, which the XDG Base Directory specification says to ignore; $HOME/.cache "
                "is used instead"});
  }
  const std::string home = env_string("HOME");
  if (home.empty() || home[0] != '/') {
    note = cat({note, note.empty() ? "" : "\n", "oxicuda cache: ",
                home.empty() ? cat({"neither OXICUDA_CACHE_DIR, XDG_CACHE_HOME nor HOME is set"})
                             : cat({"HOME='", home, "' is not an absolute path"}),
                "; compiled without the cache"});
    return {};
  }
  return cat({home, "/.cache/oxicuda"});
#endif
}

// The cache directory, ready to use: created (0700) if missing, and
// refused when it is not a directory of this user's that no one else can
// write. Empty when the cache is off or refused; `note` then says why (empty
// when simply off). Before anything is created, each directory on the way
// that exists must be the effective user's or root's: under sudo, HOME is
// often the user's, and a root-owned cache inside it would be one the user
// can neither clean nor use. Then the cache is off, with a note, and nothing
// is created.
// `create` false: looks only (kernel_cache_info); a directory still to be
// created is named, not created.
#if !OXICUDA_WINDOWS
// What cache_directory verified last on this thread.
struct VerifiedCacheDir {
  std::string dir;
  dev_t dev = 0, parent_dev = 0;
  ino_t ino = 0, parent_ino = 0;
  uid_t parent_uid = 0;
  mode_t parent_mode = 0;
};
inline thread_local VerifiedCacheDir verified_cache_dir;
#endif

inline std::string cache_directory(std::string& note, bool create) {
#if OXICUDA_WINDOWS
  (void)create;
  return cache_location(note);
#else
  if (!cache_enabled(note)) return {};
  std::string dir = cache_location(note);
  if (dir.empty()) return {};
  auto add_note = [&](std::string_view text) { note = note.empty() ? std::string(text) : cat({note, "\n", text}); };
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::size_t last = dir.find_last_of('/');
  const std::string parent = last == 0 ? cat({"/"}) : dir.substr(0, last);
  // The directory this thread verified last (every step below), while it is
  // still the same directory, yours, private, not a link, in a parent that
  // still passes: two system calls instead of a walk from the root (a hit's
  // largest cost after the load).
  VerifiedCacheDir& memo = verified_cache_dir;
  struct stat now {}, up {};
  if (create && !memo.dir.empty() && memo.dir == dir && ::lstat(dir.c_str(), &now) == 0 && S_ISDIR(now.st_mode) &&
      now.st_dev == memo.dev && now.st_ino == memo.ino && now.st_uid == ::geteuid() && (now.st_mode & 022) == 0 &&
      ::stat(parent.c_str(), &up) == 0 && up.st_dev == memo.parent_dev && up.st_ino == memo.parent_ino &&
      up.st_uid == memo.parent_uid && up.st_mode == memo.parent_mode)
    return dir;
  // The directories on the way, from the top, up to the parent.
  std::size_t missing_from = std::string::npos;
  for (std::size_t slash = dir.find('/', 1); slash != std::string::npos; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    struct stat st {};
    if (::lstat(part.c_str(), &st) != 0) {
      missing_from = slash;
      break;
    }
    const bool link = S_ISLNK(st.st_mode);
    const unsigned link_uid = st.st_uid;
    if (link && ::stat(part.c_str(), &st) != 0) {
      missing_from = slash;
      break;
    }
    if (!S_ISDIR(st.st_mode)) {
      add_note(cat({"oxicuda cache: ", part, " is not a directory; compiled without the cache"}));
      return {};
    }
    const bool foreign_link = link && link_uid != ::geteuid() && link_uid != 0;
    if (foreign_link || (st.st_uid != ::geteuid() && st.st_uid != 0)) {
      const unsigned uid = foreign_link ? link_uid : st.st_uid;
      const std::string_view which = part == parent ? "its parent " : "";
      const std::string_view kind = foreign_link ? "a symbolic link " : "";
      add_note(cat({"oxicuda cache: refusing ", dir, ": ", which, part, " is ", kind, "owned by uid ",
                    std::to_string(uid), ", not by you (uid ", std::to_string(::geteuid()),
                    "), so nothing is created there: under sudo, HOME is often the user's, and a cache of root's "
                    "in it would be one they cannot use or clean. Compiled without the cache; set "
                    "OXICUDA_CACHE_DIR (or HOME) to a directory of yours"}));
      return {};
    }
  }
  if (!create && missing_from != std::string::npos) return dir;
  // Each missing directory on the way, private to the user.
  for (std::size_t slash = missing_from; create; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      add_note(cat({"oxicuda cache: cannot create ", part, " (", std::strerror(errno), "); compiled without the cache"}));
      return {};
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  // A link another user made (in /tmp, say) could point at a directory of
  // yours, whose files eviction would then treat as entries.
  if (!create && ::lstat(dir.c_str(), &st) != 0) return dir;
  if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid != ::geteuid() && st.st_uid != 0) {
    add_note(cat({"oxicuda cache: refusing ", dir, ": it is a symbolic link owned by uid ", std::to_string(st.st_uid),
                  ", not by you; compiled without the cache"}));
    return {};
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    add_note(cat({"oxicuda cache: ", dir, " is not a directory; compiled without the cache"}));
    return {};
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    add_note(cat({"oxicuda cache: refusing ", dir, ": it is ",
                  st.st_uid != ::geteuid() ? cat({"owned by uid ", std::to_string(st.st_uid), ", not by you"})
                                           : cat({"writable by others"}),
                  ", so a kernel planted there would run as your code. Compiled without the cache; make it yours "
                  "with mode 0700, or set OXICUDA_CACHE_DIR to such a directory"}));
    return {};
  }
  // Its parent: whoever may write there could swap the directory for another
  // after these checks; in a sticky one (/tmp) no one renames what is not
  // theirs. It must be yours or root's, and writable by no one else unless
  // sticky.
  if (::stat(parent.c_str(), &st) == 0 &&
      ((st.st_uid != ::geteuid() && st.st_uid != 0) || ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0))) {
    add_note(cat({"oxicuda cache: refusing ", dir, ": its parent ", parent, " is ",
                  st.st_uid != ::geteuid() && st.st_uid != 0
                      ? cat({"owned by uid ", std::to_string(st.st_uid)})
                      : cat({"writable by others and not sticky"}),
                  ", who could replace the cache with a directory of their choice. Compiled without the cache"}));
    return {};
  }
  struct stat mine {};
  if (create && ::lstat(dir.c_str(), &mine) == 0 && ::stat(parent.c_str(), &st) == 0) {
    memo.dir = dir;
    memo.dev = mine.st_dev, memo.ino = mine.st_ino;
    memo.parent_dev = st.st_dev, memo.parent_ino = st.st_ino, memo.parent_uid = st.st_uid,
    memo.parent_mode = st.st_mode;
  }
  return dir;
#endif
}
inline std::string cache_directory(std::string& note) { return cache_directory(note, true); }

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

// Reads `n` bytes into `out`; false at an error or the end of the file first.
inline bool read_all(int fd, char* out, std::size_t n) noexcept {
  std::size_t got = 0;
  while (got < n) {
    const ::ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

// Whether a file of `bytes` may be written under RLIMIT_FSIZE: past it, the
// write would raise SIGXFSZ, whose default action ends the process. (The
// signal is the application's; no handler is installed.)
inline bool fits_file_size_limit(std::uint64_t bytes, std::string_view path, std::string& note) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      bytes <= static_cast<std::uint64_t>(rl.rlim_cur))
    return true;
  note = cat({"oxicuda cache: not stored: ", path, " would take ", std::to_string(bytes),
              " bytes, past the process's file-size limit (RLIMIT_FSIZE, ", std::to_string(rl.rlim_cur), " bytes)"});
  return false;
}

// Removes `path` only when it is still the file `opened` (another process
// may have renamed a new file there since it was opened).
inline bool remove_if_same(const std::string& path, const struct stat& opened) noexcept {
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0 || now.st_dev != opened.st_dev || now.st_ino != opened.st_ino) return false;
  return ::unlink(path.c_str()) == 0;
}

// Writes magic, size, checksum and `payload` to `dir`/`name` atomically: a
// temporary file of a name no one else can have (mkstemp), its data synced to
// disk (a crash leaves no empty entry behind), then renamed over the file.
// `replaced`: the size of the file it replaced, 0 when none.
inline bool write_atomically(const std::string& dir, std::string_view name, const char (&magic)[16],
                             std::string_view sum_key, std::string_view payload, std::string& note,
                             std::uint64_t* replaced = nullptr) {
  const std::string path = cat({dir, "/", name});
  if (!fits_file_size_limit(cache_header_size + payload.size(), path, note)) return false;
  std::string tmp = cat({path, ".tmp.XXXXXX"});
#if defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__)
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
#else
  const int fd = ::mkstemp(tmp.data());
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
  if (fd < 0) {
    note = cat({"oxicuda cache: cannot write ", tmp, " (", std::strerror(errno), ")"});
    return false;
  }
  char header[cache_header_size];
  const std::uint64_t size = payload.size(), sum = checksum(sum_key, payload);
  std::memcpy(header, magic, sizeof magic);
  std::memcpy(header + sizeof magic, &size, 8);
  std::memcpy(header + sizeof magic + 8, &sum, 8);
  bool ok = write_all(fd, std::string_view(header, sizeof header)) && write_all(fd, payload) && ::fsync(fd) == 0;
  int error = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) ok = false, error = errno;
  if (ok) {
    struct stat old {};
    if (replaced) *replaced = ::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) ? static_cast<std::uint64_t>(old.st_size) : 0;
    if (::rename(tmp.c_str(), path.c_str()) != 0) ok = false, error = errno;
  }
  if (!ok) {
    note = cat({"oxicuda cache: cannot write ", path, " (", std::strerror(error), ")"});
    ::unlink(tmp.c_str());
  }
  return ok;
}

enum class CacheRead { missing, refused, corrupt, ok };

// Reads the file `dir`/`name` that write_atomically wrote, with at most
// `bound` bytes in all: a larger file is refused unread (a sparse file of
// 100 GiB is never read). A file that is not whole (its size, magic or
// checksum wrong) is corrupt; it is removed when `remove_corrupt`, and only
// when the path still names the file that was read. `touch`: a good file's
// time is set to now (a use, for eviction). Throws nothing: a failed
// allocation is a refusal with a note.
inline CacheRead read_checked(const std::string& dir, std::string_view name, const char (&magic)[16],
                              std::string_view sum_key, std::uint64_t bound, bool touch, bool remove_corrupt,
                              std::string& payload, std::string& note) noexcept {
  std::string path;
#if OXICUDA_EXCEPTIONS
  try {
#endif
    path = cat({dir, "/", name});
#if OXICUDA_EXCEPTIONS
  } catch (...) {
    return CacheRead::refused;
  }
#endif
  auto say = [&](std::initializer_list<std::string_view> parts) noexcept {
#if OXICUDA_EXCEPTIONS
    try {
      note = cat(parts);
    } catch (...) {
    }
#else
    note = cat(parts);
#endif
  };
  // O_NONBLOCK: a FIFO by that name must not block the open (fstat then
  // refuses anything but a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return CacheRead::missing;
    if (errno == ELOOP) say({"oxicuda cache: refusing ", path, ": it is a symbolic link; compiled instead"});
    else say({"oxicuda cache: cannot read ", path, " (", std::strerror(errno), "); compiled instead"});
    return CacheRead::refused;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    ::close(fd);
    say({"oxicuda cache: refusing ", path, ": it is not a regular file of yours that only you can write; compiled instead"});
    return CacheRead::refused;
  }
  const std::uint64_t file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size > bound) {  // never read into memory
    ::close(fd);
    say({"oxicuda cache: refusing ", path, ": ", std::to_string(file_size), " bytes, more than any entry written (at most ",
         std::to_string(bound), " bytes: the cache's size limit, and never over 1 GiB); not read, compiled instead"});
    return CacheRead::refused;
  }
  char header[cache_header_size];
  std::uint64_t size = 0, sum = 0;
  bool ok = file_size >= sizeof header && read_all(fd, header, sizeof header) &&
            std::memcmp(header, magic, sizeof magic) == 0;
  if (ok) {
    std::memcpy(&size, header + sizeof magic, 8);
    std::memcpy(&sum, header + sizeof magic + 8, 8);
    ok = size == file_size - sizeof header;
  }
  if (ok) {
    bool allocated = true;
#if OXICUDA_EXCEPTIONS
    try {
      payload.resize(static_cast<std::size_t>(size));
    } catch (...) {
      allocated = false;
    }
#else
    // Without exceptions a failed allocation would abort: see first that
    // the memory is there.
    if (void* probe = std::malloc(static_cast<std::size_t>(size) + 1)) {
      // (Kept from the compiler, which may otherwise drop a malloc whose
      // memory is freed unused: clang does.)
      __asm__ __volatile__("" : : "r"(probe) : "memory");
      std::free(probe);
      payload.resize(static_cast<std::size_t>(size));
    } else {
      allocated = false;
    }
#endif
    if (!allocated) {
      ::close(fd);
      payload.clear();
      say({"oxicuda cache: cannot read ", path, ": no memory for its ", std::to_string(size), " bytes; compiled instead"});
      return CacheRead::refused;
    }
    ok = read_all(fd, payload.data(), payload.size()) && sum == checksum(sum_key, payload);
  }
  if (ok) {
    if (touch) ::futimens(fd, nullptr);
    ::close(fd);
    return CacheRead::ok;
  }
  payload.clear();
  const bool removed = remove_corrupt && remove_if_same(path, st);
  ::close(fd);
  say({"oxicuda cache: ", removed ? "discarded " : "ignored ", path,
       ": truncated or corrupt (its size, header or checksum does not match)"});
  return CacheRead::corrupt;
}
#endif

// Whether `name` is an entry's: a key (KeyHash::hex, 32 lowercase hex
// digits) and ".bin". Eviction touches no other file.
inline bool entry_name(std::string_view name) noexcept {
  if (name.size() != 36 || name.substr(32) != ".bin") return false;
  for (const char c : name.substr(0, 32))
    if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) return false;
  return true;
}

// A record's name: 1 to 64 of [a-z0-9-]. Its file is the name and ".record",
// which no entry's name can be.
inline bool record_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if ((c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-') return false;
  return true;
}
inline bool record_file_name(std::string_view name) noexcept {
  return name.size() > 7 && name.substr(name.size() - 7) == ".record" && record_name(name.substr(0, name.size() - 7));
}

// A record of the cache's own (which NVRTC made the entries, say): a small
// file, not a kernel entry: not counted in kernel_cache_info().entries, never
// evicted, written atomically and checksummed like an entry, at most 1 MiB.
// Read: false when it is missing, refused or corrupt (`note` says which,
// but for missing); a corrupt record is left to be written over.
inline bool cache_record_read(const std::string& dir, std::string_view name, std::string& payload, std::string& note) {
#if OXICUDA_WINDOWS
  (void)dir, (void)name, (void)payload, (void)note;
  return false;
#else
  if (!record_name(name)) {
    note = cat({"oxicuda cache: '", name, "' is not a record's name ([a-z0-9-], 1 to 64 characters)"});
    return false;
  }
  const std::string file = cat({name, ".record"});
  return read_checked(dir, file, record_magic, cat({"record:", name}), cache_record_cap, false, false, payload, note) ==
         CacheRead::ok;
#endif
}
inline bool cache_record_write(const std::string& dir, std::string_view name, std::string_view payload,
                               std::string& note) {
#if OXICUDA_WINDOWS
  (void)dir, (void)name, (void)payload, (void)note;
  return false;
#else
  if (!record_name(name)) {
    note = cat({"oxicuda cache: '", name, "' is not a record's name ([a-z0-9-], 1 to 64 characters)"});
    return false;
  }
  if (cache_header_size + payload.size() > cache_record_cap) {
    note = cat({"oxicuda cache: the record ", name, " is not stored: ", std::to_string(payload.size()),
                " bytes, more than a record may take (1 MiB)"});
    return false;
  }
  return write_atomically(dir, cat({name, ".record"}), record_magic, cat({"record:", name}), payload, note);
#endif
}

// The payload of the entry `key`, or false: not there, refused or corrupt
// (`note` says which, but for not there). A corrupt entry is removed, when
// the path still names the file that was read. An entry over the bound
// (cache_entry_bound) is refused unread. A hit writes nothing but the
// entry's time of last use (now). Throws nothing: a failed allocation is a
// miss.
inline bool cache_read(const std::string& dir, const std::string& key, std::string& payload, std::string& note) {
#if OXICUDA_WINDOWS
  (void)dir, (void)key, (void)payload, (void)note;
  return false;
#else
#if OXICUDA_EXCEPTIONS
  try {
#endif
    std::string limit_note;
    const std::uint64_t bound = cache_entry_bound(cache_limit(limit_note));
    return read_checked(dir, cat({key, ".bin"}), cache_magic, key, bound, true, true, payload, note) == CacheRead::ok;
#if OXICUDA_EXCEPTIONS
  } catch (...) {  // out of memory for a path or a note: a miss
    return false;
  }
#endif
#endif
}

// Whether `name` is a writer's temporary file: an entry's or a record's
// name, ".tmp." and mkstemp's letters.
inline bool temporary_name(std::string_view name) noexcept {
  const std::size_t at = name.find(".tmp.");
  if (at == std::string_view::npos) return false;
  return entry_name(name.substr(0, at)) || record_file_name(name.substr(0, at));
}

#if !OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
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
    std::sort(files.begin(), files.end(), [](const File& x, const File& y) { return x.time < y.time; });
    for (const File& f : files) {
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
#if !OXICUDA_WINDOWS
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

// Removes the entry for `key`; returns its path (for a note).
inline std::string cache_remove(const std::string& dir, std::string_view key) {
  std::string path = cat({dir, "/", key, ".bin"});
#if !OXICUDA_WINDOWS
  ::unlink(path.c_str());
#endif
  return path;
}

// Whether the file at `path` begins as an entry does (cache_magic).
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

// Stores `payload` as the entry `key` (write_atomically: a reader sees the
// old entry, the new one, or none, never part of one), then adds it to the
// running total, which evicts only past the limit. An entry over the bound
// (cache_entry_bound) or past RLIMIT_FSIZE is not stored. Returns false
// (and says why in `note`) when it could not.
inline bool cache_write(const std::string& dir, const std::string& key, std::string_view payload, std::string& note) {
#if OXICUDA_WINDOWS
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
#if !OXICUDA_WINDOWS
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

OXICUDA_NAMESPACE_END
