// GraphedStep with no arguments, with one, and with a struct, compiled and
// linked with optimization and warnings as errors (g++ 12 -O2 -Wall once
// gave -Wmaybe-uninitialized for the key of a step without arguments). Only
// built, never run.
#include "oxicuda.hpp"

namespace {

struct Params {
  float scale;
  unsigned count;
};

void steps(const oxicuda::Stream& s, oxicuda::DeviceBuffer<float>& x) {
  oxicuda::GraphedStep none{[&](const oxicuda::Stream& q) { oxicuda::fill_async(q, x, 1.0f); }};
  for (int i = 0; i < 3; ++i) none(s);
  none.reset();
  none(s);
  oxicuda::GraphedStep one{[&](const oxicuda::Stream& q, float v) { oxicuda::fill_async(q, x, v); }};
  one(s, 2.0f);
  oxicuda::GraphedStep two{[&](const oxicuda::Stream& q, Params p) { oxicuda::fill_async(q, x, p.scale); }};
  two(s, Params{3.0f, 4u});
  auto moved = std::move(none);
  moved(s);
}

}  // namespace

int main() {
  try {
    oxicuda::Context ctx = oxicuda::Context::primary(oxicuda::Device::get(0));
    oxicuda::Stream s{ctx};
    oxicuda::DeviceBuffer<float> x(ctx, 64);
    steps(s, x);
  } catch (const oxicuda::Error&) {
    return 1;
  }
  return 0;
}
