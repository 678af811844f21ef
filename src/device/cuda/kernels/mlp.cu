// parbench's MLP training kernels (`data-parallel --device cuda`): what one SGD step needs
// beyond cuBLAS's products. Each kernel has a host reference in
// src/scenario/data_parallel/gpu_step.rs that computes the same values in the same order.
//
// `mlp.ptx` beside this file is what the binary loads, made exactly as elementwise.ptx is
// (see the top of elementwise.cu):
//   nvcc -ptx -arch=compute_75 -O3 mlp.cu -o - | sed 's/^\.version 9\.0$/.version 7.5/'
// scripts/gpu-check.sh regenerates it wherever nvcc is found and fails if it differs.
//
// Conventions: matrices are row-major; class labels are stored as floats (exact below 2^24);
// the step counter is one 32-bit unsigned integer held in a float buffer's slot, so that every
// buffer comes from parbench's f32 memory pool. A step's kernels read the counter (the batch's
// rows, the loss's slot) and `record_loss` advances it, so a captured CUDA graph of the step
// trains on the next batch at every replay.

#define GRID_STRIDE(i, n)                                                        \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
         i < (n); i += (unsigned long long)blockDim.x * gridDim.x)

// The step's batch: rows (step · batch + r) mod samples of the samples×inputs `x` into the
// batch×inputs `xb`, their labels into `yb`.
extern "C" __global__ void gather_batch(const float* __restrict__ x, const float* __restrict__ y,
                                        const unsigned int* __restrict__ step,
                                        float* __restrict__ xb, float* __restrict__ yb,
                                        unsigned long long samples, unsigned long long batch,
                                        unsigned long long inputs) {
    unsigned long long start = (unsigned long long)(*step) * batch;
    GRID_STRIDE(i, batch * inputs) {
        unsigned long long r = i / inputs, c = i % inputs;
        unsigned long long src = (start + r) % samples;
        xb[i] = x[src * inputs + c];
        if (c == 0) yb[r] = y[src];
    }
}

// z = z + b (the 1×cols row b added to every row of the rows×cols z), then ReLU where `relu`
// is set: a hidden layer's output in place. fmaxf turns a NaN into 0, as Rust's f32::max does.
extern "C" __global__ void bias_act(float* __restrict__ z, const float* __restrict__ b,
                                    unsigned long long rows, unsigned long long cols, int relu) {
    GRID_STRIDE(i, rows * cols) {
        float v = z[i] + b[i % cols];
        z[i] = relu ? fmaxf(v, 0.0f) : v;
    }
}

// Softmax cross-entropy of each row of the rows×classes logits, one thread a row:
// row_loss[r] = log Σ exp(z - max) + max - z[label] and delta = (softmax(z) - onehot) / scale,
// in the host's order of operations. A label outside the classes gives a NaN loss.
extern "C" __global__ void softmax_xent(const float* __restrict__ logits,
                                        const float* __restrict__ labels,
                                        float* __restrict__ delta, float* __restrict__ row_loss,
                                        unsigned long long rows, unsigned long long classes,
                                        float scale) {
    GRID_STRIDE(r, rows) {
        const float* z = logits + r * classes;
        float* d = delta + r * classes;
        float m = -INFINITY;
        for (unsigned long long j = 0; j < classes; ++j) m = fmaxf(m, z[j]);
        float s = 0.0f;
        for (unsigned long long j = 0; j < classes; ++j) s += expf(z[j] - m);
        for (unsigned long long j = 0; j < classes; ++j) d[j] = expf(z[j] - m) / s / scale;
        unsigned long long label = (unsigned long long)labels[r];
        if (label < classes) {
            row_loss[r] = logf(s) + m - z[label];
            d[label] -= 1.0f / scale;
        } else {
            row_loss[r] = __int_as_float(0x7fc00000);
        }
    }
}

// Threads of `record_loss`'s one block.
#define LOSS_THREADS 256

// losses[*step] = Σ row_loss / scale (summed in double: thread t adds rows t, t + 256, ...,
// then a tree over the threads), then *step += 1. One block of LOSS_THREADS threads; a step
// past `capacity` is counted but not recorded.
extern "C" __global__ void record_loss(const float* __restrict__ row_loss,
                                       unsigned long long rows, float scale,
                                       unsigned int* __restrict__ step,
                                       float* __restrict__ losses,
                                       unsigned long long capacity) {
    __shared__ double partial[LOSS_THREADS];
    unsigned int t = threadIdx.x;
    double sum = 0.0;
    for (unsigned long long r = t; r < rows; r += LOSS_THREADS) sum += (double)row_loss[r];
    partial[t] = sum;
    __syncthreads();
    for (unsigned int s = LOSS_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) {
        unsigned int k = *step;
        if (k < capacity) losses[k] = (float)(partial[0] / (double)scale);
        *step = k + 1;
    }
}

// ReLU's derivative: delta = 0 where the layer's output `act` is not positive.
extern "C" __global__ void relu_backward(float* __restrict__ delta, const float* __restrict__ act,
                                         unsigned long long n) {
    GRID_STRIDE(i, n) {
        if (act[i] <= 0.0f) delta[i] = 0.0f;
    }
}

// out[j] = Σ_r x[r][j]: a bias's gradient, the column sums of the rows×cols delta, each
// summed over the rows in order by one thread.
extern "C" __global__ void column_sum(const float* __restrict__ x, float* __restrict__ out,
                                      unsigned long long rows, unsigned long long cols) {
    GRID_STRIDE(j, cols) {
        float s = 0.0f;
        for (unsigned long long r = 0; r < rows; ++r) s += x[r * cols + j];
        out[j] = s;
    }
}

// w = w - lr · g, rounded as the host rounds it (a product, then a difference: no fused
// multiply-add).
extern "C" __global__ void sgd(float* __restrict__ w, const float* __restrict__ g, float lr,
                               unsigned long long n) {
    GRID_STRIDE(i, n) { w[i] = __fsub_rn(w[i], __fmul_rn(lr, g[i])); }
}
