// CUDA kernels for the gmprof example/test workloads, compiled at run time by NVRTC
// (see mod.rs). NVRTC provides the device builtins and math functions (expf, logf,
// fmaxf) without any #include, so this file must stay include-free.
//
// All matrices are row-major. Element counts are passed as int: the host side asserts
// that every buffer has fewer than 2^31 elements.
//
// Reductions use shared memory and __syncthreads() rather than warp shuffles: these
// kernels are a few microseconds each at the example sizes, and keeping them simple
// lets them be checked on a CPU by emulating the thread grid.

#define BLOCK 256
#define NEG_FLT_MAX (-3.402823466e38f)

// c[i] = a[i] + b[i]: the synthetic benchmark's unit of work.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

// Near-empty kernel for launch-overhead tests: one block of 32 threads, one thread bumps
// a counter so a test can check how many launches actually ran (a plain increment is
// race-free because launches on one stream run one after another).
extern "C" __global__ void tiny(int* counter) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        counter[0] += 1;
    }
}

// Forward hidden layer epilogue: z += bias (broadcast over rows), a = relu(z).
// z keeps the pre-activation because relu_backward needs its sign.
extern "C" __global__ void bias_relu(float* z, const float* bias, float* a, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float v = z[i] + bias[i % cols];
        z[i] = v;
        a[i] = v > 0.0f ? v : 0.0f;
    }
}

// grad *= (z > 0), in place.
extern "C" __global__ void relu_backward(float* grad, const float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !(z[i] > 0.0f)) {
        grad[i] = 0.0f;
    }
}

// One block (BLOCK threads) per row: probs = softmax(logits + bias) and the row's
// cross-entropy loss -log(probs[label]), computed stably as
// -(x[label] - max - log(sum(exp(x - max)))).
extern "C" __global__ void softmax_xent_forward(const float* logits, const float* bias,
                                                const int* labels, float* probs,
                                                float* row_loss, int rows, int cols) {
    __shared__ float red[BLOCK];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    if (row >= rows) {
        return;  // uniform across the block, so no thread is left waiting at a barrier
    }
    const float* x = logits + (long long)row * cols;
    float* p = probs + (long long)row * cols;

    float m = NEG_FLT_MAX;
    for (int c = tid; c < cols; c += BLOCK) {
        m = fmaxf(m, x[c] + bias[c]);
    }
    red[tid] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) {
            red[tid] = fmaxf(red[tid], red[tid + s]);
        }
        __syncthreads();
    }
    m = red[0];
    __syncthreads();  // everyone has read red[0] before it is reused below

    float sum = 0.0f;
    for (int c = tid; c < cols; c += BLOCK) {
        float e = expf(x[c] + bias[c] - m);
        p[c] = e;
        sum += e;
    }
    red[tid] = sum;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) {
            red[tid] += red[tid + s];
        }
        __syncthreads();
    }
    float total = red[0];

    float inv = 1.0f / total;
    for (int c = tid; c < cols; c += BLOCK) {
        p[c] *= inv;  // each thread rescales only the elements it wrote
    }
    if (tid == 0) {
        int y = labels[row];
        row_loss[row] = -(x[y] + bias[y] - m - logf(total));
    }
}

// d(mean loss)/d(logits) = (probs - onehot(label)) * scale, with scale = 1/rows.
extern "C" __global__ void softmax_xent_backward(const float* probs, const int* labels,
                                                 float* dlogits, int rows, int cols,
                                                 float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        int row = i / cols;
        int col = i % cols;
        float g = probs[i] - (col == labels[row] ? 1.0f : 0.0f);
        dlogits[i] = g * scale;
    }
}

// out[c] = sum over rows of m[r][c]: the bias gradient. One thread per column, so
// neighbouring threads read neighbouring addresses on every row (coalesced).
extern "C" __global__ void column_sum(const float* m, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float s = 0.0f;
        for (int r = 0; r < rows; ++r) {
            s += m[(long long)r * cols + c];
        }
        out[c] = s;
    }
}

// Plain SGD: w -= lr * g.
extern "C" __global__ void sgd_update(float* w, const float* g, float lr, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        w[i] -= lr * g[i];
    }
}
