// The Windows side of the loader test (tests/windows/run.py): built with
// MinGW-w64, run under Wine. Prints what the driver and NVRTC searches found,
// one "key=value" a line. With an argument, LoadLibrary's it first (the
// "already loaded" step).
#include "oxicuda.hpp"

#include <windows.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc > 1 && !::LoadLibraryA(argv[1])) {
    std::printf("preload failed: %s\n", argv[1]);
    return 2;
  }
  const oxicuda::DriverInfo& d = oxicuda::driver_info();
  static const char* const statuses[] = {"ok", "no_library", "not_a_driver", "stub_library", "init_failed"};
  std::printf("driver.status=%s\n", statuses[static_cast<int>(d.status)]);
  std::printf("driver.library=%s\n", d.library.c_str());
  std::printf("driver.version=%d\n", d.version);
  std::printf("driver.reason=%s\n", d.reason.c_str());
  const oxicuda::LibraryInfo& n = oxicuda::nvrtc_info();
  std::printf("nvrtc.found=%d\n", n.found ? 1 : 0);
  std::printf("nvrtc.library=%s\n", n.library.c_str());
  std::printf("nvrtc.found_by=%s\n", n.found_by.c_str());
  std::printf("nvrtc.path=%s\n", n.path.c_str());
  std::printf("nvrtc.version=%d\n", n.version);
  std::printf("nvrtc.reason=%s\n", n.reason.c_str());
  // An error from the driver's stand-in, as a user sees it.
  try {
    (void)oxicuda::Device::count();
    std::printf("error=none\n");
  } catch (const oxicuda::Error& e) {
    std::printf("error=%.*s\n", static_cast<int>(e.name().size()), e.name().data());
  }
  return 0;
}
