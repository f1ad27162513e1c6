// oxicuda/memory/external_semaphore.hpp — a semaphore or fence that another
// API (Vulkan, Direct3D, NvSciSync) made, imported (cuImportExternalSemaphore)
// and signalled or waited for in stream order, with values
// (cuSignalExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync): what
// orders CUDA's work on memory it shares with that API (external_memory.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../driver/stream_ref.hpp"
#include "shareable_memory.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// What kind of handle the semaphore comes as (CUexternalSemaphoreHandleType).
// Linux: opaque_fd (a Vulkan binary semaphore) and timeline_fd (a Vulkan
// timeline semaphore). Windows: the Win32, Direct3D fence and keyed-mutex
// kinds. Tegra: nvscisync.
enum class ExternalSemaphoreType : int {
  opaque_fd = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
  opaque_win32 = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32,
  opaque_win32_kmt = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32_KMT,
  d3d12_fence = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D12_FENCE,
  d3d11_fence = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_FENCE,
  nvscisync = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC,
  d3d11_keyed_mutex = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_KEYED_MUTEX,
  d3d11_keyed_mutex_kmt = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_KEYED_MUTEX_KMT,
  timeline_fd = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
  timeline_win32 = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32,
};

// An imported semaphore, owned: destroyed (cuDestroyExternalSemaphore) when
// dropped. Move-only; a default-constructed or moved-from one is empty, and
// every operation on it is an Error.
//
// The value of signal and wait means what the kind gives it: a timeline
// semaphore's or a fence's value (signal sets it, wait waits until it is at
// least that); a keyed mutex's key (wait acquires, signal releases); a
// binary semaphore ignores it (pass 0).
class ExternalSemaphore {
 public:
  ExternalSemaphore() noexcept = default;
#if !OXICUDA_DETAIL_WINDOWS
  // The semaphore exported as the file descriptor in `fd`, into `ctx`:
  // `type` is opaque_fd or timeline_fd. As for external memory: on success
  // the driver takes the descriptor (`fd` is left empty), on failure it
  // stays yours (`fd` still holds it).
  [[nodiscard]] static ExternalSemaphore import_fd(const Context& ctx, FileDescriptor&& fd,
                                                   ExternalSemaphoreType type = ExternalSemaphoreType::opaque_fd,
                                                   SourceLocation where = SourceLocation::current());
#endif
  // A semaphore exported as a Win32 handle (or by `name`, a const
  // wchar_t*: then `handle` is null), of a Win32, Direct3D or keyed-mutex
  // `type`. The driver does not take the handle.
  [[nodiscard]] static ExternalSemaphore import_win32(const Context& ctx, ExternalSemaphoreType type, void* handle,
                                                      const void* name,
                                                      SourceLocation where = SourceLocation::current());
  // An NvSciSyncObj (Tegra).
  [[nodiscard]] static ExternalSemaphore import_nvscisync(const Context& ctx, const void* object,
                                                          SourceLocation where = SourceLocation::current());

  ExternalSemaphore(ExternalSemaphore&& other) noexcept { swap(other); }
  ExternalSemaphore& operator=(ExternalSemaphore&& other) noexcept {
    ExternalSemaphore(std::move(other)).swap(*this);
    return *this;
  }
  ExternalSemaphore(const ExternalSemaphore&) = delete;
  ExternalSemaphore& operator=(const ExternalSemaphore&) = delete;
  ~ExternalSemaphore() { reset(); }

  [[nodiscard]] CUexternalSemaphore raw() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ != nullptr; }
  [[nodiscard]] ExternalSemaphoreType type() const noexcept { return type_; }
  [[nodiscard]] const Context& context() const noexcept { return ctx_; }

  // Signals it with `value` once the work enqueued on `stream` before has
  // finished (cuSignalExternalSemaphoresAsync).
  void signal(StreamRef stream, unsigned long long value = 0, SourceLocation where = SourceLocation::current()) const;
  // Makes the work enqueued on `stream` after this wait until the
  // semaphore reaches `value` (cuWaitExternalSemaphoresAsync). `timeout`
  // applies to a keyed mutex only (the others wait as long as it takes).
  void wait(StreamRef stream, unsigned long long value = 0,
            std::chrono::milliseconds timeout = std::chrono::milliseconds(0xffffffffu),
            SourceLocation where = SourceLocation::current()) const;

  // Destroys it now; it is then empty.
  void reset() noexcept;
  void swap(ExternalSemaphore& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(raw_, other.raw_);
    std::swap(type_, other.type_);
  }

 private:
  static ExternalSemaphore import(const Context& ctx, const ffi::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC& desc,
                                  const char* operation, SourceLocation where);

  Context ctx_;
  CUexternalSemaphore raw_ = nullptr;
  ExternalSemaphoreType type_ = ExternalSemaphoreType::opaque_fd;
};

