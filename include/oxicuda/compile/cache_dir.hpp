// oxicuda/compile/cache_dir.hpp — where the kernel cache lives: whether it is
// on (OXICUDA_CACHE), its size limit (OXICUDA_CACHE_MAX_BYTES), its directory
// (OXICUDA_CACHE_DIR, $XDG_CACHE_HOME/oxicuda, $HOME/.cache/oxicuda), and the
// checks that the directory is the user's own and private before anything
// is read from it or written to it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "../core/error.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// The most any entry may take, whatever OXICUDA_CACHE_MAX_BYTES says: no
// image we write comes near it, and a read never allocates more.
inline constexpr std::uint64_t cache_entry_cap = 1ull << 30;

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
  static constexpr struct {
    char letter;
    int bits;
  } units[] = {{'k', 10}, {'m', 20}, {'g', 30}};
  for (const auto& u : units)
    if (unit.size() <= 3 && !unit.empty() && unit[0] == u.letter &&
        (unit.size() == 1 || std::string_view(unit).substr(1) == "b" || std::string_view(unit).substr(1) == "ib"))
      shift = u.bits;
  if (shift < 0 || n > (~0ull >> shift)) return refuse();
  return n << shift;
}
inline std::uint64_t cache_limit() {
  std::string note;
  return cache_limit(note);
}

// The most an entry's file may take under `limit`.
inline std::uint64_t cache_entry_bound(std::uint64_t limit) noexcept { return limit < cache_entry_cap ? limit : cache_entry_cap; }

// The cache's directory as the environment names it; empty (and why in
// `note`) when it names none. `note` also tells of a setting ignored.
inline std::string cache_location(std::string& note) {
#if OXICUDA_DETAIL_WINDOWS
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

#if !OXICUDA_DETAIL_WINDOWS
// The directory cache_directory verified last on this thread, held open: a
// hit opens its entry through it (openat), so no path is walked again and
// a directory swapped in at the path later is never read unverified.
struct VerifiedCacheDir {
  std::string dir;
  dev_t dev = 0;
  ino_t ino = 0;
  int fd = -1;
  VerifiedCacheDir() = default;
  VerifiedCacheDir(const VerifiedCacheDir&) = delete;
  VerifiedCacheDir& operator=(const VerifiedCacheDir&) = delete;
  ~VerifiedCacheDir() { drop(); }
  // Whether `fd` is still the directory verified, and its stat: a program
  // may close descriptors it did not open and reuse the number.
  bool holds(struct stat& st) const noexcept {
    return fd >= 0 && ::fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
  }
  // Lets go of it, closing the descriptor only while it is still ours.
  void drop() noexcept {
    struct stat st {};
    if (holds(st)) ::close(fd);
    fd = -1;
  }
};
inline thread_local VerifiedCacheDir verified_cache_dir;

// The verified directory's descriptor when `dir` is the one this thread
// verified last, else -1.
inline int verified_cache_dir_fd(const std::string& dir) noexcept {
  const VerifiedCacheDir& memo = verified_cache_dir;
  return memo.fd >= 0 && memo.dir == dir ? memo.fd : -1;
}
#endif

// The cache directory, ready to use: created (0700) if missing, and
// refused when it is not a directory of this user's that no one else can
// write. Empty when the cache is off or refused; `note` then says why (empty
// when simply off). Before anything is created, each directory on the way
// that exists must be the effective user's or root's: under sudo, HOME is
// often the user's, and a root-owned cache inside it would be one the user
// can neither clean nor use. Then the cache is off, with a note, and nothing
// is created.
// `create` false: looks only (kernel_cache_info); a directory still to be
// created is named, not created. With `create`, the directory verified is
// held open for this thread (verified_cache_dir), and a later call that
// names the same path only checks that it is still yours and private,
// unless `again` (a store: the path is walked and checked anew, and the
// directory held is the one found now).
inline std::string cache_directory(std::string& note, bool create, bool again = false) {
#if OXICUDA_DETAIL_WINDOWS
  (void)create, (void)again;
  return cache_location(note);
#else
  if (!cache_enabled(note)) return {};
  std::string dir = cache_location(note);
  if (dir.empty()) return {};
  auto add_note = [&](std::string_view text) { note = note.empty() ? std::string(text) : cat({note, "\n", text}); };
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::size_t last = dir.find_last_of('/');
  const std::string parent = last == 0 ? cat({"/"}) : dir.substr(0, last);
  // The directory this thread verified last (every step below) and holds
  // open, while it is still yours and private (one fstat): a hit reads
  // through it, so it cannot be swapped under the reader, whoever may write
  // its parent, and no path is walked again.
  VerifiedCacheDir& memo = verified_cache_dir;
  if (create && !again && memo.fd >= 0 && memo.dir == dir) {
    struct stat held {};
    if (!memo.holds(held)) memo.fd = -1;  // closed by the program: not ours to close
    else if (held.st_uid == ::geteuid() && (held.st_mode & 022) == 0) return dir;
  }
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
  const struct stat verified = st;
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
  // Held open, once the descriptor is seen to be the directory verified.
  const int fd = create ? ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  struct stat held {};
  if (fd >= 0 && ::fstat(fd, &held) == 0 && held.st_dev == verified.st_dev && held.st_ino == verified.st_ino) {
    memo.drop();
    memo.fd = fd;
    memo.dir = dir;
    memo.dev = held.st_dev, memo.ino = held.st_ino;
  } else if (fd >= 0) {
    ::close(fd);
  }
  return dir;
#endif
}
inline std::string cache_directory(std::string& note) { return cache_directory(note, true); }

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
