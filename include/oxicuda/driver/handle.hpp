// oxicuda/driver/handle.hpp — the ownership machinery shared by every handle: the
// shared state (Owned, counted, held through Shared<T>), and the emptiness
// check every operation on a handle makes.
#pragma once

#include <cstddef>
#include <atomic>
#include <new>
#include <type_traits>
#include <utility>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// The shared state behind oxicuda's handles (a context's owner, an event's
// InContext, a module's or function's State, a graph's) derives from Owned
// and is held through Shared<T>, an intrusive count: the count lives in the
// state, so a handle is one pointer, a copy one atomic increment, and the
// last drop one atomic decrement, the state's destructor (not virtual:
// Shared<T> knows the state's type) and the block's return to a per-thread
// cache. These handles do not use std::shared_ptr: its control block (a
// second count, two virtual calls on the last drop, a malloc per handle)
// cost event creation 5-8% on the H200, against a budget of 1.10x the raw
// create + destroy that Shared<T> meets (1.098x). A Stream is the one
// exception: a std::shared_ptr<CUstream_st> with a named deleter
// (stream.hpp), so that users can hold and adopt it as one; a stream's
// creation costs the driver far more than the control block does.
struct Owned {
  Owned() noexcept = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  mutable std::atomic<long> refs{1};  // the handles sharing this state

 protected:
  ~Owned() = default;  // (not virtual: a state is destroyed as its own type, by Shared<T>)
};

// Every state lives in one block of state_bytes.
inline constexpr std::size_t state_bytes = 128;

// Blocks are recycled through a small per-thread cache: creating a handle
// and dropping it (an event per iteration, a stream per task) then costs no
// malloc and free, which were the largest part of what an oxicuda event's
// create + destroy added to the driver's (measured: about 200 of 400
// instructions, ~15 ns on the H200). The cache holds at most
// block_cache_limit blocks (8 KiB) per thread; a block freed on another
// thread than the one that made it joins that thread's cache. BlockCache is
// trivially destructible, so its storage stays valid until the thread ends.
//
// `room` is 0 until the thread's first free: that free takes the slow path,
// which registers BlockCacheCloser (a thread_local with a destructor) and
// opens the cache. At thread exit the closer gives the cached blocks back
// and closes the cache for good, so a handle dropped later (a static one,
// after the main thread's thread_local objects are gone) frees its block
// directly. (One exception: when the main thread's very first free comes
// after its thread_local objects are gone, from a static destructor, the
// closer registered then never runs, and what that thread caches from then
// on, at most block_cache_limit blocks, is left to the process's exit.) The
// fast paths are a pop and a compare-and-push.
inline constexpr unsigned block_cache_limit = 64;
struct BlockCache {
  void* head = nullptr;  // a singly linked list through the blocks' first bytes
  unsigned count = 0;
  unsigned room = 0;     // block_cache_limit while open
  bool closed = false;
};
inline thread_local constinit BlockCache block_cache;

struct BlockCacheCloser {
  BlockCacheCloser() noexcept = default;
  BlockCacheCloser(const BlockCacheCloser&) = delete;
  BlockCacheCloser& operator=(const BlockCacheCloser&) = delete;
  ~BlockCacheCloser() {
    BlockCache& c = block_cache;
    c.closed = true;
    c.room = 0;
    while (void* b = c.head) {
      c.head = *static_cast<void**>(b);
      ::operator delete(b);
    }
    c.count = 0;
  }
};
inline thread_local BlockCacheCloser block_cache_closer;

// The thread's first free, a full cache, or a closed one.
inline void free_block_slow(void* b) noexcept {
  BlockCache& c = block_cache;
  if (c.closed || c.count == block_cache_limit) {
    ::operator delete(b);
    return;
  }
  (void)&block_cache_closer;  // (its first use registers the exit-time drain)
  c.room = block_cache_limit;
  *static_cast<void**>(b) = c.head;
  c.head = b;
  ++c.count;
}

inline void free_block(void* b) noexcept {
  BlockCache& c = block_cache;
  if (OXICUDA_DETAIL_UNLIKELY(c.count >= c.room)) return free_block_slow(b);
  *static_cast<void**>(b) = c.head;
  c.head = b;
  ++c.count;
}

// A shared handle to a T (derived from Owned, built in a block of its own):
// copies share the one T, destroyed when the last copy drops. The count is
// atomic, as std::shared_ptr's: copies may live and drop on any threads.
template <class T>
class Shared {
  using U = std::remove_const_t<T>;

