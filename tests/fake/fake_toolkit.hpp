// What the fake NVRTC (fake_nvrtc.cpp) and the fake nvJitLink
// (fake_nvjitlink.cpp) share: per-entry call counters and fault injection
// over their table (the same shape as the fake driver's), and the controls
// each exports under its own prefix (fake_nvrtc_calls, fake_nvjitlink_fail,
// ...: tests/fake/fake_abi.h declares them).
#pragma once

#include "fake_abi.h"
#include "oxicuda/core/nvjitlink_ffi.hpp"
#include "oxicuda/core/nvrtc_ffi.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace fake {

template <std::size_t N>
struct Counters {
  const oxicuda::ffi::EntryInfo* entries;
  std::atomic<long> calls[N]{};
  std::atomic<long> countdown[N]{};
  std::atomic<int> result[N]{};
  std::atomic<bool> sticky[N]{};
  std::mutex mu;  // the fake's objects
  long live = 0;
  long invalid_destroys = 0;

  explicit Counters(const oxicuda::ffi::EntryInfo* e) : entries(e) {}

  std::size_t index(const char* name) const {
    for (std::size_t i = 0; i < N; ++i)
      if (std::strcmp(entries[i].name, name) == 0) return i;
    return N;
  }
  // Counts the call; the injected failure for it, or 0.
  int enter(std::size_t i) {
    calls[i].fetch_add(1, std::memory_order_relaxed);
    if (sticky[i].load()) return result[i].load();
    if (countdown[i].load() > 0 && countdown[i].fetch_sub(1) == 1) return result[i].load();
    return 0;
  }
  void reset() {
    for (std::size_t i = 0; i < N; ++i) calls[i] = 0, countdown[i] = 0, result[i] = 0, sticky[i] = false;
    std::lock_guard lock(mu);
    invalid_destroys = 0;
  }
  long count(const char* name) {
    const std::size_t i = index(name);
    return i < N ? calls[i].load() : -1;
  }
  int fail(const char* name, long nth, int r) {
    const std::size_t i = index(name);
    if (i >= N) return -1;
    result[i] = r;
    if (nth == 0)
      sticky[i] = true;
    else
      countdown[i] = nth;
    return 0;
  }
};

}  // namespace fake

// The controls of one fake library, named fake_<prefix>_*.
#define FAKE_TOOLKIT_CONTROLS(prefix, counters)                                                             \
  FAKE_EXPORT void fake_##prefix##_reset() { counters.reset(); }                                            \
  FAKE_EXPORT long fake_##prefix##_calls(const char* name) { return counters.count(name); }                 \
  FAKE_EXPORT int fake_##prefix##_fail(const char* name, long nth, int result) {                            \
    return counters.fail(name, nth, result);                                                                \
  }                                                                                                         \
  FAKE_EXPORT long fake_##prefix##_live() {                                                                 \
    std::lock_guard lock(counters.mu);                                                                      \
    return counters.live;                                                                                   \
  }                                                                                                         \
  FAKE_EXPORT long fake_##prefix##_invalid_destroys() {                                                     \
    std::lock_guard lock(counters.mu);                                                                      \
    return counters.invalid_destroys;                                                                       \
  }
