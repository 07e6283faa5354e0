import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE 16

// y[m, n] = relu(sum_k x[m, k] * w[n, k] + bias[n]).
// Shared-memory tiled GEMM, one output per thread; the weight tile is padded (TILE + 1) so the
// transposed reads ws[tx][k] are bank-conflict free. Each K-tile's partial dot is formed first
// and then added to the running sum.
__global__ void gemm_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ y,
                                      int M, int N, int K) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    int wrow = blockIdx.x * TILE + ty;   // weight row (output feature) loaded by this thread

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int kk = k0 + tx;
        xs[ty][tx] = (row < M && kk < K) ? x[(long long)row * K + kk] : 0.0f;
        ws[ty][tx] = (wrow < N && kk < K) ? w[(long long)wrow * K + kk] : 0.0f;
        __syncthreads();
        float part = 0.0f;
        #pragma unroll
        for (int k = 0; k < TILE; ++k) {
            part += xs[ty][k] * ws[tx][k];
        }
        acc += part;
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = acc + bias[col];
        y[(long long)row * N + col] = fmaxf(v, 0.0f);
    }
}

torch::Tensor gemm_bias_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "x and weight must be 2D");
    TORCH_CHECK(x.size(1) == weight.size(1), "in_features mismatch");
    TORCH_CHECK(bias.numel() == weight.size(0), "bias size mismatch");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    int M = xc.size(0);
    int K = xc.size(1);
    int N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_bias_relu_kernel<<<grid, block>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                           y.data_ptr<float>(), M, N, K);
    return y;
}
"""

cpp_source = "torch::Tensor gemm_bias_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

gemm_bias_relu_module = load_inline(
    name="oakb_level2_1_gemm_bias_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_bias_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_bias_relu_module.gemm_bias_relu_forward(x, self.gemm.weight, self.bias)
