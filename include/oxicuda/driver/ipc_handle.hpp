// oxicuda/driver/ipc_handle.hpp — the bytes one process hands another to
// share an event or device memory (CUDA IPC): the driver's 64-byte handle
// in a small envelope that says what it is and which process exported it.
// IpcEventHandle is here (ipc_export(event) and its opening are event.hpp's);
// IpcMemoryHandle is memory/ipc.hpp's.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The envelope, little-endian whatever the host, so the bytes may cross a
// pipe or a socket as they are:
//   [0, 4)    "OXCI"
//   4         the format's version (1)
//   5         what it holds: 1 memory, 2 an event
//   [6, 8)    zero
//   [8, 16)   the exporting process's id
//   [16, 24)  a number drawn once per process (the same id in two PID
//             namespaces, containers, is two processes)
//   [24, 88)  the driver's handle (CUipcMemHandle / CUipcEventHandle)
//   memory only: [88, 96) the element size, [96, 104) the element count.
// The driver refuses to open a handle in the process that exported it; so
// does oxicuda, before the driver is asked, with an Error that says so.
namespace detail {

enum class IpcKind : unsigned char { memory = 1, event = 2 };
inline constexpr std::size_t ipc_header_bytes = 24 + ffi::ipc_handle_size;
inline constexpr unsigned char ipc_format_version = 1;

// Who exported a handle. Unknown (zero) for a handle made from the driver's
// bytes alone (from_raw): the driver then decides.
struct IpcStamp {
  std::uint64_t pid = 0;
  std::uint64_t nonce = 0;
  friend bool operator==(const IpcStamp&, const IpcStamp&) = default;
};

inline std::uint64_t mix64(std::uint64_t x) noexcept {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// This process: its id (asked each time: a forked child is another
// process) and its number, drawn once from the clocks and an address.
inline IpcStamp this_process() noexcept {
  static const std::uint64_t nonce = [] {
    static const char here = 0;
    std::uint64_t x = mix64(static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
    x = mix64(x ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    x = mix64(x ^ static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&here)));
    x = mix64(x ^ static_cast<std::uint64_t>(process_id()));
    return x | 1;  // never zero: zero is "unknown"
  }();
  return {static_cast<std::uint64_t>(process_id()), nonce};
}

inline void put_u64(std::byte* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
inline std::uint64_t get_u64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// Writes the envelope's first ipc_header_bytes.
inline void put_ipc_header(std::byte* out, IpcKind kind, IpcStamp stamp, const char (&raw)[ffi::ipc_handle_size]) noexcept {
  std::memcpy(out, "OXCI", 4);
  out[4] = static_cast<std::byte>(ipc_format_version);
  out[5] = static_cast<std::byte>(kind);
  out[6] = out[7] = std::byte{0};
  put_u64(out + 8, stamp.pid);
  put_u64(out + 16, stamp.nonce);
  std::memcpy(out + 24, raw, ffi::ipc_handle_size);
}

// Reads the envelope of `bytes` (`size` of them expected, of `kind`) into
// `raw` and returns its stamp; an Error saying what is wrong otherwise.
inline IpcStamp get_ipc_header(std::span<const std::byte> bytes, std::size_t size, IpcKind kind,
                               char (&raw)[ffi::ipc_handle_size], const char* operation, SourceLocation where) {
  auto refuse = [&](std::string why) {
    raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, std::move(why), where));
  };
  const char* what = kind == IpcKind::memory ? "an IpcMemoryHandle" : "an IpcEventHandle";
  if (bytes.size() != size)
    refuse(cat({std::to_string(bytes.size()), " bytes; ", what, " is ", std::to_string(size),
                " bytes (to_bytes()'s array): pass all of them, and nothing else"}));
  if (std::memcmp(bytes.data(), "OXCI", 4) != 0)
    refuse(cat({"these bytes are not an oxicuda IPC handle (they do not begin with \"OXCI\"): pass what ", what,
                "'s to_bytes() gave, unchanged"}));
  if (bytes[4] != static_cast<std::byte>(ipc_format_version))
    refuse(cat({"an IPC handle of format version ", std::to_string(static_cast<unsigned>(bytes[4])),
                "; this oxicuda reads version ", std::to_string(ipc_format_version),
                ": both processes need an oxicuda with the same IPC format"}));
  if (bytes[5] != static_cast<std::byte>(kind)) {
    const bool memory = bytes[5] == static_cast<std::byte>(IpcKind::memory);
    const bool event = bytes[5] == static_cast<std::byte>(IpcKind::event);
    refuse(memory || event ? cat({"these bytes are ", memory ? "an IpcMemoryHandle" : "an IpcEventHandle", ", not ", what})
                           : std::string("these bytes hold an unknown kind of IPC handle"));
  }
  std::memcpy(raw, bytes.data() + 24, ffi::ipc_handle_size);
  return {get_u64(bytes.data() + 8), get_u64(bytes.data() + 16)};
}

// The Error for opening a handle in the process that exported it: raised
// before the driver is asked (which refuses too, with a code of its own).
inline void refuse_own_handle(IpcStamp stamp, const char* operation, const char* use_instead, SourceLocation where) {
  if (OXICUDA_DETAIL_UNLIKELY(stamp.nonce != 0 && stamp == this_process()))
    raise(Error(ffi::CUDA_ERROR_INVALID_CONTEXT, operation,
                cat({"this process exported this handle; IPC handles are opened in another process (the driver "
                     "refuses a process its own): ",
                     use_instead}),
                where));
}

// What a failed open adds to the driver's error when the handle names this
// process's id under another number: another copy of oxicuda in this
// process exported it (or a process of the same id in another PID namespace).
inline std::string own_handle_hint(IpcStamp stamp) {
  if (stamp.pid == this_process().pid)
    return "the handle was exported by a process with this process's id: if that is this process (another copy of "
           "oxicuda in it, a shared library's), the driver refuses it here; open it in another process";
  return {};
}

struct IpcExported {};  // ipc_export's tag: a handle this process made

}  // namespace detail

