import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define THREADS 256
#define WARP_SIZE 32
#define SPLIT_K 2

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffff, v, offset);
    }
    return v;
}

// y = A @ x. Each row is split into SPLIT_K chunks (blockIdx.y); a block reduces one chunk of one
// row with float4 loads (scalar tail when the row is not 16-byte aligned), warp shuffles and a
// shared-memory pass, then atomically adds its partial into the zero-initialised output.
// With SPLIT_K == 2 the result is bitwise deterministic (0 + a + b == 0 + b + a).
__global__ void matvec_splitk_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
                                     int M, int K, int use_vec) {
    __shared__ float warp_sums[THREADS / WARP_SIZE];
    int row = blockIdx.x;
    if (row >= M) return;
    // chunk length rounded up to a multiple of 4 so every chunk starts on a float4 boundary
    int chunk = (((K + SPLIT_K - 1) / SPLIT_K) + 3) & ~3;
    int k_begin = blockIdx.y * chunk;
    int k_end = min(K, k_begin + chunk);
    const float* a_row = A + (long long)row * K;

    float sum = 0.0f;
    int len = k_end > k_begin ? k_end - k_begin : 0;
    int nvec = use_vec ? len / 4 : 0;
    const float4* a4 = reinterpret_cast<const float4*>(a_row + k_begin);
    const float4* x4 = reinterpret_cast<const float4*>(x + k_begin);
    for (int i = threadIdx.x; i < nvec; i += THREADS) {
        float4 a = a4[i];
        float4 b = __ldg(&x4[i]);
        sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    for (int k = k_begin + nvec * 4 + threadIdx.x; k < k_end; k += THREADS) {
        sum += a_row[k] * __ldg(&x[k]);
    }

    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    sum = warp_reduce_sum(sum);
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        float v = lane < THREADS / WARP_SIZE ? warp_sums[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) atomicAdd(&y[row], v);
    }
}

torch::Tensor matvec_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "A and B must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && B.size(1) == 1, "expected A (M, K) and B (K, 1)");
    TORCH_CHECK(A.size(1) == B.size(0), "inner dimensions must match");
    auto Ac = A.contiguous();
    auto Bc = B.contiguous();
    int M = Ac.size(0);
    int K = Ac.size(1);
    auto y = torch::zeros({M, 1}, Ac.options());
    if (M == 0) return y;
    const float* a_ptr = Ac.data_ptr<float>();
    const float* b_ptr = Bc.data_ptr<float>();
    int use_vec = (K % 4 == 0) && ((reinterpret_cast<uintptr_t>(a_ptr) & 15) == 0) &&
                  ((reinterpret_cast<uintptr_t>(b_ptr) & 15) == 0);
    dim3 grid(M, SPLIT_K);
    matvec_splitk_kernel<<<grid, THREADS>>>(a_ptr, b_ptr, y.data_ptr<float>(), M, K, use_vec);
    return y;
}
"""

cpp_source = "torch::Tensor matvec_forward(torch::Tensor A, torch::Tensor B);"

matvec_module = load_inline(
    name="oakb_level1_33_matrix_vector_multiplication",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matvec_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matvec_module.matvec_forward(A, B)
