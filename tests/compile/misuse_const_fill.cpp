// Must not compile (CASE 1-4): a fill through a span of const elements.
#include "oxicuda.hpp"

void f(const oxicuda::Stream& s, oxicuda::DeviceSpan<const float> d) {
#if CASE == 1
  oxicuda::fill(d, 1.0f);
#elif CASE == 2
  oxicuda::fill_bytes(d, 0);
#elif CASE == 3
  oxicuda::fill_async(s, d, 1.0f);
#elif CASE == 4
  oxicuda::fill_bytes_async(s, d, 0);
#else
  (void)s, (void)d;  // CASE 0: the same function without the fill compiles
#endif
}
