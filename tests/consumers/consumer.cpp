// The program the consumer projects build (CMake find_package, a Makefile
// using pkg-config, a meson parent project with oxicuda as a subproject):
// oxicuda used the way an application uses it once installed.
//
// Exit status, as oxicuda-doctor's: 0 when a driver is loaded and sees at
// least one device; 2 when no usable driver or no device is found (the
// reason is printed); 1 when a driver call fails.
#include <oxicuda.hpp>

#include <cstdio>

int main() {
  std::printf("oxicuda %s\n", OXICUDA_VERSION_STRING);
  const oxicuda::DriverInfo& info = oxicuda::driver_info();
  if (!info.available()) {
    std::printf("no usable CUDA driver: %s\n", info.reason.c_str());
    return 2;
  }
  try {
    const int n = oxicuda::Device::count();
    std::printf("driver %s (CUDA %d.%d): %d device(s)\n", info.library.c_str(), info.version / 1000,
                info.version % 1000 / 10, n);
    for (int i = 0; i < n; ++i) std::printf("device %d: %s\n", i, oxicuda::Device::get(i).name().c_str());
    return n > 0 ? 0 : 2;
  } catch (const oxicuda::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
