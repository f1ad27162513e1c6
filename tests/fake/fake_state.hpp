// The fake driver's state that more than one of its files uses, each part
// defined in the file named above it. Every access holds `mu`, except a
// thread's own context stack and the counters of fake_core.cpp.
#pragma once

#include "fake_abi.h"
#include "fake_cuda.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fake {

// green: a green context; green_context: the context it converts to (cuCtxFromGreenCtx).
enum class Kind {
  context, stream, event, module, function, link, graph, node, graph_exec, user_object,
  library, kernel, library_module,  // fake_library.cpp (a library's module in a context: not the caller's to unload)
  green, green_context
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
  int static_shared;  // from the PTX's .shared declarations
};
struct Global {
  std::string name;
  CUdeviceptr ptr;  // zeroed memory of the fake's while the module lives (module_variable_add)
  std::size_t bytes;
};
struct Module {
  CUcontext ctx;
  std::vector<Func*> funcs;
  std::vector<Global> globals;  // the PTX's module-scope .global and .const variables
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
extern FAKE_TLS bool in_host_function;  // on the thread that runs host functions

// fake_device.cpp
extern int device_count;
void reset_device_attributes();  // forgets fake_set_device_attribute's answers (takes `mu`)
int device_attribute_locked(CUdevice dev, CUdevice_attribute attr);  // with `mu` held: cuDeviceGetAttribute's answer
bool peer_capable_locked(int dev, int peer);  // with `mu` held: cuDeviceCanAccessPeer's answer

// fake_context.cpp
CUcontext current();  // the calling thread's current context (possibly destroyed)
int context_device(CUcontext c);  // with `mu` held: a context's device (-1 for none)
// Whether the calling thread's current context is usable, as the driver
// answers: CUDA_ERROR_INVALID_CONTEXT (none), CUDA_ERROR_CONTEXT_IS_DESTROYED
// (a fully released primary context, or a created one destroyed while
// current here). Takes `mu`; the _locked form is for callers that hold it.
CUresult need_current();
CUresult need_current_locked();
// With `mu` held: the context a green context converts to (cuCtxFromGreenCtx),
// made with it and gone with it; and the green context of a context (null
// for an ordinary one, or one gone).
CUcontext green_context_new(int device, const void* green);
void green_context_free(CUcontext c);
const void* green_of(CUcontext c);

// fake_stream_event.cpp
// With `mu` held: a new stream in `ctx` (cuStreamCreate's, after its checks).
CUstream new_stream(CUcontext ctx, unsigned flags, int priority);
// Whether work may be enqueued on `s` (and notes the context it goes to).
CUresult use_stream(CUstream s);
// Pending work (fake_hold): a held stream's work waits, in order, until
// the stream is synchronized (or its context), an event recorded after it
// is waited for, the legacy default stream orders after it (a blocking
// stream), or the test releases it; a held stream destroyed with work
// pending leaves that work to run at the release of all streams, as the
// driver runs it after cuStreamDestroy returns. With `mu` held: whether
// `s` is held, and (when it is) queueing `work` on it; a caller does its
// work at once when the stream is not held (checked first, so that the
// hot path allocates nothing).
bool held(CUstream s);
void defer(CUstream s, std::function<void()> work);
// With `mu` held: runs a host function as the driver does, on a thread of
// its own where CUDA calls are refused, and counts it.
void run_host_function(CUhostFn fn, void* data);
// With `mu` held: runs the pending work of the held streams of `ctx` (only
// the blocking ones when `blocking_only`).
void drain_context(CUcontext ctx, bool blocking_only);

// fake_memory.cpp
// [ptr, ptr + bytes) inside one device allocation?
bool in_allocation(CUdeviceptr ptr, std::size_t bytes);
// A graph's memory (a mem alloc node's block, owned by the node): made live
// when the node runs (graph_memory_alloc: false when it is live already),
// dead when a mem free node (of any graph), cuMemFreeAsync or cuMemFree
// frees it; those do not free the block itself, which the node keeps.
void graph_memory_reserve(CUdeviceptr ptr, std::size_t bytes);  // a node's block, made
bool in_graph_block(CUdeviceptr ptr, std::size_t bytes);  // inside such a block (live or not)?
bool graph_block_start(CUdeviceptr ptr);  // the start of such a block (an address an alloc node gave)?
bool graph_memory_alloc(CUdeviceptr ptr, std::size_t bytes);
bool graph_memory_free(CUdeviceptr ptr);
// A module's variable: device memory that copies may reach, not an allocation.
void module_variable_add(CUdeviceptr ptr, std::size_t bytes);
void module_variable_remove(CUdeviceptr ptr);
// The block itself is gone (its last node destroyed); true when its memory
// is live (allocated by a launch, not freed): that memory outlives the
// graph, an allocation of its own until cuMemFree or cuMemFreeAsync.
bool graph_memory_forget(CUdeviceptr ptr);
// With `mu` held: for cuIpcGetMemHandle, whether `ptr` is the start of an
// allocation made by cuMemAlloc (its size and its id, unique in the run, out).
bool ipc_allocation(CUdeviceptr ptr, std::size_t& bytes, unsigned long long& id);
// With `mu` held: whether that allocation is still there (not freed, its
// address not reused by another).
bool ipc_allocation_live(CUdeviceptr ptr, unsigned long long id);

// With `mu` held: a range of managed memory and a location to prefetch it
// to (or advise, when not `prefetch`), checked as cuMemPrefetchAsync does.
CUresult check_managed(CUdeviceptr p, std::size_t bytes, CUmemLocation to, bool prefetch);

// fake_module_launch.cpp
// The image read into a new module of `c`, not yet live (`opts`: the JIT
// options, their outputs written as the driver writes them); with `mu`
// held, a module made live as `kind`, and a live one destroyed.
CUresult read_module(CUcontext c, const void* image, std::vector<std::pair<CUjit_option, void*>>& opts, Module*& out);
void add_module(Module* m, Kind kind);
void remove_module(Module* m);
// fake_library.cpp: with `mu` held, the function `fn` names in `ctx`: a
// live function itself, or a live library kernel's function in `ctx` (the
// library loaded there first); null for neither (or no context).
// (fake_module_launch.cpp, through kernel_resolver, which fake_library.cpp
// sets: the fake_cuda_old variant has no libraries.)
Func* function_in(CUfunction fn, CUcontext ctx);
extern Func* (*kernel_resolver)(CUfunction fn, CUcontext ctx);

// Checks a launch's configuration against the function (as cuLaunchKernel does).
CUresult check_launch(const Func& f, const unsigned grid[3], const unsigned block[3], unsigned shared,
                      const unsigned cluster[3], int cooperative, void** params, void** extra);
// Records the launch (fake_last_launch) and runs the kernel on the host.
void run_launch(CUfunction fn, CUstream s, const unsigned grid[3], const unsigned block[3], unsigned shared,
                const unsigned cluster[3], int cooperative, int via_ex, void** params);

// fake_stream_event.cpp
void mark_recorded(CUevent e);  // an event record has run
CUcontext stream_context(CUstream s);
// fake_attributes.cpp: a launch attribute checked as the driver does (for a
// launch, or a kernel node), with `mu` held; the last launch's attributes
// noted (null: a new launch begins); a stream's attributes forgotten.
CUresult check_attribute(const CUlaunchAttribute& a, int dev, bool node);
void note_launch_attribute(const CUlaunchAttribute* a);
void forget_stream_attributes(CUstream s);
bool blocking_stream(CUstream s);
// With `mu` held: a live event's flags; -1 for a dead one.
long event_flags(CUevent e);
// With `mu` held: a new event in `ctx` with `flags` (cuIpcOpenEventHandle's).
CUevent new_event(CUcontext ctx, unsigned flags);

// fake_vmm.cpp
// With `mu` held: [ptr, ptr + bytes) mapped by cuMemMap, back to back, and
// open (cuMemSetAccess) to some device?
bool in_vmm_mapping(CUdeviceptr ptr, std::size_t bytes);
// With `mu` held: the mapping that holds `ptr` and its reservation (what
// cuPointerGetAttributes tells of VMM memory); false outside any mapping.
struct VmmExtent {
  std::uintptr_t mapping_base;
  std::size_t mapping_size;
  std::uintptr_t range_base;
  std::size_t range_size;
  int device;
};
bool vmm_extent(CUdeviceptr ptr, VmmExtent& out);
// With `mu` held: whether [ptr, ptr + bytes) starts in a mapping and runs
// past its end, into the next one (what driver 580 refuses to copy in one
// stream-ordered call: memory/copy.hpp).
bool spans_vmm_mappings(CUdeviceptr ptr, std::size_t bytes);

// fake_external.cpp: with `mu` held, frees a mapped buffer of external
// memory (false when `p` is not one), for cuMemFree.
bool external_buffer_free(CUdeviceptr p);

// fake_checkpoint.cpp (in the optional group: a weak reference, null in the
// variant without it): forgets every process's checkpoint state (takes `mu`).
__attribute__((weak)) void reset_checkpoint();

// fake_ipc.cpp
void reset_ipc();  // forgets fake_set_process_id (takes `mu`)

// fake_graph*.cpp: graphs (fake_graph_capture.cpp: stream capture).
// One node's work, as enqueued on a stream or added to a graph.
struct Block;  // a mem alloc node's memory
struct Work {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  // kernel: the function, its configuration, and its arguments' bytes at
  // the function's parameter offsets
  Func* func = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, cluster[3] = {0, 0, 0};
  unsigned shared = 0;
  int cooperative = 0;
  std::vector<unsigned char> args;
  // memcpy: `bytes` from `src` to `dst` (host or device addresses alike)
  std::uintptr_t dst = 0, src = 0;
  bool dst_device = false, src_device = false;
  std::size_t bytes = 0;
  // memset: `width` elements of `element_size` bytes, `height` rows `pitch` apart
  unsigned value = 0, element_size = 0;
  std::size_t width = 0, height = 0, pitch = 0;
  // host
  CUhostFn fn = nullptr;
  void* data = nullptr;
  // event record / wait
  CUevent event = nullptr;
  // mem alloc / free
  std::shared_ptr<Block> memory;
  CUdeviceptr dptr = 0;
};
// The kernel's arguments packed as the driver copies them.
std::vector<unsigned char> pack_args(const Func& f, void** params);
// Writes `text` to the JIT log buffer that `opts` names by `buf_key` (its
// size by `size_key`, set to the length written), as cuModuleLoadDataEx and
// cuLinkComplete do (fake_module_launch.cpp, fake_link.cpp).
void write_log(std::vector<std::pair<CUjit_option, void*>>& opts, CUjit_option buf_key, CUjit_option size_key,
               const std::string& text);
// With `mu` held: when `s` is capturing, adds `w` as a node of the capture
// (or refuses: an invalidated capture), sets `captured` and returns the
// result; otherwise returns CUDA_SUCCESS and leaves `captured` false.
CUresult capture_work(CUstream s, Work&& w, bool& captured);
// With `mu` held: cuMemAllocAsync on a capturing stream, a mem alloc node
// whose block's address goes to `out`.
CUresult capture_alloc(CUstream s, std::size_t bytes, CUdeviceptr& out);
// With `mu` held: whether `s` is capturing.
bool capturing(CUstream s);
// With `mu` held: a synchronizing call on `s` (cuStreamSynchronize,
// cuStreamQuery) while it captures invalidates the capture.
CUresult capture_forbids_sync(CUstream s);
// With `mu` held: a call that is unsafe during a global-mode capture
// (cuCtxSynchronize, cuMemAlloc) invalidates such captures.
CUresult capture_forbids_unsafe();
// With `mu` held: work on the legacy default stream while a blocking stream
// captures invalidates that capture.
CUresult capture_forbids_legacy(CUcontext ctx);
// With `mu` held: an event record / wait on a capturing stream.
bool capture_record(CUevent e, CUstream s);
CUresult capture_wait(CUstream s, CUevent e, bool& captured);
// With `mu` held: `s` is being destroyed; a capture it began ends.
void stream_destroyed(CUstream s);
// Releases `lock` (on mu) and runs what became due under it (user objects' destructors).
void finish_unlocked(std::unique_lock<std::mutex>& lock);
// With `mu` held: a conditional handle's value (set by a kernel).
void set_conditional(CUgraphConditionalHandle h, unsigned value);

// fake_core.cpp: what cuDriverGetVersion answers (fake_set_driver_version).
int reported_driver_version();

// The live handles of each kind of FAKE_LIVE_KINDS (fake_live), counted in
// the file of that kind, with `mu` held.
#define FAKE_LIVE_DECLARE(name, ...) long live_##name();
FAKE_LIVE_KINDS(FAKE_LIVE_DECLARE)
#undef FAKE_LIVE_DECLARE

}  // namespace fake