// One semaphore and its value, for the batched forms. An NvSciSync
// semaphore is signalled and waited for through its fence instead (an
// NvSciSyncFence*: the driver fills it on a signal and reads it on a wait),
// and only through the batched forms, which are an Error without one.
struct SemaphoreValue {
  const ExternalSemaphore& semaphore;
  unsigned long long value = 0;
  void* fence = nullptr;
};

// Signals (or waits for) every one of `semaphores` on `stream`, in one
// driver call (the batched form). An empty span enqueues nothing; an empty
// semaphore among them, or an NvSciSync one without its fence, is an Error
// before any is signalled.
void signal_all(StreamRef stream, std::span<const SemaphoreValue> semaphores,
                SourceLocation where = SourceLocation::current());
void wait_all(StreamRef stream, std::span<const SemaphoreValue> semaphores,
              SourceLocation where = SourceLocation::current());

namespace detail {
[[noreturn]] OXICUDA_DETAIL_COLD inline void bad_semaphore(const char* operation, const char* why,
                                                           SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation, why, where));
}

inline bool keyed_mutex(ExternalSemaphoreType t) noexcept {
  return t == ExternalSemaphoreType::d3d11_keyed_mutex || t == ExternalSemaphoreType::d3d11_keyed_mutex_kmt;
}

// The driver's parameters for one semaphore: the value where its kind has
// one, the key and timeout of a keyed mutex, the fence of an NvSciSync one.
// (Params: the signal or the wait parameters.)
template <class Params>
Params semaphore_params(ExternalSemaphoreType t, unsigned long long value, void* fence,
                        unsigned timeout_ms = 0) noexcept {
  Params p{};
  if (keyed_mutex(t)) {
    p.params.keyedMutexKey = value;
    if constexpr (requires { p.params.keyedMutexTimeoutMs; }) p.params.keyedMutexTimeoutMs = timeout_ms;
  } else if (t == ExternalSemaphoreType::nvscisync) {
    p.params.nvSciSync.fence = fence;
  } else {
    p.params.fenceValue = value;
  }
  return p;
}

// Signals (or waits for) all of `all` in one driver call, their arrays on
// the stack up to 16 semaphores and on the heap above; a wait's timeout
// applies to keyed mutexes. One body for every signal and wait.
inline void semaphores_on(StreamRef stream, std::span<const SemaphoreValue> all, bool signal, unsigned timeout_ms,
                          const char* operation, SourceLocation where) {
  for (const SemaphoreValue& s : all) {
    if (!s.semaphore) empty_handle("oxicuda::ExternalSemaphore", operation, where);
    if (s.semaphore.type() == ExternalSemaphoreType::nvscisync && s.fence == nullptr)
      bad_semaphore(operation,
                    "an NvSciSync semaphore is signalled and waited for through its NvSciSyncFence: give it as "
                    "SemaphoreValue::fence to signal_all or wait_all",
                    where);
  }
  if (all.empty()) return;
  if (all.size() > 0xffffffffu) bad_semaphore(operation, "more semaphores than one driver call takes (2^32 - 1)", where);
  constexpr std::size_t inline_count = 16;
  const std::size_t n = all.size();
  CUexternalSemaphore raws_here[inline_count];
  ffi::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS signals_here[inline_count];
  ffi::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS waits_here[inline_count];
  std::vector<CUexternalSemaphore> raws_heap;
  std::vector<ffi::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS> signals_heap;
  std::vector<ffi::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS> waits_heap;
  CUexternalSemaphore* raws = raws_here;
  ffi::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS* signals = signals_here;
  ffi::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS* waits = waits_here;
  if (n > inline_count) {
    raws = (raws_heap = std::vector<CUexternalSemaphore>(n)).data();
    if (signal)
      signals = (signals_heap = std::vector<ffi::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS>(n)).data();
    else
      waits = (waits_heap = std::vector<ffi::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS>(n)).data();
  }
  for (std::size_t i = 0; i < n; ++i) {
    const SemaphoreValue& s = all[i];
    raws[i] = s.semaphore.raw();
    if (signal)
      signals[i] = semaphore_params<ffi::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS>(s.semaphore.type(), s.value, s.fence);
    else
      waits[i] = semaphore_params<ffi::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS>(s.semaphore.type(), s.value, s.fence,
                                                                            timeout_ms);
  }
  const auto count = static_cast<unsigned>(n);
  on_stream(stream, operation, where, [&](CUstream q) {
    check(signal ? OXICUDA_DRIVER(SignalExternalSemaphoresAsync, raws, signals, count, q)
                 : OXICUDA_DRIVER(WaitExternalSemaphoresAsync, raws, waits, count, q),
          where);
  });
}
}  // namespace detail

