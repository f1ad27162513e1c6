// A context's limits and cache preference, and a function's (issue 23,
// item 4), on the fake driver, whose defaults are the H200's.
#include <doctest/doctest.h>

#include "../fixtures.hpp"

#include <string>

using namespace oxicuda;

TEST_CASE_FIXTURE(ContextTest, "issue 23 (4): limits are set and read back in their context, the current one left alone") {
  REQUIRE(Context::current().raw() == nullptr);
  Context fresh = Context::create(Device::get(0));
  CHECK(get_limit(fresh, Limit::stack_size) == 1024);  // the H200's defaults
  CHECK(get_limit(fresh, Limit::printf_fifo_size) == 1u << 20);
  set_limit(ctx, Limit::printf_fifo_size, 4u << 20);
  CHECK(get_limit(ctx, Limit::printf_fifo_size) == 4u << 20);
  set_limit(ctx, Limit::malloc_heap_size, 64u << 20);
  CHECK(get_limit(ctx, Limit::malloc_heap_size) == 64u << 20);
  set_limit(ctx, Limit::stack_size, 1000);  // the driver rounds it up
  CHECK(get_limit(ctx, Limit::stack_size) == 1008);
  CHECK(Context::current().raw() == nullptr);
  // Another context has its own.
  CHECK(get_limit(fresh, Limit::printf_fifo_size) == 1u << 20);
  CHECK(fake.calls("cuCtxSetLimit") == 3);
}

TEST_CASE_FIXTURE(ContextTest, "issue 23 (4): a limit that cannot be set is an Error naming it and the value") {
  const Error e = error_of([&] { set_limit(ctx, Limit::shared_memory_size, 4096); });
  CHECK(e.result() == ffi::CUDA_ERROR_UNSUPPORTED_LIMIT);
  const std::string what = e.what();
  CHECK(what.find("shared_memory_size") != std::string::npos);
  CHECK(what.find("4096") != std::string::npos);
  CHECK(what.find("cuCtxSetLimit") != std::string::npos);
  const Error range = error_of([&] { set_limit(ctx, Limit::max_l2_fetch_granularity, 1000); });
  CHECK(range.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(std::string(range.what()).find("max_l2_fetch_granularity") != std::string::npos);
  // Outside the enumeration: the driver's refusal, named as such.
  const Error unknown = error_of([&] { (void)get_limit(ctx, static_cast<Limit>(42)); });
  CHECK(unknown.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(std::string(unknown.what()).find("unknown limit") != std::string::npos);
  CHECK(std::string(to_string(Limit::cig_enabled)) == "cig_enabled");
  // Gone on compute capability 9.0, reading included (the H100's answer).
  const Error depth = error_of([&] { (void)get_limit(ctx, Limit::device_runtime_sync_depth); });
  CHECK(depth.result() == ffi::CUDA_ERROR_UNSUPPORTED_LIMIT);
  CHECK(std::string(depth.what()).find("device_runtime_sync_depth: this device does not have this limit") !=
        std::string::npos);
  // Nothing changed, the current context as it was.
  const std::size_t granularity = get_limit(ctx, Limit::max_l2_fetch_granularity);
  CHECK(error_of([&] { set_limit(ctx, Limit::max_l2_fetch_granularity, 129); }).result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(get_limit(ctx, Limit::max_l2_fetch_granularity) == granularity);
  CHECK(Context::current().raw() == nullptr);
  // An empty context.
  CHECK(error_of([] { (void)get_limit(Context(), Limit::stack_size); }).result() == ffi::CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE_FIXTURE(ModuleTest, "issue 23 (4): cache preference of a context and of a function; the shared-memory carveout") {
  CHECK(get_cache_config(Context::create(Device::get(0))) == CacheConfig::prefer_none);
  set_cache_config(ctx, CacheConfig::prefer_shared);
  CHECK(get_cache_config(ctx) == CacheConfig::prefer_shared);
  const Function f = m.function("dbl");
  f.set_cache_config(CacheConfig::prefer_l1);
  CHECK(fake.calls("cuFuncSetCacheConfig") == 1);
  f.set_shared_memory_carveout(50);
  f.set_shared_memory_carveout(-1);
  f.set_shared_memory_carveout(100);
  CHECK(fake.calls("cuFuncSetAttribute") == 3);
  const Error e = error_of([&] { f.set_shared_memory_carveout(101); });
  CHECK(e.result() == ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(std::string(e.what()).find("0 to 100") != std::string::npos);
  CHECK(fake.calls("cuFuncSetAttribute") == 3);  // refused before the driver
  CHECK(error_of([] { Function().set_cache_config(CacheConfig::prefer_l1); }).result() ==
        ffi::CUDA_ERROR_INVALID_HANDLE);
  CHECK(error_of([&] { set_cache_config(ctx, static_cast<CacheConfig>(9)); }).result() ==
        ffi::CUDA_ERROR_INVALID_VALUE);
  CHECK(get_cache_config(ctx) == CacheConfig::prefer_shared);
}
