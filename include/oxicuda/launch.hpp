// oxicuda/launch.hpp — launching a kernel on a stream.
#pragma once

#include "memory.hpp"
#include "module.hpp"

OXICUDA_NAMESPACE_BEGIN

// Grid or block dimensions; `Dim3{256}` is 256 x 1 x 1.
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

// Why a launch failed, in words, computed only after it has.
[[noreturn]] OXICUDA_COLD inline void launch_failed(ffi::CUresult r, const Function& fn, Dim3 grid, Dim3 block,
                                                   unsigned shared_bytes, SourceLocation where) {
  auto dims = [](Dim3 d) {
    return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
  };
  std::string why = "kernel '" + std::string(fn.name()) + "', grid " + dims(grid) + ", block " + dims(block) +
                    ", " + std::to_string(shared_bytes) + " bytes of dynamic shared memory";
  if (grid.volume() == 0 || block.volume() == 0)
    why += ": a grid or block dimension is zero";
  else if (r == ffi::CUDA_ERROR_INVALID_CONTEXT)
    why += ": the kernel's module and the stream belong to different contexts, or the context is gone";
  raise(Error(r, "cuLaunchKernel", std::move(why), where));
}

}  // namespace detail

// Launches `fn` on `stream` with the given grid, block and dynamic shared
// memory; each argument is passed by address and must have exactly the
// type of the kernel's parameter (a DeviceBuffer's data(), an unsigned, ...).
// One cuLaunchKernel; no allocation, no context switch.
template <class... Args>
inline void launch(detail::Located<const Stream&> stream, const Function& fn, Dim3 grid, Dim3 block,
                   unsigned shared_bytes, const Args&... args) {
  const SourceLocation where = stream.where;
  CUstream s = stream.value.checked("oxicuda::launch", where);
  CUfunction f = fn.checked("oxicuda::launch", where);
  void* params[sizeof...(Args) > 0 ? sizeof...(Args) : 1] = {
      const_cast<void*>(static_cast<const void*>(&args))...};
  const ffi::CUresult r = detail::call_result<ffi::Entry::LaunchKernel>(
      where, f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, s,
      sizeof...(Args) > 0 ? params : nullptr, nullptr);
  if (OXICUDA_UNLIKELY(r != ffi::CUDA_SUCCESS)) detail::launch_failed(r, fn, grid, block, shared_bytes, where);
}

OXICUDA_NAMESPACE_END
