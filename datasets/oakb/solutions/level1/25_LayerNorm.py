import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define WARP_SIZE 32
#define NUM_WARPS (BLOCK_SIZE / WARP_SIZE)

__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffff, v, offset);
    }
    return v;
}

// Block-wide sum, broadcast to every thread. scratch holds NUM_WARPS + 1 floats.
__device__ __forceinline__ float block_reduce_sum(float v, float* scratch) {
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    v = warp_reduce_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < NUM_WARPS ? scratch[lane] : 0.0f;
        t = warp_reduce_sum(t);
        if (lane == 0) scratch[NUM_WARPS] = t;
    }
    __syncthreads();
    float total = scratch[NUM_WARPS];
    __syncthreads();  // scratch is reused by the next reduction
    return total;
}

// One block per row. Two passes over the row (mean, then sum of squared deviations), then the
// affine normalisation. float4 loads when every row is 16-byte aligned, scalar tail otherwise.
__global__ void layernorm_rows_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, float* __restrict__ y,
                                      int rows, int cols, float eps, int use_vec) {
    __shared__ float scratch[NUM_WARPS + 1];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    int nvec = use_vec ? cols / 4 : 0;
    const float4* xv = reinterpret_cast<const float4*>(xr);

    float s = 0.0f;
    for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
        float4 v = xv[i];
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int c = nvec * 4 + threadIdx.x; c < cols; c += BLOCK_SIZE) {
        s += xr[c];
    }
    float mean = block_reduce_sum(s, scratch) / (float)cols;

    float sq = 0.0f;
    for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
        float4 v = xv[i];
        float d0 = v.x - mean, d1 = v.y - mean, d2 = v.z - mean, d3 = v.w - mean;
        sq += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
    }
    for (int c = nvec * 4 + threadIdx.x; c < cols; c += BLOCK_SIZE) {
        float d = xr[c] - mean;
        sq += d * d;
    }
    float var = block_reduce_sum(sq, scratch) / (float)cols;
    float rstd = 1.0f / sqrtf(var + eps);

    const float4* gv = reinterpret_cast<const float4*>(gamma);
    const float4* bv = reinterpret_cast<const float4*>(beta);
    float4* yv = reinterpret_cast<float4*>(yr);
    for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
        float4 v = xv[i];
        float4 g = gv[i];
        float4 b = bv[i];
        float4 o;
        o.x = (v.x - mean) * rstd * g.x + b.x;
        o.y = (v.y - mean) * rstd * g.y + b.y;
        o.z = (v.z - mean) * rstd * g.z + b.z;
        o.w = (v.w - mean) * rstd * g.w + b.w;
        yv[i] = o;
    }
    for (int c = nvec * 4 + threadIdx.x; c < cols; c += BLOCK_SIZE) {
        yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
}

static bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    int cols = xc.size(-1);
    TORCH_CHECK(wc.numel() == cols && bc.numel() == cols, "weight/bias must match the last dimension");
    int rows = cols > 0 ? (int)(xc.numel() / cols) : 0;
    auto y = torch::empty_like(xc);
    if (rows == 0 || cols == 0) return y;
    int use_vec = (cols % 4 == 0) && aligned16(xc.data_ptr<float>()) && aligned16(wc.data_ptr<float>()) &&
                  aligned16(bc.data_ptr<float>()) && aligned16(y.data_ptr<float>());
    layernorm_rows_kernel<<<rows, BLOCK_SIZE>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                                y.data_ptr<float>(), rows, cols, (float)eps, use_vec);
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

layernorm_module = load_inline(
    name="oakb_level1_25_layernorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        g = torch.Generator().manual_seed(25)
        with torch.no_grad():
            self.ln.weight.copy_(torch.rand(normalized_shape, generator=g) + 0.5)
            self.ln.bias.copy_(torch.rand(normalized_shape, generator=g) - 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layernorm_module.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
