import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cmath>

#define THREADS 256
#define WARP_SIZE 32
#define NUM_WARPS (THREADS / WARP_SIZE)
#define K_CHUNK 1024

// Fully fused Linear + RMSNorm + SiLU, one block per input row.
// Stage 1: the row of x is staged in shared memory K_CHUNK floats at a time; each warp owns
//          output columns j = warp, warp + NUM_WARPS, ... and computes coalesced dot products
//          with W[j, :], reduced by __shfl_down_sync; lane 0 accumulates into y[row, j].
// Stage 2: block reduction of sum(y^2) -> inverse RMS.
// Stage 3: y = silu(y * inv_rms * weight).
__global__ void linear_rmsnorm_silu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                           const float* __restrict__ bias, const float* __restrict__ scale,
                                           float* __restrict__ y, int M, int N, int K, float eps) {
    __shared__ float xs[K_CHUNK];
    __shared__ float red[NUM_WARPS];
    __shared__ float inv_rms_s;
    int row = blockIdx.x;
    if (row >= M) return;
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    const float* xr = x + (long long)row * K;
    float* yr = y + (long long)row * N;

    // the lane that owns column j (lane 0 of warp j % NUM_WARPS) starts it at the bias
    if (lane == 0) {
        for (int j = warp; j < N; j += NUM_WARPS) yr[j] = bias[j];
    }
    for (int kb = 0; kb < K; kb += K_CHUNK) {
        int len = min(K_CHUNK, K - kb);
        for (int i = threadIdx.x; i < len; i += THREADS) xs[i] = xr[kb + i];
        __syncthreads();
        for (int j = warp; j < N; j += NUM_WARPS) {
            const float* wr = w + (long long)j * K + kb;
            float s = 0.0f;
            for (int i = lane; i < len; i += WARP_SIZE) s += xs[i] * wr[i];
            #pragma unroll
            for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffff, s, offset);
            if (lane == 0) yr[j] += s;
        }
        __syncthreads();
    }
    __syncthreads();   // y[row, :] complete and visible to the whole block

    float ss = 0.0f;
    for (int j = threadIdx.x; j < N; j += THREADS) {
        float v = yr[j];
        ss += v * v;
    }
    #pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) ss += __shfl_down_sync(0xffffffff, ss, offset);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < NUM_WARPS; ++i) t += red[i];
        inv_rms_s = 1.0f / sqrtf(t / (float)N + eps);
    }
    __syncthreads();
    float inv_rms = inv_rms_s;
    for (int j = threadIdx.x; j < N; j += THREADS) {
        float v = yr[j] * inv_rms * scale[j];
        yr[j] = v / (1.0f + expf(-v));
    }
}

torch::Tensor linear_rmsnorm_silu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                          torch::Tensor scale, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && scale.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "x and weight must be 2D");
    TORCH_CHECK(x.size(1) == weight.size(1), "in_features mismatch");
    TORCH_CHECK(bias.numel() == weight.size(0) && scale.numel() == weight.size(0), "parameter size mismatch");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto sc = scale.contiguous();
    int M = xc.size(0);
    int K = xc.size(1);
    int N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    linear_rmsnorm_silu_kernel<<<M, THREADS>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                               sc.data_ptr<float>(), y.data_ptr<float>(), M, N, K, (float)eps);
    return y;
}
"""

cpp_source = ("torch::Tensor linear_rmsnorm_silu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, "
              "torch::Tensor scale, double eps);")

linear_rmsnorm_silu_module = load_inline(
    name="oakb_level2_14_linear_rmsnorm_silu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_rmsnorm_silu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, eps: float = 1e-5):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(torch.ones(out_features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_rmsnorm_silu_module.linear_rmsnorm_silu_forward(
            x, self.linear.weight, self.linear.bias, self.weight, self.eps)
