// oxicuda/compile/arch.hpp — GPU architectures at run time: the real
// architectures this NVRTC compiles for, the architecture to compile for on
// a device (its own, or PTX for NVRTC's newest when the device is newer),
// and the check of an architecture's form before nvJitLink sees it.
#pragma once

#include <string>
#include <string_view>

#include "../driver/device.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// NVRTC's real architectures (75, 80, ..., 120), ascending.
struct ArchList {
  static constexpr int capacity = 64;
  int archs[capacity] = {};
  int count = 0;
  [[nodiscard]] const int* begin() const noexcept { return archs; }
  [[nodiscard]] const int* end() const noexcept { return archs + count; }
  [[nodiscard]] bool contains(int arch) const noexcept {
    for (int a : *this)
      if (a == arch) return true;
    return false;
  }
};

// The real architectures this NVRTC compiles for.
[[nodiscard]] ArchList supported_archs(SourceLocation where = SourceLocation::current());

// The architecture to compile for on a device: its own (sm_XX, a cubin) when
// NVRTC supports it; otherwise, for a device newer than NVRTC, the newest
// architecture NVRTC supports as PTX (compute_XX, which the driver compiles
// forward), and a note that says so.
struct ArchChoice {
  std::string arch;
  std::string note;  // empty unless there was a fallback
};
[[nodiscard]] ArchChoice arch_for(const Device& device, SourceLocation where = SourceLocation::current());
// The same from a compute capability and NVRTC's supported architectures.
[[nodiscard]] ArchChoice arch_for(ComputeCapability cc, const ArchList& supported,
                                  SourceLocation where = SourceLocation::current());

namespace detail {

// Whether `arch` is sm_NN, sm_NNa, sm_NNf or compute_NN (NN: 2 or 3 digits,
// not starting with 0), a form nvJitLink takes without ending the process.
inline bool plausible_arch(std::string_view arch) noexcept {
  std::string_view rest;
  if (arch.starts_with("sm_"))
    rest = arch.substr(3);
  else if (arch.starts_with("compute_"))
    rest = arch.substr(8);
  else
    return false;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) rest.remove_suffix(1);
  if (rest.size() < 2 || rest.size() > 3 || rest[0] == '0') return false;
  for (char c : rest)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace detail

inline ArchList supported_archs(SourceLocation where) {
  int n = 0;
  detail::check(OXICUDA_NVRTC(GetNumSupportedArchs, &n), where);
  ArchList list;
  if (n > ArchList::capacity)
    detail::raise(Error(ffi::NVRTC_ERROR_INTERNAL_ERROR, "oxicuda::supported_archs",
                        detail::cat({"NVRTC supports ", std::to_string(n), " architectures; oxicuda has room for ",
                                     std::to_string(ArchList::capacity)}),
                        where));
  if (n > 0) detail::check(OXICUDA_NVRTC(GetSupportedArchs, list.archs), where);
  list.count = n > 0 ? n : 0;
  return list;
}

inline ArchChoice arch_for(ComputeCapability cc, const ArchList& supported, SourceLocation where) {
  const int want = cc.major * 10 + cc.minor;
  int newest_below = 0;
  for (int a : supported) {
    if (a == want) return {detail::cat({"sm_", std::to_string(want)}), {}};
    if (a < want && a > newest_below) newest_below = a;
  }
  if (newest_below == 0)
    detail::raise(Error(ffi::NVRTC_ERROR_INVALID_OPTION, "oxicuda::arch_for",
                        detail::cat({"NVRTC supports no architecture up to the device's compute capability ",
                                     std::to_string(cc.major), ".", std::to_string(cc.minor)}),
                        where));
  return {detail::cat({"compute_", std::to_string(newest_below)}),
          detail::cat({"oxicuda: NVRTC does not support sm_", std::to_string(want), " (compute capability ",
                       std::to_string(cc.major), ".", std::to_string(cc.minor),
                       "); compiled PTX for compute_", std::to_string(newest_below),
                       ", its newest architecture, which the driver compiles for the device"})};
}

inline ArchChoice arch_for(const Device& device, SourceLocation where) {
  return arch_for(device.compute_capability(where), supported_archs(where), where);
}

OXICUDA_DETAIL_NAMESPACE_END
