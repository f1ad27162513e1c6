// Every entry point, every failure: for each public operation, every call
// it makes to the driver, NVRTC or nvJitLink is made to fail in turn (the
// fakes' fault injection). Each time, an oxicuda::Error must surface with that
// library's result and that call's name — or, when the call was made by a destructor, the diagnostic hook
// must receive it — and the fake's live-handle counts must be back where
// they started: nothing leaked, nothing destroyed twice, the thread's
// current context as it was. The coverage line counts the entry points of
// each table that were failed this way, per library; the test fails unless
// it is all of them.
#include <doctest/doctest.h>

#include "fake_driver.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/eventfd.h>
#include <unistd.h>

using namespace oxicuda;

namespace {

constexpr ffi::CUresult kInjected = ffi::CUDA_ERROR_UNKNOWN;

struct Op {
  const char* name;
  std::function<void()> run;
  // Calls whose failure this operation survives by design: reading a log
  // on a path that is already failing (the first failure is the error).
  std::set<std::string> tolerated = {};
  // A failed destroy that keeps one more object alive, by the driver's
  // rules: {entry, kind} (memory a pool still has out keeps the pool).
  std::pair<std::string, const char*> also_kept = {};
};

const std::string kSource = std::string(kFakePtx) +
                            ".visible .entry fake_saxpy_float_(.param .u64 y, .param .u64 x, .param .f32 a, "
                            ".param .u32 n)\n{ ret; }\n";

// Rethrows anything but the error `code` that the operation expects.
template <class F>
void expect_error(std::error_code code, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() != code) throw;
    return;
  }
  throw std::logic_error("the operation did not fail as expected");
}

