import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE_X 32
#define TILE_Y 8

// x is viewed as [outer, rdim, inner]; y is [outer, inner].
// Block (TILE_X, TILE_Y): threadIdx.x walks the contiguous inner index (coalesced loads),
// threadIdx.y strides over the reduced dimension. Partial sums (double) meet in a shared tile
// and are folded along y with a tree reduction.
__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y, int outer, int rdim, int inner) {
    __shared__ double tile[TILE_Y][TILE_X + 1];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int i = blockIdx.x * TILE_X + tx;
    int o = blockIdx.y;

    double acc = 0.0;
    if (i < inner && o < outer) {
        const float* base = x + (long long)o * rdim * inner + i;
        for (int r = ty; r < rdim; r += TILE_Y) {
            acc += (double)base[(long long)r * inner];
        }
    }
    tile[ty][tx] = acc;
    __syncthreads();

    for (int s = TILE_Y / 2; s > 0; s >>= 1) {
        if (ty < s) {
            tile[ty][tx] += tile[ty + s][tx];
        }
        __syncthreads();
    }

    if (ty == 0 && i < inner && o < outer) {
        y[(long long)o * inner + i] = (float)tile[0][tx];
    }
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    auto xc = x.contiguous();

    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    int64_t rdim = xc.size(dim);
    TORCH_CHECK(outer <= 65535, "too many outer slices for gridDim.y");

    std::vector<int64_t> out_sizes = xc.sizes().vec();
    out_sizes[dim] = 1;  // keepdim=True
    auto y = torch::empty(out_sizes, xc.options());
    if (y.numel() == 0) return y;

    dim3 block(TILE_X, TILE_Y);
    dim3 grid((unsigned int)((inner + TILE_X - 1) / TILE_X), (unsigned int)outer);
    sum_dim_kernel<<<grid, block>>>(xc.data_ptr<float>(), y.data_ptr<float>(), (int)outer, (int)rdim, (int)inner);
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

sum_module = load_inline(
    name="oakb_level1_11_sum_reduction_over_a_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_module.sum_dim_forward(x, self.dim)
