// Kernels for the GPU suite's cubin and fatbin fixtures (built with nvcc at
// build time where the toolkit is present, embedded into the test binary).
extern "C" __global__ void dbl(float* p, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] *= 2.0f;
}

extern "C" __global__ void iota(unsigned* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}
