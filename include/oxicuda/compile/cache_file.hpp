// oxicuda/compile/cache_file.hpp — the kernel cache's files: the header
// (magic, size, checksum) that frames each payload, atomic writes (mkstemp,
// fsync, rename), bounded reads that check the frame, removal only of the
// file that was read, and the cache's own small records.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <string>
#include <string_view>

#include "cache_key.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cerrno>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// A file's first 32 bytes: the magic (an entry's or a record's), the
// payload's size and its checksum.
inline constexpr char cache_magic[16] = {'O', 'X', 'I', 'C', 'U', 'D', 'A', '-', 'C', 'A', 'C', 'H', 'E', '-', '1', '\n'};
inline constexpr char record_magic[16] = {'O', 'X', 'I', 'C', 'U', 'D', 'A', '-', 'R', 'E', 'C', 'O', 'R', 'D', '1', '\n'};
inline constexpr std::size_t cache_header_size = sizeof cache_magic + 16;
// The most a record (cache_record_write) may take.
inline constexpr std::uint64_t cache_record_cap = 1ull << 20;

#if !OXICUDA_DETAIL_WINDOWS
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

// Reads `nh` bytes into `head`, then `nb` into `body`, in one system call
// when the file gives them at once (a hit's header and payload).
inline bool read_all(int fd, char* head, std::size_t nh, char* body, std::size_t nb) noexcept {
  ::iovec v[2] = {{head, nh}, {body, nb}};
  int first = 0;
  for (std::size_t left = nh + nb; left > 0;) {
    while (v[first].iov_len == 0) ++first;  // left > 0: one is not done
    const ::ssize_t r = ::readv(fd, v + first, 2 - first);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    left -= static_cast<std::size_t>(r);
    for (std::size_t k = static_cast<std::size_t>(r); k > 0;) {
      const std::size_t t = k < v[first].iov_len ? k : v[first].iov_len;
      v[first].iov_base = static_cast<char*>(v[first].iov_base) + t;
      v[first].iov_len -= t;
      k -= t;
      if (v[first].iov_len == 0 && first == 0) first = 1;
    }
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
// time is set to now (a use, for eviction), unless it is within the last
// second already (a hit just after the write or after another hit: one
// system call less, and eviction's order still right to the second); `found`, when given, is set to
// its stat (which file it was). Throws nothing: a failed
// allocation is a refusal with a note.
inline CacheRead read_checked(const std::string& dir, std::string_view name, const char (&magic)[16],
                              std::string_view sum_key, std::uint64_t bound, bool touch, bool remove_corrupt,
                              std::string& payload, std::string& note, struct stat* found = nullptr,
                              int dir_fd = -1) noexcept {
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
  // Through `dir_fd` (the directory verified and held open) when given.
  constexpr int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  const int fd = dir_fd >= 0 ? ::openat(dir_fd, path.c_str() + dir.size() + 1, flags) : ::open(path.c_str(), flags);
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
  bool ok = file_size >= sizeof header;
  if (ok) {
    // The payload's buffer first (its size is the file's, bounded above),
    // so that header and payload come in one read.
    size = file_size - sizeof header;
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
    std::uint64_t written = 0;
    ok = read_all(fd, header, sizeof header, payload.data(), payload.size()) &&
         std::memcmp(header, magic, sizeof magic) == 0;
    if (ok) {
      std::memcpy(&written, header + sizeof magic, 8);
      std::memcpy(&sum, header + sizeof magic + 8, 8);
      ok = written == size && sum == checksum(sum_key, payload);
    }
  }
  if (ok) {
    if (touch) {
      std::timespec now{};
      if (std::timespec_get(&now, TIME_UTC) != TIME_UTC || now.tv_sec - st.st_mtim.tv_sec >= 1 ||
          now.tv_sec < st.st_mtim.tv_sec)
        ::futimens(fd, nullptr);
    }
    if (found) *found = st;
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

// Whether `name` is a record's name; else `note` says why.
inline bool record_name(std::string_view name, std::string& note) {
  if (record_name(name)) return true;
  note = cat({"oxicuda cache: '", name, "' is not a record's name ([a-z0-9-], 1 to 64 characters)"});
  return false;
}

// A record of the cache's own (which NVRTC made the entries, say): a small
// file, not a kernel entry: not counted in kernel_cache_info().entries, never
// evicted, written atomically and checksummed like an entry, at most 1 MiB.
// Read: false when it is missing, refused or corrupt (`note` says which,
// but for missing); a corrupt record is left to be written over.
inline bool cache_record_read(const std::string& dir, std::string_view name, std::string& payload, std::string& note) {
#if OXICUDA_DETAIL_WINDOWS
  (void)dir, (void)name, (void)payload, (void)note;
  return false;
#else
  if (!record_name(name, note)) return false;
  const std::string file = cat({name, ".record"});
  return read_checked(dir, file, record_magic, cat({"record:", name}), cache_record_cap, false, false, payload, note) ==
         CacheRead::ok;
#endif
}
inline bool cache_record_write(const std::string& dir, std::string_view name, std::string_view payload,
                               std::string& note) {
#if OXICUDA_DETAIL_WINDOWS
  (void)dir, (void)name, (void)payload, (void)note;
  return false;
#else
  if (!record_name(name, note)) return false;
  if (cache_header_size + payload.size() > cache_record_cap) {
    note = cat({"oxicuda cache: the record ", name, " is not stored: ", std::to_string(payload.size()),
                " bytes, more than a record may take (1 MiB)"});
    return false;
  }
  return write_atomically(dir, cat({name, ".record"}), record_magic, cat({"record:", name}), payload, note);
#endif
}

// Whether the file at `path` begins as an entry does (cache_magic).
inline bool starts_as_entry(const std::string& path) noexcept {
#if !OXICUDA_DETAIL_WINDOWS
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

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
