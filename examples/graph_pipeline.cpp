// A captured pipeline (README, "Graphs"): upload, two kernels, download and a
// host function captured from a stream into a graph, replayed, and written
// out as Graphviz DOT.
//   oxicuda-graph-pipeline pipeline.dot && dot -Tsvg pipeline.dot -o pipeline.svg
#include "oxicuda.hpp"

#include <cstdio>
#include <vector>

namespace {

constexpr const char* kPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry scale(.param .u64 p, .param .f32 a, .param .u32 n)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r2, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.f32 %f2, [%rd2];
    mul.f32 %f3, %f2, %f1;
    st.global.f32 [%rd2], %f3;
DONE:
    ret;
}
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace oxicuda;
  const char* dot_path = argc > 1 ? argv[1] : "pipeline.dot";
  try {
    Context ctx = Context::primary(Device::get(0));
    Stream stream{ctx};
    Module m = Module::from_ptx(ctx, kPtx);
    auto scale = m.kernel<void(float*, float, unsigned)>("scale");
    constexpr unsigned n = 1024;
    PinnedBuffer<float> host(ctx, n);
    for (unsigned i = 0; i < n; ++i) host[i] = static_cast<float>(i);
    DeviceBuffer<float> data(ctx, n);
    int replays = 0;

    // Capture: nothing runs here; the work is recorded into the graph.
    Graph graph = capture(stream, [&](const Stream& s) {
      copy_async(s, data, host);
      launch(s, scale, {.grid = n / 256, .block = 256}, data, 2.0f, n);
      launch(s, scale, {.grid = n / 256, .block = 256}, data, 0.5f, n);
      copy_async(s, host, data);
      s.launch_host_func([&replays] { ++replays; });  // runs on every replay
    });
    GraphExec exec{graph};
    for (int i = 0; i < 10; ++i) exec.launch(stream);
    stream.synchronize();

    graph.write_dot(dot_path);
    std::printf("%zu nodes, %d replays, host[3] = %g; DOT written to %s\n", graph.node_count(), replays,
                static_cast<double>(host[3]), dot_path);
    return host[3] == 3.0f && replays == 10 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
