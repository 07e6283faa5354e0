import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE_DIM 32

// C (M, N) = A^T @ B with A stored (K, M) and B stored (K, N). Both operands are read row by row
// of K, so tile loads are coalesced along M and N. 32x32 threads, one output each; the shared
// tiles are padded by one column to avoid bank conflicts.
__global__ void matmul_at_b_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                   int M, int K, int N) {
    __shared__ float As[TILE_DIM][TILE_DIM + 1];  // As[k][m]
    __shared__ float Bs[TILE_DIM][TILE_DIM + 1];  // Bs[k][n]
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int m = blockIdx.y * TILE_DIM + ty;
    int n = blockIdx.x * TILE_DIM + tx;
    int m_load = blockIdx.y * TILE_DIM + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE_DIM) {
        int k = k0 + ty;
        As[ty][tx] = (k < K && m_load < M) ? A[(long long)k * M + m_load] : 0.0f;
        Bs[ty][tx] = (k < K && n < N) ? B[(long long)k * N + n] : 0.0f;
        __syncthreads();

        float partial = 0.0f;
#pragma unroll 8
        for (int kk = 0; kk < TILE_DIM; ++kk) {
            partial += As[kk][ty] * Bs[kk][tx];
        }
        acc += partial;
        __syncthreads();
    }
    if (m < M && n < N) {
        C[(long long)m * N + n] = acc;
    }
}

torch::Tensor matmul_at_b_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "A and B must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "A and B must be 2D");
    TORCH_CHECK(A.size(0) == B.size(0), "A is (K, M) and B is (K, N): first dimensions must match");
    auto Ac = A.contiguous();
    auto Bc = B.contiguous();
    int K = Ac.size(0);
    int M = Ac.size(1);
    int N = Bc.size(1);
    auto C = torch::empty({M, N}, Ac.options());
    if (M == 0 || N == 0) return C;
    dim3 block(TILE_DIM, TILE_DIM);
    dim3 grid((N + TILE_DIM - 1) / TILE_DIM, (M + TILE_DIM - 1) / TILE_DIM);
    matmul_at_b_kernel<<<grid, block>>>(Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), M, K, N);
    return C;
}
"""

cpp_source = "torch::Tensor matmul_at_b_forward(torch::Tensor A, torch::Tensor B);"

matmul_at_b_module = load_inline(
    name="oakb_level1_34_matmul_transposed_a",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_at_b_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_at_b_module.matmul_at_b_forward(A, B)
