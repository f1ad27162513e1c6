// oxicuda/driver/sm_resource.hpp — a device's streaming multiprocessors as a
// resource (cuDeviceGetDevResource), and its split into groups
// (cuDevSmResourceSplitByCount): what a green context is made of
// (driver/green_context.hpp). CUDA 12.4 and newer.
#pragma once

#include <span>
#include <string>

#include "device.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

class SmSplit;

// How SmResource::split groups the SMs (cuDevSmResourceSplit_flags).
struct SmSplitOptions {
  // Each SM on its own, ignoring the hardware's co-scheduling groups: finer
  // groups (a smaller granularity), at the cost of large thread clusters.
  bool ignore_coscheduling = false;
  // Groups that may allow the largest thread clusters (compute capability 9.0+).
  bool max_cluster_size = false;
};

// Some of a device's SMs: all of them (SmResource::of), a group of a split,
// or a green context's (GreenContext::sms). A value (cuda.h's
// CUdevResource, whose hidden bytes say which SMs), copied freely; a
// default-constructed one is empty (no SMs) and using it is an Error.
class SmResource {
 public:
  SmResource() noexcept = default;
  // All the SMs of `device` (cuDeviceGetDevResource).
  [[nodiscard]] static SmResource of(const Device& device, SourceLocation where = SourceLocation::current());
  // The driver's description of SMs of `device`, as cuda.h's calls fill it.
  [[nodiscard]] static SmResource from_raw(const ffi::CUdevResource& raw, const Device& device) noexcept {
    SmResource r;
    r.raw_ = raw;
    r.device_ = device.raw();
    return r;
  }

  [[nodiscard]] explicit operator bool() const noexcept { return raw_.type == ffi::CU_DEV_RESOURCE_TYPE_SM; }
  [[nodiscard]] const ffi::CUdevResource& raw() const noexcept { return raw_; }
  [[nodiscard]] Device device() const noexcept { return Device::from_raw(device_ < 0 ? 0 : device_); }
  // How many SMs (0 for an empty one, and for a split's remainder that got none).
  [[nodiscard]] unsigned sm_count() const noexcept { return *this ? raw_.sm.smCount : 0; }
  // The fewest SMs a group split from these may have (8 on compute capability 9.0).
  [[nodiscard]] unsigned min_partition_size() const noexcept { return *this ? raw_.sm.minSmPartitionSize : 0; }
  // The SMs guaranteed co-scheduled together: a group's count is a multiple of it.
  [[nodiscard]] unsigned coscheduled_alignment() const noexcept {
    return *this ? raw_.sm.smCoscheduledAlignment : 0;
  }

  // Splits these SMs into `groups` disjoint groups of at least
  // `min_sm_count` SMs each (cuDevSmResourceSplitByCount). The driver rounds
  // the count up to its granularity (min_partition_size(),
  // coscheduled_alignment()): each group's sm_count() is what it got, the
  // same for all, and the SMs left over are the split's remainder. An Error
  // before the driver makes the groups: zero groups, more than
  // SmSplit::max_groups, `min_sm_count` above sm_count(), or fewer groups
  // possible than asked (the Error says how many fit); an empty resource, or
  // a group or the remainder of an earlier split, is an Error too (the
  // driver splits only what a device or a green context has: split a
  // GreenContext's sms() instead).
  [[nodiscard]] SmSplit split(unsigned groups, unsigned min_sm_count, SmSplitOptions options = {},
                              SourceLocation where = SourceLocation::current()) const;

 private:
  ffi::CUdevResource raw_{};
  ffi::CUdevice device_ = -1;
  bool split_output_ = false;  // a group or the remainder of split()
};

// The groups of one split, and its remainder: held inline (no allocation).
class SmSplit {
 public:
  static constexpr unsigned max_groups = 32;

  [[nodiscard]] std::span<const SmResource> groups() const noexcept { return {groups_, count_}; }
  [[nodiscard]] unsigned size() const noexcept { return count_; }
  // Group `i` (an Error past the last).
  [[nodiscard]] const SmResource& group(unsigned i, SourceLocation where = SourceLocation::current()) const;
  // The SMs no group got (sm_count() 0 when none). It has none of the
  // groups' guarantees of co-scheduling; a green context may still be made of it.
  [[nodiscard]] const SmResource& remainder() const noexcept { return remainder_; }

