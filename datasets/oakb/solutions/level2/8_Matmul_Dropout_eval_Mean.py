import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define COLMEAN_THREADS 256
#define WARP_SIZE 32
#define DOT_WARPS 4

// mean_j (x . W[j, :] + b[j]) == x . mean_j W[j, :] + mean_j b[j]  (dropout is the identity
// in inference). Kernel 1: column means of the weight (one thread per input feature, coalesced
// over rows) and, from thread 0, the mean of the bias.
__global__ void weight_colmean_kernel(const float* __restrict__ w, const float* __restrict__ bias,
                                      float* __restrict__ w_mean, float* __restrict__ b_mean, int N, int K) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < K) {
        float s = 0.0f;
        for (int j = 0; j < N; ++j) s += w[(long long)j * K + k];
        w_mean[k] = s / (float)N;
    }
    if (k == 0) {
        float s = 0.0f;
        for (int j = 0; j < N; ++j) s += bias[j];
        b_mean[0] = s / (float)N;
    }
}

// Kernel 2: one warp per input row computes x[row] . w_mean (float4 loads when aligned,
// scalar tail) and reduces it with __shfl_xor_sync.
__global__ void row_dot_kernel(const float* __restrict__ x, const float* __restrict__ w_mean,
                               const float* __restrict__ b_mean, float* __restrict__ out,
                               int M, int K, int vectorized) {
    int warp = threadIdx.x / WARP_SIZE;
    int lane = threadIdx.x % WARP_SIZE;
    int row = blockIdx.x * DOT_WARPS + warp;
    if (row >= M) return;
    const float* xr = x + (long long)row * K;
    float s = 0.0f;
    int tail_start = 0;
    if (vectorized) {
        int k4 = K / 4;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* m4 = reinterpret_cast<const float4*>(w_mean);
        for (int i = lane; i < k4; i += WARP_SIZE) {
            float4 a = x4[i];
            float4 b = m4[i];
            s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
        tail_start = k4 * 4;
    }
    for (int k = tail_start + lane; k < K; k += WARP_SIZE) s += xr[k] * w_mean[k];
    #pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffff, s, offset);
    if (lane == 0) out[row] = s + b_mean[0];
}

torch::Tensor matmul_mean_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
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
    TORCH_CHECK(N > 0, "out_features must be positive");
    auto out = torch::empty({M, 1}, xc.options());
    auto w_mean = torch::empty({K > 0 ? K : 1}, xc.options());
    auto b_mean = torch::empty({1}, xc.options());
    int cm_blocks = (K + COLMEAN_THREADS - 1) / COLMEAN_THREADS;
    if (cm_blocks < 1) cm_blocks = 1;
    weight_colmean_kernel<<<cm_blocks, COLMEAN_THREADS>>>(wc.data_ptr<float>(), bc.data_ptr<float>(),
                                                          w_mean.data_ptr<float>(), b_mean.data_ptr<float>(), N, K);
    if (M == 0) return out;
    int vectorized = ((K % 4) == 0 &&
                      reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w_mean.data_ptr<float>()) % 16 == 0) ? 1 : 0;
    int blocks = (M + DOT_WARPS - 1) / DOT_WARPS;
    row_dot_kernel<<<blocks, DOT_WARPS * WARP_SIZE>>>(xc.data_ptr<float>(), w_mean.data_ptr<float>(),
                                                      b_mean.data_ptr<float>(), out.data_ptr<float>(), M, K, vectorized);
    return out;
}
"""

cpp_source = "torch::Tensor matmul_mean_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

matmul_mean_module = load_inline(
    name="oakb_level2_8_matmul_dropout_eval_mean",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_mean_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, dropout_p: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout_p = dropout_p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return matmul_mean_module.matmul_mean_forward(x, self.matmul.weight, self.matmul.bias)
