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
//   floor-event: raw-event plus what any wrapper whose events keep their
//     context must add (cuCtxGetCurrent, a Context copy held meanwhile);
//   raw-set-kernel / set-kernel: one kernel node's arguments in an exec of
//     100 kernel nodes, cuGraphExecKernelNodeSetParams directly,
//     GraphExec::set_kernel (the context current, as in a loop of them);
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

// What every mode works on, made once per run.
struct Setup {
  Context ctx = Context::primary(Device::get(0));
  Stream s{ctx};
  Event e{ctx, {.timing = false}};
  Module m = Module::from_ptx(ctx, kPtx);
  Function fn = m.function("dbl");
  Kernel<void(float*, unsigned)> kernel = m.kernel<void(float*, unsigned)>("dbl");
  DeviceBuffer<float> buf{ctx, 64};
  const ffi::DriverApi& api = detail::api();  // the driver's own entry points, as a raw program would hold them
  std::shared_ptr<int> shared = std::make_shared<int>(0);
};

// Each mode's loop is a function of its own, never inlined: the code the
// compiler makes for one mode cannot then change with another's (in one
// large function, a change to event creation moved a register and added an
// instruction to the record loop).
#if defined(__GNUC__) || defined(__clang__)
#define OVERHEAD_LOOP __attribute__((noinline)) void
#else
#define OVERHEAD_LOOP __declspec(noinline) void
#endif

OVERHEAD_LOOP raw_launch(Setup& x, long n) {
  CUfunction raw_fn = x.fn.raw();
  CUstream raw_s = x.s.raw();
  for (long i = 0; i < n; ++i) {
    float* p = x.buf.data();
    unsigned count = 64;
    void* params[] = {&p, &count};
    check(x.api.LaunchKernel(raw_fn, 1, 1, 1, 64, 1, 1, 0, raw_s, params, nullptr));
  }
}
OVERHEAD_LOOP typed_launch(Setup& x, long n) {
  for (long i = 0; i < n; ++i) launch(x.s, x.kernel, {.grid = 1, .block = 64}, x.buf, 64);
}
OVERHEAD_LOOP untyped_launch(Setup& x, long n) {
  for (long i = 0; i < n; ++i) {
    float* p = x.buf.data();
    unsigned count = 64;
    launch(x.s, x.fn, 1, 64, 0, p, count);
  }
}
OVERHEAD_LOOP raw_record(Setup& x, long n) {
  CUevent raw_e = x.e.raw();
  CUstream raw_s = x.s.raw();
  for (long i = 0; i < n; ++i) check(x.api.EventRecord(raw_e, raw_s));
}
OVERHEAD_LOOP record(Setup& x, long n) {
  for (long i = 0; i < n; ++i) x.s.record(x.e);
}
OVERHEAD_LOOP raw_copy(Setup& x, long n) {
  for (long i = 0; i < n; ++i) {
    std::shared_ptr<int> copy = x.shared;
    keep(copy);
  }
}
OVERHEAD_LOOP copy(Setup& x, long n) {
  for (long i = 0; i < n; ++i) {
    Stream c = x.s;
    keep(c);
  }
}
OVERHEAD_LOOP raw_event(Setup& x, long n) {
  const ScopedCurrent current(x.ctx);
  for (long i = 0; i < n; ++i) {
    CUevent ev = nullptr;
    check(x.api.EventCreate(&ev, ffi::CU_EVENT_DEFAULT));
    check(x.api.EventDestroy(ev));
  }
}
OVERHEAD_LOOP floor_event(Setup& x, long n) {
  const ScopedCurrent current(x.ctx);
  for (long i = 0; i < n; ++i) {
    CUcontext c = nullptr;
    check(x.api.CtxGetCurrent(&c));
    CUevent ev = nullptr;
    check(x.api.EventCreate(&ev, ffi::CU_EVENT_DEFAULT));
    Context held = x.ctx;
    keep(held);
    check(x.api.EventDestroy(ev));
  }
}
OVERHEAD_LOOP event(Setup& x, long n) {
  const ScopedCurrent current(x.ctx);
  for (long i = 0; i < n; ++i) {
    Event ev(x.ctx);
    keep(ev);
  }
}

// A graph of 100 kernel nodes of `dbl`, instantiated: set-kernel modes
// set node 50's arguments, as bench_graph.cpp's pair does on the GPU.
struct GraphSetup {
  Graph g;
  GraphNode nodes[100];
  GraphExec exec;
  explicit GraphSetup(Setup& x) : g(x.ctx) {
    for (int i = 0; i < 100; ++i)
      nodes[i] = i == 0 ? g.add_kernel({}, x.kernel, {.grid = 1, .block = 64}, x.buf, 64)
                        : g.add_kernel(nodes[i - 1], x.kernel, {.grid = 1, .block = 64}, x.buf, 64);
    exec = GraphExec(g);
    // As in a loop that has run a while: the node's kernel is held already.
    exec.set_kernel(nodes[50], x.kernel, {.grid = 1, .block = 64}, x.buf, 64);
  }
};
OVERHEAD_LOOP raw_set_kernel(Setup& x, long n) {
  GraphSetup gs(x);
  const ScopedCurrent current(x.ctx);
  CUgraphExec e = gs.exec.raw();
  CUgraphNode node = gs.nodes[50].raw();
  CUfunction raw_fn = x.fn.raw();
  for (long i = 0; i < n; ++i) {
    float* p = x.buf.data();
    unsigned count = static_cast<unsigned>(i & 63);
    void* params[] = {&p, &count};
    ffi::CUDA_KERNEL_NODE_PARAMS_v2 kp{};
    kp.func = raw_fn;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 64;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    check(x.api.GraphExecKernelNodeSetParams(e, node, &kp));
  }
}
OVERHEAD_LOOP set_kernel(Setup& x, long n) {
  GraphSetup gs(x);
  const ScopedCurrent current(x.ctx);
  for (long i = 0; i < n; ++i)
    gs.exec.set_kernel(gs.nodes[50], x.kernel, {.grid = 1, .block = 64}, x.buf, static_cast<unsigned>(i & 63));
}

struct Mode {
  const char* name;
  void (*loop)(Setup&, long);
};
constexpr Mode modes[] = {{"raw-launch", raw_launch}, {"launch", typed_launch}, {"untyped-launch", untyped_launch},
                          {"raw-record", raw_record}, {"record", record},        {"raw-copy", raw_copy},
                          {"copy", copy},             {"raw-event", raw_event}, {"floor-event", floor_event},
                          {"event", event},           {"raw-set-kernel", raw_set_kernel},
                          {"set-kernel", set_kernel}};

int run(const char* mode, long n) {
  for (const Mode& m : modes)
    if (!std::strcmp(mode, m.name)) {
      Setup x;
      m.loop(x, n);
      x.s.synchronize();
      return 0;
    }
  std::fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: oxicuda-overhead MODE|all N\n");
    return 2;
  }
  const long n = std::atol(argv[2]);
  if (std::strcmp(argv[1], "all") != 0) return run(argv[1], n);
  for (const Mode& m : modes)
    if (const int status = run(m.name, n); status != 0) return status;
  std::printf("every mode ran %ld operations\n", n);
  return 0;
}
