// Small device-only kernels for the mutate-stage tests (TCE verdicts, compile errors, the output folder).

// out = a * x + y, every pointer __restrict__: each input is read once, so dropping a __restrict__
// leaves the machine code unchanged.
__global__ void axpy_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                            float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a * x[i] + y[i];
    }
}

// 1 / x: the division made a product (1.0f * x) or its operands swapped (x / 1.0f) are both plain x.
__global__ void reciprocal_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f / x[i];
}

// Reversed through shared memory behind a doubled barrier: dropping either barrier gives the same code.
__global__ void reverse_kernel(const float* x, float* out, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    __syncthreads();
    if (i < n) out[i] = tile[255 - threadIdx.x];
}
