import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE_DIM 32

// Tiled GEMM with 32x32 blocks (one output per thread) fused with bias, min against the
// learned scalar and subtraction of that scalar. The scalar is read from device memory.
__global__ void matmul_min_sub_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, const float* __restrict__ constant,
                                      float* __restrict__ y, int M, int N, int K) {
    __shared__ float a_tile[TILE_DIM][TILE_DIM];
    __shared__ float b_tile[TILE_DIM][TILE_DIM + 1];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE_DIM + ty;
    int col = blockIdx.x * TILE_DIM + tx;
    int b_row = blockIdx.x * TILE_DIM + ty;
    int num_tiles = (K + TILE_DIM - 1) / TILE_DIM;

    float sum = 0.0f;
    for (int t = 0; t < num_tiles; ++t) {
        int k = t * TILE_DIM + tx;
        a_tile[ty][tx] = (row < M && k < K) ? x[(long long)row * K + k] : 0.0f;
        b_tile[ty][tx] = (b_row < N && k < K) ? w[(long long)b_row * K + k] : 0.0f;
        __syncthreads();
        float part = 0.0f;
        #pragma unroll
        for (int i = 0; i < TILE_DIM; ++i) part += a_tile[ty][i] * b_tile[tx][i];
        sum += part;
        __syncthreads();
    }
    if (row < M && col < N) {
        float c = __ldg(constant);
        float v = sum + bias[col];
        v = fminf(v, c);
        y[(long long)row * N + col] = v - c;
    }
}

torch::Tensor matmul_min_sub_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor constant) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && constant.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "x and weight must be 2D");
    TORCH_CHECK(x.size(1) == weight.size(1), "in_features mismatch");
    TORCH_CHECK(bias.numel() == weight.size(0), "bias size mismatch");
    TORCH_CHECK(constant.numel() == 1, "constant must be a scalar");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto cc = constant.contiguous();
    int M = xc.size(0);
    int K = xc.size(1);
    int N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    dim3 block(TILE_DIM, TILE_DIM);
    dim3 grid((N + TILE_DIM - 1) / TILE_DIM, (M + TILE_DIM - 1) / TILE_DIM);
    matmul_min_sub_kernel<<<grid, block>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                           cc.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    return y;
}
"""

cpp_source = ("torch::Tensor matmul_min_sub_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, "
              "torch::Tensor constant);")

matmul_min_sub_module = load_inline(
    name="oakb_level2_11_matmul_min_subtract",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_min_sub_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, constant: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return matmul_min_sub_module.matmul_min_sub_forward(x, self.linear.weight, self.linear.bias, self.constant)
