// Built with OXICUDA_NO_EXCEPTIONS while the compiler has exceptions:
// operator new still throws std::bad_alloc there, so a handle whose shared
// state cannot be allocated must give back the driver object it made just
// before, and let the std::bad_alloc through. Runs on the fake driver, whose
// live counts say whether anything was lost.
#define OXICUDA_NO_EXCEPTIONS
#include "oxicuda.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
// Allocations of exactly watched_size bytes are counted; the fail_at-th of
// them (from 1; 0: none) throws std::bad_alloc.
std::atomic<std::size_t> watched_size{0};
std::atomic<long> watched_count{0};
std::atomic<long> fail_at{0};
std::atomic<std::size_t> last_size{0};  // the last allocation's size

void watch(std::size_t bytes, long fail_nth) {
  watched_size = 0;
  watched_count = 0;
  fail_at = fail_nth;
  watched_size = bytes;
}
}  // namespace

void* operator new(std::size_t n) {
  last_size = n;
  if (n != 0 && n == watched_size.load() && watched_count.fetch_add(1) + 1 == fail_at.load()) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

int main() {
  using namespace oxicuda;
  void* fake = dlopen(driver_info().library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto live = fake ? reinterpret_cast<long (*)(const char*)>(dlsym(fake, "fake_live")) : nullptr;
  if (!live) {
    std::puts("needs the fake driver (OXICUDA_LIBCUDA_PATH)");
    return 1;
  }
  int failures = 0;
  const Context ctx = Context::create(Device::get(0));
  // For each kind: make one and hold it (so that its block stays taken and
  // this thread's cache of free blocks stays empty), counting the
  // allocations of a state's size on the way; the state's block is the last
  // of them. Making a second, that allocation fails: std::bad_alloc must come
  // out, and the driver object made before it must be given back.
  auto fails_cleanly = [&](const char* kind, auto make, std::size_t state_size = detail::state_bytes) {
    watch(state_size, 0);
    auto held = make();
    const long nth = watched_count.load();
    const long before = live(kind);
    bool threw = false;
    watch(state_size, nth);
    try {
      (void)make();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    watch(0, 0);
    const long after = live(kind);
    const bool ok = threw && nth > 0 && after == before;
    std::printf("%s: %s (state allocations %ld, std::bad_alloc %s, live %ld -> %ld)\n", ok ? "ok" : "FAILED", kind,
                nth, threw ? "thrown" : "not thrown", before, after);
    failures += ok ? 0 : 1;
    return held;
  };
  const Event e = fails_cleanly("event", [&] { return Event{ctx}; });
  // A Stream's state is its std::shared_ptr's control block, the last
  // allocation of a Stream's making (its deleter destroys the stream when
  // that allocation fails).
  std::size_t control_block = 0;
  {
    const Stream probe{ctx};
    control_block = last_size.load();
  }
  const Stream s = fails_cleanly("stream", [&] { return Stream{ctx}; }, control_block);
  const Context c = fails_cleanly("context", [] { return Context::create(Device::get(0)); });
  const Graph g = fails_cleanly("graph", [&] { return Graph{ctx}; });
  const GraphExec x = fails_cleanly("graph_exec", [&] { return GraphExec{g}; });
  return failures == 0 ? 0 : 1;
}