inline ExternalSemaphore ExternalSemaphore::import(const Context& ctx,
                                                   const ffi::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC& desc,
                                                   const char* operation, SourceLocation where) {
  if (!ctx) detail::empty_handle("oxicuda::Context", operation, where);
  ExternalSemaphore s;
  {
    detail::SwitchCurrent current(ctx.raw(), where);
    detail::check(OXICUDA_DRIVER(ImportExternalSemaphore, &s.raw_, &desc), where);
  }
  s.ctx_ = ctx;
  s.type_ = static_cast<ExternalSemaphoreType>(desc.type);
  return s;
}

#if !OXICUDA_DETAIL_WINDOWS
inline ExternalSemaphore ExternalSemaphore::import_fd(const Context& ctx, FileDescriptor&& fd,
                                                      ExternalSemaphoreType type, SourceLocation where) {
  constexpr const char* operation = "oxicuda::ExternalSemaphore::import_fd";
  if (!fd)
    detail::bad_semaphore(operation, "the FileDescriptor is empty (moved from, released, or never opened)", where);
  if (type != ExternalSemaphoreType::opaque_fd && type != ExternalSemaphoreType::timeline_fd)
    detail::bad_semaphore(operation, "a file descriptor is imported as opaque_fd or timeline_fd only", where);
  ffi::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc{};
  desc.type = static_cast<ffi::CUexternalSemaphoreHandleType>(type);
  desc.handle.fd = fd.get();
  ExternalSemaphore s = import(ctx, desc, operation, where);
  (void)fd.release();  // the driver's now (it closes it)
  return s;
}
#endif

inline ExternalSemaphore ExternalSemaphore::import_win32(const Context& ctx, ExternalSemaphoreType type, void* handle,
                                                         const void* name, SourceLocation where) {
  constexpr const char* operation = "oxicuda::ExternalSemaphore::import_win32";
  if (type == ExternalSemaphoreType::opaque_fd || type == ExternalSemaphoreType::timeline_fd ||
      type == ExternalSemaphoreType::nvscisync || static_cast<int>(type) < 1 || static_cast<int>(type) > 10)
    detail::bad_semaphore(operation, "a Win32 handle is imported as a Win32, Direct3D or keyed-mutex type only", where);
  if ((handle == nullptr) == (name == nullptr))
    detail::bad_semaphore(operation, "give exactly one of a handle and a name", where);
  ffi::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc{};
  desc.type = static_cast<ffi::CUexternalSemaphoreHandleType>(type);
  desc.handle.win32.handle = handle;
  desc.handle.win32.name = name;
  return import(ctx, desc, operation, where);
}

inline ExternalSemaphore ExternalSemaphore::import_nvscisync(const Context& ctx, const void* object,
                                                             SourceLocation where) {
  constexpr const char* operation = "oxicuda::ExternalSemaphore::import_nvscisync";
  if (!object) detail::bad_semaphore(operation, "a null NvSciSyncObj", where);
  ffi::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc{};
  desc.type = ffi::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC;
  desc.handle.nvSciObject = object;
  return import(ctx, desc, operation, where);
}

inline void ExternalSemaphore::signal(StreamRef stream, unsigned long long value, SourceLocation where) const {
  const SemaphoreValue one{*this, value};
  detail::semaphores_on(stream, {&one, 1}, true, 0, "oxicuda::ExternalSemaphore::signal", where);
}

inline void ExternalSemaphore::wait(StreamRef stream, unsigned long long value, std::chrono::milliseconds timeout,
                                    SourceLocation where) const {
  constexpr const char* operation = "oxicuda::ExternalSemaphore::wait";
  if (!raw_) detail::empty_handle("oxicuda::ExternalSemaphore", operation, where);
  if (timeout.count() < 0 || timeout.count() > 0xffffffffll)
    detail::bad_semaphore(operation, "a timeout below 0 or above 0xffffffff ms (INFINITE)", where);
  const SemaphoreValue one{*this, value};
  detail::semaphores_on(stream, {&one, 1}, false, static_cast<unsigned>(timeout.count()), operation, where);
}

inline void signal_all(StreamRef stream, std::span<const SemaphoreValue> semaphores, SourceLocation where) {
  detail::semaphores_on(stream, semaphores, true, 0, "oxicuda::signal_all", where);
}

inline void wait_all(StreamRef stream, std::span<const SemaphoreValue> semaphores, SourceLocation where) {
  detail::semaphores_on(stream, semaphores, false, 0xffffffffu, "oxicuda::wait_all", where);
}

inline void ExternalSemaphore::reset() noexcept {
  if (raw_) {
    constexpr const char* during = "destroying an oxicuda::ExternalSemaphore";
    detail::ScopedCurrentNothrow current(ctx_.raw(), during);
    detail::check_nothrow(OXICUDA_DRIVER(DestroyExternalSemaphore, raw_), during);
  }
  raw_ = nullptr;
  ctx_ = Context();
}

OXICUDA_DETAIL_NAMESPACE_END
