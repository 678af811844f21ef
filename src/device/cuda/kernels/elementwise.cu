// parbench's element-wise GPU kernels: the ops the chapter's experiments need beyond cuBLAS
// (`y = x + 1`, a layer's bias and ReLU, a scaling). Each is a grid-stride loop over 64-bit
// indices, so one launch shape serves every size.
//
// `elementwise.ptx` beside this file is what the binary loads (the driver JIT-compiles it for
// the GPU at hand, so no CUDA toolkit is needed to build or run parbench). It is nvcc 13's
// output with the PTX ISA version lowered from 9.0 to 7.5 (these kernels use nothing newer),
// so that CUDA 12 drivers load it too:
//   nvcc -ptx -arch=compute_75 -O3 elementwise.cu -o - | sed 's/^\.version 9\.0$/.version 7.5/'
// scripts/gpu-check.sh regenerates it wherever nvcc is found and fails if it differs.

#define GRID_STRIDE(i, n)                                                        \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
         i < (n); i += (unsigned long long)blockDim.x * gridDim.x)

// y = x + s
extern "C" __global__ void add_scalar(const float* __restrict__ x, float* __restrict__ y,
                                      float s, unsigned long long n) {
    GRID_STRIDE(i, n) { y[i] = x[i] + s; }
}

// y = s · x
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y,
                                 float s, unsigned long long n) {
    GRID_STRIDE(i, n) { y[i] = x[i] * s; }
}

// y = max(x, 0); a NaN becomes 0, as Rust's f32::max does on the CPU.
extern "C" __global__ void relu(const float* __restrict__ x, float* __restrict__ y,
                                unsigned long long n) {
    GRID_STRIDE(i, n) { y[i] = fmaxf(x[i], 0.0f); }
}

// y = x + b, the 1×cols row b added to every row of the row-major rows×cols x.
extern "C" __global__ void add_row(const float* __restrict__ x, const float* __restrict__ b,
                                   float* __restrict__ y, unsigned long long rows,
                                   unsigned long long cols) {
    GRID_STRIDE(i, rows * cols) { y[i] = x[i] + b[i % cols]; }
}
