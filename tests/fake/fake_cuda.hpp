// The fake driver's shared declarations (not part of oxicuda).
//
// The fake exports every entry point of oxicuda's table under its driver
// symbol (cuStreamDestroy_v2, ...), keeps in-memory handles, counts calls per
// entry point, counts live handles per kind, and fails a chosen call of a
// chosen entry point on request. Tests reach its controls (fake_*) through
// tests/fake_driver.hpp. Its files follow the library's parts:
//   fake_core.cpp           call counting, fault injection, the controls, cuInit, error texts
//   fake_device.cpp         devices
//   fake_context.cpp        primary and created contexts, the current context
//   fake_stream_event.cpp   streams and events
//   fake_module_launch.cpp  modules (PTX read for its entries), functions, launches, the JIT linker
//   fake_occupancy.cpp      the occupancy calculator
//   fake_memory.cpp         device and pinned memory, copies, fills, memory pools
//   fake_ipc.cpp            IPC handles of memory and events, opened "in another process"
//   fake_vmm.cpp            virtual memory: reservations, physical allocations (memfds), mappings, exports
//   fake_external.cpp       external memory (the VMM's exported memfds) and semaphores (eventfds)
//   fake_tensor_map.cpp     tensor maps (TMA descriptors), checked by the driver's documented rules
//   fake_graph.cpp          graphs: made, destroyed, cloned, listed; user objects; DOT
//   fake_graph_nodes.cpp    graph nodes added one by one, their parameters checked
//   fake_graph_exec.cpp     executable graphs: instantiate, launch, upload, update, setters
//   fake_graph_capture.cpp  stream capture
//   fake_getproc.cpp        cuGetProcAddress_v2
//   fake_optional.cpp       the newest entry points
//   fake_batch.cpp          batched copies, prefetches and discards (CUDA 13.0; optional too)
//   fake_library.cpp        libraries and their kernels (CUDA 12.0; optional too)
//   fake_green.cpp          SM resources, their splits, green contexts and their streams (CUDA 12.4; optional too)
//   fake_checkpoint.cpp     checkpointing: a state machine per process (CUDA 12.8; optional too)
// fake_state.hpp declares what they share (fake_graph.hpp, what the
// graph files share among themselves). A new entry point goes in the file
// of its area (a new area, a new file in tests/meson.build's fake_common).
// The variants there leave out fake_getproc.cpp (a driver older than CUDA
// 11.3) or fake_optional.cpp, fake_batch.cpp, fake_library.cpp, fake_green.cpp and
// fake_checkpoint.cpp (a driver without the newest
// entry points).
#pragma once

#include "oxicuda/core/ffi.hpp"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// The fake's thread-local state, in the static TLS block (initial-exec: the
// few bytes fit glibc's surplus for dlopen'ed libraries), reached without
// __tls_get_addr: LeakSanitizer's tracking of dynamic TLS read a stale
// block of the fake's and crashed at exit in the ASan loader tests (a
// meson run, once the fake's layout changed; LSan's own bug).
#define FAKE_TLS thread_local __attribute__((tls_model("initial-exec")))

using namespace oxicuda::ffi;

namespace fake {

// Counts the call, and returns the injected failure for it (or CUDA_SUCCESS).
CUresult enter(Entry e) noexcept;

}  // namespace fake

// Declares fake_<member> with the driver's exported symbol name, so each
// definition below must have exactly the table's signature.
#define FAKE_DECLARE(member, version, symbol, params) \
  extern "C" __attribute__((visibility("default"))) CUresult fake_##member params __asm__(symbol);
OXICUDA_DETAIL_DRIVER_API(FAKE_DECLARE)
#undef FAKE_DECLARE

#define FAKE_ENTRY(member)                                                          \
  do {                                                                              \
    if (const CUresult fake_r_ = ::fake::enter(Entry::member); fake_r_ != CUDA_SUCCESS) \
      return fake_r_;                                                               \
  } while (0)