 private:
  friend class SmResource;
  SmResource groups_[max_groups];
  unsigned count_ = 0;
  SmResource remainder_;
};

namespace detail {

[[noreturn]] OXICUDA_DETAIL_COLD inline void sm_split_refused(const char* rule, unsigned groups, unsigned min_sm_count,
                                                              unsigned sm_count, unsigned possible,
                                                              SourceLocation where) {
  std::string text = cat({"asked for ", std::to_string(groups), " group(s) of at least ", std::to_string(min_sm_count),
                          " SMs of ", std::to_string(sm_count), ": ", rule});
  if (possible != ~0u) text += cat({" (these SMs make ", std::to_string(possible), " such group(s))"});
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::SmResource::split", std::move(text), where));
}

[[noreturn]] OXICUDA_DETAIL_COLD inline void sm_group_out_of_range(unsigned i, unsigned count, SourceLocation where) {
  raise(Error(ffi::CUDA_ERROR_INVALID_VALUE, "oxicuda::SmSplit::group",
              cat({"group ", std::to_string(i), " of a split of ", std::to_string(count), " group(s)"}), where));
}

}  // namespace detail

inline SmResource SmResource::of(const Device& device, SourceLocation where) {
  ffi::CUdevResource raw{};
  detail::check(OXICUDA_DRIVER(DeviceGetDevResource, device.raw(), &raw, ffi::CU_DEV_RESOURCE_TYPE_SM), where);
  return from_raw(raw, device);
}

inline SmSplit SmResource::split(unsigned groups, unsigned min_sm_count, SmSplitOptions options,
                                 SourceLocation where) const {
  if (!*this) detail::empty_handle("oxicuda::SmResource", "oxicuda::SmResource::split", where);
  const unsigned sms = sm_count();
  if (split_output_)
    detail::sm_split_refused("these SMs are a group or the remainder of an earlier split, which the driver does not "
                             "split again: make a GreenContext of them and split its sms()",
                             groups, min_sm_count, sms, ~0u, where);
  if (groups == 0) detail::sm_split_refused("zero groups", groups, min_sm_count, sms, ~0u, where);
  if (groups > SmSplit::max_groups)
    detail::sm_split_refused("more than SmSplit::max_groups (32)", groups, min_sm_count, sms, ~0u, where);
  if (min_sm_count > sms)
    detail::sm_split_refused("the minimum is more SMs than there are", groups, min_sm_count, sms, ~0u, where);
  unsigned flags = 0;
  if (options.ignore_coscheduling) flags |= ffi::CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING;
  if (options.max_cluster_size) flags |= ffi::CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
  // How many groups the driver would make (a null result: a simulated split).
  unsigned possible = 0;
  detail::check(OXICUDA_DRIVER(DevSmResourceSplitByCount, nullptr, &possible, &raw_, nullptr, flags, min_sm_count),
                where);
  if (possible < groups)
    detail::sm_split_refused("the driver's granularity leaves too few", groups, min_sm_count, sms, possible, where);
  ffi::CUdevResource made[SmSplit::max_groups]{};
  ffi::CUdevResource rest{};
  unsigned count = groups;
  detail::check(OXICUDA_DRIVER(DevSmResourceSplitByCount, made, &count, &raw_, &rest, flags, min_sm_count), where);
  SmSplit s;
  s.count_ = count < groups ? count : groups;
  const Device device = this->device();
  for (unsigned i = 0; i < s.count_; ++i) {
    s.groups_[i] = from_raw(made[i], device);
    s.groups_[i].split_output_ = true;
  }
  s.remainder_ = from_raw(rest, device);
  s.remainder_.split_output_ = true;
  return s;
}

inline const SmResource& SmSplit::group(unsigned i, SourceLocation where) const {
  if (OXICUDA_DETAIL_UNLIKELY(i >= count_)) detail::sm_group_out_of_range(i, count_, where);
  return groups_[i];
}

OXICUDA_DETAIL_NAMESPACE_END
