// oxicuda/handle.hpp — the ownership machinery shared by every handle: the
// one shared-state type (Owned, held through Shared<T>), and the emptiness
// check every operation on a handle makes.
#pragma once

#include <memory>
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

template <class T>
class Shared {
 public:
  Shared() noexcept = default;
  // A T made from args, shared: one allocation holds the T and its control
  // block (std::make_shared). If it fails, no T was made.
  template <class... A>
  [[nodiscard]] static Shared make(A&&... args) {
    Shared s;
    s.owner_ = std::make_shared<std::remove_const_t<T>>(std::forward<A>(args)...);
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
