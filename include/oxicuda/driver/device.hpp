// oxicuda/driver/device.hpp — Device: count, all, get by ordinal, name, compute
// capability, memory, any attribute, UUID, PCI bus id; and the driver's version.
#pragma once

#include <array>
#include <compare>
#include <vector>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

// The driver's CUDA version, e.g. 13000 for CUDA 13.0.
[[nodiscard]] inline int driver_version(SourceLocation where = SourceLocation::current()) {
  int v = 0;
  detail::check(OXICUDA_DRIVER(DriverGetVersion, &v), where);
  return v;
}

struct ComputeCapability {
  int major = 0;
  int minor = 0;
  friend constexpr auto operator<=>(const ComputeCapability&, const ComputeCapability&) = default;
};

// A device's 16-byte UUID; to_string() gives the nvidia-smi spelling "GPU-xxxxxxxx-xxxx-...".
struct Uuid {
  std::array<unsigned char, 16> bytes{};
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Uuid&, const Uuid&) = default;
};

// A GPU, by its driver handle. Cheap to copy; owns nothing.
class Device {
 public:
  // The number of devices the driver sees (0 is an answer, not an error).
  [[nodiscard]] static int count(SourceLocation where = SourceLocation::current());
  // The device with this ordinal; an ordinal outside [0, count) is an Error
  // (CUDA_ERROR_INVALID_DEVICE) that says how many devices there are.
  [[nodiscard]] static Device get(int ordinal, SourceLocation where = SourceLocation::current());
  // Every device the driver sees, in ordinal order (empty when none).
  [[nodiscard]] static std::vector<Device> all(SourceLocation where = SourceLocation::current());
  // A device from a raw handle (e.g. from cuCtxGetDevice).
  [[nodiscard]] static constexpr Device from_raw(ffi::CUdevice raw) noexcept { return Device(raw); }

  [[nodiscard]] constexpr ffi::CUdevice raw() const noexcept { return raw_; }
  [[nodiscard]] std::string name(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] ComputeCapability compute_capability(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] std::size_t total_memory(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] int attribute(ffi::CUdevice_attribute attr, SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] Uuid uuid(SourceLocation where = SourceLocation::current()) const;
  // "domain:bus:device.function" in hexadecimal, as the driver spells it ("0000:18:00.0").
  [[nodiscard]] std::string pci_bus_id(SourceLocation where = SourceLocation::current()) const;
  [[nodiscard]] int multiprocessor_count(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, where);
  }
  [[nodiscard]] int max_threads_per_block(SourceLocation where = SourceLocation::current()) const {
    return attribute(ffi::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, where);
  }

  friend constexpr bool operator==(Device, Device) = default;

 private:
  constexpr explicit Device(ffi::CUdevice raw) noexcept : raw_(raw) {}
  ffi::CUdevice raw_ = 0;
};

inline std::string Uuid::to_string() const {
  static constexpr char hex[] = "0123456789abcdef";
  char s[41] = "GPU-";  // "GPU-" + 32 hex digits + 4 dashes
  std::size_t n = 4;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s[n++] = '-';
    s[n++] = hex[bytes[i] >> 4];
    s[n++] = hex[bytes[i] & 0xF];
  }
  return std::string(static_cast<const char*>(s), n);
}

inline int Device::count(SourceLocation where) {
  int n = 0;
  detail::check(OXICUDA_DRIVER(DeviceGetCount, &n), where);
  return n;
}

inline Device Device::get(int ordinal, SourceLocation where) {
  const int n = count(where);
  if (ordinal < 0 || ordinal >= n)
    detail::raise(Error(ffi::CUDA_ERROR_INVALID_DEVICE, "oxicuda::Device::get",
                        detail::cat({"device ordinal ", std::to_string(ordinal), " is out of range: the driver sees ",
                                     std::to_string(n), n == 1 ? " device" : " devices", n > 0 ? " (ordinals 0.." : "",
                                     n > 0 ? std::to_string(n - 1) : std::string(), n > 0 ? ")" : ""}),
                        where));
  ffi::CUdevice d = 0;
  detail::check(OXICUDA_DRIVER(DeviceGet, &d, ordinal), where);
  return Device(d);
}

inline std::vector<Device> Device::all(SourceLocation where) {
  const int n = count(where);
  std::vector<Device> devices;
  devices.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    ffi::CUdevice d = 0;
    detail::check(OXICUDA_DRIVER(DeviceGet, &d, i), where);
    devices.push_back(Device(d));
  }
  return devices;
}

inline std::string Device::name(SourceLocation where) const {
  char buf[256] = {};
  detail::check(OXICUDA_DRIVER(DeviceGetName, buf, static_cast<int>(sizeof buf - 1), raw_),
                where);
  return std::string(static_cast<const char*>(buf));
}

inline int Device::attribute(ffi::CUdevice_attribute attr, SourceLocation where) const {
  int v = 0;
  detail::check(OXICUDA_DRIVER(DeviceGetAttribute, &v, attr, raw_), where);
  return v;
}

inline ComputeCapability Device::compute_capability(SourceLocation where) const {
  return {attribute(ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, where),
          attribute(ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, where)};
}

inline std::size_t Device::total_memory(SourceLocation where) const {
  std::size_t bytes = 0;
  detail::check(OXICUDA_DRIVER(DeviceTotalMem, &bytes, raw_), where);
  return bytes;
}

inline Uuid Device::uuid(SourceLocation where) const {
  ffi::CUuuid raw{};
  detail::check(OXICUDA_DRIVER(DeviceGetUuid, &raw, raw_), where);
  Uuid u;
  for (std::size_t i = 0; i < u.bytes.size(); ++i) u.bytes[i] = static_cast<unsigned char>(raw.bytes[i]);
  return u;
}

inline std::string Device::pci_bus_id(SourceLocation where) const {
  char buf[64] = {};  // the driver needs 13 bytes
  detail::check(OXICUDA_DRIVER(DeviceGetPCIBusId, buf, static_cast<int>(sizeof buf - 1), raw_), where);
  return std::string(static_cast<const char*>(buf));
}

OXICUDA_DETAIL_NAMESPACE_END
