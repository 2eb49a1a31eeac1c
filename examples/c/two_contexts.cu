// Two CUDA contexts in one process on one GPU: the runtime's primary context, then a context
// the program creates with the driver API, each running its own kernels. gmprof profiles the
// first context; the second must never be silent: the summary's first line and injection.json
// name it with its kernel launches (scripts/gpu/contexts-validate.sh).
//
//   nvcc -o two_contexts examples/c/two_contexts.cu -lcuda
//   ./two_contexts [LAUNCHES]      # LAUNCHES kernels in the first context, 2x in the second
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

__global__ void scale(float* x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

#define CHECK(call)                                                               \
  do {                                                                            \
    int err_ = (int)(call);                                                       \
    if (err_ != 0) {                                                              \
      fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, err_); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

static int run(int launches, int n) {
  float* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  for (int i = 0; i < launches; ++i) scale<<<(n + 255) / 256, 256>>>(x, n, 1.0001f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  return 0;
}

int main(int argc, char** argv) {
  int launches = argc > 1 ? atoi(argv[1]) : 50;
  const int n = 1 << 20;
  // The first context: the runtime's primary context of device 0.
  if (run(launches, n)) return 1;
  // The second: created by the program (cuCtxCreate makes it current; the runtime then uses it).
  CUdevice dev;
  CUcontext second;
  CHECK(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
  CHECK(cuCtxCreate(&second, nullptr, 0, dev));  // CUDA 13: (ctx, params, flags, dev)
#else
  CHECK(cuCtxCreate(&second, 0, dev));
#endif
  if (run(2 * launches, n)) return 1;
  CHECK(cuCtxDestroy(second));
  // Back on the primary context.
  CHECK(cudaSetDevice(0));
  if (run(launches, n)) return 1;
  printf("two_contexts: %d kernels in the primary context, %d in a second context\n", 2 * launches, 2 * launches);
  return 0;
}
