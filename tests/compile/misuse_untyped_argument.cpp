// Must not compile (CASE 1-3): an untyped launch given an argument whose
// bytes are not a kernel parameter.
#include <string>

#include "oxicuda.hpp"

void f(const oxicuda::Stream& s, const oxicuda::Function& fn, const oxicuda::DeviceBuffer<float>& b) {
#if CASE == 1
  oxicuda::launch(s, fn, {}, b, 8u);  // the buffer object, not its address
#elif CASE == 2
  oxicuda::launch(s, fn, {}, b.device_span(), 8u);
#elif CASE == 3
  oxicuda::launch(s, fn, {}, std::string("x"), 8u);
#else
  oxicuda::launch(s, fn, {}, b.data(), 8u);  // CASE 0: the address compiles
#endif
}
