// oxicuda-doctor: which driver was loaded, which devices it sees, and
// whether the two-stream self-check passes on each.
//
// Exit status: 0 when a driver is loaded, at least one device is present and
// every device passes; 1 when the check fails; 2 when no usable driver or no
// device is found (the reason is printed).
#include "oxicuda.hpp"
#include "two_stream_check.hpp"

#include <cstdio>

int main() {
  using namespace oxicuda;
  std::printf("oxicuda %s\n", OXICUDA_VERSION_STRING);
  const DriverInfo& info = driver_info();
  if (!info.available()) {
    std::printf("no usable CUDA driver: %s\n", info.reason.c_str());
    return 2;
  }
  std::printf("driver: %s (CUDA %d.%d), entry points from %s\n", info.library.c_str(), info.version / 1000,
              info.version % 1000 / 10, info.via_get_proc_address ? "cuGetProcAddress_v2" : "dlsym");
  try {
    const int n = Device::count();
    if (n == 0) {
      std::printf("the driver sees no CUDA device\n");
      return 2;
    }
    bool all_passed = true;
    for (int i = 0; i < n; ++i) {
      const Device d = Device::get(i);
      const ComputeCapability cc = d.compute_capability();
      std::printf("device %d: %s, compute capability %d.%d, %.1f GiB, %d multiprocessors, %s\n", i,
                  d.name().c_str(), cc.major, cc.minor, static_cast<double>(d.total_memory()) / (1u << 30),
                  d.multiprocessor_count(), d.uuid().to_string().c_str());
      const auto result = oxicuda_examples::two_stream_check(Context::primary(d));
      std::printf("  two-stream self-check: %s (%s)\n", result.passed ? "PASS" : "FAIL", result.message.c_str());
      all_passed = all_passed && result.passed;
    }
    return all_passed ? 0 : 1;
  } catch (const Error& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
