import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE 16

// Classic shared-memory tiled GEMM: one output per thread, TILE x TILE tiles of A and B staged in
// shared memory, zero-filled outside the matrices. Each tile's products are summed into a partial
// that is then added to the running total (keeps the fp32 rounding error low for long K).
__global__ void matmul_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                    int M, int K, int N) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int a_col = k0 + tx;
        int b_row = k0 + ty;
        As[ty][tx] = (row < M && a_col < K) ? A[(long long)row * K + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < K && col < N) ? B[(long long)b_row * N + col] : 0.0f;
        __syncthreads();

        float partial = 0.0f;
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) {
            partial += As[ty][kk] * Bs[kk][tx];
        }
        acc += partial;
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(long long)row * N + col] = acc;
    }
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "A and B must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "A and B must be 2D");
    TORCH_CHECK(A.size(1) == B.size(0), "inner dimensions must match");
    auto Ac = A.contiguous();
    auto Bc = B.contiguous();
    int M = Ac.size(0);
    int K = Ac.size(1);
    int N = Bc.size(1);
    auto C = torch::empty({M, N}, Ac.options());
    if (M == 0 || N == 0) return C;
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled_kernel<<<grid, block>>>(Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), M, K, N);
    return C;
}
"""

cpp_source = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);"

matmul_module = load_inline(
    name="oakb_level1_30_square_matrix_multiplication",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_module.matmul_forward(A, B)
