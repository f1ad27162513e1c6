// Built with -fno-exceptions: the header compiles, and an error goes to the
// replaceable handler (which must not return) instead of a throw.
#include "oxicuda.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
void handler(const oxicuda::Error& e) {
  const bool ok = e.result() == oxicuda::ffi::CUDA_ERROR_NOT_INITIALIZED &&
                  std::strstr(e.what(), "cuDeviceGetCount failed") != nullptr &&
                  std::strstr(e.what(), "no_exceptions.cpp") != nullptr;
  std::printf("handler received: %s\n", e.what());
  std::_Exit(ok ? 0 : 1);
}
}  // namespace

int main() {
  oxicuda::set_error_handler(handler);
  (void)oxicuda::Device::count();  // no driver (OXICUDA_LIBCUDA_PATH names a missing file)
  std::puts("the error handler was not called");
  return 1;
}
