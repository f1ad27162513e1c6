// oxicuda/handle.hpp — the ownership machinery shared by every handle: the
// one shared-state type (Owned, held through Shared<T>), and the emptiness
// check every operation on a handle makes.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "error.hpp"

OXICUDA_NAMESPACE_BEGIN

namespace detail {

// The shared state behind oxicuda's handles (a context's owner, a stream's
// or event's InContext, a module's or function's State) derives from Owned
// and is held through Shared<T>: every such state then shares one
// control-block type, std::shared_ptr<const Owned>, which keeps the header
// cheap to compile (each std::shared_ptr<T> or std::make_shared<T>
// instantiates a family of templates per T).
struct Owned {
  Owned() noexcept = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  virtual ~Owned() = default;
};

// Every state lives in one block of its own: the state first (up to
// state_bytes), then the std::shared_ptr control block (up to control_bytes),
// which SlotAllocator places there instead of allocating it. So a handle's
// creation makes one allocation, and the header instantiates one
// control-block type, for std::shared_ptr<const Owned> with SlotDestroy and
// SlotAllocator, whatever the state's type (std::make_shared would add a
// family of templates per type, the largest part of the header's compile
// time).
inline constexpr std::size_t state_bytes = 128, control_bytes = 64;

inline constexpr std::size_t block_bytes = state_bytes + control_bytes;

// Blocks are recycled through a small per-thread cache: creating a handle
// and dropping it (an event per iteration, a stream per task) then costs no
// malloc and free, which were the largest part of what an oxicuda event's
// create + destroy added to the driver's (measured: about 200 of 400
// instructions, ~15 ns on the H200). The cache holds at most
// block_cache_limit blocks (12 KiB) per thread; a block freed on another
// thread than the one that made it joins that thread's cache. At thread exit
// BlockCacheCloser gives the cached blocks back and closes the cache, so a
// handle dropped later (a static one, after the main thread's thread_local
// objects are gone) frees its block directly. BlockCache is trivially
// destructible, so its storage stays valid until the thread ends.
inline constexpr unsigned block_cache_limit = 64;
struct BlockCache {
  void* head = nullptr;  // a singly linked list through the blocks' first bytes
  unsigned count = 0;
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
    while (void* b = c.head) {
      c.head = *static_cast<void**>(b);
      ::operator delete(b);
    }
    c.count = 0;
  }
};
inline thread_local BlockCacheCloser block_cache_closer;

[[nodiscard]] inline void* allocate_block() {
  BlockCache& c = block_cache;
  if (void* b = c.head) {
    c.head = *static_cast<void**>(b);
    --c.count;
    return b;
  }
  return ::operator new(block_bytes);
}

inline void free_block(void* b) noexcept {
  BlockCache& c = block_cache;
  if (c.closed || c.count == block_cache_limit) {
    ::operator delete(b);
    return;
  }
  if (c.count == 0) (void)&block_cache_closer;  // (its first use registers the exit-time drain)
  *static_cast<void**>(b) = c.head;
  c.head = b;
  ++c.count;
}

// Destroys the state in its block; the block is freed with the control block.
struct SlotDestroy {
  void operator()(const Owned* state) const noexcept { state->~Owned(); }
};

template <class T>
struct SlotAllocator {
  using value_type = T;
  unsigned char* block;
  explicit SlotAllocator(unsigned char* b) noexcept : block(b) {}
  template <class U>
  SlotAllocator(const SlotAllocator<U>& o) noexcept : block(o.block) {}  // NOLINT: rebinding converts
  T* allocate(std::size_t n) noexcept {
    static_assert(sizeof(T) <= control_bytes && alignof(T) <= alignof(std::max_align_t),
                  "the control block must fit its place in the state's block");
    (void)n;  // always 1: the one control block
    return reinterpret_cast<T*>(block + state_bytes);
  }
  // The control block is the last thing in the block to go: free it all.
  void deallocate(T*, std::size_t) noexcept { free_block(block); }
  friend bool operator==(const SlotAllocator& a, const SlotAllocator& b) noexcept { return a.block == b.block; }
};

// Shares the state constructed at the start of `block`. Cannot fail: the
// control block's place is already allocated.
inline std::shared_ptr<const Owned> share_state(unsigned char* block, const Owned* state) noexcept {
  return std::shared_ptr<const Owned>(state, SlotDestroy{}, SlotAllocator<Owned>(block));
}

template <class T>
class Shared {
 public:
  Shared() noexcept = default;
  // A T made from args, shared: one allocation holds the T and its control
  // block. If the allocation fails, no T was made.
  template <class... A>
  [[nodiscard]] static Shared make(A&&... args) {
    using U = std::remove_const_t<T>;
    static_assert(sizeof(U) <= state_bytes && alignof(U) <= alignof(std::max_align_t),
                  "a handle's shared state must fit its block: hold what is larger indirectly");
    auto* block = static_cast<unsigned char*>(allocate_block());
    static_assert(noexcept(::new (static_cast<void*>(block)) U(static_cast<A&&>(args)...)),
                  "a handle's state is constructed without throwing");
    U* state = ::new (static_cast<void*>(block)) U(static_cast<A&&>(args)...);
    Shared s;
    s.owner_ = share_state(block, state);
    return s;
  }

  [[nodiscard]] T* get() const noexcept { return static_cast<T*>(const_cast<Owned*>(owner_.get())); }
  T* operator->() const noexcept { return get(); }
  [[nodiscard]] explicit operator bool() const noexcept { return owner_ != nullptr; }
  [[nodiscard]] long use_count() const noexcept { return owner_.use_count(); }

 private:
  std::shared_ptr<const Owned> owner_;
};


// The raw handle of `handle`, or an Error (CUDA_ERROR_INVALID_HANDLE) naming
// its `type` and the `operation` when it is empty (default-constructed or
// moved-from). One compare on success. Every handle type checks this way.
template <class Handle>
[[nodiscard]] auto checked(const Handle& handle, const char* type, const char* operation, SourceLocation where) {
  auto raw = handle.raw();
  if (OXICUDA_UNLIKELY(!raw)) empty_handle(type, operation, where);
  return raw;
}

}  // namespace detail

OXICUDA_NAMESPACE_END
