// The fake driver's state that more than one of its files uses, each part
// defined in the file named above it. Every access holds `mu`, except a
// thread's own context stack and the counters of fake_core.cpp.
#pragma once

#include "fake_abi.h"
#include "fake_cuda.hpp"

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fake {

enum class Kind { context, stream, event, module, function, link };

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

// fake_core.cpp
extern std::mutex mu;
// Every handle the fake has made and not yet destroyed. Never destroyed, so
// that objects a test leaves alive in the fake on purpose (a destroy the
// fake was told to refuse) stay reachable at exit for LeakSanitizer.
extern std::unordered_map<const void*, Kind>& live;
bool alive(const void* h, Kind k);
long count_live(Kind k);  // the handles of kind `k` in `live`
extern long invalid_destroys;  // destroys of a handle that was not live
extern long host_funcs_run;
extern thread_local bool in_host_function;  // on the thread that runs host functions

// fake_device.cpp
extern int device_count;

// fake_context.cpp
CUcontext current();  // the calling thread's current context

// fake_stream_event.cpp
// Whether work may be enqueued on `s` (and notes the context it goes to).
CUresult use_stream(CUstream s);

// fake_memory.cpp
// [ptr, ptr + bytes) inside one device allocation?
bool in_allocation(CUdeviceptr ptr, std::size_t bytes);

// The live handles of each kind of FAKE_LIVE_KINDS (fake_live), counted in
// the file of that kind, with `mu` held.
#define FAKE_LIVE_DECLARE(name, ...) long live_##name();
FAKE_LIVE_KINDS(FAKE_LIVE_DECLARE)
#undef FAKE_LIVE_DECLARE

}  // namespace fake
