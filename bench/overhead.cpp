// oxicuda-overhead: the work one oxicuda hot-path operation does on the CPU
// beyond the raw driver call, for bench/overhead.py to count (valgrind
// instruction counts, deterministic). Run against the fake driver, whose
// entry points do the same work whichever side calls them:
//   OXICUDA_LIBCUDA_PATH=build/tests/libfake_cuda.so oxicuda-overhead MODE N
// performs N operations of MODE:
//   raw-launch / launch / untyped-launch: cuLaunchKernel of a 2-parameter
//     kernel (float*, unsigned) directly, through a typed Kernel, through an
//     untyped Function;
//   raw-record / record: cuEventRecord directly, Stream::record;
//   raw-copy / copy: copy and drop a std::shared_ptr, a Stream handle;
//   raw-event / event: create and destroy an event, in the current context;
//   all: each of them in turn (a smoke test, run by meson test).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "oxicuda.hpp"

using namespace oxicuda;

namespace {

constexpr const char* kPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry dbl(.param .u64 ptr, .param .u32 n)
{ ret; }
)";

void check(ffi::CUresult r) {
  if (r != ffi::CUDA_SUCCESS) {
    std::fprintf(stderr, "driver call failed: %d\n", static_cast<int>(r));
    std::exit(1);
  }
}

// Keeps the compiler from dropping a loop body whose result is unused.
template <class T>
void keep(T& v) {
#if defined(__GNUC__) || defined(__clang__)
  asm volatile("" : : "g"(&v) : "memory");
#else
  static const void* volatile sink;
  sink = &v;
#endif
}

}  // namespace

int run(const char* mode, long n);

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: oxicuda-overhead MODE|all N\n");
    return 2;
  }
  const long n = std::atol(argv[2]);
  if (std::strcmp(argv[1], "all") != 0) return run(argv[1], n);
  for (const char* mode : {"raw-launch", "launch", "untyped-launch", "raw-record", "record", "raw-copy", "copy", "raw-event",
                           "event"})
    if (const int status = run(mode, n); status != 0) return status;
  std::printf("every mode ran %ld operations\n", n);
  return 0;
}

int run(const char* mode, long n) {
  Context ctx = Context::primary(Device::get(0));
  Stream s(ctx);
  Event e(ctx, {.timing = false});
  Module m = Module::from_ptx(ctx, kPtx);
  Function fn = m.function("dbl");
  Kernel<void(float*, unsigned)> kernel = m.kernel<void(float*, unsigned)>("dbl");
  DeviceBuffer<float> buf(ctx, 64);
  const auto& api = detail::api();  // the driver's own entry points, as a raw program would hold them
  CUfunction raw_fn = fn.raw();
  CUstream raw_s = s.raw();
  CUevent raw_e = e.raw();
  std::shared_ptr<int> shared = std::make_shared<int>(0);

  if (!std::strcmp(mode, "raw-launch")) {
    for (long i = 0; i < n; ++i) {
      float* p = buf.data();
      unsigned count = 64;
      void* params[] = {&p, &count};
      check(api.LaunchKernel(raw_fn, 1, 1, 1, 64, 1, 1, 0, raw_s, params, nullptr));
    }
  } else if (!std::strcmp(mode, "launch")) {
    for (long i = 0; i < n; ++i) launch(s, kernel, {.grid = 1, .block = 64}, buf, 64);
  } else if (!std::strcmp(mode, "untyped-launch")) {
    for (long i = 0; i < n; ++i) {
      float* p = buf.data();
      unsigned count = 64;
      launch(s, fn, 1, 64, 0, p, count);
    }
  } else if (!std::strcmp(mode, "raw-record")) {
    for (long i = 0; i < n; ++i) check(api.EventRecord(raw_e, raw_s));
  } else if (!std::strcmp(mode, "record")) {
    for (long i = 0; i < n; ++i) s.record(e);
  } else if (!std::strcmp(mode, "raw-copy")) {
    for (long i = 0; i < n; ++i) {
      std::shared_ptr<int> copy = shared;
      keep(copy);
    }
  } else if (!std::strcmp(mode, "copy")) {
    for (long i = 0; i < n; ++i) {
      Stream copy = s;
      keep(copy);
    }
  } else if (!std::strcmp(mode, "raw-event")) {
    const ScopedCurrent current(ctx);
    for (long i = 0; i < n; ++i) {
      CUevent ev = nullptr;
      check(api.EventCreate(&ev, ffi::CU_EVENT_DEFAULT));
      check(api.EventDestroy(ev));
    }
  } else if (!std::strcmp(mode, "event")) {
    const ScopedCurrent current(ctx);
    for (long i = 0; i < n; ++i) {
      Event ev(ctx);
      keep(ev);
    }
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  s.synchronize();
  return 0;
}
