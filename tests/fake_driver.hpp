// Tests' access to the fake driver's controls (tests/fake/fake_abi.h),
// through the very library the loader opened (OXICUDA_LIBCUDA_PATH).
#pragma once

#include "fake/fake_abi.h"
#include "oxicuda.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

struct Fake {
  fake_reset_fn reset;
  fake_calls_fn calls;
  fake_fail_fn fail;
  fake_live_fn live;
  fake_invalid_destroys_fn invalid_destroys;
  fake_set_device_count_fn set_device_count;
  fake_set_device_attribute_fn set_device_attribute;
  fake_set_peer_access_fn set_peer_access;
  fake_set_driver_version_fn set_driver_version;
  fake_last_launch_fn last_launch;
  fake_last_batch_fn last_batch;
  fake_last_launch_attribute_fn last_launch_attribute;
  fake_host_funcs_run_fn host_funcs_run;
  fake_last_context_fn last_context;
  fake_hold_user_object_destructors_fn hold_user_object_destructors;
  fake_hold_fn hold;
  fake_pending_fn pending;
  fake_stream_destroys_fn stream_destroys;
  fake_set_process_id_fn set_process_id;
  fake_semaphore_fn semaphore;

  // The fake that oxicuda loaded (loading it first if need be).
  static Fake& get() {
    static Fake f = [] {
      const oxicuda::DriverInfo& info = oxicuda::driver_info();
      void* lib = dlopen(info.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
      if (!lib || !dlsym(lib, "fake_reset")) {
        std::fprintf(stderr, "these tests need the fake driver (OXICUDA_LIBCUDA_PATH); loaded: '%s' (%s)\n",
                     info.library.c_str(), info.reason.c_str());
        std::abort();
      }
      Fake x{};
      x.reset = reinterpret_cast<fake_reset_fn>(dlsym(lib, "fake_reset"));
      x.calls = reinterpret_cast<fake_calls_fn>(dlsym(lib, "fake_calls"));
      x.fail = reinterpret_cast<fake_fail_fn>(dlsym(lib, "fake_fail"));
      x.live = reinterpret_cast<fake_live_fn>(dlsym(lib, "fake_live"));
      x.invalid_destroys = reinterpret_cast<fake_invalid_destroys_fn>(dlsym(lib, "fake_invalid_destroys"));
      x.set_device_count = reinterpret_cast<fake_set_device_count_fn>(dlsym(lib, "fake_set_device_count"));
      x.set_device_attribute =
          reinterpret_cast<fake_set_device_attribute_fn>(dlsym(lib, "fake_set_device_attribute"));
      x.set_peer_access = reinterpret_cast<fake_set_peer_access_fn>(dlsym(lib, "fake_set_peer_access"));
      x.set_driver_version = reinterpret_cast<fake_set_driver_version_fn>(dlsym(lib, "fake_set_driver_version"));
      x.last_launch = reinterpret_cast<fake_last_launch_fn>(dlsym(lib, "fake_last_launch"));
      x.last_batch = reinterpret_cast<fake_last_batch_fn>(dlsym(lib, "fake_last_batch"));
      x.last_launch_attribute =
          reinterpret_cast<fake_last_launch_attribute_fn>(dlsym(lib, "fake_last_launch_attribute"));
      x.host_funcs_run = reinterpret_cast<fake_host_funcs_run_fn>(dlsym(lib, "fake_host_funcs_run"));
      x.last_context = reinterpret_cast<fake_last_context_fn>(dlsym(lib, "fake_last_context"));
      x.hold_user_object_destructors = reinterpret_cast<fake_hold_user_object_destructors_fn>(
          dlsym(lib, "fake_hold_user_object_destructors"));
      x.hold = reinterpret_cast<fake_hold_fn>(dlsym(lib, "fake_hold"));
      x.pending = reinterpret_cast<fake_pending_fn>(dlsym(lib, "fake_pending"));
      x.stream_destroys = reinterpret_cast<fake_stream_destroys_fn>(dlsym(lib, "fake_stream_destroys"));
      x.set_process_id = reinterpret_cast<fake_set_process_id_fn>(dlsym(lib, "fake_set_process_id"));
      x.semaphore = reinterpret_cast<fake_semaphore_fn>(dlsym(lib, "fake_semaphore"));
      return x;
    }();
    return f;
  }
};

// The kinds of handle the fake counts as live (FAKE_LIVE_KINDS), as fields
// of a count, one per kind: `counts.stream`.
struct LiveCounts {
#define FAKE_LIVE_FIELD(name, ...) long name = 0;
  FAKE_LIVE_KINDS(FAKE_LIVE_FIELD)
#undef FAKE_LIVE_FIELD
  bool operator==(const LiveCounts&) const = default;
  // The fake's counts now.
  static LiveCounts take(Fake& fake);
};

struct LiveKind {
  const char* name;                // fake_live's name for it
  long LiveCounts::*count;         // its field
  const char* destroyed_by[2];     // the entry points that destroy, release or free one
};
inline constexpr LiveKind live_kinds[] = {
#define FAKE_LIVE_KIND(name, ...) {#name, &LiveCounts::name, {__VA_ARGS__}},
    FAKE_LIVE_KINDS(FAKE_LIVE_KIND)
#undef FAKE_LIVE_KIND
};

inline LiveCounts LiveCounts::take(Fake& fake) {
  LiveCounts c;
  for (const LiveKind& k : live_kinds) c.*k.count = fake.live(k.name);
  return c;
}

// The kind of handle that a call of `entry` destroys, if any.
inline const LiveKind* kind_destroyed_by(std::string_view entry) {
  for (const LiveKind& k : live_kinds)
    for (const char* e : k.destroyed_by)
      if (e && entry == e) return &k;
  return nullptr;
}

// Every entry point named in FAKE_LIVE_KINDS is one of the table's.
static_assert([] {
  for (const LiveKind& k : live_kinds)
    for (const char* e : k.destroyed_by) {
      bool found = !e;
      for (const auto& entry : oxicuda::ffi::entries) found = found || std::string_view(entry.name) == e;
      if (!found) return false;
    }
  return true;
}());

// Resets the fake's counters and faults for one test; imbalance() says
// what the test has left in the fake.
struct FakeScope {
  Fake& fake = Fake::get();
  LiveCounts at_start;
  FakeScope() {
    fake.reset();
    at_start = LiveCounts::take(fake);
  }
  // Empty when the test has left no handle alive and destroyed nothing twice;
  // otherwise every kind's live count at the start and now, and the double
  // destroys.
  std::string imbalance() const {
    const LiveCounts now = LiveCounts::take(fake);
    const long invalid_destroys = fake.invalid_destroys();
    if (now == at_start && invalid_destroys == 0) return {};
    std::string text;
    for (const LiveKind& k : live_kinds)
      text += std::string(k.name) + " " + std::to_string(at_start.*k.count) + "->" + std::to_string(now.*k.count) + ", ";
    return text + "invalid destroys " + std::to_string(invalid_destroys);
  }
};

// The oxicuda::Error that `f` raises (the test fails when it raises none).
template <class F>
oxicuda::Error error_of(F&& f) {
  try {
    f();
  } catch (const oxicuda::Error& e) {
    return e;
  }
  FAIL("no error");
  return oxicuda::Error(oxicuda::ffi::CUDA_SUCCESS, "");
}

// An IPC handle as if another process had exported it: its bytes with the
// exporter's id and number (bytes 8 to 24 of the envelope, see
// oxicuda/driver/ipc_handle.hpp) changed. The fake must believe so too:
// OtherProcess.
template <class Handle>
Handle as_if_exported_elsewhere(const Handle& handle) {
  auto bytes = handle.to_bytes();
  for (std::size_t i = 8; i < 24; ++i) bytes[i] ^= std::byte{0x5a};
  return Handle::from_bytes(bytes);
}

// For its scope, the fake believes it runs in another process than the one
// that exported the handles made before (fake_set_process_id).
struct OtherProcess {
  OtherProcess() { Fake::get().set_process_id(static_cast<long>(::getpid()) + 100000); }
  OtherProcess(const OtherProcess&) = delete;
  OtherProcess& operator=(const OtherProcess&) = delete;
  ~OtherProcess() { Fake::get().set_process_id(0); }
};

// Heap allocations made by this process so far (tests/cpu/main.cpp counts them).
long heap_allocations();

// The PTX module of the CPU tests; the fake reads its entry declarations and
// runs `dbl` on the host:
//   dbl(.u64 ptr, .u32 n)                       doubles n floats
//   layout(.u64, .u32, .f32, .align 8 .b8[24])  parameters at 0, 8, 12, 16
//   saxpy(.u64 y, .u64 x, .f32 a, .u32 n)
//   take_u32(.u32 n)
//   take_blob(.u32 tag, .align 8 .b8 blob[24])
//   none()
inline constexpr const char* kFakePtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry dbl(
    .param .u64 ptr,
    .param .u32 n
)
{ ret; }
.visible .entry layout(.param .u64 a, .param .u32 b, .param .f32 c, .param .align 8 .b8 d[24])
{ ret; }
.visible .entry saxpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)
{ ret; }
.visible .entry take_u32(.param .u32 n)
{ ret; }
.visible .entry take_blob(.param .u32 tag, .param .align 8 .b8 blob[24])
{ ret; }
.visible .entry none()
{ ret; }
.visible .entry set_handle(.param .u64 h, .param .u64 v)
{ ret; }
)";

