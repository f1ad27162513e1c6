// oxicuda/driver/access_policy.hpp — the L2 access-policy window (persisting
// lines for a range of device memory): AccessPolicyWindow, set on a stream
// (cuStreamSetAttribute) or on a launch (LaunchConfig::access_policy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "stream_ref.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// How the L2 cache treats the lines of a window: kept (persisting), let
// go first (streaming), or as usual (normal).
enum class AccessProperty : int {
  normal = ffi::CU_ACCESS_PROPERTY_NORMAL,
  streaming = ffi::CU_ACCESS_PROPERTY_STREAMING,
  persisting = ffi::CU_ACCESS_PROPERTY_PERSISTING,
};

// A range of device memory whose L2 lines a stream's kernels (or one
// launch) treat with `hit` for a fraction `hit_ratio` of the range and
// `miss` for the rest. Persisting lines use the context's persisting L2
// size (set_limit(ctx, Limit::persisting_l2_cache_size, bytes)); the
// window is at most CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE
// bytes. A window of 0 bytes is none (and clears a stream's).
struct AccessPolicyWindow {
  ffi::CUdeviceptr base = 0;
  std::size_t num_bytes = 0;
  float hit_ratio = 1.0f;  // in [0, 1]
  AccessProperty hit = AccessProperty::persisting;
  AccessProperty miss = AccessProperty::streaming;  // normal or streaming

  // The window over a device range's bytes (DeviceBuffer, DeviceSpan, ...).
  template <class R>
    requires requires(const R& r) { r.device_span().size_bytes(); }
  [[nodiscard]] static AccessPolicyWindow over(const R& range, float hit_ratio = 1.0f) noexcept {
    const auto s = range.device_span();
    return {s.device_ptr(), s.size_bytes(), hit_ratio};
  }
  [[nodiscard]] constexpr bool empty() const noexcept { return num_bytes == 0; }
  friend constexpr bool operator==(const AccessPolicyWindow&, const AccessPolicyWindow&) = default;
};

namespace detail {

// The window as the driver takes it, after the checks the driver leaves to
// its bare CUDA_ERROR_INVALID_VALUE: a ratio outside [0, 1], a miss
// property that is persisting.
inline ffi::CUaccessPolicyWindow raw_window(const AccessPolicyWindow& w, const char* operation, SourceLocation where) {
  if (w.num_bytes != 0) {
    if (!(w.hit_ratio >= 0.0f && w.hit_ratio <= 1.0f))
      raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                  cat({"the access-policy window's hit_ratio is ", std::to_string(w.hit_ratio),
                       "; it is the fraction of the window given the hit property, in [0, 1]"}),
                  where));
    if (w.miss == AccessProperty::persisting)
      raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, operation,
                  "the access-policy window's miss property is persisting; the driver takes normal or streaming for "
                  "the lines outside the hit fraction",
                  where));
  }
  return {reinterpret_cast<void*>(static_cast<std::uintptr_t>(w.base)), w.num_bytes, w.hit_ratio,
          static_cast<ffi::CUaccessProperty>(w.hit), static_cast<ffi::CUaccessProperty>(w.miss)};
}

}  // namespace detail

// Sets the access-policy window of the kernels launched on `stream` from
// now on (cuStreamSetAttribute); a window of 0 bytes clears it. A window
// larger than the device allows is the driver's Error.
inline void set_access_policy_window(StreamRef stream, const AccessPolicyWindow& window,
                                     SourceLocation where = SourceLocation::current()) {
  constexpr const char* op = "oxicuda::set_access_policy_window";
  ffi::CUlaunchAttributeValue v{};
  v.accessPolicyWindow = detail::raw_window(window, op, where);
  detail::on_stream(stream, op, where, [&](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamSetAttribute, q, ffi::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v), where);
  });
}

// The stream's access-policy window (0 bytes: none).
[[nodiscard]] inline AccessPolicyWindow access_policy_window(StreamRef stream,
                                                             SourceLocation where = SourceLocation::current()) {
  ffi::CUlaunchAttributeValue v{};
  detail::on_stream(stream, "oxicuda::access_policy_window", where, [&](CUstream q) {
    detail::check(OXICUDA_DRIVER(StreamGetAttribute, q, ffi::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v), where);
  });
  const ffi::CUaccessPolicyWindow& w = v.accessPolicyWindow;
  return {static_cast<ffi::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(w.base_ptr)), w.num_bytes, w.hitRatio,
          static_cast<AccessProperty>(w.hitProp), static_cast<AccessProperty>(w.missProp)};
}

OXICUDA_DETAIL_NAMESPACE_END
