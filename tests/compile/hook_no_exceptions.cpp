// Built with OXICUDA_NO_EXCEPTIONS while the compiler has exceptions: a
// diagnostic hook that throws, and a host function that throws, are caught
// and reported; the process carries on. Runs on the fake driver.
#define OXICUDA_NO_EXCEPTIONS
#include "oxicuda.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <stdexcept>

int main() {
  using namespace oxicuda;
  static int hook_calls = 0;
  set_diagnostic_hook([](const Error&) {
    ++hook_calls;
    throw std::runtime_error("a hook that throws");
  });
  void* fake = dlopen(driver_info().library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto fail = fake ? reinterpret_cast<int (*)(const char*, long, int)>(dlsym(fake, "fake_fail")) : nullptr;
  if (!fail) {
    std::puts("needs the fake driver (OXICUDA_LIBCUDA_PATH)");
    return 1;
  }
  {
    Context ctx = Context::primary(Device::get(0));
    Stream s(ctx);
    s.launch_host_func([] { throw std::runtime_error("a host function that throws"); });
    s.synchronize();
    fail("cuStreamDestroy", 1, 999);
  }  // the destroy fails; the hook is called and throws
  std::printf("hook called %d times; the process carried on\n", hook_calls);
  return hook_calls == 2 ? 0 : 1;
}