// The fake NVRTC's or fake nvJitLink's controls (tests/fake/fake_toolkit.hpp),
// through the library oxicuda loaded for it (OXICUDA_LIBNVRTC_PATH,
// OXICUDA_LIBNVJITLINK_PATH).
struct FakeToolkit {
  fake_reset_fn reset;
  fake_calls_fn calls;
  fake_fail_fn fail;
  fake_toolkit_live_fn live;
  fake_toolkit_live_fn invalid_destroys;

  static FakeToolkit load(const oxicuda::LibraryInfo& info, const char* prefix) {
    void* lib = dlopen(info.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    auto sym = [&](const char* what) {
      void* p = lib ? dlsym(lib, (std::string("fake_") + prefix + "_" + what).c_str()) : nullptr;
      if (!p) {
        std::fprintf(stderr, "these tests need the fake %s (loaded: '%s'; %s)\n", prefix, info.library.c_str(),
                     info.reason.c_str());
        std::abort();
      }
      return p;
    };
    FakeToolkit f{};
    f.reset = reinterpret_cast<fake_reset_fn>(sym("reset"));
    f.calls = reinterpret_cast<fake_calls_fn>(sym("calls"));
    f.fail = reinterpret_cast<fake_fail_fn>(sym("fail"));
    f.live = reinterpret_cast<fake_toolkit_live_fn>(sym("live"));
    f.invalid_destroys = reinterpret_cast<fake_toolkit_live_fn>(sym("invalid_destroys"));
    return f;
  }
  static FakeToolkit& nvrtc() {
    static FakeToolkit f = load(oxicuda::nvrtc_info(), "nvrtc");
    return f;
  }
  static FakeToolkit& nvjitlink() {
    static FakeToolkit f = load(oxicuda::nvjitlink_info(), "nvjitlink");
    return f;
  }
};
