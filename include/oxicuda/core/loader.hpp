// oxicuda/core/loader.hpp — find the driver library at first use, resolve every
// entry point of the table at its pinned version, run cuInit(0) once, and
// remember why not when any of it fails. Nothing here throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include "library.hpp"

#if !OXICUDA_DETAIL_WINDOWS
#include <pthread.h>
#endif

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Why the driver is, or is not, usable.
enum class DriverStatus {
  ok,            // loaded, every available entry point resolved, cuInit succeeded
  no_library,    // no candidate library could be opened
  not_a_driver,  // a library was opened but it exports no cuInit
  stub_library,  // the toolkit's link-time stub: cuInit answered CUDA_ERROR_STUB_LIBRARY
  init_failed,   // cuInit(0) failed (no device, driver/kernel-module mismatch, ...)
};

// What the first use of the driver found. Filled once; read-only afterwards.
struct DriverInfo {
  DriverStatus status = DriverStatus::no_library;
  std::string library;                            // the file that was opened, as it was named to the loader
  std::string reason;                             // when not ok: what was tried, what failed, what to do
  int version = 0;                                // cuDriverGetVersion (e.g. 13000), 0 when unknown
  ffi::CUresult init_result = ffi::CUDA_SUCCESS;  // what cuInit(0) returned
  bool via_get_proc_address = false;              // entry points came from cuGetProcAddress_v2

  [[nodiscard]] bool available() const noexcept { return status == DriverStatus::ok; }
};

// Loads the driver on first use (thread-safe, once per process, never
// unloaded) and says what happened. Never throws.
[[nodiscard]] const DriverInfo& driver_info() noexcept;

namespace ffi {

// The driver's stand-ins (each answers CUDA_ERROR_NOT_FOUND, which
// detail::fail turns into the error that explains why) and DriverApi, one
// function pointer per table entry: the driver's, or its stand-in.
#define OXICUDA_DETAIL_TABLE_TRAITS LibraryTraits<Library::driver>
OXICUDA_DETAIL_LIBRARY_API(OXICUDA_DETAIL_DRIVER_API, DriverApi)
#undef OXICUDA_DETAIL_TABLE_TRAITS

}  // namespace ffi

namespace detail {

struct Driver {
  ffi::DriverApi api;
  long pid = 0;  // the process that loaded the driver (a forked child has another)
  bool forked_child = false;  // set in a child forked after the load (see on_fork_child)
  bool provided[ffi::entry_count] = {};  // by entry: the slot holds the driver's function, not the stand-in
  DriverInfo info;

