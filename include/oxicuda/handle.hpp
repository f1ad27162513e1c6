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

// The storage of one shared state of any type up to 128 bytes. Every state
// is allocated as a StateSlot by one std::make_shared (one allocation holds
// the slot and its control block), constructed in place, and shared through
// the aliasing constructor: so std::make_shared is instantiated once for the
// whole header rather than once per state type (which had made it the
// largest part of the header's compile time).
struct StateSlot {
  static constexpr std::size_t capacity = 128;
  alignas(std::max_align_t) unsigned char bytes[capacity];
  Owned* object = nullptr;  // set once a state was constructed in bytes
  StateSlot() noexcept {}   // bytes stay uninitialized
  StateSlot(const StateSlot&) = delete;
  StateSlot& operator=(const StateSlot&) = delete;
  ~StateSlot() {
    if (object) object->~Owned();
  }
};

inline std::shared_ptr<StateSlot> new_state_slot() { return std::make_shared<StateSlot>(); }

template <class T>
class Shared {
 public:
  Shared() noexcept = default;
  // A T made from args, shared: one allocation holds the T and its control
  // block. If the allocation or T's constructor fails, no T was made.
  template <class... A>
  [[nodiscard]] static Shared make(A&&... args) {
    using U = std::remove_const_t<T>;
    static_assert(sizeof(U) <= StateSlot::capacity && alignof(U) <= alignof(std::max_align_t),
                  "a handle's shared state must fit a StateSlot: hold what is larger indirectly");
    std::shared_ptr<StateSlot> slot = new_state_slot();
    U* object = ::new (static_cast<void*>(slot->bytes)) U(static_cast<A&&>(args)...);
    slot->object = object;
    Shared s;
    s.owner_ = std::shared_ptr<const Owned>(std::move(slot), object);
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
