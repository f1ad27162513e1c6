// oxicuda/kernel_args.hpp — what a kernel launch is made of, shared by stream
// launches and graph kernel nodes: the configuration (Dim3, LaunchConfig),
// and the arguments, converted to a typed kernel's parameter types and packed
// as the driver takes them, or checked as an untyped launch's bytes.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernel.hpp"
#include "span.hpp"

OXICUDA_NAMESPACE_BEGIN

// Grid, block or cluster dimensions; `Dim3{256}` is 256 x 1 x 1.
struct Dim3 {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
  constexpr Dim3() noexcept = default;
  constexpr Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
  [[nodiscard]] constexpr unsigned long long volume() const noexcept {
    return static_cast<unsigned long long>(x) * y * z;
  }
  friend constexpr bool operator==(const Dim3&, const Dim3&) = default;
};

// How to launch, taken by designated initializers:
//   launch(stream, kernel, {.grid = blocks, .block = 256, .shared_bytes = 4096}, args...)
// A plain configuration is one cuLaunchKernel. Thread-block clusters (a
// non-zero `cluster`, compute capability 9.0+) and cooperative launches go
// through cuLaunchKernelEx with the matching attributes. Dynamic shared
// memory above what the kernel allows (48 KiB until raised) raises the
// kernel's limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) first.
struct LaunchConfig {
  Dim3 grid{1};
  Dim3 block{1};
  unsigned shared_bytes = 0;
  Dim3 cluster{0, 0, 0};  // {0,0,0}: no cluster; e.g. {2}: clusters of 2 blocks along x
  bool cooperative = false;
};

namespace detail {

// A launch argument that also carries the caller's source line (a variadic
// function cannot take a defaulted source_location after its pack).
template <class T>
struct Located {
  T value;
  SourceLocation where;
  // NOLINTNEXTLINE(google-explicit-constructor): converting on purpose
  Located(T v, SourceLocation w = SourceLocation::current()) noexcept : value(v), where(w) {}
};

// How an argument becomes a parameter of type P: device buffers and spans
// become their T* — only where P is a pointer their element converts to,
// never through their T* on to a bool or an integer — and anything else
// converts as in a function call.
template <class P, class R>
concept device_pointer_parameter = std::is_pointer_v<P> && std::is_convertible_v<device_element_t<R>*, P>;

template <class P, class A>
concept passable_as = (device_range<std::remove_cvref_t<A>> && device_pointer_parameter<P, std::remove_cvref_t<A>>) ||
                      (!device_range<std::remove_cvref_t<A>> && std::is_convertible_v<A, P>);

template <class P, class A>
P to_parameter(A&& a) noexcept {
  if constexpr (device_range<std::remove_cvref_t<A>>)
    return a.device_span().data();
  else
    return static_cast<P>(std::forward<A>(a));
}

// What the untyped launch may pass: the bytes of a kernel parameter type,
// but not an oxicuda buffer or span, whose bytes are not the device address.
template <class A>
inline constexpr bool untyped_argument_v = is_kernel_parameter_v<A> && !device_range<A>;

// A typed kernel's arguments, converted to its parameter types and laid out
// as the driver takes them: `get()` is the array of pointers to each value
// (null when there are none). It lives as long as the call that hands it to
// the driver (a launch, a graph kernel node: the driver copies the values),
// and points into itself, so it is neither copied nor moved.
template <class... Params>
class PackedArgs {
 public:
  template <class... Args>
  explicit PackedArgs(Args&&... args) noexcept : values_{to_parameter<Params>(std::forward<Args>(args))...} {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((pointers_[I] = static_cast<void*>(&std::get<I>(values_))), ...);
    }(std::index_sequence_for<Params...>{});
  }
  PackedArgs(const PackedArgs&) = delete;
  PackedArgs& operator=(const PackedArgs&) = delete;
  [[nodiscard]] void** get() noexcept { return pointers_; }

 private:
  std::tuple<Params...> values_;
  void* pointers_[sizeof...(Params)];
};

template <>
class PackedArgs<> {
 public:
  PackedArgs() noexcept = default;
  PackedArgs(const PackedArgs&) = delete;
  PackedArgs& operator=(const PackedArgs&) = delete;
  [[nodiscard]] void** get() noexcept { return nullptr; }
};

}  // namespace detail

OXICUDA_NAMESPACE_END
