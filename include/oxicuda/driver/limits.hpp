// oxicuda/driver/limits.hpp — a context's limits (thread stack, printf FIFO,
// malloc heap, ...: cuCtxSetLimit/cuCtxGetLimit) and its preferred split of
// on-chip memory between L1 and shared memory (cuCtxSetCacheConfig).
#pragma once

#include <cstddef>

#include "context.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The driver's limits of a context (CUlimit). Sizes are in bytes, counts
// and depths plain numbers. Some are read-only (shared_memory_size,
// cig_enabled), and a device may lack some (the persisting L2 cache):
// setting those is an Error that names the limit.
enum class Limit : int {
  stack_size = ffi::CU_LIMIT_STACK_SIZE,                 // bytes of stack per GPU thread
  printf_fifo_size = ffi::CU_LIMIT_PRINTF_FIFO_SIZE,     // bytes of the device printf's FIFO
  malloc_heap_size = ffi::CU_LIMIT_MALLOC_HEAP_SIZE,     // bytes of the device malloc's heap
  device_runtime_sync_depth = ffi::CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH,
  device_runtime_pending_launch_count = ffi::CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT,
  max_l2_fetch_granularity = ffi::CU_LIMIT_MAX_L2_FETCH_GRANULARITY,  // bytes, 0..128, a hint
  persisting_l2_cache_size = ffi::CU_LIMIT_PERSISTING_L2_CACHE_SIZE,  // bytes
  shared_memory_size = ffi::CU_LIMIT_SHMEM_SIZE,                      // read-only (a CIG context's)
  cig_enabled = ffi::CU_LIMIT_CIG_ENABLED,                            // read-only
  cig_shared_memory_fallback_enabled = ffi::CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED,
};

// The preferred split of on-chip memory between L1 and shared memory (a
// hint the driver may ignore, as on devices where the split is fixed).
enum class CacheConfig : int {
  prefer_none = ffi::CU_FUNC_CACHE_PREFER_NONE,
  prefer_shared = ffi::CU_FUNC_CACHE_PREFER_SHARED,
  prefer_l1 = ffi::CU_FUNC_CACHE_PREFER_L1,
  prefer_equal = ffi::CU_FUNC_CACHE_PREFER_EQUAL,
};

// "stack_size", "printf_fifo_size", ...; "unknown limit" for a value
// outside the enumeration.
[[nodiscard]] constexpr const char* to_string(Limit limit) noexcept {
  constexpr const char* names[] = {"stack_size",
                                   "printf_fifo_size",
                                   "malloc_heap_size",
                                   "device_runtime_sync_depth",
                                   "device_runtime_pending_launch_count",
                                   "max_l2_fetch_granularity",
                                   "persisting_l2_cache_size",
                                   "shared_memory_size",
                                   "cig_enabled",
                                   "cig_shared_memory_fallback_enabled"};
  const auto i = static_cast<unsigned>(limit);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown limit";
}

// Sets a limit of `ctx` (cuCtxSetLimit with `ctx` current). The driver may
// round the value (the stack size up to a multiple of 16 bytes, say): read
// it back with get_limit. Some limits can only be set before the context
// launches a kernel that uses them (malloc_heap_size). A limit the device
// lacks, or a read-only one, is an Error naming the limit and the value.
void set_limit(const Context& ctx, Limit limit, std::size_t value, SourceLocation where = SourceLocation::current());
// A limit of `ctx` (cuCtxGetLimit with `ctx` current).
[[nodiscard]] std::size_t get_limit(const Context& ctx, Limit limit, SourceLocation where = SourceLocation::current());
// The context's preferred L1/shared split, for its kernels that have none
// of their own (Function::set_cache_config).
void set_cache_config(const Context& ctx, CacheConfig config, SourceLocation where = SourceLocation::current());
[[nodiscard]] CacheConfig get_cache_config(const Context& ctx, SourceLocation where = SourceLocation::current());

namespace detail {
[[noreturn]] OXICUDA_DETAIL_COLD inline void limit_failed(Outcome o, const char* verb, Limit limit,
                                                         const std::string& value, SourceLocation where) {
  const char* why = "";
  if (o.result == ffi::CUDA_ERROR_UNSUPPORTED_LIMIT)
    why = value.empty() ? ": this device does not have this limit (the device runtime's sync depth is gone on "
                          "compute capability 9.0 and later, for one)"
                        : ": this device does not have this limit, or it can only be read";
  else if (o.result == ffi::CUDA_ERROR_INVALID_VALUE)
    why = value.empty() ? ": not a limit the driver knows" : ": not a limit the driver knows, or the value is out of its range";
  fail(o, where, cat({verb, " the context's limit ", to_string(limit), value, why}));
}
}  // namespace detail

inline void set_limit(const Context& ctx, Limit limit, std::size_t value, SourceLocation where) {
  detail::SwitchCurrent current(detail::checked(ctx, "oxicuda::Context", "oxicuda::set_limit", where), where);
  const detail::Outcome o = OXICUDA_DRIVER(CtxSetLimit, static_cast<ffi::CUlimit>(limit), value);
  if (OXICUDA_DETAIL_UNLIKELY(!o.ok())) detail::limit_failed(o, "setting", limit, detail::cat({" to ", std::to_string(value)}), where);
}

inline std::size_t get_limit(const Context& ctx, Limit limit, SourceLocation where) {
  detail::SwitchCurrent current(detail::checked(ctx, "oxicuda::Context", "oxicuda::get_limit", where), where);
  std::size_t value = 0;
  const detail::Outcome o = OXICUDA_DRIVER(CtxGetLimit, &value, static_cast<ffi::CUlimit>(limit));
  if (OXICUDA_DETAIL_UNLIKELY(!o.ok())) detail::limit_failed(o, "reading", limit, {}, where);
  return value;
}

inline void set_cache_config(const Context& ctx, CacheConfig config, SourceLocation where) {
  detail::SwitchCurrent current(detail::checked(ctx, "oxicuda::Context", "oxicuda::set_cache_config", where), where);
  detail::check(OXICUDA_DRIVER(CtxSetCacheConfig, static_cast<ffi::CUfunc_cache>(config)), where);
}

inline CacheConfig get_cache_config(const Context& ctx, SourceLocation where) {
  detail::SwitchCurrent current(detail::checked(ctx, "oxicuda::Context", "oxicuda::get_cache_config", where), where);
  ffi::CUfunc_cache config = ffi::CU_FUNC_CACHE_PREFER_NONE;
  detail::check(OXICUDA_DRIVER(CtxGetCacheConfig, &config), where);
  return static_cast<CacheConfig>(config);
}

OXICUDA_DETAIL_NAMESPACE_END
