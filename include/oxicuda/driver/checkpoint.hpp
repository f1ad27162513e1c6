// oxicuda/driver/checkpoint.hpp — checkpointing a CUDA process (CUDA 12.8,
// Linux; cuCheckpointProcess*): lock a process's CUDA calls, move its
// device memory to host memory and release its GPUs, restore it (onto
// the same GPUs or others of the same chip), unlock it. What CRIU's
// cuda-checkpoint does, and vLLM's sleep mode; the process is named by its
// pid (another process, or this one).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "device.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// Where a process stands (cuCheckpointProcessGetState):
//   running --lock--> locked --checkpoint--> checkpointed --restore--> locked --unlock--> running
// failed: an uncorrectable error during a checkpoint or a restore.
enum class ProcessState : int {
  running = ffi::CU_PROCESS_STATE_RUNNING,            // the default
  locked = ffi::CU_PROCESS_STATE_LOCKED,              // its CUDA calls block
  checkpointed = ffi::CU_PROCESS_STATE_CHECKPOINTED,  // its device memory is on the host, its GPUs released
  failed = ffi::CU_PROCESS_STATE_FAILED,
};

// A GPU of the checkpoint and the GPU to restore it onto (same chip, enough memory).
struct GpuRemap {
  Uuid from;
  Uuid to;
};

// Whether the loaded driver has the checkpoint calls (CUDA 12.8 or newer);
// without them, each function below is an Error naming the driver it needs.
[[nodiscard]] bool checkpointing_available() noexcept;

// The state of process `pid`.
[[nodiscard]] ProcessState process_state(int pid, SourceLocation where = SourceLocation::current());
// Locks `pid` (running -> locked): its further CUDA calls block until it is
// unlocked. `timeout` 0 waits as long as it takes; when the timeout is
// reached the driver answers an Error and the process is left running.
void lock_process(int pid, std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                  SourceLocation where = SourceLocation::current());
// Checkpoints a locked `pid` (locked -> checkpointed): its device memory
// moves to host memory and its GPU resources are released.
void checkpoint_process(int pid, SourceLocation where = SourceLocation::current());
// Restores a checkpointed `pid` (checkpointed -> locked), onto the GPUs
// it had or, with `remaps`, onto others (then every checkpointed GPU must
// be in it). The driver requires persistence mode or cuInit in the
// calling process (oxicuda's loader calls cuInit).
void restore_process(int pid, std::span<const GpuRemap> remaps = {}, SourceLocation where = SourceLocation::current());
// Unlocks a locked `pid` (locked -> running).
void unlock_process(int pid, SourceLocation where = SourceLocation::current());
// The thread id of `pid`'s CUDA restore thread (for a process-level
// checkpointer that must leave that thread running).
[[nodiscard]] int restore_thread_id(int pid, SourceLocation where = SourceLocation::current());

// "running", "locked", "checkpointed", "failed".
[[nodiscard]] constexpr const char* to_string(ProcessState state) noexcept {
  switch (state) {
    case ProcessState::running:
      return "running";
    case ProcessState::locked:
      return "locked";
    case ProcessState::checkpointed:
      return "checkpointed";
    case ProcessState::failed:
      return "failed";
  }
  return "an unknown process state";
}

inline bool checkpointing_available() noexcept { return !detail::missing(ffi::Entry::CheckpointProcessGetState); }

inline ProcessState process_state(int pid, SourceLocation where) {
  ffi::CUprocessState s = ffi::CU_PROCESS_STATE_RUNNING;
  detail::check(OXICUDA_DRIVER(CheckpointProcessGetState, pid, &s), where);
  return static_cast<ProcessState>(s);
}

inline void lock_process(int pid, std::chrono::milliseconds timeout, SourceLocation where) {
  if (timeout.count() < 0 || timeout.count() > 0xffffffffll)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::lock_process",
                        "a timeout below 0 or above 0xffffffff ms (0 waits as long as it takes)", where));
  ffi::CUcheckpointLockArgs args{};
  args.timeoutMs = static_cast<unsigned>(timeout.count());
  detail::check(OXICUDA_DRIVER(CheckpointProcessLock, pid, &args), where);
}

inline void checkpoint_process(int pid, SourceLocation where) {
  ffi::CUcheckpointCheckpointArgs args{};
  detail::check(OXICUDA_DRIVER(CheckpointProcessCheckpoint, pid, &args), where);
}

inline void restore_process(int pid, std::span<const GpuRemap> remaps, SourceLocation where) {
  constexpr std::size_t most = 64;
  if (remaps.size() > most)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::restore_process",
                        detail::cat({std::to_string(remaps.size()), " GPU remaps; at most 64"}), where));
  ffi::CUcheckpointGpuPair pairs[most] = {};
  for (std::size_t i = 0; i < remaps.size(); ++i)
    for (std::size_t b = 0; b < 16; ++b) {
      pairs[i].oldUuid.bytes[b] = static_cast<char>(remaps[i].from.bytes[b]);
      pairs[i].newUuid.bytes[b] = static_cast<char>(remaps[i].to.bytes[b]);
    }
  ffi::CUcheckpointRestoreArgs args{};
  args.gpuPairs = remaps.empty() ? nullptr : pairs;
  args.gpuPairsCount = static_cast<unsigned>(remaps.size());
  detail::check(OXICUDA_DRIVER(CheckpointProcessRestore, pid, &args), where);
}

inline void unlock_process(int pid, SourceLocation where) {
  ffi::CUcheckpointUnlockArgs args{};
  detail::check(OXICUDA_DRIVER(CheckpointProcessUnlock, pid, &args), where);
}

inline int restore_thread_id(int pid, SourceLocation where) {
  int tid = 0;
  detail::check(OXICUDA_DRIVER(CheckpointProcessGetRestoreThreadId, pid, &tid), where);
  return tid;
}

OXICUDA_DETAIL_NAMESPACE_END
