import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
#define THREADS ((BM / TM) * (BN / TN))

// Register-tiled GEMM: a 64x64 output tile per block, each of the 16x16 threads computes a
// 4x4 micro-tile from K-major shared tiles. Epilogue: v = acc + bias; y = v * scale + v.
__global__ void matmul_scale_residual_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                             const float* __restrict__ bias, float* __restrict__ y,
                                             int M, int N, int K, float scaling) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int tid = ty * blockDim.x + tx;
    int row0 = blockIdx.y * BM;
    int col0 = blockIdx.x * BN;

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += THREADS) {
            int r = i / BK;
            int kk = i % BK;
            int gk = k0 + kk;
            int gm = row0 + r;
            int gn = col0 + r;
            As[kk][r] = (gm < M && gk < K) ? x[(long long)gm * K + gk] : 0.0f;
            Bs[kk][r] = (gn < N && gk < K) ? w[(long long)gn * K + gk] : 0.0f;
        }
        __syncthreads();
        float part[TM][TN];
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) part[i][j] = 0.0f;
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM];
            float b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx * TN + j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) part[i][j] += a[i] * b[j];
        }
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += part[i][j];
        __syncthreads();
    }

    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        int r = row0 + ty * TM + i;
        if (r >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            int c = col0 + tx * TN + j;
            if (c < N) {
                float v = acc[i][j] + bias[c];
                y[(long long)r * N + c] = v * scaling + v;
            }
        }
    }
}

torch::Tensor matmul_scale_residual_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scaling) {
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
    dim3 block(BN / TN, BM / TM);
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    matmul_scale_residual_kernel<<<grid, block>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                                  y.data_ptr<float>(), M, N, K, (float)scaling);
    return y;
}
"""

cpp_source = "torch::Tensor matmul_scale_residual_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scaling);"

matmul_scale_residual_module = load_inline(
    name="oakb_level2_2_matmul_scale_residualadd",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_scale_residual_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return matmul_scale_residual_module.matmul_scale_residual_forward(
            x, self.matmul.weight, self.matmul.bias, self.scaling_factor)
