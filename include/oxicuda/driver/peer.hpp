// oxicuda/driver/peer.hpp — several GPUs: whether one device can reach
// another's memory (cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute), and
// access from one context to another's memory turned on and off
// (cuCtxEnablePeerAccess, cuCtxDisablePeerAccess).
#pragma once

#include "context.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// What the link from one device to another offers (cuDeviceGetP2PAttribute).
struct PeerAttributes {
  bool access_supported = false;    // kernels on `from` may reach `to`'s memory once access is enabled
  bool native_atomics = false;      // every atomic works over the link
  bool array_access = false;        // CUDA arrays are reachable over the link
  int performance_rank = 0;         // relative: lower is a faster link
};

// Whether `from` can reach `to`'s memory (cuDeviceCanAccessPeer); false for
// a device and itself.
[[nodiscard]] bool can_access_peer(const Device& from, const Device& to, SourceLocation where = SourceLocation::current());
[[nodiscard]] PeerAttributes peer_attributes(const Device& from, const Device& to,
                                             SourceLocation where = SourceLocation::current());
// Lets kernels and copies in `from` reach memory allocated in `to`
// (cuCtxEnablePeerAccess, with `from` current). Enabling what is enabled
// already is not an error. Devices that cannot reach each other, or two
// contexts of one device, are an Error naming both devices.
void enable_peer_access(const Context& from, const Context& to, SourceLocation where = SourceLocation::current());
// Turns that access off again; an Error when it was not on.
void disable_peer_access(const Context& from, const Context& to, SourceLocation where = SourceLocation::current());

inline bool can_access_peer(const Device& from, const Device& to, SourceLocation where) {
  int can = 0;
  detail::check(OXICUDA_DRIVER(DeviceCanAccessPeer, &can, from.raw(), to.raw()), where);
  return can != 0;
}

inline PeerAttributes peer_attributes(const Device& from, const Device& to, SourceLocation where) {
  auto get = [&](ffi::CUdevice_P2PAttribute a) {
    int v = 0;
    detail::check(OXICUDA_DRIVER(DeviceGetP2PAttribute, &v, a, from.raw(), to.raw()), where);
    return v;
  };
  PeerAttributes p;
  p.access_supported = get(ffi::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED) != 0;
  p.native_atomics = get(ffi::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED) != 0;
  p.array_access = get(ffi::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED) != 0;
  p.performance_rank = get(ffi::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK);
  return p;
}

namespace detail {
[[noreturn]] OXICUDA_DETAIL_COLD inline void peer_failed(Outcome o, const char* verb, const Context& from,
                                                        const Context& to, SourceLocation where) {
  const int a = from.device(where).raw(), b = to.device(where).raw();
  std::string why = cat({verb, " peer access from device ", std::to_string(a), " to device ", std::to_string(b)});
  if (o.result == ffi::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
    why += ": these devices cannot reach each other's memory (can_access_peer is false); copy through copy_peer, "
           "which the driver stages through the host";
  else if (o.result == ffi::CUDA_ERROR_INVALID_DEVICE && a == b)
    why += ": both contexts are of one device, whose memory its contexts reach without peer access";
  else if (o.result == ffi::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
    why += ": it was not enabled";
  fail(o, where, std::move(why));
}
}  // namespace detail

inline void enable_peer_access(const Context& from, const Context& to, SourceLocation where) {
  CUcontext peer = detail::checked(to, "oxicuda::Context", "oxicuda::enable_peer_access", where);
  detail::SwitchCurrent current(detail::checked(from, "oxicuda::Context", "oxicuda::enable_peer_access", where), where);
  const detail::Outcome o = OXICUDA_DRIVER(CtxEnablePeerAccess, peer, 0u);
  if (OXICUDA_DETAIL_UNLIKELY(!o.ok() && o.result != ffi::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED))
    detail::peer_failed(o, "enabling", from, to, where);
}

inline void disable_peer_access(const Context& from, const Context& to, SourceLocation where) {
  CUcontext peer = detail::checked(to, "oxicuda::Context", "oxicuda::disable_peer_access", where);
  detail::SwitchCurrent current(detail::checked(from, "oxicuda::Context", "oxicuda::disable_peer_access", where), where);
  const detail::Outcome o = OXICUDA_DRIVER(CtxDisablePeerAccess, peer);
  if (OXICUDA_DETAIL_UNLIKELY(!o.ok())) detail::peer_failed(o, "disabling", from, to, where);
}

OXICUDA_DETAIL_NAMESPACE_END
