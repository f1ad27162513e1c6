// oxicuda against the raw driver call, side by side in one run (Catch2
// BENCHMARK). Each pair is named "<what>: raw" and "<what>: oxicuda";
// bench/ratios.py turns the XML report into a table of ratios.
// "raw" calls the driver's own function pointers (resolved once, as any
// program using the driver API would), with no wrapper in between. Every
// pair runs twice, the second time in the opposite order ("(again)"), so
// that an order effect shows instead of passing for overhead.
// Without a GPU it says so and exits 0.
#define CATCH_CONFIG_RUNNER
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#include <catch2/catch.hpp>

#include "oxicuda.hpp"

#include "interleaved.hpp"
#include "smid_kernel.hpp"
#include "tma_kernel.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace oxicuda;

// Runs `raw` and `ox` as "<what>: raw" / "<what>: oxicuda", then again in
// the opposite order as "<what> (again): ...".
#define OXI_BENCH_PAIR(what, raw_body, ox_body) \
  BENCHMARK(what ": raw") raw_body;             \
  BENCHMARK(what ": oxicuda") ox_body;          \
  BENCHMARK(what " (again): oxicuda") ox_body;  \
  BENCHMARK(what " (again): raw") raw_body

namespace {

constexpr const char* kEmptyPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry empty()
{
    ret;
}
)";

struct Fixture {
  Context ctx = Context::primary(Device::get(0));
  ScopedCurrent current{ctx};
  Stream stream{ctx};
  Module module = Module::from_ptx(ctx, kEmptyPtx);
  Function fn = module.function("empty");
  Kernel<void()> kernel = module.kernel<void()>("empty");
  Event event{ctx, {.timing = false}};
};

Fixture& fx() {
  static Fixture f;
  return f;
}

const ffi::DriverApi& raw() { return detail::api(); }

void check(ffi::CUresult r) {
  if (r != ffi::CUDA_SUCCESS) throw Error(r, "raw driver call");
}

}  // namespace