  // Back to the stand-ins, every one: the driver is unusable.
  void forget() noexcept {
    api = {};
    for (bool& b : provided) b = false;
    info.via_get_proc_address = false;
  }
};

// DriverApi is one function pointer per entry, in entry order, each stored
// like a void* (true on every platform with a CUDA driver), and nothing else:
// entry i's slot is the i-th pointer-sized slot.
static_assert(std::is_standard_layout_v<ffi::DriverApi> && std::is_trivially_copyable_v<ffi::DriverApi>);
static_assert(sizeof(void*) == sizeof(ffi::DriverApi{}.Init));
static_assert(sizeof(ffi::DriverApi) == ffi::entry_count * sizeof(void*));

// The files to try, and the driver's file as messages name it.
#if OXICUDA_DETAIL_WINDOWS
inline constexpr const char* driver_file = "nvcuda.dll";
inline const char* const default_candidates[] = {driver_file};
#else
inline constexpr const char* driver_file = "libcuda.so.1";
inline const char* const default_candidates[] = {driver_file, "libcuda.so"};
#endif

// "CUDA_ERROR_INVALID_VALUE (1)", from the header's table (the driver may be
// absent or the stub).
inline std::string describe_result(ffi::CUresult r) {
  return cat({result_name<Library::driver>(r), " (", std::to_string(static_cast<int>(r)), ")"});
}

// Fills the table from the opened library: each entry from cuGetProcAddress_v2
// at its pinned version (with legacy default-stream semantics), else by its
// exported symbol (library.hpp); an entry found neither way keeps its stand-in.
inline void resolve(Driver& d, LibHandle h) {
  const TableSlots table{ffi::entries, ffi::entry_count, &d.api, d.provided};
  auto* gpa = reinterpret_cast<decltype(d.api.GetProcAddress)>(lib_symbol(h, "cuGetProcAddress_v2"));
  bool any_from_gpa = false;
  for (std::size_t i = 0; gpa && i < ffi::entry_count; ++i) {
    if (i == static_cast<std::size_t>(ffi::Entry::GetProcAddress)) continue;
    void* p = nullptr;
    ffi::CUdriverProcAddressQueryResult status = ffi::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (gpa(ffi::entries[i].name, &p, ffi::entries[i].version, ffi::CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) !=
            ffi::CUDA_SUCCESS ||
        status != ffi::CU_GET_PROC_ADDRESS_SUCCESS || !p)
      continue;
    set_slot(table, i, p);
    any_from_gpa = true;
  }
  resolve_symbols(h, table);
  d.info.via_get_proc_address = any_from_gpa;
}

#if !OXICUDA_DETAIL_WINDOWS
// The driver loaded in this process, for the fork handler.
inline Driver* loaded_driver = nullptr;
// In a child forked after the driver was loaded, the driver serves nothing
// (it answers CUDA_ERROR_NOT_INITIALIZED) and some of its calls crash
// (cuStreamDestroy, on driver 580). So the child, single-threaded at this
// point, puts every slot of the table back to its stand-in: no call of
// oxicuda's reaches the driver there. Calls are refused with an Error that
// explains (detail::fail), and destructors leak what the parent owns,
// silently (detail::check_nothrow).
inline void on_fork_child() noexcept {
  if (loaded_driver) {
    loaded_driver->api = ffi::DriverApi{};
    loaded_driver->forked_child = true;
  }
}
#endif

inline Driver* load_driver() {
  auto* d = new Driver{};
  d->pid = process_id();
#if !OXICUDA_DETAIL_WINDOWS
  loaded_driver = d;
  ::pthread_atfork(nullptr, nullptr, &on_fork_child);
#endif
  DriverInfo& info = d->info;
  const LibrarySpec spec{LibraryTraits<Library::driver>::name, "OXICUDA_LIBCUDA_PATH", default_candidates,
                         sizeof default_candidates / sizeof default_candidates[0], false, "", nullptr, 0};
  Opened o = open_library(spec);
  const LibHandle h = o.handle;
  if (!h) {
    info.status = DriverStatus::no_library;
    info.reason = o.from_env ? cat({"OXICUDA_LIBCUDA_PATH names a driver library that cannot be opened: ", o.tried,
                                    ". Point it at the driver's ", driver_file, " or unset it."})
                             : cat({"no CUDA driver library could be opened (tried ", o.tried,
                                    "). Install the NVIDIA driver, or set OXICUDA_LIBCUDA_PATH to its ", driver_file,
                                    "."});
    return d;
  }
  info.library = std::move(o.path);
  resolve(*d, h);
  if (!d->provided[static_cast<std::size_t>(ffi::Entry::Init)]) {
    info.status = DriverStatus::not_a_driver;
    info.reason = cat({info.library, " was opened but exports no cuInit: it is not a CUDA driver library."});
    d->forget();
    return d;
  }
  info.init_result = d->api.Init(0);
  if (d->api.DriverGetVersion(&info.version) != ffi::CUDA_SUCCESS) info.version = 0;
  if (info.init_result == ffi::CUDA_ERROR_STUB_LIBRARY) {
    info.status = DriverStatus::stub_library;
    info.reason = cat({info.library,
                       " is the CUDA toolkit's stub library (cuInit returned CUDA_ERROR_STUB_LIBRARY "
                       "(34)): it exists only to link against and cannot run anything. Remove its "
                       "directory (.../lib64/stubs) from LD_LIBRARY_PATH or OXICUDA_LIBCUDA_PATH so "
                       "that the driver's own libcuda.so.1 is found."});
  } else if (info.init_result != ffi::CUDA_SUCCESS) {
    info.status = DriverStatus::init_failed;
    const ffi::ResultText* t = result_text<Library::driver>(info.init_result);
    info.reason = cat({"cuInit(0) failed with ", describe_result(info.init_result), ": ", t ? t->text : "unknown error",
                       " (driver library ", info.library, ")."});
  } else {
    info.status = DriverStatus::ok;
    return d;
  }
  d->forget();
  return d;
}

// The process's driver. Built on first use, then read without a lock; never
// freed, so it outlives every static object that might still call it.
// (The pointer is published once loaded, so that a call reads one word and
// tests it, where a function-local static reads its guard, then the pointer.)
inline std::atomic<const Driver*> published_driver{nullptr};
OXICUDA_DETAIL_COLD inline const Driver* load_driver_once() noexcept {
  static const Driver* const d = load_driver();
  published_driver.store(d, std::memory_order_release);
  return d;
}
inline const Driver& driver() noexcept {
  const Driver* d = published_driver.load(std::memory_order_acquire);
  if (OXICUDA_DETAIL_UNLIKELY(d == nullptr)) d = load_driver_once();
  return *d;
}

inline const ffi::DriverApi& api() noexcept { return driver().api; }

// Whether this process is a child forked after the driver was loaded (the
// driver then answers every call with CUDA_ERROR_NOT_INITIALIZED).
inline bool forked_after_load() noexcept { return driver().forked_child || driver().pid != process_id(); }

// Whether the driver lacks this entry point (its slot holds the stand-in).
inline bool missing(ffi::Entry entry) noexcept { return !driver().provided[static_cast<std::size_t>(entry)]; }

}  // namespace detail

inline const DriverInfo& driver_info() noexcept { return detail::driver().info; }

OXICUDA_DETAIL_NAMESPACE_END
