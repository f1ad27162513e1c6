// The fake driver's core: every call counted and, on request, failed
// (fault injection); the registry of live handles; the controls the tests
// use (fake_abi.h); initialization and error texts. See fake_cuda.hpp.
#include "fake_state.hpp"
#include "oxicuda/core/traits.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <pthread.h>
#include <string>
#include <unordered_map>

namespace fake {

namespace {

constexpr std::size_t N = entry_count;

std::atomic<long> calls[N];
std::atomic<long> total_calls{0};
std::atomic<long> fail_countdown[N];
std::atomic<int> fail_result[N];
std::atomic<bool> fail_sticky[N];

// FAKE_CUDA_FAIL="cuInit:1:100" injects a failure before the first call
// (for the entry points only the loader calls, in a process of their own).
const bool env_faults = [] {
  if (const char* spec = std::getenv("FAKE_CUDA_FAIL")) {
    const char* c1 = std::strchr(spec, ':');
    const char* c2 = c1 ? std::strchr(c1 + 1, ':') : nullptr;
    if (c2) {
      const std::string name(spec, c1);
      for (std::size_t i = 0; i < N; ++i)
        if (name == entries[i].name) {
          fail_countdown[i] = std::atol(c1 + 1);
          fail_result[i] = std::atoi(c2 + 1);
        }
    }
  }
  return true;
}();

// As the driver: a child forked after the driver was loaded gets
// CUDA_ERROR_NOT_INITIALIZED from every call, cuInit included.
std::atomic<bool> forked{false};
const bool fork_handler = [] {
  pthread_atfork(nullptr, nullptr, [] { forked = true; });
  return true;
}();

std::size_t entry_index(const char* name) {
  for (std::size_t i = 0; i < N; ++i)
    if (std::strcmp(entries[i].name, name) == 0) return i;
  return N;
}

}  // namespace

// As the driver: on the thread that runs host functions, every call but
// cuStreamDestroy is refused (measured on an H200, driver 580).
FAKE_TLS bool in_host_function = false;

CUresult enter(Entry e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  calls[i].fetch_add(1, std::memory_order_relaxed);
  total_calls.fetch_add(1, std::memory_order_relaxed);
  if (forked.load(std::memory_order_relaxed)) return CUDA_ERROR_NOT_INITIALIZED;
  if (in_host_function && e != Entry::StreamDestroy) return CUDA_ERROR_NOT_PERMITTED;
  if (fail_sticky[i].load(std::memory_order_relaxed)) return static_cast<CUresult>(fail_result[i].load());
  if (fail_countdown[i].load(std::memory_order_relaxed) > 0 && fail_countdown[i].fetch_sub(1) == 1)
    return static_cast<CUresult>(fail_result[i].load());
  return CUDA_SUCCESS;
}

std::mutex mu;
std::unordered_map<const void*, Kind>& live = *new std::unordered_map<const void*, Kind>;
long invalid_destroys = 0;
long host_funcs_run = 0;

bool alive(const void* h, Kind k) {
  auto it = live.find(h);
  return it != live.end() && it->second == k;
}

long count_live(Kind k) {
  long n = 0;
  for (auto& [h, kk] : live) n += kk == k;
  return n;
}

}  // namespace fake

using namespace fake;

// --- controls ----------------------------------------------------------------

FAKE_EXPORT void fake_reset() {
  for (std::size_t i = 0; i < N; ++i) {
    calls[i] = 0;
    fail_countdown[i] = 0;
    fail_sticky[i] = false;
    fail_result[i] = 0;
  }
  total_calls = 0;
  reset_device_attributes();
  reset_ipc();
  if (reset_checkpoint) reset_checkpoint();
  std::lock_guard lock(mu);
  invalid_destroys = 0;
  host_funcs_run = 0;
}

FAKE_EXPORT long fake_calls(const char* name) {
  if (std::strcmp(name, "*") == 0) return total_calls.load();
  const std::size_t i = entry_index(name);
  return i < N ? calls[i].load() : -1;
}

FAKE_EXPORT int fake_fail(const char* name, long nth, int result) {
  const std::size_t i = entry_index(name);
  if (i >= N) return -1;
  fail_result[i] = result;
  if (nth == 0)
    fail_sticky[i] = true;
  else
    fail_countdown[i] = nth;
  return 0;
}

FAKE_EXPORT long fake_live(const char* kind) {
  std::lock_guard lock(mu);
#define FAKE_LIVE_COUNT(name, ...) if (std::strcmp(kind, #name) == 0) return live_##name();
  FAKE_LIVE_KINDS(FAKE_LIVE_COUNT)
#undef FAKE_LIVE_COUNT
  return -1;
}

FAKE_EXPORT long fake_invalid_destroys() {
  std::lock_guard lock(mu);
  return invalid_destroys;
}

FAKE_EXPORT long fake_host_funcs_run() {
  std::lock_guard lock(mu);
  return host_funcs_run;
}

// --- initialization and errors -----------------------------------------------

CUresult fake_Init(unsigned int flags) {
  FAKE_ENTRY(Init);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (const char* r = std::getenv("FAKE_CUDA_INIT_RESULT")) return static_cast<CUresult>(std::atoi(r));
  return CUDA_SUCCESS;
}

// What cuDriverGetVersion answers (fake_set_driver_version), 13000 unless set.
static std::atomic<int> driver_version{13000};

FAKE_EXPORT void fake_set_driver_version(int version) { driver_version = version; }
int fake::reported_driver_version() { return driver_version; }

CUresult fake_DriverGetVersion(int* v) {
  FAKE_ENTRY(DriverGetVersion);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = driver_version;
  return CUDA_SUCCESS;
}

CUresult fake_GetErrorString(CUresult error, const char** s) {
  FAKE_ENTRY(GetErrorString);
  static const auto texts = [] {
    std::map<int, std::string> m;
    // The header's texts, marked, so that a test tells the driver's own text from them.
    for (const auto& t : oxicuda::LibraryTraits<oxicuda::Library::driver>::texts)
      m[t.code] = std::string(t.text) + " [fake driver]";
    return m;
  }();
  auto it = texts.find(error);
  if (it == texts.end()) return CUDA_ERROR_INVALID_VALUE;
  *s = it->second.c_str();
  return CUDA_SUCCESS;
}
