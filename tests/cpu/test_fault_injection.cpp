// Every entry point, every failure: for each public operation, every driver
// call it makes is made to fail in turn (the fake's fault injection). Each
// time, an oxicuda::Error must surface with that CUresult and that call's
// name — or, when the call was made by a destructor, the diagnostic hook
// must receive it — and the fake's live-handle counts must be back where
// they started: nothing leaked, nothing destroyed twice, the thread's
// current context as it was. The coverage line counts the entry points of
// the table that were failed this way; the test fails unless it is all of
// them.
#include <doctest/doctest.h>

#include "fake_driver.hpp"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace oxicuda;

namespace {

constexpr ffi::CUresult kInjected = ffi::CUDA_ERROR_UNKNOWN;

struct Op {
  const char* name;
  std::function<void()> run;
};

std::vector<Op> operations() {
  return {
      {"an error's description",
       [] {
         // The driver's text, or — when cuGetErrorString itself fails — the header's own.
         const Error e(ffi::CUDA_ERROR_OUT_OF_MEMORY, "an operation");
         const std::string table = detail::result_text(ffi::CUDA_ERROR_OUT_OF_MEMORY)->text;
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
         (void)Context::borrow(ctx.raw()).device();
       }},
      {"a created context", [] { Context ctx = Context::create(Device::get(0)); }},
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
      {"memory",
       [] {
         Context ctx = Context::primary(Device::get(0));
         Stream s(ctx);
         std::vector<unsigned> host(64, 1);
         DeviceBuffer<unsigned> a(ctx, 64), b(ctx, 64);
         PinnedBuffer<unsigned> pinned(ctx, 64);
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
         auto c = DeviceBuffer<unsigned>::allocate_async(s, 64);
         MemoryPool pool = MemoryPool::device_default(Device::get(0));
         pool.set_release_threshold(0);
         (void)pool.used_bytes();
         pool.trim_to(0);
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
         (void)g.dot();
         Graph copy = g.clone();
         GraphExec exec(g, {.upload = s});
         exec.launch(s);
         exec.upload(s);
         exec.update(g);
         exec.set_kernel(kn, k, {.grid = 1, .block = 64}, x, 32);
         exec.set_copy(cp, host, x);
         exec.set_fill(fl, x, 3.0f);
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
  };
}

std::vector<Error> reported;
void capture(const Error& e) noexcept { reported.push_back(e); }

}  // namespace

TEST_CASE("fault injection: every driver call of every operation, failed in turn") {
  Fake& fake = Fake::get();
  DiagnosticHook previous = set_diagnostic_hook(capture);
  std::set<std::string> failed_entries;
  int injections = 0;

  for (const Op& op : operations()) {
    // A clean run: what does the operation call, and how often?
    fake.reset();
    reported.clear();
    REQUIRE_NOTHROW(op.run());
    REQUIRE(reported.empty());
    std::vector<std::pair<std::string, long>> calls;
    for (const auto& e : ffi::entries)
      if (long n = fake.calls(e.name); n > 0) calls.emplace_back(e.name, n);

    for (const auto& [entry, count] : calls) {
      for (long nth = 1; nth <= count; ++nth) {
        const std::string operation = op.name;
        CAPTURE(operation);
        CAPTURE(entry);
        CAPTURE(nth);
        fake.reset();
        reported.clear();
        const LiveCounts before = LiveCounts::take(fake);
        fake.fail(entry.c_str(), nth, kInjected);
        bool thrown = false;
        try {
          op.run();
        } catch (const Error& e) {
          thrown = true;
          CHECK(e.result() == kInjected);
          CHECK(e.name() == "CUDA_ERROR_UNKNOWN");
          CHECK(e.call() == entry);
        }
        ++injections;
        failed_entries.insert(entry);
        // cuGetErrorString is asked while an Error is built: when it fails,
        // the header's own text stands in (checked by the operation), and
        // nothing else changes.
        if (entry == "cuGetErrorString") {
          CHECK_FALSE(thrown);
          CHECK(reported.empty());
          continue;
        }
        if (!thrown) {
          // The failure happened in a destructor: reported, never thrown.
          REQUIRE(reported.size() == 1);
          CHECK(reported[0].result() == kInjected);
          CHECK(reported[0].call() == entry);
        } else {
          CHECK(reported.empty());
        }
        // Nothing leaked, nothing destroyed twice, the current context restored.
        LiveCounts after = LiveCounts::take(fake);
        // A failed destroy leaves the object alive in the fake (the driver
        // said no); that one object is expected to remain.
        if (const LiveKind* kind = kind_destroyed_by(entry); kind && !thrown) --(after.*kind->count);
        for (const LiveKind& kind : live_kinds) {
          INFO("live " << std::string(kind.name));
          CHECK(after.*kind.count == before.*kind.count);
        }
        CHECK(fake.invalid_destroys() == 0);
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

  std::printf("fault injection: %zu/%zu entry points (%d injected failures)\n", failed_entries.size(),
              ffi::entry_count, injections);
  for (const auto& e : ffi::entries) {
    INFO("never failed: " << std::string(e.name));
    CHECK(failed_entries.count(e.name) == 1);
  }
  CHECK(failed_entries.size() == ffi::entry_count);
}
