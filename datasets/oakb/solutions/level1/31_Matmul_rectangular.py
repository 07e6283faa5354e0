import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE 32
#define ROWS_PER_THREAD 4
#define BLOCK_ROWS (TILE / ROWS_PER_THREAD)

// 32x32 output tile per block of 32x8 threads; each thread owns ROWS_PER_THREAD outputs of one
// column (register blocking along M). The B value of a column is reused from a register for all rows.
__global__ void matmul_rect_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                   int M, int K, int N) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row_base = blockIdx.y * TILE;
    int col = blockIdx.x * TILE + tx;

    float acc[ROWS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < ROWS_PER_THREAD; ++r) acc[r] = 0.0f;

    int num_tiles = (K + TILE - 1) / TILE;
    for (int t = 0; t < num_tiles; ++t) {
        int k0 = t * TILE;
#pragma unroll
        for (int r = 0; r < ROWS_PER_THREAD; ++r) {
            int lr = ty + r * BLOCK_ROWS;
            int a_row = row_base + lr;
            int a_col = k0 + tx;
            As[lr][tx] = (a_row < M && a_col < K) ? A[(long long)a_row * K + a_col] : 0.0f;
            int b_row = k0 + lr;
            Bs[lr][tx] = (b_row < K && col < N) ? B[(long long)b_row * N + col] : 0.0f;
        }
        __syncthreads();

        float partial[ROWS_PER_THREAD];
#pragma unroll
        for (int r = 0; r < ROWS_PER_THREAD; ++r) partial[r] = 0.0f;
#pragma unroll 8
        for (int kk = 0; kk < TILE; ++kk) {
            float b = Bs[kk][tx];
#pragma unroll
            for (int r = 0; r < ROWS_PER_THREAD; ++r) {
                partial[r] += As[ty + r * BLOCK_ROWS][kk] * b;
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS_PER_THREAD; ++r) acc[r] += partial[r];
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < ROWS_PER_THREAD; ++r) {
        int row = row_base + ty + r * BLOCK_ROWS;
        if (row < M && col < N) {
            C[(long long)row * N + col] = acc[r];
        }
    }
}

torch::Tensor matmul_rect_forward(torch::Tensor A, torch::Tensor B) {
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
    dim3 block(TILE, BLOCK_ROWS);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_rect_kernel<<<grid, block>>>(Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), M, K, N);
    return C;
}
"""

cpp_source = "torch::Tensor matmul_rect_forward(torch::Tensor A, torch::Tensor B);"

matmul_rect_module = load_inline(
    name="oakb_level1_31_matmul_rectangular",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_rect_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_rect_module.matmul_rect_forward(A, B)
