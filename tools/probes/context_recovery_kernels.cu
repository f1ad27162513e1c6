#include <cassert>
extern "C" __global__ void boom(unsigned fire) { assert(fire == 0); }
extern "C" __global__ void twice(float* out, const float* in, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = 2.0f * in[i]; }
