// oxicuda/driver/in_context.hpp — SharedHandle, a shared handle to a driver object that
// lives in a context (an event): the object is destroyed once, when the last
// handle drops, and every handle keeps the context alive. (A Stream is a
// std::shared_ptr with a deleter instead, see stream.hpp.)
#pragma once

#include <utility>

#include "current.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// The state behind a driver object that lives in a context (an event): the
// raw handle, the context it keeps alive, and whether it owns
// the object (false: borrowed, never destroyed). Destroying the state
// destroys an owned object first (Destroy, a direct call), then releases
// the context.
template <class Object, void (*Destroy)(Object*) noexcept, class Extra>
struct InContext : Owned {
  Context ctx;
  Object* raw;
  bool owns;
  Extra extra;
  InContext(const Context& c, Object* r, bool o, Extra e) noexcept : ctx(c), raw(r), owns(o), extra(e) {}
  ~InContext() {
    if (owns) Destroy(raw);
  }
};

// A shared handle to such an object: the shared InContext state (the last
// copy's drop runs the destroy exactly once) and the raw handle beside it, so
// that a copy is one atomic increment and get() reads no indirection.
template <class Object, void (*Destroy)(Object*) noexcept, class Extra = bool>
class SharedHandle {
 public:
  SharedHandle() noexcept = default;
  // Takes ownership of `raw` (or borrows it when `owns` is false). If the
  // state cannot be allocated, an owned `raw` is destroyed before the error
  // leaves.
  SharedHandle(const Context& ctx, Object* raw, bool owns, Extra extra = {})
      : state_(State::make(ctx, raw, owns, extra)), raw_(raw) {}
  SharedHandle(const SharedHandle&) noexcept = default;
  SharedHandle& operator=(const SharedHandle&) noexcept = default;
  SharedHandle(SharedHandle&& o) noexcept : state_(std::move(o.state_)), raw_(o.raw_) { o.raw_ = nullptr; }
  SharedHandle& operator=(SharedHandle&& o) noexcept {
    state_ = std::move(o.state_);
    Object* raw = o.raw_;
    o.raw_ = nullptr;
    raw_ = raw;
    return *this;
  }

  [[nodiscard]] Object* get() const noexcept { return raw_; }
  [[nodiscard]] const Context& context() const noexcept { return state_ ? state_->ctx : empty(); }
  [[nodiscard]] Extra extra() const noexcept { return state_ ? state_->extra : Extra{}; }
  [[nodiscard]] bool owns() const noexcept { return state_ && state_->owns; }
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }

 private:
  using State = Shared<InContext<Object, Destroy, Extra>>;
  static const Context& empty() noexcept {
    static const Context none;
    return none;
  }
  State state_;
  Object* raw_ = nullptr;
};

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
