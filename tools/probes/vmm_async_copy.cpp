// Probe: which stream-ordered copies over two VMM mappings (two physical
// allocations mapped side by side in one reserved range) driver 580
// refuses, and why: the stream's flags, the current context, the direction.
// Also what CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR / _SIZE say. Not part of
// the build; on this machine:
//   g++ -std=c++20 -O1 -I. -Itools/probes tools/probes/vmm_async_copy.cpp -o .dev/probe_async_copy -ldl -lpthread
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
  CUstream blocking = nullptr, nonblocking = nullptr;
  {
    const ScopedCurrent cur(ctx);
    OXICUDA_DRIVER(StreamCreate, &blocking, 0u);
    OXICUDA_DRIVER(StreamCreate, &nonblocking, 1u);
  }
  struct Q { const char* n; CUstream s; };
  const Q queues[] = {{"blocking", blocking}, {"non-blocking", nonblocking}, {"legacy", ffi::stream_legacy()},
                      {"per-thread", ffi::stream_per_thread()}};
  for (int current = 0; current < 2; ++current) {
    CUcontext set = current ? ctx.raw() : nullptr;
    OXICUDA_DRIVER(CtxSetCurrent, set);
    for (const Q& q : queues) {
      for (int span = 0; span < 2; ++span) {  // two mappings, or one mapping of 2g
        const ffi::CUdeviceptr d = span ? base + 2 * g : base;
        const char* what = span ? "one allocation of 2g" : "two allocations";
        const auto dtoh = OXICUDA_DRIVER(MemcpyDtoHAsync, host.data(), d, 2 * g, q.s);
        const auto dtohp = OXICUDA_DRIVER(MemcpyDtoHAsync, pinned.data(), d, 2 * g, q.s);
        const auto htod = OXICUDA_DRIVER(MemcpyHtoDAsync, d, host.data(), 2 * g, q.s);
        const auto dtod = OXICUDA_DRIVER(MemcpyDtoDAsync, d, span ? base : base + 2 * g, 2 * g, q.s);
        const auto set32 = OXICUDA_DRIVER(MemsetD32Async, d, 7u, 2 * g / 4, q.s);
        const ffi::CUresult sync = current ? OXICUDA_DRIVER(CtxSynchronize).result : ffi::CUresult{};
        std::printf("current %d, %-12s %-20s: DtoH pageable %s, DtoH pinned %s, HtoD %s, DtoD %s, memset %s (sync %s)\n",
                    current, q.n, what, name(dtoh.result), name(dtohp.result), name(htod.result), name(dtod.result),
                    name(set32.result), name(sync));
      }
    }
  }
  OXICUDA_DRIVER(CtxSetCurrent, ctx.raw());
  for (std::size_t off : {std::size_t(0), g - 4, g, 2 * g, 3 * g + 8}) {
    ffi::CUpointer_attribute at[2] = {static_cast<ffi::CUpointer_attribute>(19), static_cast<ffi::CUpointer_attribute>(18)};
    unsigned long long mbase = 0; std::size_t msize = 0;
    void* data[2] = {&mbase, &msize};
    const auto r = OXICUDA_DRIVER(PointerGetAttributes, 2u, at, data, base + off);
    std::printf("offset %#zx: %s mapping base offset %#llx size %#zx\n", off, name(r.result), mbase - base, msize);
  }
  {  // an ordinary allocation, and with no context current
    DeviceBuffer<char> plain(ctx, 3 * g + 100);
    for (int cur = 1; cur >= 0; --cur) {
      OXICUDA_DRIVER(CtxSetCurrent, cur ? ctx.raw() : nullptr);
      for (std::size_t off : {std::size_t(0), g + 7}) {
        ffi::CUpointer_attribute at[2] = {static_cast<ffi::CUpointer_attribute>(19), static_cast<ffi::CUpointer_attribute>(18)};
        unsigned long long mbase = 0; std::size_t msize = 0;
        void* data[2] = {&mbase, &msize};
        const auto r = OXICUDA_DRIVER(PointerGetAttributes, 2u, at, data, plain.device_ptr() + off);
        std::printf("cuMemAlloc, current %d, offset %#zx: %s mapping base offset %#llx size %#zx\n", cur, off, name(r.result),
                    mbase - plain.device_ptr(), msize);
      }
      ffi::CUpointer_attribute at[2] = {static_cast<ffi::CUpointer_attribute>(19), static_cast<ffi::CUpointer_attribute>(18)};
      unsigned long long mbase = 0; std::size_t msize = 0;
      void* data[2] = {&mbase, &msize};
      const auto r = OXICUDA_DRIVER(PointerGetAttributes, 2u, at, data, base + g + 5);
      std::printf("VMM, current %d, offset g+5: %s mapping base offset %#llx size %#zx\n", cur, name(r.result), mbase - base, msize);
    }
    OXICUDA_DRIVER(CtxSetCurrent, ctx.raw());
  }
  OXICUDA_DRIVER(StreamDestroy, blocking);
  OXICUDA_DRIVER(StreamDestroy, nonblocking);
}
