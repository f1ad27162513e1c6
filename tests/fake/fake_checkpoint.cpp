// Checkpointing (CUDA 12.8: cuCheckpointProcess*), in the optional group:
// the variant that models an older driver lacks it.
//
// A state machine per process, as cuda.h documents the calls:
//   running --lock--> locked --checkpoint--> checkpointed --restore--> locked --unlock--> running
// a call from any other state is refused with CUDA_ERROR_ILLEGAL_STATE and
// changes nothing. The only CUDA process the fake knows is its own (it
// cannot see others): any other pid is refused with CUDA_ERROR_INVALID_VALUE
// (what the driver answers for a process that is not a CUDA one is not
// measured). The fake does not block the locked process's calls nor move
// its memory: the states and the order are what it models. The optional
// argument structs may be null; their reserved fields must be zero. A
// restore's GPU pairs must be given with their count, and name the fake's
// devices (cuDeviceGetUuid's UUIDs). The restore thread is the process's
// main thread (its pid).
#include "fake_state.hpp"

#include <cstring>
#include <mutex>

#include <unistd.h>

namespace fake {
namespace {

CUprocessState state = CU_PROCESS_STATE_RUNNING;  // this process's (with `mu` held)

bool zero(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

bool fake_uuid(const CUuuid& u) {
  for (int dev = 0; dev < device_count; ++dev) {
    bool same = true;
    for (int i = 0; i < 16; ++i) same = same && u.bytes[i] == static_cast<char>(0xa0 + i + dev);
    if (same) return true;
  }
  return false;
}

// One transition of this process: from `from` to `to`, or refused.
CUresult step(int pid, CUprocessState from, CUprocessState to) {
  if (pid != ::getpid()) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  if (state != from) return CUDA_ERROR_ILLEGAL_STATE;
  state = to;
  return CUDA_SUCCESS;
}

}  // namespace

void reset_checkpoint() {
  std::lock_guard lock(mu);
  state = CU_PROCESS_STATE_RUNNING;
}

}  // namespace fake

using namespace fake;

CUresult fake_CheckpointProcessGetRestoreThreadId(int pid, int* tid) {
  FAKE_ENTRY(CheckpointProcessGetRestoreThreadId);
  if (!tid || pid != ::getpid()) return CUDA_ERROR_INVALID_VALUE;
  *tid = pid;
  return CUDA_SUCCESS;
}

CUresult fake_CheckpointProcessGetState(int pid, CUprocessState* out) {
  FAKE_ENTRY(CheckpointProcessGetState);
  if (!out || pid != ::getpid()) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  *out = state;
  return CUDA_SUCCESS;
}

CUresult fake_CheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
  FAKE_ENTRY(CheckpointProcessLock);
  if (args && (args->reserved0 != 0 || !zero(args->reserved1, sizeof args->reserved1))) return CUDA_ERROR_INVALID_VALUE;
  return step(pid, CU_PROCESS_STATE_RUNNING, CU_PROCESS_STATE_LOCKED);
}

CUresult fake_CheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs* args) {
  FAKE_ENTRY(CheckpointProcessCheckpoint);
  if (args && !zero(args, sizeof *args)) return CUDA_ERROR_INVALID_VALUE;
  return step(pid, CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_CHECKPOINTED);
}

CUresult fake_CheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
  FAKE_ENTRY(CheckpointProcessRestore);
  if (args) {
    if (!zero(args->reserved, sizeof args->reserved) || args->reserved1 != 0) return CUDA_ERROR_INVALID_VALUE;
    if ((args->gpuPairs == nullptr) != (args->gpuPairsCount == 0)) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(mu);
    for (unsigned i = 0; i < args->gpuPairsCount; ++i)
      if (!fake_uuid(args->gpuPairs[i].oldUuid) || !fake_uuid(args->gpuPairs[i].newUuid)) return CUDA_ERROR_INVALID_VALUE;
  }
  return step(pid, CU_PROCESS_STATE_CHECKPOINTED, CU_PROCESS_STATE_LOCKED);
}

CUresult fake_CheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs* args) {
  FAKE_ENTRY(CheckpointProcessUnlock);
  if (args && !zero(args, sizeof *args)) return CUDA_ERROR_INVALID_VALUE;
  return step(pid, CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_RUNNING);
}
