// Kernels for the GPU suite's cubin and fatbin fixtures (built with nvcc at
// build time where the toolkit is present, embedded into the test binary).
#include <cuda_runtime.h>  // cudaGraphConditionalHandle, cudaGraphSetConditional (CUDA 12.3+)
extern "C" __global__ void dbl(float* p, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] *= 2.0f;
}

// A variable looked up by name (KernelLibrary::global, tests/gpu/gpu_library.cpp).
extern "C" __device__ float fixture_bias[4] = {1.0f, 2.0f, 3.0f, 4.0f};

extern "C" __global__ void iota(unsigned* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

extern "C" __global__ void saxpy(float* y, const float* x, float a, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += a * x[i];
}

// Decrements *c (when not 0) and sets the graph's conditional handle to
// whether it is still non-zero: the body of a `while` node that runs *c times.
extern "C" __global__ void countdown(cudaGraphConditionalHandle h, unsigned* c) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    unsigned v = *c;
    if (v) --v;
    *c = v;
    cudaGraphSetConditional(h, v != 0);
  }
}

// Sets the graph's conditional handle to *v: an if/else or switch node after
// it takes the branch *v names.
extern "C" __global__ void set_handle(cudaGraphConditionalHandle h, const unsigned* v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(h, *v);
}

// out[0] = v: which body of a conditional node ran.
extern "C" __global__ void mark(unsigned* out, unsigned v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *out = v;
}

// Kernels with C++ names (mangled in the image; issue 24, item 14): a
// template in a namespace, instantiated for float and for int, and two
// overloads of one name.
namespace fixture {
template <class T>
__global__ void scale(T* p, T a, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] *= a;
}
template __global__ void scale<float>(float*, float, unsigned);
template __global__ void scale<int>(int*, int, unsigned);

__global__ void add(float* p, float a, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] += a;
}
__global__ void add(int* p, int a, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] += a;
}
}  // namespace fixture