 public:
  Shared() noexcept = default;
  Shared(const Shared& o) noexcept : state_(o.state_) {
    if (state_) state_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Shared(Shared&& o) noexcept : state_(o.state_) { o.state_ = nullptr; }
  Shared& operator=(const Shared& o) noexcept {
    Shared(o).swap(*this);
    return *this;
  }
  Shared& operator=(Shared&& o) noexcept {
    Shared(static_cast<Shared&&>(o)).swap(*this);
    return *this;
  }
  // A count of 1 means this is the only handle: nothing can copy it as it
  // drops, so the last drop of an unshared state (an event made and
  // dropped) skips the locked decrement, the largest part of what the count
  // costs on the H200.
  ~Shared() {
    if (state_ && (state_->refs.load(std::memory_order_acquire) == 1 ||
                   state_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1))
      destroy(state_);
  }

  // A T made from args, shared: one block holds it, from the thread's
  // cache, else from operator new. A state owns what its arguments hand it
  // (a driver object made just before) and its destructor gives that back:
  // so if operator new fails, new_block makes a T from copies of the same
  // arguments only to destroy it, before the error leaves, and nothing
  // handed over leaks.
  template <class... A>
  [[nodiscard]] static Shared make(A&&... args) {
    BlockCache& c = block_cache;
    void* block = c.head;
    if (OXICUDA_DETAIL_LIKELY(block != nullptr)) {  // the cache's pop
      c.head = *static_cast<void**>(block);
      --c.count;
    } else {
      block = new_block(static_cast<A&&>(args)...);  // (moves from args only when it throws)
    }
    return make_in(block, static_cast<A&&>(args)...);
  }

  [[nodiscard]] T* get() const noexcept { return state_; }
  T* operator->() const noexcept { return state_; }
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }
  [[nodiscard]] long use_count() const noexcept {
    return state_ ? state_->refs.load(std::memory_order_relaxed) : 0;
  }
  void swap(Shared& o) noexcept {
    U* s = state_;
    state_ = o.state_;
    o.state_ = s;
  }

 private:
  // A T built in `block` (from the cache or new_block), which it takes over.
  template <class... A>
  [[nodiscard]] static Shared make_in(void* block, A&&... args) noexcept {
    static_assert(sizeof(U) <= state_bytes && alignof(U) <= alignof(std::max_align_t),
                  "a handle's shared state must fit its block: hold what is larger indirectly");
    static_assert(std::is_base_of_v<Owned, U>, "a handle's shared state derives from detail::Owned");
    static_assert(noexcept(::new (block) U(static_cast<A&&>(args)...)),
                  "a handle's state is constructed without throwing");
    return Shared(::new (block) U(static_cast<A&&>(args)...));
  }
  // A block from operator new; if there is none, a T made from `args` and
  // destroyed at once gives back what they hand it. The T takes the
  // arguments as make_in would (moved, never copied: a copy of a string
  // could itself fail for want of memory, and the driver object would leak).
  // OXICUDA_DETAIL_HAS_EXCEPTIONS, not OXICUDA_EXCEPTIONS: operator new throws
  // wherever the compiler has exceptions, also where oxicuda reports its own
  // errors by handler.
  template <class... B>
  OXICUDA_DETAIL_COLD static void* new_block(B&&... args) {
#if OXICUDA_DETAIL_HAS_EXCEPTIONS
    try {
      return ::operator new(state_bytes);
    } catch (...) {
      static_assert(noexcept(U(static_cast<B&&>(args)...)), "a handle's state is constructed without throwing");
      const U give_back(static_cast<B&&>(args)...);
      throw;
    }
#else
    ((void)args, ...);  // (operator new cannot throw here)
    return ::operator new(state_bytes);
#endif
  }
  explicit Shared(U* state) noexcept : state_(state) {}
  static void destroy(U* state) noexcept {
    state->~U();
    free_block(state);
  }
  U* state_ = nullptr;
};


// The raw handle of `handle`, or an Error (CUDA_ERROR_INVALID_HANDLE) naming
// its `type` and the `operation` when it is empty (default-constructed or
// moved-from). One compare on success. Every handle type checks this way.
template <class Handle>
[[nodiscard]] auto checked(const Handle& handle, const char* type, const char* operation, SourceLocation where) {
  auto raw = handle.raw();
  if (OXICUDA_DETAIL_UNLIKELY(!raw)) empty_handle(type, operation, where);
  return raw;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