std::vector<Op> operations() {
  return {
      {"an error's description",
       [] {
         // The driver's text, or — when cuGetErrorString itself fails — the header's own.
         const Error e(ffi::CUDA_ERROR_OUT_OF_MEMORY, "an operation");
         const std::string table = detail::result_text<Library::driver>(ffi::CUDA_ERROR_OUT_OF_MEMORY)->text;
         if (e.description() != table + " [fake driver]" && e.description() != table)
           throw std::logic_error("unexpected description: " + e.description());
       }},
      {"devices and the driver",
       [] {
         (void)driver_version();
         const Device d = Device::get(0);
         (void)d.name();
         (void)d.compute_capability();
         (void)d.total_memory();
         (void)d.uuid();
         (void)d.pci_bus_id();
       }},
      {"the primary context",
       [] {
         Context ctx = Context::primary(Device::get(0));
         ctx.synchronize();
         (void)ctx.stream_priority_range();
         (void)ctx.memory_info();
         (void)ctx.id();
         (void)Context::borrow(ctx.raw()).device();
       }},
      {"a created context", [] { Context ctx = Context::create(Device::get(0)); }},
      {"profiler ranges, nested",
       [] {
         const Context ctx = Context::primary(Device::get(0));
         ProfilerRange outer(ctx);
         { ProfilerRange inner(ctx); }
       }},
      {"streams and events",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream a(ctx), b(ctx, {.priority = -1});
         Event start(ctx), stop(ctx);
         a.record(start);
         b.wait(start);
         a.record(stop);
         (void)a.ready();
         a.synchronize();
         (void)b.priority();
         (void)b.non_blocking();
         (void)Stream::borrow(a.raw());
         stop.synchronize();
         (void)stop.ready();
         (void)Event::elapsed(start, stop);
         a.launch_host_func([] {});
         a.synchronize();  // the callable has run: this reclaims it
       }},
      {"modules and launches",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         Module m = Module::from_ptx(ctx, kFakePtx);
         auto k = m.kernel<void(float*, unsigned)>("dbl");
         const Function& f = k.function();
         (void)f.num_registers();
         f.set_attribute(ffi::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50);
         (void)f.max_active_blocks_per_multiprocessor(128);
         (void)f.suggested_block_size();
         launch(s, k, {.grid = 2, .block = 64}, static_cast<float*>(nullptr), 0);
         launch(s, k, {.grid = 2, .block = 64, .cluster = {2}}, static_cast<float*>(nullptr), 0);
         launch(s, k, {.shared_bytes = 64 * 1024}, static_cast<float*>(nullptr), 0);
       }},
      {"a module's global",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Module m = Module::from_ptx(ctx, ".version 8.0\n.target sm_90\n.visible .global .align 4 .u32 g;\n");
         const DeviceSpan<unsigned> g = m.global<unsigned>("g");
         std::vector<unsigned> host{7};
         copy(g, host);
       }},
      {"libraries and their kernels",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         KernelLibrary lib = KernelLibrary::from_ptx(std::string(kFakePtx) +
                                                     ".visible .global .align 4 .u32 g;\n"
                                                     ".visible .global .attribute(.managed) .align 4 .u32 m;\n");
         auto k = lib.kernel<void(float*, unsigned)>("dbl");
         (void)lib.kernel_names();
         (void)k.for_context(ctx);
         (void)lib.raw_module(ctx);
         (void)lib.global<unsigned>(ctx, "g");
         (void)lib.managed<unsigned>("m");
         launch(s, k, {.grid = 1, .block = 32}, static_cast<float*>(nullptr), 0);
         s.synchronize();
       }},
      {"a library from a file",
       [] {
         char path[] = "/tmp/oxicuda-fault-library-XXXXXX";
         const int fd = ::mkstemp(path);
         if (fd < 0) throw std::runtime_error("mkstemp");
         const std::string text(kFakePtx);
         const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
         ::close(fd);
         struct Remove {
           const char* p;
           ~Remove() { std::remove(p); }
         } remove{path};
         if (!written) throw std::runtime_error("write");
         (void)KernelLibrary::from_file(path);
       }},
      {"a primary context's reset", [] { Context::reset_primary(Device::get(0)); }},
      {"limits and cache preferences",
       [] {
         Context ctx = Context::primary(Device::get(0));
         set_limit(ctx, Limit::printf_fifo_size, 2u << 20);
         (void)get_limit(ctx, Limit::printf_fifo_size);
         set_cache_config(ctx, CacheConfig::prefer_shared);
         (void)get_cache_config(ctx);
         Module m = Module::from_ptx(ctx, kFakePtx);
         m.function("dbl").set_cache_config(CacheConfig::prefer_l1);
       }},
      {"kernels by their C++ names (an nvcc image's mangled names)",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Module m = Module::from_ptx(ctx, ".version 7.0\n.target sm_70\n.address_size 64\n"
                                          ".visible .entry _ZN2ns5scaleEPfi(.param .u64 p, .param .u32 n)\n{ ret; }\n");
         (void)m.kernel_names();
         (void)m.function("ns::scale");
       }},
      {"peer access and peer copies, on two devices",
       [] {
         struct Two {
           Two() { Fake::get().set_device_count(2); }
           ~Two() { Fake::get().set_device_count(1); }
         } two;
         (void)Device::all();
         (void)can_access_peer(Device::get(0), Device::get(1));
         (void)peer_attributes(Device::get(0), Device::get(1));
         Context c0 = Context::primary(Device::get(0));
         Context c1 = Context::primary(Device::get(1));
         enable_peer_access(c0, c1);
         disable_peer_access(c0, c1);
         DeviceBuffer<int> a(c0, 8), b(c1, 8);
         copy_peer(b, a);
         const DevicePool pool = DevicePool::all();
         (void)pool.most_free_memory();
         pool.synchronize();
       }},
      {"launch attributes: a stream's access-policy window, a kernel node's attributes",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         DeviceBuffer<float> x(ctx, 64);
         set_access_policy_window(s, AccessPolicyWindow::over(x));
         (void)access_policy_window(s);
         const Module m = Module::from_ptx(ctx, kSource);
         Graph g{ctx};
         (void)g.add_kernel({}, m.kernel<void(float*, const float*, float, unsigned)>("fake_saxpy_float_"),
                            {.grid = 1, .block = 64, .priority = -1}, x, x, 2.0f, 64u);
         launch(s, m.kernel<void(float*, const float*, float, unsigned)>("fake_saxpy_float_"),
                {.grid = 1, .block = 64, .programmatic = true}, x, x, 2.0f, 64u);
         s.synchronize();
       }},
      {"2D memory and copies, pools of one's own",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         PitchedBuffer<float> p(ctx, 10, 4);
         std::vector<float> host(40, 1.0f);
         copy_2d(p, view_2d(host, 10, 4));
         copy_2d_async(s, view_2d(host, 10, 4), p);
         s.synchronize();
         const MemoryPool pool = MemoryPool::create(Device::get(0), {.release_threshold = 1024});
         pool.set_access(Device::get(0), PoolAccess::read_write);
         (void)pool.access(Device::get(0));
         auto b = DeviceBuffer<float>::allocate_async(s, 16, pool);
       },
       {},
       {"cuMemFreeAsync", "pool"}},
      {"tensor maps, tiled and im2col",
       [] {
         Context ctx = Context::primary(Device::get(0));
         DeviceBuffer<float> buf(ctx, 4096);
         (void)TensorMap::tiled(buf, {64, 64}, {}, {32, 32});
         (void)TensorMap::im2col(buf, {8, 16, 4}, {},
                                 {.lower_corner = {0}, .upper_corner = {0}, .channels_per_pixel = 8, .pixels_per_column = 16});
       }},
      {"managed memory, registered host memory, pointer queries",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         ManagedBuffer<float> m(ctx, 16);
         prefetch_async(s, m, MemoryLocation::device(Device::get(0)));
         advise(m, Advice::set_read_mostly, MemoryLocation::host());
         // Host memory of its own each run, kept to the end of the process:
         // a run whose cuMemHostUnregister fails leaves its registration in
         // the fake (the driver said no), and memory freed and handed out
         // again at that address would be "already registered" in a later
         // run (it was, in CI's clang++-16 build).
         static std::vector<std::unique_ptr<float[]>> hosts;
         hosts.push_back(std::make_unique<float[]>(16));
         HostRegistration<float> r(ctx, std::span<float>(hosts.back().get(), 16), {.device_map = true});
         (void)pointer_info(m);
         (void)pointer_info(hosts.back().get());
       }},
      {"batched copies, prefetches and discards (issue 25, capability 3)",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         std::vector<float> h(8, 1.0f);
         DeviceBuffer<float> d(ctx, 8), e(ctx, 8);
         copy_batch(s, {{d, h}, {e, d, {.source_access = SourceAccess::during_call}}, {h, e}});
         ManagedBuffer<float> m(ctx, 16);
         prefetch_batch(s, {{m.subspan(0, 8), MemoryLocation::device(Device::get(0))}, {m.subspan(8), MemoryLocation::host()}});
         discard_batch(s, {m.subspan(0, 4)});
         discard_and_prefetch_batch(s, {{m, MemoryLocation::host()}});
         s.synchronize();
       }},
      {"IPC: memory and an event exported, opened as if in another process, closed",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         DeviceBuffer<int> b(ctx, 16);
         Event e(ctx, {.timing = false, .interprocess = true});
         const IpcMemoryHandle h = as_if_exported_elsewhere(ipc_export(b));
         const IpcEventHandle eh = as_if_exported_elsewhere(ipc_export(e));
         OtherProcess other;
         IpcMemory<int> m(ctx, h);
         Event opened(ctx, eh);
         s.wait(opened);
       }},
      {"green contexts: the SMs split, a green context, its SMs, a stream in it and which green context it runs on",
       [] {
         const SmSplit halves = SmResource::of(Device::get(0)).split(2, 8);
         GreenContext g(halves.group(0));
         (void)g.sms();
         Stream s = g.stream();
         (void)green_context_of(s);
       }},
      {"virtual memory: reserved, created, mapped, access set and read, exported and imported, grown",
       [] {
         Context ctx = Context::primary(Device::get(0));
         const std::size_t g = allocation_granularity(Device::get(0));
         const VirtualRange range = VirtualRange::reserve(ctx, 2 * g);
         const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
         const Mapping m(range, 0, memory);
         m.set_access(Device::get(0), MemoryAccess::read_write);
         (void)m.access(Device::get(0));
         const PhysicalMemory imported = import_fd(ctx, export_fd(memory).get(), g);
         const Mapping again(range, g, imported, MemoryAccess::none);
         GrowableBuffer<int> b(ctx, 2 * g / sizeof(int), 1);
         b.resize(g / sizeof(int) + 1);
       }},
      {"external memory and semaphores: imported, mapped, signalled and waited for",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         const std::size_t g = allocation_granularity(Device::get(0));
         const PhysicalMemory memory = PhysicalMemory::create(ctx, g, {.exportable = ExportKind::posix_fd});
         const ExternalMemory ext = ExternalMemory::import_fd(ctx, export_fd(memory), g);
         const DeviceBuffer<int> b = ext.mapped_buffer<int>(0, 4);
         const ExternalSemaphore sem = ExternalSemaphore::import_fd(ctx, FileDescriptor(::eventfd(0, EFD_CLOEXEC)),
                                                                    ExternalSemaphoreType::timeline_fd);
         sem.signal(s, 1);
         sem.wait(s, 1);
       }},
      {"checkpointing: this process locked, checkpointed, restored, unlocked",
       [] {
         const int pid = static_cast<int>(::getpid());
         (void)process_state(pid);
         lock_process(pid);
         checkpoint_process(pid);
         restore_process(pid);
         unlock_process(pid);
         (void)restore_thread_id(pid);
       }},
      {"memory",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         std::vector<unsigned> host(64, 1);
         DeviceBuffer<unsigned> a(ctx, 64), b(ctx, 64);
         PinnedBuffer<unsigned> pinned(ctx, 64);
         PinnedBuffer<unsigned> mapped(ctx, 64, {.device_map = true});
         (void)mapped.mapped_span();
         copy(a, host);
         copy(b, a);
         copy(host, b);
         copy_async(s, a, pinned);
         copy_async(s, b, a);
         copy_async(s, pinned, b);
         fill(a, 1u);
         fill_bytes(a, 0);
         fill_async(s, a, 2u);
         fill_bytes_async(s, a, 3);
         DeviceBuffer<std::int16_t> half(ctx, 8);
         DeviceBuffer<double> wide(ctx, 8);
         fill(half, std::int16_t{1});
         fill_async(s, wide, 1.0);
         auto c = DeviceBuffer<unsigned>::allocate_async(s, 64);
         MemoryPool pool = MemoryPool::device_default(Device::get(0));
         pool.set_release_threshold(0);
         (void)pool.used_bytes();
         pool.trim_to(0);
       }},
      {"runtime compilation",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Program p(kSource, "k.cu");
         p.header("util.cuh", "").name_expression("saxpy<float>");
         (void)p.compile({.arch = "compute_75"});
         (void)p.compile({.arch = "sm_90"});
         (void)p.compile({.arch = "sm_90", .lto = true});
         (void)nvrtc_version();
         (void)arch_for(Device::get(0));
         Module m = module_from_source(
             ctx, kSource, {.compile = {.arch = "compute_75"}, .name_expressions = {"saxpy<float>"}, .cache = false});
         (void)m.kernel<void(float*, const float*, float, unsigned)>("saxpy<float>");
       }},
      {"a failed compile",
       [] { expect_error(ffi::NVRTC_ERROR_COMPILATION, [] { (void)Program("#error x").compile(); }); },
       {"nvrtcGetProgramLogSize", "nvrtcGetProgramLog"}},
      {"LTO linking",
       [] {
         const Compiled c = Program(kSource).compile({.arch = "sm_90", .lto = true});
         LtoLinker l("sm_90");
         l.add(c);
         (void)l.complete();
         (void)l.info_log();
         (void)nvjitlink_version();
       }},
      {"a failed LTO link",
       [] {
         const Compiled c = Program("frob").compile({.arch = "sm_90", .lto = true});
         LtoLinker l("sm_90");
         expect_error(ffi::NVJITLINK_ERROR_PTX_COMPILE, [&] { l.add(c); });
       },
       {"nvJitLinkGetErrorLogSize", "nvJitLinkGetErrorLog"}},
      {"the JIT linker",
       [] {
         Context ctx = Context::primary(Device::get(0));
         const std::string path = std::string("/tmp/oxicuda-fault-") + std::to_string(::getpid()) + ".ptx";
         if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
           std::fputs(kFakePtx, f);
           std::fclose(f);
         }
         struct Remove {
           std::string p;
           ~Remove() { std::remove(p.c_str()); }
         } remove{path};
         Linker l(ctx);
         l.add_ptx(kFakePtx);
         l.add_file(LinkInput::ptx, path);
         Module m = l.load();
       }},
      {"graphs: built, instantiated, launched, updated",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         Module m = Module::from_ptx(ctx, kFakePtx);
         auto k = m.kernel<void(float*, unsigned)>("dbl");
         DeviceBuffer<float> x(ctx, 64);
         PinnedBuffer<float> host(ctx, 64);
         Event e(ctx);
         Graph child(ctx);
         (void)child.add_empty({});
         Graph g(ctx);
         GraphAllocation<float> tmp = g.add_alloc<float>({}, 64);
         GraphNode set = g.add_fill(tmp.node, tmp.span, 1.0f);
         GraphNode free = g.add_free(set, tmp.span);
         GraphNode kn = g.add_kernel(free, k, {.grid = 1, .block = 64}, x, 64);
         GraphNode cp = g.add_copy(kn, host, x);
         GraphNode fl = g.add_fill({}, x, 2.0f);
         GraphNode rec = g.add_event_record(fl, e);
         GraphNode wait = g.add_event_wait(rec, e);
         GraphNode sub = g.add_child(wait, child);
         g.depend(sub, kn);
         (void)kn.type();
         (void)g.node_count();
         ConditionalHandle h = g.conditional_handle(0);
         ConditionalNode c = g.add_if(cp, h);
         (void)c.body.add_empty({});
         IfElseNode ie = g.add_if_else(cp, h);
         (void)ie.else_body.add_empty({});
         SwitchNode sw = g.add_switch(cp, h, 2);
         (void)sw.bodies[1].add_empty({});
         Graph nested(ctx);
         (void)nested.add_child({}, child);
         (void)c.body.add_child({}, nested);  // its nodes checked for the body's rule, child graphs too
         (void)g.nodes();
         (void)kn.dependencies();
         (void)kn.dependents();
         (void)g.dot();
         Graph copy = child.clone();  // (a graph with allocation nodes cannot be cloned)
         GraphExec exec(g, {.upload = s});
         exec.launch(s);
         exec.upload(s);
         exec.update(g);
         exec.set_kernel(kn, k, {.grid = 1, .block = 64}, x, 32);
         exec.set_copy(cp, host, x);
         exec.set_fill(fl, x, 3.0f);
       }},
      {"graphs: an allocation owned after the launch (adopt_async), a free node for it in another graph",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         Graph g(ctx);
         GraphAllocation<float> mem = g.add_alloc<float>({}, 64);
         (void)g.add_fill(mem.node, mem.span, 1.0f);
         GraphExec exec(g);
         Graph frees(ctx);
         (void)frees.add_free({}, mem.span);
         GraphExec free_exec(frees);
         exec.launch(s);  // (then owned at once: nothing left live when a later call fails)
         DeviceBuffer<float> owned = DeviceBuffer<float>::adopt_async(mem.span, s);
         s.synchronize();
       }},
      {"graphs: host nodes, capture, host functions captured, the step helper",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         DeviceBuffer<float> x(ctx, 64);
         {
           Graph g(ctx);
           (void)g.add_host({}, [] {});
           Graph copy = g.clone();
           Graph parent(ctx);
           (void)parent.add_child({}, g);
         }
         (void)capture_status(s);
         Graph captured = capture(s, [&](const Stream& q) {
           fill_async(q, x, 1.0f);
           q.launch_host_func([] {});
         });
         GraphedStep step{[&](const Stream& q, float v) { fill_async(q, x, v); }};
         step(s, 1.0f);
         step(s, 2.0f);
         s.synchronize();
       }},
      {"graphs: capture into a graph after its nodes, capture info, dependencies updated by hand",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         DeviceBuffer<float> x(ctx, 64);
         Graph g(ctx);
         GraphNode first = g.add_fill({}, x, 1.0f);
         ScopedCapture scope{s, g, first};
         fill_async(s, x, 2.0f);
         const CaptureInfo info = capture_info(s);
         GraphNode mine = info.graph.add_empty(info.dependencies);
         update_capture_dependencies(s, mine, CaptureDependencies::set);
         fill_async(s, x, 3.0f);
         Graph back = scope.end();
         (void)back.node_count();
       }},
  };
}

