// The fake driver's own C interface: the controls it exports beside the
// driver's entry points, shared by the fake and the tests (which reach it
// with dlsym on the library the loader opened: tests/fake_driver.hpp).
#pragma once

#include <stddef.h>

// The kinds of handle the fake counts as live (fake_live's names), each
// with the driver entry points that destroy, release or free one (the names
// fake_calls takes). The one list: the fake's counts and the tests' balance
// checks are made from it.
#define FAKE_LIVE_KINDS(X)                                                    \
  X(context, "cuCtxDestroy")               /* made by cuCtxCreate */          \
  X(primary, "cuDevicePrimaryCtxRelease")  /* primary-context retains */      \
  X(stream, "cuStreamDestroy")                                                \
  X(event, "cuEventDestroy")                                                  \
  X(module, "cuModuleUnload")                                                 \
  X(library, "cuLibraryUnload")                                               \
  X(link, "cuLinkDestroy")                 /* JIT link states */              \
  X(memory, "cuMemFree", "cuMemFreeAsync") /* device allocations */           \
  X(pinned, "cuMemFreeHost")               /* page-locked host allocations */ \
  X(registered, "cuMemHostUnregister")     /* host ranges page-locked by cuMemHostRegister */ \
  X(pool, "cuMemPoolDestroy")              /* pools made by cuMemPoolCreate */ \
  X(graph, "cuGraphDestroy")               /* also made by cuStreamEndCapture */ \
  X(graph_exec, "cuGraphExecDestroy")                                         \
  X(user_object, "cuUserObjectRelease")    /* with a reference no graph holds */ \
  X(ipc_memory, "cuIpcCloseMemHandle")     /* mappings made by cuIpcOpenMemHandle */ \
  X(va_range, "cuMemAddressFree")          /* reservations made by cuMemAddressReserve */ \
  X(physical, "cuMemRelease")              /* cuMemCreate's and imports' handles */ \
  X(vmm_mapping, "cuMemUnmap")             /* mappings made by cuMemMap */ \
  X(green, "cuGreenCtxDestroy")            /* green contexts made by cuGreenCtxCreate */ \
  X(external_memory, "cuDestroyExternalMemory") /* cuImportExternalMemory's */ \
  X(external_semaphore, "cuDestroyExternalSemaphore") /* cuImportExternalSemaphore's */

