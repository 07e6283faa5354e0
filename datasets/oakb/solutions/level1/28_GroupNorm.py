import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define GN_THREADS 512  // must be a power of two for the tree reduction

// Classic shared-memory tree reduction; every thread gets the block total.
__device__ __forceinline__ float block_tree_sum(float v, float* sdata) {
    int tid = threadIdx.x;
    sdata[tid] = v;
    __syncthreads();
    for (int s = GN_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    float total = sdata[0];
    __syncthreads();
    return total;
}

// One block per (sample, group). A group's channels are contiguous in NCHW memory, so the group is a
// single span of channels_per_group * HW floats. Two passes: mean, then centred sum of squares.
__global__ void groupnorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y,
                                 int channels, int groups, int hw, float eps) {
    __shared__ float sdata[GN_THREADS];
    int ng = blockIdx.x;
    int g = ng % groups;
    int cpg = channels / groups;
    long long group_size = (long long)cpg * hw;
    const float* xg = x + (long long)ng * group_size;
    float* yg = y + (long long)ng * group_size;

    float s = 0.0f;
    for (long long i = threadIdx.x; i < group_size; i += GN_THREADS) {
        s += xg[i];
    }
    float mean = block_tree_sum(s, sdata) / (float)group_size;

    float sq = 0.0f;
    for (long long i = threadIdx.x; i < group_size; i += GN_THREADS) {
        float d = xg[i] - mean;
        sq += d * d;
    }
    float var = block_tree_sum(sq, sdata) / (float)group_size;
    float rstd = rsqrtf(var + eps);

    for (long long i = threadIdx.x; i < group_size; i += GN_THREADS) {
        int c = g * cpg + (int)(i / hw);
        yg[i] = (xg[i] - mean) * rstd * gamma[c] + beta[c];
    }
}

torch::Tensor groupnorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t num_groups,
                                double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 2, "x must be (N, C, ...)");
    auto xc = x.contiguous();
    int n = xc.size(0);
    int channels = xc.size(1);
    int groups = (int)num_groups;
    TORCH_CHECK(groups > 0 && channels % groups == 0, "channels must be divisible by num_groups");
    TORCH_CHECK(weight.numel() == channels && bias.numel() == channels, "weight/bias must have C elements");
    int hw = 1;
    for (int d = 2; d < xc.dim(); ++d) hw *= xc.size(d);
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    int blocks = n * groups;
    groupnorm_kernel<<<blocks, GN_THREADS>>>(xc.data_ptr<float>(), weight.contiguous().data_ptr<float>(),
                                             bias.contiguous().data_ptr<float>(), y.data_ptr<float>(), channels,
                                             groups, hw, (float)eps);
    return y;
}
"""

cpp_source = (
    "torch::Tensor groupnorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, "
    "int64_t num_groups, double eps);"
)

groupnorm_module = load_inline(
    name="oakb_level1_28_groupnorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["groupnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)
        g = torch.Generator().manual_seed(28)
        with torch.no_grad():
            self.gn.weight.copy_(torch.rand(num_features, generator=g) + 0.5)
            self.gn.bias.copy_(torch.rand(num_features, generator=g) - 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return groupnorm_module.groupnorm_forward(x, self.gn.weight, self.gn.bias, self.gn.num_groups, self.gn.eps)
