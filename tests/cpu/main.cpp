// The CPU suite's main, the heap-allocation counter the hot-path tests read,
// and out-of-memory on demand for an allocation of a given size.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

// GCC cannot see that these operator new and delete are a matching pair.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<long> allocations{0};
std::atomic<std::size_t> watched_size{0};
std::atomic<long> watched_count{0};
std::atomic<long> fail_at{0};
std::atomic<bool> fail_all{false};
std::atomic<std::size_t> last_size{0};
}  // namespace

long heap_allocations() { return allocations.load(); }
// The size of the last operator new (single object) on any thread.
std::size_t last_allocation_size() { return last_size.load(); }

// Counts the allocations of exactly `bytes` bytes from now on; the
// `fail_nth`-th of them (from 1; 0: none) throws std::bad_alloc.
void watch_allocations_of(std::size_t bytes, long fail_nth) {
  watched_size.store(0);
  watched_count.store(0);
  fail_at.store(fail_nth);
  watched_size.store(bytes);
}
long watched_allocations() { return watched_count.load(); }
// While on, every operator new throws std::bad_alloc (out of memory).
void fail_every_allocation(bool on) { fail_all.store(on); }

void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  last_size.store(n, std::memory_order_relaxed);
  if (fail_all.load(std::memory_order_relaxed)) throw std::bad_alloc();
  if (n != 0 && n == watched_size.load(std::memory_order_relaxed) && watched_count.fetch_add(1) + 1 == fail_at.load())
    throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
