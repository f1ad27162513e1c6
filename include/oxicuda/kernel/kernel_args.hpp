// oxicuda/kernel/kernel_args.hpp — what a kernel launch is made of, shared by stream
// launches and graph kernel nodes: the configuration (Dim3, LaunchConfig),
// and the arguments, converted to a typed kernel's parameter types and packed
// as the driver takes them, or checked as an untyped launch's bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../memory/buffer.hpp"
#include "../driver/access_policy.hpp"
#include "../driver/event.hpp"
#include "kernel.hpp"
#include "../memory/span.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

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
  // {0,0,0}: no cluster; e.g. {2}: clusters of 2 blocks along x. A cluster
  // with a zero dimension beside a non-zero one, or one that does not divide
  // the grid in each dimension, is an Error naming both.
  Dim3 cluster{0, 0, 0};
  bool cooperative = false;
  // Programmatic dependent launch (compute capability 9.0+): this kernel may
  // start before the kernel before it on the stream has finished, once that
  // one's blocks have all triggered (griddepcontrol.launch_dependents, or
  // cudaTriggerProgrammaticLaunchCompletion) or exited; it must wait
  // (griddepcontrol.wait, cudaGridDependencySynchronize) before reading what
  // that kernel wrote. CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
  bool programmatic = false;
  // An event recorded when this kernel's blocks have all triggered (or,
  // with trigger_at_block_start, started): another stream that waits on it
  // may start early, as programmatic above does on one stream. Only
  // Stream::wait may use it (the driver's rule). CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT.
  struct ProgrammaticEvent {
    EventRef event;
    bool trigger_at_block_start = false;
  } programmatic_event{};
  // The launch's priority (CU_LAUNCH_ATTRIBUTE_PRIORITY): as a stream's,
  // lower numbers are more urgent, within Context::stream_priority_range();
  // unset: the stream's.
  std::optional<int> priority{};
  // The L2 access-policy window of this launch (CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
  // 0 bytes: the stream's.
  AccessPolicyWindow access_policy{};
};

namespace detail {
// Whether a configuration has launch attributes beyond clusters and
// cooperative launches (each a cuLaunchKernelEx attribute).
inline bool has_extra_attributes(const LaunchConfig& cfg) noexcept {
  return cfg.programmatic || cfg.programmatic_event.event || cfg.priority.has_value() ||
         cfg.access_policy.num_bytes != 0;
}
// Whether a launch leaves the plain path (one cuLaunchKernel with no
// dynamic shared memory): a cluster, cooperative, dynamic shared memory or
// an attribute.
inline bool special_launch(const LaunchConfig& cfg) noexcept {
  return (cfg.cluster.x | cfg.cluster.y | cfg.cluster.z | cfg.shared_bytes | static_cast<unsigned>(cfg.cooperative)) !=
             0 ||
         has_extra_attributes(cfg);
}
}  // namespace detail

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

inline std::string dims(Dim3 d) {
  return cat({std::to_string(d.x), "x", std::to_string(d.y), "x", std::to_string(d.z)});
}

// A cluster (any dimension non-zero) must have every dimension non-zero and
// divide the grid in each: checked before the driver sees it (a zero
// dimension beside a non-zero one would otherwise be a plain launch).
[[noreturn]] OXICUDA_DETAIL_COLD inline void bad_cluster(const Function& fn, const LaunchConfig& cfg, const char* operation,
                                                  SourceLocation where) {
  const Dim3 c = cfg.cluster, g = cfg.grid;
  const bool zero = c.x == 0 || c.y == 0 || c.z == 0;
  raise(Error(ffi::CUDA_ERROR_INVALID_CLUSTER_SIZE, operation,
              cat({"kernel '", fn.name(), "': cluster ", dims(c), ", grid ", dims(g),
                   zero ? ": a cluster dimension is zero beside a non-zero one (every dimension of a cluster is at "
                          "least 1; {0, 0, 0} is no cluster)"
                        : ": the cluster does not divide the grid (each grid dimension must be a multiple of the "
                          "cluster's)"}),
              where));
}

inline void check_cluster(const Function& fn, const LaunchConfig& cfg, const char* operation, SourceLocation where) {
  const Dim3 c = cfg.cluster, g = cfg.grid;
  if (c.x == 0 || c.y == 0 || c.z == 0 || g.x % c.x != 0 || g.y % c.y != 0 || g.z % c.z != 0)
    bad_cluster(fn, cfg, operation, where);
}

template <class A>
inline constexpr bool is_device_buffer_v = false;
template <class T>
inline constexpr bool is_device_buffer_v<DeviceBuffer<T>> = true;

[[noreturn]] OXICUDA_DETAIL_COLD inline void empty_buffer_argument(const Function& fn, std::size_t position,
                                                            std::size_t count, std::string_view type,
                                                            const char* operation, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_HANDLE, operation,
              cat({"argument ", std::to_string(position), " of ", std::to_string(count), " (", type,
                   ") to kernel '", fn.name(),
                   "' is an empty buffer (default-constructed or moved-from): the kernel would get a null pointer"}),
              where));
}

// Refuses a default-constructed or moved-from DeviceBuffer among a typed
// launch's arguments (it has no memory and no context; a buffer of 0
// elements made in a context passes, as its null pointer with a size of 0).
// Nothing to do, at compile time, for arguments that are not buffers.
template <class... Args>
inline void check_arguments(const Function& fn, const char* operation, SourceLocation where, const Args&... args) {
  if constexpr ((is_device_buffer_v<Args> || ...)) {
    std::size_t position = 0;
    auto check = [&]<class A>(const A& a) {
      ++position;
      if constexpr (is_device_buffer_v<A>)
        if (OXICUDA_DETAIL_UNLIKELY(a.device_ptr() == 0 && !a.context()))
          empty_buffer_argument(fn, position, sizeof...(Args), type_name<A>(), operation, where);
    };
    (check(args), ...);
  } else {
    (void)fn, (void)operation, (void)where;
  }
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

OXICUDA_DETAIL_NAMESPACE_END
