// Probe: the GPU suite's GrowableBuffer case ("grows twice in place"), step
// by step, and variants of the copy that driver 580 refuses there, with the
// pointer attributes of both sides. Not part of the build; on this machine:
//   g++ -std=c++20 -O1 -I. -Iexamples tools/probes/growable_copy.cpp -o .device/probe_grow -ldl -lpthread
// then run .device/probe_grow on the GPU machine (device `run`, carry .device).
#include "oxicuda.hpp"
#include "two_stream_check.hpp"
#include <cstdio>
#include <numeric>
#include <vector>
using namespace oxicuda;
template <class F> void step(const char* what, F&& f) {
  try { f(); std::printf("OK    %s\n", what); }
  catch (const Error& e) { std::printf("ERROR %s: %s\n", what, e.what()); }
  std::fflush(stdout);
}
void where(const char* what, const void* p) {
  try { const PointerInfo i = pointer_info(p);
    std::printf("  %s %p: known %d type %d range %#lx + %zu\n", what, p, (int)i.known(), (int)i.type,
                (unsigned long)i.range_start, (size_t)i.range_size);
  } catch (const Error& e) { std::printf("  %s %p: %s\n", what, p, e.what()); }
}
void wherev(const char* what, ffi::CUdeviceptr p) {
  try { const PointerInfo i = pointer_info(reinterpret_cast<const void*>(p));
    std::printf("  %s %#lx: known %d type %d range %#lx + %zu\n", what, (unsigned long)p, (int)i.known(), (int)i.type,
                (unsigned long)i.range_start, (size_t)i.range_size);
  } catch (const Error& e) { std::printf("  %s %#lx: %s\n", what, (unsigned long)p, e.what()); }
}
int main() {
  const Context ctx = Context::primary(Device::get(0));
  const std::size_t g = allocation_granularity(ctx.device());
  const std::size_t per_chunk = g / sizeof(float);
  std::printf("granularity %zu (minimum); recommended %zu\n", g,
              allocation_granularity(ctx.device(), {}, Granularity::recommended));
  static Module m = Module::from_ptx(ctx, oxicuda_examples::kDoublePtx);
  Function dbl = m.function("dbl");
  for (int variant = 0; variant < 3; ++variant) {
    std::printf("== variant %d (%s)\n", variant, variant == 0 ? "the test's steps" : variant == 1 ? "no fill, no launch" : "max 3 chunks");
    GrowableBuffer<float> b(ctx, (variant == 2 ? 3 : 4) * per_chunk, 1000);
    std::vector<float> host(1000);
    std::iota(host.begin(), host.end(), 1.0f);
    step("copy 1000 in", [&] { copy(b, host); });
    step("resize per_chunk + 5", [&] { b.resize(per_chunk + 5); });
    step("resize 3 per_chunk", [&] { b.resize(3 * per_chunk); });
    std::printf("  mappings %zu size %zu capacity %zu range %zu bytes\n", b.mapping_count(), b.size(), b.capacity(), b.range().size());
    if (variant == 0) step("fill tail", [&] { fill(b.subspan(1000), 5.0f); });
    Stream s(ctx);
    if (variant == 0)
      step("launch", [&] { launch(s, dbl, static_cast<unsigned>((b.size() + 255) / 256), 256, 0, b.device_ptr(), static_cast<unsigned>(b.size())); });
    std::vector<float> all(b.size());
    step("copy(s, all, b): the test's", [&] { copy(s, all, b); });
    where("all.data()", all.data());
    where("all.end()-1", all.data() + all.size() - 1);
    for (std::size_t k = 0; k < 3; ++k) wherev("chunk", b.device_ptr() + k * g);
    step("sync copy(all, b)", [&] { copy(all, b); });
    step("per chunk, async", [&] { for (std::size_t k = 0; k < 3; ++k) copy(s, std::span(all).subspan(k * per_chunk, per_chunk), b.subspan(k * per_chunk, per_chunk)); s.synchronize(); });
    step("chunks 0-1 async", [&] { copy(s, std::span(all).first(2 * per_chunk), b.subspan(0, 2 * per_chunk)); s.synchronize(); });
    step("chunks 1-2 async", [&] { copy(s, std::span(all).subspan(per_chunk, 2 * per_chunk), b.subspan(per_chunk, 2 * per_chunk)); s.synchronize(); });
    step("last 5 floats of chunk 0 + 5 of chunk 1", [&] { copy(s, std::span(all).subspan(per_chunk - 5, 10), b.subspan(per_chunk - 5, 10)); s.synchronize(); });
    step("into a PinnedBuffer, async", [&] { PinnedBuffer<float> p(ctx, b.size()); copy(s, std::span<float>(p.data(), b.size()), b); s.synchronize(); });
    step("into a new vector, async", [&] { std::vector<float> v(b.size()); copy(s, v, b); s.synchronize(); });
    step("raw cuMemcpyDtoHAsync on s", [&] {
      detail::check(OXICUDA_DRIVER(MemcpyDtoHAsync, all.data(), b.device_ptr(), b.size_bytes(), s.raw()), SourceLocation::current()); s.synchronize(); });
    step("raw cuMemcpyDtoHAsync on the legacy stream", [&] {
      const ScopedCurrent c(ctx);
      detail::check(OXICUDA_DRIVER(MemcpyDtoHAsync, all.data(), b.device_ptr(), b.size_bytes(), ffi::stream_legacy()), SourceLocation::current());
      ctx.synchronize(); });
    std::size_t right = 0;
    for (std::size_t i = 0; i < 1000; ++i) right += all[i] == (variant == 0 ? 2.0f : 1.0f) * host[i];
    std::printf("  first 1000 right: %zu\n", right);
  }
}