// An event's IPC handle: ipc_export(event) makes it from an Event created
// with {.timing = false, .interprocess = true}; Event(ctx, handle) opens it
// in another process. Copyable; to_bytes() gives the bytes to send there,
// from_bytes() reads them back (every malformed input is an Error).
class IpcEventHandle {
 public:
  static constexpr std::size_t bytes_size = detail::ipc_header_bytes;
  using Bytes = std::array<std::byte, bytes_size>;

  IpcEventHandle() noexcept = default;
  IpcEventHandle(detail::IpcExported, const ffi::CUipcEventHandle& raw) noexcept
      : raw_(raw), stamp_(detail::this_process()), valid_(true) {}
  // A handle another program exported with the driver or runtime API
  // (cuIpcGetEventHandle, cudaIpcGetEventHandle: the same 64 bytes). Who
  // exported it is not known: opening it in that same process is the
  // driver's error.
  [[nodiscard]] static IpcEventHandle from_raw(const ffi::CUipcEventHandle& raw) noexcept {
    IpcEventHandle h;
    h.raw_ = raw;
    h.valid_ = true;
    return h;
  }

  [[nodiscard]] Bytes to_bytes(SourceLocation where = SourceLocation::current()) const {
    if (!valid_) detail::empty_handle("oxicuda::IpcEventHandle", "oxicuda::IpcEventHandle::to_bytes", where);
    Bytes out{};
    detail::put_ipc_header(out.data(), detail::IpcKind::event, stamp_, raw_.reserved);
    return out;
  }
  [[nodiscard]] static IpcEventHandle from_bytes(std::span<const std::byte> bytes,
                                                 SourceLocation where = SourceLocation::current()) {
    IpcEventHandle h;
    h.stamp_ = detail::get_ipc_header(bytes, bytes_size, detail::IpcKind::event, h.raw_.reserved,
                                      "oxicuda::IpcEventHandle::from_bytes", where);
    h.valid_ = true;
    return h;
  }

  [[nodiscard]] explicit operator bool() const noexcept { return valid_; }
  // Whether this process exported it (and so cannot open it).
  [[nodiscard]] bool exported_here() const noexcept { return valid_ && stamp_ == detail::this_process(); }
  [[nodiscard]] const ffi::CUipcEventHandle& raw() const noexcept { return raw_; }
  [[nodiscard]] detail::IpcStamp stamp() const noexcept { return stamp_; }

 private:
  ffi::CUipcEventHandle raw_{};
  detail::IpcStamp stamp_{};
  bool valid_ = false;
};

OXICUDA_DETAIL_NAMESPACE_END
