import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define WARPS_PER_BLOCK 8
#define THREADS_PER_BLOCK (WARPS_PER_BLOCK * WARP_SIZE)
#define MAX_BLOCKS 4096

__device__ __forceinline__ float warp_allreduce_sum(float v) {
    for (int mask = WARP_SIZE / 2; mask > 0; mask >>= 1) {
        v += __shfl_xor_sync(0xffffffff, v, mask);
    }
    return v;
}

// One warp per row, grid-stride over rows. The butterfly reduction leaves the row's sum of
// squares in every lane, so no shared memory is needed.
__global__ void rmsnorm_warp_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                    float* __restrict__ y, int rows, int dim, float eps) {
    int lane = threadIdx.x % WARP_SIZE;
    int warp_id = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / WARP_SIZE;
    int total_warps = gridDim.x * WARPS_PER_BLOCK;
    for (int row = warp_id; row < rows; row += total_warps) {
        const float* xr = x + (long long)row * dim;
        float* yr = y + (long long)row * dim;
        float ss = 0.0f;
        for (int c = lane; c < dim; c += WARP_SIZE) {
            float v = xr[c];
            ss += v * v;
        }
        ss = warp_allreduce_sum(ss);
        float inv_rms = rsqrtf(ss / (float)dim + eps);
        for (int c = lane; c < dim; c += WARP_SIZE) {
            yr[c] = xr[c] * inv_rms * weight[c];
        }
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    int dim = xc.size(-1);
    TORCH_CHECK(wc.numel() == dim, "weight must match the last dimension");
    int rows = dim > 0 ? (int)(xc.numel() / dim) : 0;
    auto y = torch::empty_like(xc);
    if (rows == 0 || dim == 0) return y;
    int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    rmsnorm_warp_kernel<<<blocks, THREADS_PER_BLOCK>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(),
                                                       rows, dim, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps);"

rmsnorm_module = load_inline(
    name="oakb_level1_26_rmsnorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_module.rmsnorm_forward(x, self.weight, self.eps)
