// The fake driver's state, shared by its source files (fake_cuda.cpp
// defines it). Every access holds `mu`.
#pragma once

#include "fake_abi.h"
#include "fake_cuda.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fake {

enum class Kind { context, stream, event, module, function };

struct Ctx {
  int device;
  bool primary;
  long retains;  // primary only
};
struct Stream {
  CUcontext ctx;
  unsigned flags;
  int priority;
};
struct Event {
  CUcontext ctx;
  unsigned flags;
  bool recorded;
  double time_ms;
};
struct Param {
  std::size_t offset, size;
};
struct Module;
struct Func {
  Module* module;
  std::string name;
  std::vector<Param> params;
  int max_dynamic_shared;
};
struct Module {
  CUcontext ctx;
  std::vector<Func*> funcs;
};
struct Pool {
  std::uint64_t release_threshold = 0;
  std::uint64_t used = 0;
};

extern std::mutex mu;
// Never destroyed, so that objects a test leaves alive in the fake on
// purpose (a destroy the fake was told to refuse) stay reachable at exit
// for LeakSanitizer.
extern std::unordered_map<const void*, Kind>& live;
extern std::map<std::uintptr_t, std::size_t>& allocations;       // device memory (cuMemAlloc, cuMemAllocAsync)
extern std::map<std::uintptr_t, std::size_t>& host_allocations;  // pinned host memory
extern long invalid_destroys;
extern long host_funcs_run;
extern int device_count;
extern Ctx primaries[8];
extern Pool pools[8];
extern FakeLaunch last_launch;

bool alive(const void* h, Kind k);
// Handles of kind `k` in `live`.
long count_live(Kind k);
// Live handles of each kind of FAKE_LIVE_KINDS (fake_live), with mu held.
#define FAKE_LIVE_DECLARE(name, ...) long live_##name();
FAKE_LIVE_KINDS(FAKE_LIVE_DECLARE)
#undef FAKE_LIVE_DECLARE
// Whether work may be enqueued on `s` (and notes the context it goes to).
CUresult use_stream(CUstream s);
extern CUcontext last_enqueue_context;
extern thread_local bool in_host_function;
bool in_allocation(CUdeviceptr ptr, std::size_t bytes);
CUcontext current();

}  // namespace fake