std::vector<Error> reported;
void capture(const Error& e) noexcept { reported.push_back(e); }

}  // namespace

// One library's table as the test drives it.
struct Table {
  const char* library;
  const ffi::EntryInfo* entries;
  std::size_t count;
  std::function<void()> reset;
  std::function<long(const char*)> calls;
  std::function<void(const char*, long)> fail;  // with the library's injected result
  std::error_code injected;
  std::function<long()> live;  // the library's own live objects (0 for the driver: LiveCounts has them)
  const char* destroyer;       // the entry that destroys one of them
};

TEST_CASE("fault injection: every call of every operation, failed in turn, for the driver, NVRTC and nvJitLink") {
  Fake& fake = Fake::get();
  FakeToolkit& nvrtc = FakeToolkit::nvrtc();
  FakeToolkit& jitlink = FakeToolkit::nvjitlink();
  const Table tables[] = {
      {"driver", ffi::entries, ffi::entry_count, [&] { fake.reset(); }, [&](const char* n) { return fake.calls(n); },
       [&](const char* n, long nth) { fake.fail(n, nth, kInjected); }, kInjected, [] { return 0L; }, ""},
      {"NVRTC", ffi::nvrtc::entries, ffi::nvrtc::entry_count, [&] { nvrtc.reset(); },
       [&](const char* n) { return nvrtc.calls(n); },
       [&](const char* n, long nth) { nvrtc.fail(n, nth, ffi::NVRTC_ERROR_INTERNAL_ERROR); },
       ffi::NVRTC_ERROR_INTERNAL_ERROR, [&] { return nvrtc.live(); }, "nvrtcDestroyProgram"},
      {"nvJitLink", ffi::nvjitlink::entries, ffi::nvjitlink::entry_count, [&] { jitlink.reset(); },
       [&](const char* n) { return jitlink.calls(n); },
       [&](const char* n, long nth) { jitlink.fail(n, nth, ffi::NVJITLINK_ERROR_INTERNAL); },
       ffi::NVJITLINK_ERROR_INTERNAL, [&] { return jitlink.live(); }, "nvJitLinkDestroy"},
  };
  auto reset_all = [&] {
    for (const Table& t : tables) t.reset();
  };
  const long primary_at_start = LiveCounts::take(fake).primary;
  DiagnosticHook previous = set_diagnostic_hook(capture);
  std::set<std::string> failed_entries;
  int injections = 0;

  for (const Op& op : operations()) {
    // A clean run: what does the operation call, and how often?
    reset_all();
    reported.clear();
    REQUIRE_NOTHROW(op.run());
    REQUIRE(reported.empty());
    struct Call {
      const Table* table;
      std::string entry;
      long count;
    };
    std::vector<Call> calls;
    for (const Table& t : tables)
      for (std::size_t i = 0; i < t.count; ++i)
        if (long n = t.calls(t.entries[i].name); n > 0) calls.push_back({&t, t.entries[i].name, n});

    for (const auto& [table, entry, count] : calls) {
      for (long nth = 1; nth <= count; ++nth) {
        const std::string operation = op.name;
        CAPTURE(operation);
        CAPTURE(entry);
        CAPTURE(nth);
        reset_all();
        reported.clear();
        const LiveCounts before = LiveCounts::take(fake);
        const long before_own = table->live();
        table->fail(entry.c_str(), nth);
        bool thrown = false;
        try {
          op.run();
        } catch (const Error& e) {
          thrown = true;
          CHECK(e.code() == table->injected);
          CHECK(e.call() == entry);
        }
        ++injections;
        failed_entries.insert(entry);
        // cuGetErrorString is asked while an Error is built: when it fails,
        // the header's own text stands in (checked by the operation), and
        // nothing else changes. A log read on a failing path is the same.
        // Relaxing the capture mode to destroy finished host callables
        // happens when the driver's thread has retired one, which varies
        // from run to run: when it fails, they wait for the next reclaim
        // (restoring the mode is reported).
        if (entry == "cuThreadExchangeStreamCaptureMode") {
          CHECK_FALSE(thrown);
          for (const Error& r : reported) CHECK(r.call() == entry);
          // A refused restore leaves the thread relaxed: set it back for the next run.
          ffi::CUstreamCaptureMode global = ffi::CU_STREAM_CAPTURE_MODE_GLOBAL;
          REQUIRE(detail::api().ThreadExchangeStreamCaptureMode(&global) == ffi::CUDA_SUCCESS);
          continue;
        }
        if (entry == "cuGetErrorString" || op.tolerated.count(entry)) {
          CHECK_FALSE(thrown);
          CHECK(reported.empty());
          continue;
        }
        if (!thrown) {
          // The failure happened in a destructor: reported, never thrown.
          REQUIRE(reported.size() == 1);
          CHECK(reported[0].code() == table->injected);
          CHECK(reported[0].call() == entry);
        } else {
          CHECK(reported.empty());
        }
        // Nothing leaked, nothing destroyed twice, the current context restored.
        LiveCounts after = LiveCounts::take(fake);
        // A failed destroy leaves the object alive in the fake (the driver
        // said no); that one object is expected to remain.
        if (const LiveKind* kind = kind_destroyed_by(entry); kind && !thrown) --(after.*kind->count);
        if (entry == op.also_kept.first && !thrown)
          for (const LiveKind& kind : live_kinds)
            if (std::string_view(kind.name) == op.also_kept.second) --(after.*kind.count);
        for (const LiveKind& kind : live_kinds) {
          INFO("live " << std::string(kind.name));
          CHECK(after.*kind.count == before.*kind.count);
        }
        CHECK(table->live() - (entry == table->destroyer && !thrown ? 1 : 0) == before_own);
        CHECK(fake.invalid_destroys() == 0);
        CHECK(nvrtc.invalid_destroys() == 0);
        CHECK(jitlink.invalid_destroys() == 0);
        if (entry == "cuCtxSetCurrent" && !thrown) {
          // The driver refused to restore the previous context (reported
          // above); nothing more can be done about it. Clean up for the next run.
          REQUIRE(detail::api().CtxSetCurrent(nullptr) == ffi::CUDA_SUCCESS);
        }
        CHECK(Context::current().raw() == nullptr);
      }
    }
  }
  set_diagnostic_hook(previous);
  // Each refused cuDevicePrimaryCtxRelease above left a retain in the fake
  // (the driver said no): give them back, so that a later test's primary
  // context is released by its own last holder, as on a real driver.
  // The retains may be of device 1 too (the operations on two devices),
  // which held none at the start: those first. A release refused by a
  // device with none left is counted by the fake as a bad destroy,
  // forgotten below.
  fake.set_device_count(2);
  for (long n = LiveCounts::take(fake).primary; n > primary_at_start; --n)
    if (detail::api().DevicePrimaryCtxRelease(1) != ffi::CUDA_SUCCESS)
      REQUIRE(detail::api().DevicePrimaryCtxRelease(0) == ffi::CUDA_SUCCESS);
  fake.set_device_count(1);
  fake.reset();
  CHECK(LiveCounts::take(fake).primary == primary_at_start);

  // The loader's own entry points fail in processes of their own (below).
  const char* loader = std::getenv("OXICUDA_LOADER_TESTS");
  const char* lib = std::getenv("OXICUDA_LIBCUDA_PATH");
  REQUIRE(loader);
  for (const char* entry : {"cuInit", "cuGetProcAddress"}) {
    const std::string cmd = std::string("FAKE_CUDA_FAIL=") + entry + ":1:999 OXICUDA_LIBCUDA_PATH='" + lib + "' '" +
                            loader + "' '--test-case=loader: injected failure of " + entry + "' > /dev/null";
    CAPTURE(cmd);
    CHECK(std::system(cmd.c_str()) == 0);
    failed_entries.insert(entry);
  }

  // The coverage line, per library.
  std::string line = "fault injection:";
  std::size_t all = 0;
  for (const Table& t : tables) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < t.count; ++i) {
      INFO("never failed: " << std::string(t.entries[i].name));
      CHECK(failed_entries.count(t.entries[i].name) == 1);
      n += failed_entries.count(t.entries[i].name);
    }
    all += t.count;
    line += std::string(all == t.count ? " " : ", ") + t.library + " " + std::to_string(n) + "/" + std::to_string(t.count);
  }
  std::printf("%s entry points (%d injected failures)\n", line.c_str(), injections);
  CHECK(failed_entries.size() == all);
}
