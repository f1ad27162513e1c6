// Probe: whether driver 580 refuses cuMemcpyBatchAsync as it refuses the
// single stream-ordered copies (tools/probes/vmm_async_copy.cpp) when a
// copy's device side runs over two VMM mappings and no context is current;
// and a batch of one copy and of two (one over the mappings, one not).
// Not part of the build; on this machine:
//   g++ -std=c++20 -O1 -I. -Itools/probes tools/probes/vmm_batch_copy.cpp -o .dev/probe_batch_copy -ldl -lpthread
#include "vmm_layout.hpp"
#include <cstdio>
#include <vector>
using namespace oxicuda;

static const char* name(ffi::CUresult r) { return result_name(r); }
int main() {
  const Context ctx = Context::primary(Device::get(0));
  const VmmLayout vmm(ctx);
  const std::size_t g = vmm.g;
  const ffi::CUdeviceptr base = vmm.base;
  std::vector<char> host(2 * g);
  PinnedBuffer<char> pinned(ctx, 2 * g);
  DeviceBuffer<char> plain(ctx, 2 * g);
  CUstream stream = nullptr;
  {
    const ScopedCurrent cur(ctx);
    OXICUDA_DRIVER(StreamCreate, &stream, 1u);
  }
  ffi::CUmemcpyAttributes attr{};
  attr.srcAccessOrder = ffi::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attr.srcLocHint.type = ffi::CU_MEM_LOCATION_TYPE_INVALID;
  attr.dstLocHint.type = ffi::CU_MEM_LOCATION_TYPE_INVALID;
  auto batch = [&](std::size_t n, ffi::CUdeviceptr* d, ffi::CUdeviceptr* s) {
    std::size_t sizes[2] = {2 * g, 2 * g}, idx = 0;
    return OXICUDA_DRIVER(MemcpyBatchAsync, d, s, sizes, n, &attr, &idx, 1, stream).result;
  };
  auto hp = [](const void* p) { return static_cast<ffi::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); };
  for (int current = 0; current < 2; ++current) {
    OXICUDA_DRIVER(CtxSetCurrent, current ? ctx.raw() : nullptr);
    for (int span = 0; span < 2; ++span) {  // two mappings, or one mapping of 2g
      const ffi::CUdeviceptr d = span ? base + 2 * g : base;
      ffi::CUdeviceptr d1[1] = {d}, s1[1] = {hp(host.data())};
      const auto htod = batch(1, d1, s1);
      ffi::CUdeviceptr d2[1] = {hp(host.data())}, s2[1] = {d};
      const auto dtoh = batch(1, d2, s2);
      ffi::CUdeviceptr d3[1] = {hp(pinned.data())}, s3[1] = {d};
      const auto dtohp = batch(1, d3, s3);
      ffi::CUdeviceptr d4[1] = {plain.device_ptr()}, s4[1] = {d};
      const auto dtod = batch(1, d4, s4);
      ffi::CUdeviceptr d5[2] = {plain.device_ptr(), hp(pinned.data())}, s5[2] = {d, plain.device_ptr()};
      const auto two = batch(2, d5, s5);
      const ffi::CUresult sync = OXICUDA_DRIVER(StreamSynchronize, stream).result;
      std::printf("batch, current %d, %-20s: HtoD %s, DtoH pageable %s, DtoH pinned %s, DtoD %s, two copies %s (sync %s)\n",
                  current, span ? "one allocation of 2g" : "two allocations", name(htod), name(dtoh), name(dtohp),
                  name(dtod), name(two), name(sync));
    }
  }
  // Memory of cuMemAlloc only: does the refusal need VMM memory at all?
  DeviceBuffer<char> other(ctx, 2 * g);
  for (int current = 0; current < 2; ++current) {
    OXICUDA_DRIVER(CtxSetCurrent, current ? ctx.raw() : nullptr);
    ffi::CUdeviceptr d1[1] = {plain.device_ptr()}, s1[1] = {hp(pinned.data())};
    const auto htod = batch(1, d1, s1);
    ffi::CUdeviceptr d2[1] = {other.device_ptr()}, s2[1] = {plain.device_ptr()};
    const auto dtod = batch(1, d2, s2);
    const ffi::CUresult sync = OXICUDA_DRIVER(StreamSynchronize, stream).result;
    std::printf("batch, current %d, cuMemAlloc memory only: HtoD pinned %s, DtoD %s (sync %s)\n", current, name(htod),
                name(dtod), name(sync));
  }
  OXICUDA_DRIVER(CtxSetCurrent, nullptr);
  {  // oxicuda's copy_batch, no context current
    const Stream s(ctx);
    const DeviceSpan<char> over{base, 2 * g, ctx.raw()};
    try {
      copy_batch(s, {{over, host}, {plain, over}});
      copy_batch(s, {{pinned, over}});
      s.synchronize();
      std::printf("oxicuda copy_batch over two mappings, no context current: ok\n");
    } catch (const Error& e) {
      std::printf("oxicuda copy_batch over two mappings, no context current: %s\n", e.what());
    }
  }
  OXICUDA_DRIVER(CtxSetCurrent, ctx.raw());
  OXICUDA_DRIVER(StreamDestroy, stream);
}
