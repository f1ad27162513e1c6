// The fake driver's occupancy calculator (cuOccupancy*), over the functions
// of fake_module_launch.cpp.
#include "fake_state.hpp"

#include <cstddef>
#include <mutex>

using namespace fake;

// The fake's occupancy model: 2048 threads, 32 blocks and 228 KiB of shared
// memory per multiprocessor; 16 registers per thread never limit.
static int blocks_per_sm(int block_size, std::size_t shared) {
  if (block_size <= 0 || block_size > 1024) return 0;
  int blocks = 2048 / block_size;
  if (blocks > 32) blocks = 32;
  if (shared) {
    const auto by_shared = static_cast<int>((228u * 1024u) / shared);
    if (by_shared < blocks) blocks = by_shared;
  }
  return blocks;
}

CUresult fake_OccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction fn, int block_size, std::size_t shared) {
  FAKE_ENTRY(OccupancyMaxActiveBlocksPerMultiprocessor);
  std::lock_guard lock(mu);
  // A library's kernel (CUkernel) is computed in the current context, as the driver does.
  if (!function_in(fn, current()) || !n) return CUDA_ERROR_INVALID_HANDLE;
  *n = blocks_per_sm(block_size, shared);
  return CUDA_SUCCESS;
}

CUresult fake_OccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction fn, CUoccupancyB2DSize to_shared,
                                             std::size_t shared, int limit) {
  FAKE_ENTRY(OccupancyMaxPotentialBlockSize);
  std::lock_guard lock(mu);
  if (!function_in(fn, current()) || !min_grid || !block) return CUDA_ERROR_INVALID_HANDLE;
  int best = 0, best_threads = -1;
  for (int b = 32; b <= 1024 && (limit <= 0 || b <= limit); b += 32) {
    const int threads = b * blocks_per_sm(b, to_shared ? to_shared(b) : shared);
    if (threads > best_threads) best = b, best_threads = threads;
  }
  *block = best;
  *min_grid = 132 * blocks_per_sm(best, to_shared ? to_shared(best) : shared);
  return CUDA_SUCCESS;
}
