// An unmodified C/CUDA training loop for `gmprof run`, llm.c style: NVTX ranges only, no
// gmprof header or library. An MLP of LAYERS square layers (width 1024, batch 256) trains
// with plain SGD on random data.
//
//   nvcc -O2 -o nvtx_mlp_train examples/c/nvtx_mlp_train.cu
//   gmprof run -o out -- ./nvtx_mlp_train STEPS LAYERS [SLEEP_MS]
//
// Ranges: "Train step N" > "forward" > "layer L", "loss", "backward" > "layer L", "optimizer".
// Kernels per step, exactly: forward 2 per layer (matmul, bias+relu), loss 1, backward 3 per
// layer (weight-gradient matmul, input-gradient matmul, relu mask), optimizer 1 per layer:
// 6 * LAYERS + 1. SLEEP_MS (default 0) sleeps between steps, so a signal can land mid-run.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <unistd.h>
#include <nvtx3/nvToolsExt.h>
#include <cuda_runtime.h>

constexpr int W = 1024, B = 256, T = 16;

// C[m][n] = sum_k A[m][k] * B[k][n] (ta: A transposed, tb: B transposed), tiled.
__global__ void matmul(const float* a, const float* b, float* c, int m, int n, int k, bool ta, bool tb) {
    __shared__ float as[T][T], bs[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < k; t += T) {
        int ak = t + threadIdx.x, bk = t + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? (ta ? a[ak * m + row] : a[row * k + ak]) : 0.f;
        bs[threadIdx.y][threadIdx.x] = (bk < k && col < n) ? (tb ? b[col * k + bk] : b[bk * n + col]) : 0.f;
        __syncthreads();
        for (int i = 0; i < T; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

__global__ void bias_relu(float* x, const float* bias, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) x[i] = fmaxf(x[i] + bias[i % cols], 0.f);
}

__global__ void loss_grad(const float* y, const float* target, float* dy, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dy[i] = 2.f * (y[i] - target[i]) / n;
}

__global__ void relu_mask(float* dx, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] <= 0.f) dx[i] = 0.f;
}

__global__ void sgd(float* w, const float* dw, float lr, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] -= lr * dw[i];
}

#define CUDA(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
    const int layers = argc > 2 ? std::atoi(argv[2]) : 4;
    const int sleep_ms = argc > 3 ? std::atoi(argv[3]) : 0;
    std::vector<float*> w(layers), dw(layers), bias(layers), act(layers + 1), grad(layers + 1);
    std::vector<float> host(W * W);
    for (auto& v : host) v = (std::rand() / (float)RAND_MAX - 0.5f) * 0.05f;
    for (int l = 0; l < layers; ++l) {
        CUDA(cudaMalloc(&w[l], W * W * sizeof(float)));
        CUDA(cudaMalloc(&dw[l], W * W * sizeof(float)));
        CUDA(cudaMalloc(&bias[l], W * sizeof(float)));
        CUDA(cudaMemcpy(w[l], host.data(), W * W * sizeof(float), cudaMemcpyHostToDevice));
        CUDA(cudaMemset(bias[l], 0, W * sizeof(float)));
    }
    for (int l = 0; l <= layers; ++l) {
        CUDA(cudaMalloc(&act[l], B * W * sizeof(float)));
        CUDA(cudaMalloc(&grad[l], B * W * sizeof(float)));
    }
    float* target;
    CUDA(cudaMalloc(&target, B * W * sizeof(float)));
    CUDA(cudaMemcpy(act[0], host.data(), B * W * sizeof(float), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(target, host.data() + B * W, B * W * sizeof(float), cudaMemcpyHostToDevice));
    const dim3 tile(T, T), grid_act(W / T, B / T), grid_w(W / T, W / T);
    const int n_act = B * W, n_w = W * W, th = 256;
    char name[64];
    for (int s = 0; s < steps; ++s) {
        std::snprintf(name, sizeof name, "Train step %d", s);
        nvtxRangePushA(name);
        nvtxRangePushA("forward");
        for (int l = 0; l < layers; ++l) {
            std::snprintf(name, sizeof name, "layer %d", l);
            nvtxRangePushA(name);
            matmul<<<grid_act, tile>>>(act[l], w[l], act[l + 1], B, W, W, false, false);
            bias_relu<<<(n_act + th - 1) / th, th>>>(act[l + 1], bias[l], B, W);
            nvtxRangePop();
        }
        nvtxRangePop();
        nvtxRangePushA("loss");
        loss_grad<<<(n_act + th - 1) / th, th>>>(act[layers], target, grad[layers], n_act);
        nvtxRangePop();
        nvtxRangePushA("backward");
        for (int l = layers - 1; l >= 0; --l) {
            std::snprintf(name, sizeof name, "layer %d", l);
            nvtxRangePushA(name);
            relu_mask<<<(n_act + th - 1) / th, th>>>(grad[l + 1], act[l + 1], n_act);
            matmul<<<grid_w, tile>>>(act[l], grad[l + 1], dw[l], W, W, B, true, false);
            matmul<<<grid_act, tile>>>(grad[l + 1], w[l], grad[l], B, W, W, false, true);
            nvtxRangePop();
        }
        nvtxRangePop();
        nvtxRangePushA("optimizer");
        for (int l = 0; l < layers; ++l) sgd<<<(n_w + th - 1) / th, th>>>(w[l], dw[l], 1e-3f, n_w);
        nvtxRangePop();
        CUDA(cudaDeviceSynchronize());
        nvtxRangePop();
        if (sleep_ms > 0) usleep(sleep_ms * 1000);
    }
    std::printf("nvtx_mlp_train: %d steps, %d layers, %d kernels\n", steps, layers, steps * (6 * layers + 1));
    return 0;
}
