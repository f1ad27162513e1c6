// The GPU suite, part: issue 26's Stream on std::shared_ptr, StreamRef and
// EventRef on a real driver, and issue 22's device runtime from source (a
// kernel that launches a kernel, compiled with SourceOptions::device_runtime).
#include <doctest/doctest.h>

#include "gpu_common.hpp"

#include <memory>
#include <span>
#include <thread>
#include <utility>
#include <vector>

using namespace oxicuda;
using gpu::ctx;

namespace {

const char* const kBump = R"(
extern "C" __global__ void bump(unsigned* p, unsigned i) { if (threadIdx.x == 0) p[i] += 1; }
)";

std::vector<unsigned> read_back(const Stream& s, const DeviceBuffer<unsigned>& buf) {
  std::vector<unsigned> host(buf.size());
  copy(s, std::span<unsigned>(host), buf);
  return host;
}

CUstream raw_stream() {
  const ScopedCurrent current(ctx());
  CUstream q = nullptr;
  REQUIRE(detail::api().StreamCreate(&q, ffi::CU_STREAM_NON_BLOCKING) == ffi::CUDA_SUCCESS);
  return q;
}

}  // namespace

TEST_CASE("issue 26: a Stream copied to 8 threads is one queue; the last copy, dropped on another thread, destroys it and a weak_ptr expires") {
  Module m = module_from_source(ctx(), kBump);
  auto bump = m.kernel<void(unsigned*, unsigned)>("bump");
  DeviceBuffer<unsigned> counts(ctx(), 8);
  std::weak_ptr<CUstream_st> watch;
  Stream check_on(ctx());
  {
    Stream s(ctx());
    fill(s, counts, 0u);
    watch = s.shared();
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 8; ++t)
      threads.emplace_back([q = s, &bump, &counts, t] {
        for (int k = 0; k < 100; ++k) launch(q, bump, {.grid = 1, .block = 32}, counts, t);
      });  // each thread's copy drops on its thread
    for (std::thread& th : threads) th.join();
    CHECK(s.use_count() == 1);
    Event done(ctx());
    s.record(done);
    check_on.wait(done);
    std::thread([last = std::move(s)] {}).join();  // the last handle drops on another thread
  }
  CHECK(watch.expired());
  for (unsigned v : read_back(check_on, counts)) CHECK(v == 100);
}

TEST_CASE("issue 26: adopt runs the user's deleter once, never ours; StreamRef and EventRef over raw handles enqueue work") {
  Module m = module_from_source(ctx(), kBump);
  auto bump = m.kernel<void(unsigned*, unsigned)>("bump");
  DeviceBuffer<unsigned> counts(ctx(), 2);
  Stream s(ctx());
  fill(s, counts, 0u);
  s.synchronize();
  int destroyed = 0;
  {
    std::shared_ptr<CUstream_st> mine(raw_stream(), [&destroyed](CUstream q) {
      ++destroyed;
      CHECK(detail::api().StreamDestroy(q) == ffi::CUDA_SUCCESS);
    });
    Stream adopted = Stream::adopt(mine);
    CHECK(adopted.context() == ctx());
    CHECK_FALSE(adopted.owns());
    mine.reset();
    launch(adopted, bump, {.grid = 1, .block = 32}, counts, 0u);
    adopted.synchronize();
    CHECK(destroyed == 0);
  }
  CHECK(destroyed == 1);

  // A foreign stream and a foreign event, viewed: work ordered across two queues.
  const CUstream foreign = raw_stream();
  CUevent ev = nullptr;
  {
    const ScopedCurrent current(ctx());
    REQUIRE(detail::api().EventCreate(&ev, ffi::CU_EVENT_DISABLE_TIMING) == ffi::CUDA_SUCCESS);
  }
  const StreamRef r(foreign, ctx());
  launch(r, bump, {.grid = 1, .block = 32}, counts, 1u);
  r.record(EventRef(ev));
  s.wait(EventRef(ev));
  launch(s, bump, {.grid = 1, .block = 32}, counts, 1u);
  const std::vector<unsigned> host = read_back(s, counts);
  CHECK(host[0] == 1);
  CHECK(host[1] == 2);
  CHECK(detail::api().EventDestroy(ev) == ffi::CUDA_SUCCESS);  // never destroyed by oxicuda
  CHECK(detail::api().StreamDestroy(foreign) == ffi::CUDA_SUCCESS);
}

TEST_CASE("issue 22: a kernel that launches a kernel, from source with .device_runtime, runs") {
  const char* const source = R"(
extern "C" __global__ void child(unsigned* out, unsigned base) { out[base + threadIdx.x] = base + threadIdx.x; }
extern "C" __global__ void parent(unsigned* out, unsigned n) {
  if (threadIdx.x == 0) child<<<1, n>>>(out, blockIdx.x * n);
}
)";
  Module m = module_from_source(ctx(), source, {.device_runtime = true});
  auto parent = m.kernel<void(unsigned*, unsigned)>("parent");
  constexpr unsigned blocks = 4, n = 64;
  DeviceBuffer<unsigned> out(ctx(), blocks * n);
  Stream s(ctx());
  fill(s, out, 0xFFFFFFFFu);
  launch(s, parent, {.grid = blocks, .block = 32}, out, n);
  const std::vector<unsigned> host = read_back(s, out);
  for (unsigned i = 0; i < blocks * n; ++i) {
    CAPTURE(i);
    CHECK(host[i] == i);
  }
}

TEST_CASE("issue 24 (8): ProfilerRange, nested and on two threads, around real work, on the real driver") {
  // Without a profiler attached the driver takes both calls as no-ops; what
  // is checked is that it takes them (the context is current for each) and
  // that the work inside runs as without the range.
  Module m = module_from_source(ctx(), kBump);
  auto bump = m.kernel<void(unsigned*, unsigned)>("bump");
  Stream s{ctx()};
  DeviceBuffer<unsigned> counts(ctx(), 2);
  fill(s, counts, 0u);
  {
    ProfilerRange outer(ctx());
    std::thread other([&] {
      ProfilerRange inner(ctx());
      Stream t{ctx()};
      launch(t, bump, {.grid = 1, .block = 32}, counts, 1u);
      t.synchronize();
    });
    {
      ProfilerRange inner(ctx());
      CHECK(ProfilerRange::open_in(ctx()) >= 2);
      launch(s, bump, {.grid = 1, .block = 32}, counts, 0u);
    }
    other.join();
    CHECK(ProfilerRange::open_in(ctx()) == 1);
  }
  CHECK(ProfilerRange::open_in(ctx()) == 0);
  CHECK(read_back(s, counts) == std::vector<unsigned>{1, 1});
}