#ifdef __cplusplus
extern "C" {
#endif

// What the last cuLaunchKernel received. Parameter bytes are copied at the
// offsets the kernel's PTX declares.
struct FakeLaunch {
  const void* function;
  const void* stream;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  unsigned cluster[3];  // cuLaunchKernelEx's cluster dimension, 0 when none
  int cooperative;      // cuLaunchKernelEx's cooperative attribute
  int via_ex;           // launched with cuLaunchKernelEx
  size_t param_count;
  size_t param_offsets[32];
  size_t param_sizes[32];
  unsigned char params[1024];
};

// What the fake's cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col write
// into the 128-byte descriptor (the rest zero): the description as given,
// so that tests can read what the library passed.
// The last batched call (cuMemcpyBatchAsync, cuMem*BatchAsync) that
// succeeded: its entry, its operations and their groups (an attribute entry
// or a prefetch location each, the first 8), as the driver received them.
struct FakeBatch {
  char entry[48];
  size_t count;
  size_t groups;
  size_t starts[8];             // attrsIdxs / prefetchLocIdxs
  int access[8];                // a copy group's srcAccessOrder
  unsigned flags[8];            // a copy group's flags
  int src_hint[8], dst_hint[8]; // a copy group's hints: location type * 100 + id
  int location[8];              // a prefetch group's location: type * 100 + id
  size_t sizes[8];              // the first 8 operations' sizes
};

struct FakeTensorMap {
  unsigned long long address;
  unsigned long long dims[5];
  unsigned long long strides[4];       // bytes, dimensions 1 to rank - 1
  unsigned short box[5];               // tiled
  unsigned short channels_per_pixel;   // im2col
  unsigned short pixels_per_column;    // im2col
  short lower_corner[3];               // im2col
  short upper_corner[3];               // im2col
  unsigned char element_strides[5];
  unsigned char kind;                  // 1: tiled, 2: im2col
  unsigned char data_type, rank, interleave, swizzle, l2_promotion, oob_fill;
};

// Forgets faults and counters (live handles stay: they belong to the test).
typedef void (*fake_reset_fn)(void);
// Calls made to an entry point so far, by driver name ("cuStreamDestroy");
// "*" counts all entry points.
typedef long (*fake_calls_fn)(const char* name);
// Make the nth next call (1 = the next one) of `name` return `result`; with
// nth = 0 every call fails until fake_reset.
typedef int (*fake_fail_fn)(const char* name, long nth, int result);
// Live handles of a kind named in FAKE_LIVE_KINDS ("stream"); -1 for
// another name.
typedef long (*fake_live_fn)(const char* kind);
// Destroy/release/free calls on a handle that was not live (a double destroy).
typedef long (*fake_invalid_destroys_fn)(void);
typedef void (*fake_set_device_count_fn)(int count);
// From now until fake_reset, cuDeviceGetAttribute(attr, dev) answers `value`.
typedef void (*fake_set_device_attribute_fn)(int dev, int attr, int value);
// From now until fake_reset, whether device `dev` can reach `peer`'s memory
// (by default every two distinct devices can).
typedef void (*fake_set_peer_access_fn)(int dev, int peer, int can);
// What cuDriverGetVersion answers from now on (13000 until set).
typedef void (*fake_set_driver_version_fn)(int version);
typedef void (*fake_last_launch_fn)(struct FakeLaunch* out);
// The last batched call that succeeded (count 0: none yet).
typedef void (*fake_last_batch_fn)(struct FakeBatch* out);
// A launch attribute of the last launch (CUlaunchAttributeID), as one
// number: the window's bytes, the priority, the serialization flag, 1 for a
// programmatic event (2 when triggered at block start), the cluster's x,
// the cooperative flag; -1 when the last launch did not have it.
typedef long long (*fake_last_launch_attribute_fn)(int id);
// The context that the last work enqueued on a stream went to (for a
// default stream: the enqueuing thread's current context).
typedef const void* (*fake_last_context_fn)(void);
// How many times host functions enqueued with cuLaunchHostFunc have run.
typedef long (*fake_host_funcs_run_fn)(void);
// With hold != 0, user objects whose last reference goes keep their
// destructors until fake_hold_user_object_destructors(0) runs them (on a
// driver thread): the real driver's release is as late as that, on its own
// internal thread (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC).
typedef void (*fake_hold_user_object_destructors_fn)(int hold);
// Holds a stream's work (hold = 1): copies, fills, frees, event records
// and host functions enqueued on it wait, as behind a slow kernel, until
// the stream is synchronized or released (hold = 0). A null stream: every
// stream, and released, also the work of held streams destroyed with work
// pending (which the driver runs after cuStreamDestroy returns).
typedef void (*fake_hold_fn)(const void* stream, int hold);
// The work waiting on a held stream; for a null stream, the work of
// destroyed ones.
typedef long (*fake_pending_fn)(const void* stream);
// The cuStreamDestroy_v2 calls made on a stream handle since the fake
// created it (or ever, for a handle it did not create: a default stream).
typedef long (*fake_stream_destroys_fn)(const void* stream);
// The process id the fake believes it runs in, until fake_reset (0: the
// real one). An IPC handle names its exporter's id, and the fake, as the
// driver, refuses to open one in the exporting process: a test opens its
// own handle "in another process" by setting another id here.
typedef void (*fake_set_process_id_fn)(long pid);
// An imported external semaphore's value, and how many waits found it
// short of their value (where a device would have blocked the stream);
// -1 for a semaphore that is not live.
typedef int (*fake_semaphore_fn)(const void* semaphore, unsigned long long* value, long* blocked);

// The fake NVRTC's and fake nvJitLink's controls (fake_toolkit.hpp), named
// fake_nvrtc_* and fake_nvjitlink_*: reset, calls (by entry name, such as
// "nvrtcCompileProgram"), fail (as fake_fail), live (programs or links not
// destroyed) and invalid_destroys.
typedef long (*fake_toolkit_live_fn)(void);

#ifdef __cplusplus
}
#endif