TEST_CASE("launch enqueue of an empty kernel, 1000 launches per synchronize") {
  Fixture& f = fx();
  CUfunction fn = f.fn.raw();
  CUstream s = f.stream.raw();
  OXI_BENCH_PAIR("launch x1000 + sync", {
    for (int i = 0; i < 1000; ++i) check(raw().LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
    check(raw().StreamSynchronize(s));
  }, {
    for (int i = 0; i < 1000; ++i) launch(f.stream, f.kernel, {});
    f.stream.synchronize();
  });
  OXI_BENCH_PAIR("untyped launch x1000 + sync", {
    for (int i = 0; i < 1000; ++i) check(raw().LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
    check(raw().StreamSynchronize(s));
  }, {
    for (int i = 0; i < 1000; ++i) launch(f.stream, f.fn, 1, 1, 0);
    f.stream.synchronize();
  });
}

TEST_CASE("launch + synchronize") {
  Fixture& f = fx();
  CUfunction fn = f.fn.raw();
  CUstream s = f.stream.raw();
  OXI_BENCH_PAIR("launch + sync", {
    check(raw().LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
    check(raw().StreamSynchronize(s));
  }, {
    launch(f.stream, f.kernel, {});
    f.stream.synchronize();
  });
}

TEST_CASE("event record") {
  Fixture& f = fx();
  CUevent e = f.event.raw();
  CUstream s = f.stream.raw();
  OXI_BENCH_PAIR("event record x100", {
    for (int i = 0; i < 100; ++i) check(raw().EventRecord(e, s));
  }, {
    for (int i = 0; i < 100; ++i) f.stream.record(f.event);
  });
  f.stream.synchronize();
}

// Issue 26's other two hot operations: a stream waiting for an event
// (cuStreamWaitEvent) and asking an event and a stream whether their work is
// done (cuEventQuery, cuStreamQuery; both done here: the stream is idle).
TEST_CASE("stream wait, event query, stream query") {
  Fixture& f = fx();
  CUevent e = f.event.raw();
  CUstream s = f.stream.raw();
  check(raw().EventRecord(e, s));
  check(raw().StreamSynchronize(s));
  OXI_BENCH_PAIR("stream wait x100", {
    for (int i = 0; i < 100; ++i) check(raw().StreamWaitEvent(s, e, 0));
  }, {
    for (int i = 0; i < 100; ++i) f.stream.wait(f.event);
  });
  f.stream.synchronize();
  OXI_BENCH_PAIR("event query x100", {
    int done = 0;
    for (int i = 0; i < 100; ++i) done += raw().EventQuery(e) == ffi::CUDA_SUCCESS;
    return done;
  }, {
    int done = 0;
    for (int i = 0; i < 100; ++i) done += f.event.ready();
    return done;
  });
  OXI_BENCH_PAIR("stream query x100", {
    int done = 0;
    for (int i = 0; i < 100; ++i) done += raw().StreamQuery(s) == ffi::CUDA_SUCCESS;
    return done;
  }, {
    int done = 0;
    for (int i = 0; i < 100; ++i) done += f.stream.ready();
    return done;
  });
  interleaved("stream wait", 1001, 64, [&] { check(raw().StreamWaitEvent(s, e, 0)); }, [&] { f.stream.wait(f.event); });
  f.stream.synchronize();
  interleaved("event query", 1001, 64, [&] { (void)raw().EventQuery(e); }, [&] { (void)f.event.ready(); });
  interleaved("stream query", 1001, 64, [&] { (void)raw().StreamQuery(s); }, [&] { (void)f.stream.ready(); });
  interleaved("event record", 1001, 64, [&] { check(raw().EventRecord(e, s)); }, [&] { f.stream.record(f.event); });
  f.stream.synchronize();
}

TEST_CASE("stream create + destroy") {
  Fixture& f = fx();
  OXI_BENCH_PAIR("stream create + destroy", {
    CUstream s = nullptr;
    check(raw().StreamCreate(&s, ffi::CU_STREAM_NON_BLOCKING));
    check(raw().StreamDestroy(s));
  }, {
    Stream s(f.ctx);
    return s.raw();
  });
}

TEST_CASE("event create + destroy") {
  Fixture& f = fx();
  OXI_BENCH_PAIR("event create + destroy", {
    CUevent e = nullptr;
    check(raw().EventCreate(&e, ffi::CU_EVENT_DEFAULT));
    check(raw().EventDestroy(e));
  }, {
    Event e(f.ctx);
    return e.raw();
  });
}

TEST_CASE("creation, raw and oxicuda interleaved") {
  Fixture& f = fx();
  interleaved("event create + destroy", 1001, 64, [] {
    CUevent e = nullptr;
    check(raw().EventCreate(&e, ffi::CU_EVENT_DEFAULT));
    check(raw().EventDestroy(e));
  }, [&f] { Event e(f.ctx); });
  // What oxicuda adds that the driver charges for: asking which context is
  // current (cuCtxGetCurrent), which event creation needs, since
  // cuEventCreate creates in the calling thread's current context.
  interleaved("event create + destroy, raw with cuCtxGetCurrent", 1001, 64, [] {
    CUevent e = nullptr;
    check(raw().EventCreate(&e, ffi::CU_EVENT_DEFAULT));
    check(raw().EventDestroy(e));
  }, [] {
    CUcontext c = nullptr;
    check(raw().CtxGetCurrent(&c));
    CUevent e = nullptr;
    check(raw().EventCreate(&e, ffi::CU_EVENT_DEFAULT));
    check(raw().EventDestroy(e));
  });
  // ... and keeping the event's context alive, as every oxicuda handle does
  // (a Context copy: one atomic increment of its count, one decrement): the
  // floor of any wrapper whose events keep their context, before the handle's
  // own state.
  interleaved("event create + destroy, raw with cuCtxGetCurrent and a Context copy", 1001, 64, [] {
    CUevent e = nullptr;
    check(raw().EventCreate(&e, ffi::CU_EVENT_DEFAULT));
    check(raw().EventDestroy(e));
  }, [&f] {
    CUcontext c = nullptr;
    check(raw().CtxGetCurrent(&c));
    CUevent e = nullptr;
    check(raw().EventCreate(&e, ffi::CU_EVENT_DEFAULT));
    const Context keep = f.ctx;
    (void)keep;  // (atomic operations: not elided)
    check(raw().EventDestroy(e));
  });
  interleaved("stream create + destroy", 501, 16, [] {
    CUstream s = nullptr;
    check(raw().StreamCreate(&s, ffi::CU_STREAM_NON_BLOCKING));
    check(raw().StreamDestroy(s));
  }, [&f] { Stream s(f.ctx); });
}

TEST_CASE("copying and dropping a Stream handle") {
  Fixture& f = fx();
  // The raw comparison is a std::shared_ptr copy (what the Rust original's
  // Arc clone is); copying a bare CUstream costs nothing and shares nothing.
  std::shared_ptr<CUstream_st> shared(f.stream.raw(), [](CUstream_st*) {});
  OXI_BENCH_PAIR("stream handle copy + drop", {
    std::shared_ptr<CUstream_st> copy = shared;
    return copy.get();
  }, {
    Stream copy = f.stream;
    return copy.raw();
  });
}

TEST_CASE("host-to-device copy of 256 MiB") {
  Fixture& f = fx();
  constexpr std::size_t bytes = std::size_t{256} << 20;
  DeviceBuffer<unsigned char> device(f.ctx, bytes);
  PinnedBuffer<unsigned char> pinned(f.ctx, bytes);
  std::vector<unsigned char> pageable(bytes, 1);
  for (std::size_t i = 0; i < bytes; ++i) pinned[i] = static_cast<unsigned char>(i);
  const ffi::CUdeviceptr d = device.device_ptr();
  // The raw side is the driver's own synchronous copy, which oxicuda does not
  // use (its copy() is a stream-ordered copy and a wait; see memory.hpp).
  using MemcpyHtoD = ffi::CUresult(OXICUDA_DETAIL_CUDAAPI*)(ffi::CUdeviceptr, const void*, std::size_t);
  void* lib = dlopen(driver_info().library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto memcpy_htod = reinterpret_cast<MemcpyHtoD>(lib ? dlsym(lib, "cuMemcpyHtoD_v2") : nullptr);
  REQUIRE(memcpy_htod);
  OXI_BENCH_PAIR("H2D 256 MiB pinned", { check(memcpy_htod(d, pinned.data(), bytes)); },
                 { copy(device, pinned); });
  OXI_BENCH_PAIR("H2D 256 MiB pageable", { check(memcpy_htod(d, pageable.data(), bytes)); },
                 { copy(device, pageable); });
}

// Issue 23: a kernel over managed memory that starts on the host, with and
// without a prefetch to the device first (each round moves it back to the
// host); the prefetch pair is oxicuda's prefetch_async against the raw
// cuMemPrefetchAsync_v2.
TEST_CASE("a kernel over 256 MiB of managed memory, with and without prefetch") {
  Fixture& f = fx();
  const Device dev = f.ctx.device();
  if (dev.attribute(ffi::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0) {
    WARN("no concurrent managed access: nothing to measure");
    return;
  }
  const Module m = module_from_source(f.ctx, R"(
extern "C" __global__ void touch(unsigned* p, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += i;
})");
  const auto touch = m.kernel<void(unsigned*, unsigned)>("touch");
  constexpr unsigned n = 64u << 20;  // 256 MiB of unsigned
  ManagedBuffer<unsigned> buf(f.ctx, n);
  std::fill(buf.begin(), buf.end(), 1u);
  const StreamRef s = f.stream;
  const LaunchConfig config{.grid = n / 256, .block = 256};
  const ffi::CUmemLocation to_device = MemoryLocation::device(dev).raw();
  auto to_host = [&] {
    prefetch_async(s, buf, MemoryLocation::host());
    s.synchronize();
  };
  BENCHMARK("managed 256 MiB, kernel on host-resident pages: no prefetch") {
    to_host();
    launch(s, touch, config, buf, n);
    s.synchronize();
  };
  OXI_BENCH_PAIR("managed 256 MiB, prefetch to the device + kernel",
                 {
                   to_host();
                   check(raw().MemPrefetchAsync(buf.device_ptr(), buf.size_bytes(), to_device, 0, s.raw()));
                   launch(s, touch, config, buf, n);
                   s.synchronize();
                 },
                 {
                   to_host();
                   prefetch_async(s, buf, MemoryLocation::device(dev));
                   launch(s, touch, config, buf, n);
                   s.synchronize();
                 });
}

// Issue 23: a 2D copy against cuMemcpy2DAsync_v2 called raw, one pair
// large (pitched device memory to pinned host rows, bandwidth) and one small
// (a 64 x 64 block between two pitched buffers, the call's own cost).
TEST_CASE("a 2D copy, raw and oxicuda interleaved") {
  Fixture& f = fx();
  const StreamRef s = f.stream;
  constexpr std::size_t w = 4096, h = 1024;
  PitchedBuffer<float> a(f.ctx, w, h), b(f.ctx, w, h);
  PinnedBuffer<float> host(f.ctx, w * h);
  const auto host_rows = view_2d(host, w, h);
  ffi::CUDA_MEMCPY2D big{};
  big.srcMemoryType = ffi::CU_MEMORYTYPE_DEVICE;
  big.srcDevice = a.device_ptr();
  big.srcPitch = a.pitch_bytes();
  big.dstMemoryType = ffi::CU_MEMORYTYPE_HOST;
  big.dstHost = host.data();
  big.dstPitch = w * sizeof(float);
  big.WidthInBytes = w * sizeof(float);
  big.Height = h;
  OXI_BENCH_PAIR("2D copy 4096 x 1024 floats, pitched device to pinned host rows",
                 {
                   check(raw().Memcpy2DAsync(&big, s.raw()));
                   s.synchronize();
                 },
                 {
                   copy_2d_async(s, host_rows, a);
                   s.synchronize();
                 });
  ffi::CUDA_MEMCPY2D small{};
  small.srcMemoryType = ffi::CU_MEMORYTYPE_DEVICE;
  small.srcDevice = a.device_ptr();
  small.srcPitch = a.pitch_bytes();
  small.dstMemoryType = ffi::CU_MEMORYTYPE_DEVICE;
  small.dstDevice = b.device_ptr();
  small.dstPitch = b.pitch_bytes();
  small.WidthInBytes = 64 * sizeof(float);
  small.Height = 64;
  const auto from = a.block(0, 0, 64, 64), to = b.block(0, 0, 64, 64);
  OXI_BENCH_PAIR("2D copy 64 x 64 floats between pitched buffers, enqueue x 100 + synchronize",
                 {
                   for (int i = 0; i < 100; ++i) check(raw().Memcpy2DAsync(&small, s.raw()));
                   s.synchronize();
                 },
                 {
                   for (int i = 0; i < 100; ++i) copy_2d_async(s, to, from);
                   s.synchronize();
                 });
}

// Issue 25 (3): 1,000 small device-to-device copies (64 bytes each, from
// one buffer's slots to another's), enqueued and waited for: copy_batch
// (one cuMemcpyBatchAsync where the driver has it) against a loop of the
// raw cuMemcpyDtoDAsync_v2, against the raw batched call (the wrapper's own
// cost: grouping the attributes, filling the arrays, one allocation above
// 16 copies) and, interleaved, against a loop of oxicuda's copy_async. The
// BatchCopy list is made once, outside the timing, as a program reusing
// its batch would.
TEST_CASE("1,000 small copies, batched against a loop") {
  Fixture& f = fx();
  const StreamRef s = f.stream;
  constexpr std::size_t n = 1000, each = 16;  // 16 floats: 64 bytes
  DeviceBuffer<float> from(f.ctx, n * each), to(f.ctx, n * each);
  fill(from, 1.0f);
  std::vector<BatchCopy> copies;
  std::vector<ffi::CUdeviceptr> dsts, srcs;
  std::vector<std::size_t> sizes(n, each * sizeof(float));
  for (std::size_t i = 0; i < n; ++i) {
    copies.emplace_back(to.subspan(i * each, each), from.subspan(i * each, each));
    dsts.push_back(to.subspan(i * each, each).device_ptr());
    srcs.push_back(from.subspan(i * each, each).device_ptr());
  }
  std::printf("copy_batch takes %s on this driver\n",
              batched_copies_available() ? "cuMemcpyBatchAsync" : "a loop of single copies (no cuMemcpyBatchAsync)");
  auto raw_loop = [&] {
    for (std::size_t i = 0; i < n; ++i) check(raw().MemcpyDtoDAsync(dsts[i], srcs[i], sizes[i], s.raw()));
    s.synchronize();
  };
  auto batched = [&] {
    copy_batch(s, copies);
    s.synchronize();
  };
  OXI_BENCH_PAIR("1000 copies of 64 bytes device to device, a raw cuMemcpyDtoDAsync loop against copy_batch",
                 { raw_loop(); }, { batched(); });
  if (batched_copies_available()) {
    ffi::CUmemcpyAttributes attrs{};
    attrs.srcAccessOrder = ffi::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    std::size_t zero = 0;
    OXI_BENCH_PAIR("1000 copies of 64 bytes device to device, the raw cuMemcpyBatchAsync against copy_batch",
                   {
                     check(raw().MemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), n, &attrs, &zero, 1,
                                                  s.raw()));
                     s.synchronize();
                   },
                   { batched(); });
  }
  interleaved("1000 copies of 64 bytes device to device, a copy_async loop (raw) against copy_batch (oxicuda)", 31, 4,
              [&] {
                for (std::size_t i = 0; i < n; ++i)
                  copy_async(s, to.subspan(i * each, each), from.subspan(i * each, each));
                s.synchronize();
              },
              batched);
}

// Issue 24 (7): a 4096 x 4096 float matrix copied tile by tile (64 x 64
// floats, one block each, through shared memory), the tiles loaded by TMA
// through a TensorMap against plain coalesced loads. Needs compute
// capability 9.0. Not a raw/oxicuda pair: two ways of loading a tile.
TEST_CASE("a TMA tile copy against a plain-load kernel") {
  Fixture& f = fx();
  const ComputeCapability cc = f.ctx.device().compute_capability();
  if (cc.major < 9) {
    WARN("TMA needs compute capability 9.0: nothing to measure");
    return;
  }
  // tile_copy: examples/tma_kernel.hpp, one 64 x 64 box a block.
  const Module m = module_from_source(f.ctx, std::string(oxicuda_examples::kTmaTileSource) + R"(
extern "C" __global__ void plain_copy(const float* in, float* out, unsigned cols) {
  __shared__ alignas(128) float tile[64 * 64];
  const int x = blockIdx.x * 64, y = blockIdx.y * 64;
  for (unsigned i = threadIdx.x; i < 64 * 64; i += blockDim.x) tile[i] = in[(y + i / 64) * cols + x + i % 64];
  __syncthreads();
  for (unsigned i = threadIdx.x; i < 64 * 64; i += blockDim.x) out[(y + i / 64) * cols + x + i % 64] = tile[i];
})");
  const auto tma = m.kernel<void(TensorMap, float*, int, int, unsigned, unsigned, unsigned)>("tile_copy");
  const auto plain = m.kernel<void(const float*, float*, unsigned)>("plain_copy");
  constexpr unsigned cols = 4096, rows = 4096;
  std::vector<float> host(std::size_t{cols} * rows);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 100003);
  DeviceBuffer<float> in(f.ctx, host.size()), out(f.ctx, host.size());
  copy(in, host);
  const TensorMap map = TensorMap::tiled(in, {cols, rows}, {}, {64, 64});
  const StreamRef s = f.stream;
  const LaunchConfig config{.grid = {cols / 64, rows / 64}, .block = 256};
  std::vector<float> back(host.size());
  for (const bool with_tma : {true, false}) {
    fill(s, out, 0.0f);
    if (with_tma)
      launch(s, tma, config, map, out, 0, 0, 64u, 64u, cols);
    else
      launch(s, plain, config, in, out, cols);
    copy(s, back, out);
    REQUIRE(back == host);
  }
  BENCHMARK("tile copy 4096 x 4096 floats in 64 x 64 boxes: TMA") {
    launch(s, tma, config, map, out, 0, 0, 64u, 64u, cols);
    s.synchronize();
  };
  BENCHMARK("tile copy 4096 x 4096 floats in 64 x 64 boxes: plain loads") {
    launch(s, plain, config, in, out, cols);
    s.synchronize();
  };
}

// Issue 24: a dependent kernel pair (the second reads what the first
// wrote, after griddepcontrol.wait), 50 pairs a round, launched with and
// without programmatic dependent launch on the second.
TEST_CASE("a dependent kernel pair, with and without programmatic dependent launch") {
  Fixture& f = fx();
  if (f.ctx.device().compute_capability().major < 9) {
    WARN("compute capability below 9.0: no programmatic dependent launch to measure");
    return;
  }
  const Module m = module_from_source(f.ctx, R"(
extern "C" __global__ void first(float* a, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * 0.5f + 1.0f;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
extern "C" __global__ void second(const float* a, float* b, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (i < n) b[i] = a[i] + 1.0f;
})");
  const auto first = m.kernel<void(float*, unsigned)>("first");
  const auto second = m.kernel<void(const float*, float*, unsigned)>("second");
  constexpr unsigned n = 1u << 16;
  DeviceBuffer<float> a(f.ctx, n), b(f.ctx, n);
  fill(a, 1.0f);
  const StreamRef s = f.stream;
  auto pairs = [&](bool pdl) {
    for (int i = 0; i < 50; ++i) {
      launch(s, first, {.grid = n / 256, .block = 256}, a, n);
      launch(s, second, {.grid = n / 256, .block = 256, .programmatic = pdl}, a, b, n);
    }
    s.synchronize();
  };
  BENCHMARK("50 dependent pairs: without PDL") { pairs(false); };
  BENCHMARK("50 dependent pairs: with PDL") { pairs(true); };
  BENCHMARK("50 dependent pairs (again): with PDL") { pairs(true); };
  BENCHMARK("50 dependent pairs (again): without PDL") { pairs(false); };
}

// Issue 25 (1): two long kernels (every block spins a fixed number of
// cycles; 4 blocks of 128 threads per SM of the device each) on two green
// contexts of half the SMs each, against the same two kernels on two
// streams of the primary context. Not a raw/oxicuda pair: two ways of
// sharing the device. Reported, nothing asserted.
TEST_CASE("two long kernels: on two green contexts of half the SMs, against two streams of one context") {
  Fixture& f = fx();
  if (!green_contexts_available()) {
    WARN("this driver has no green contexts (CUDA 12.4): nothing to measure");
    return;
  }
  const SmResource all = SmResource::of(f.ctx.device());
  const unsigned align = std::max(all.coscheduled_alignment(), 1u), half = all.sm_count() / 2 / align * align;
  if (half < all.min_partition_size()) {
    WARN("too few SMs for two green contexts: nothing to measure");
    return;
  }
  SmSplit halves;  // the largest two groups the driver makes (it may keep to the processing clusters)
  for (unsigned want = half; want >= all.min_partition_size() && want >= align && halves.size() == 0; want -= align) {
    try {
      halves = all.split(2, want);
    } catch (const Error&) {
    }
  }
  if (halves.size() != 2) {
    WARN("the driver makes no two groups of SMs: nothing to measure");
    return;
  }
  const GreenContext green[2] = {GreenContext(halves.group(0)), GreenContext(halves.group(1))};
  const Stream green_streams[2] = {green[0].stream(), green[1].stream()};
  const Stream plain_streams[2] = {Stream(f.ctx), Stream(f.ctx)};
  // The kernel loaded in each stream's context (a green context's, or the primary one).
  using SmidKernel = Kernel<void(unsigned*, unsigned long long)>;
  const Module modules[3] = {Module::from_ptx(green[0].context(), oxicuda_examples::kSmidPtx),
                             Module::from_ptx(green[1].context(), oxicuda_examples::kSmidPtx),
                             Module::from_ptx(f.ctx, oxicuda_examples::kSmidPtx)};
  const SmidKernel green_kernels[2] = {modules[0].kernel<void(unsigned*, unsigned long long)>("record_smid"),
                                       modules[1].kernel<void(unsigned*, unsigned long long)>("record_smid")};
  const SmidKernel plain = modules[2].kernel<void(unsigned*, unsigned long long)>("record_smid");
  const SmidKernel plain_kernels[2] = {plain, plain};
  const unsigned blocks = all.sm_count() * 4;
  DeviceBuffer<unsigned> green_out[2] = {DeviceBuffer<unsigned>(green[0].context(), blocks),
                                         DeviceBuffer<unsigned>(green[1].context(), blocks)};
  DeviceBuffer<unsigned> plain_out[2] = {DeviceBuffer<unsigned>(f.ctx, blocks), DeviceBuffer<unsigned>(f.ctx, blocks)};
  constexpr unsigned long long cycles = 2'000'000;  // about 1 ms a block at 2 GHz
  auto run = [&](const Stream (&streams)[2], const SmidKernel (&kernels)[2], DeviceBuffer<unsigned> (&out)[2]) {
    for (int i = 0; i < 2; ++i) launch(streams[i], kernels[i], {.grid = blocks, .block = 128}, out[i], cycles);
    for (const Stream& s : streams) s.synchronize();
  };
  std::fprintf(stderr, "green contexts: %u SMs, two groups of %u\n", all.sm_count(), halves.group(0).sm_count());
  BENCHMARK("two long kernels: two green contexts of half the SMs") { run(green_streams, green_kernels, green_out); };
  BENCHMARK("two long kernels: two streams of one context") { run(plain_streams, plain_kernels, plain_out); };
  BENCHMARK("two long kernels (again): two streams of one context") { run(plain_streams, plain_kernels, plain_out); };
  BENCHMARK("two long kernels (again): two green contexts of half the SMs") { run(green_streams, green_kernels, green_out); };
}

int main(int argc, char** argv) {
  const DriverInfo& info = driver_info();
  int devices = 0;
  if (info.available()) {
    try {
      devices = Device::count();
    } catch (const Error&) {
      devices = 0;
    }
  }
  if (!info.available() || devices == 0) {
    std::printf("oxicuda-bench: no GPU here (%s); nothing to measure\n",
                info.available() ? "the driver sees no device" : info.reason.c_str());
    return 0;
  }
  const Device d = Device::get(0);
  std::fprintf(stderr, "oxicuda-bench on %s, driver %s (CUDA %d.%d)\n", d.name().c_str(), info.library.c_str(),
               info.version / 1000, info.version % 1000 / 10);
  return Catch::Session().run(argc, argv);
}
