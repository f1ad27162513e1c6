// Must not compile: an argument that cannot convert to its parameter type.
#include "oxicuda.hpp"

void f(const oxicuda::Stream& s, const oxicuda::Kernel<void(float*, unsigned)>& k, int* wrong) {
  oxicuda::launch(s, k, {}, wrong, 1u);
}
