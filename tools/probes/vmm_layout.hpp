// The probes' VMM layout: a range of four granules, the first two mapped
// from two physical allocations side by side (a copy over them crosses a
// mapping), the last two from one allocation of two granules.
#pragma once
#include "oxicuda.hpp"

struct VmmLayout {
  explicit VmmLayout(const oxicuda::Context& ctx)
      : g(oxicuda::allocation_granularity(ctx.device())),
        range(oxicuda::VirtualRange::reserve(ctx, 4 * g)),
        m0(oxicuda::PhysicalMemory::create(ctx, g)),
        m1(oxicuda::PhysicalMemory::create(ctx, g)),
        big(oxicuda::PhysicalMemory::create(ctx, 2 * g)),
        a(range, 0, m0),
        b(range, g, m1),
        c(range, 2 * g, big),
        base(range.address()) {}
  std::size_t g;
  oxicuda::VirtualRange range;
  oxicuda::PhysicalMemory m0, m1, big;
  oxicuda::Mapping a, b, c;
  oxicuda::ffi::CUdeviceptr base;  // two mappings from here; one mapping of 2g from base + 2g
};

inline const char* result_name(oxicuda::ffi::CUresult r) {
  return r == 0 ? "ok" : oxicuda::detail::result_name<oxicuda::Library::driver>(r);
}
