import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

#define BLOCK_SIZE 256

// x viewed as [outer, rdim, inner]; one block per output element.
// Each thread keeps a running minimum, then a shared-memory tree reduction.
__global__ void min_dim_kernel(const float* __restrict__ x, float* __restrict__ y, int rdim, int inner) {
    __shared__ float sdata[BLOCK_SIZE];
    int tid = threadIdx.x;
    long long out = blockIdx.x;
    long long o = out / inner;
    int i = (int)(out - o * inner);
    const float* base = x + o * rdim * inner + i;

    float m = FLT_MAX;
    for (int r = tid; r < rdim; r += BLOCK_SIZE) {
        m = fminf(m, base[(long long)r * inner]);
    }
    sdata[tid] = m;
    __syncthreads();

    for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = fminf(sdata[tid], sdata[tid + s]);
        }
        __syncthreads();
    }
    if (tid == 0) y[out] = sdata[0];
}

torch::Tensor min_dim_forward(torch::Tensor x, int64_t dim) {
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
    TORCH_CHECK(rdim > 0, "min over an empty dimension");

    std::vector<int64_t> out_sizes = xc.sizes().vec();
    out_sizes.erase(out_sizes.begin() + dim);
    auto y = torch::empty(out_sizes, xc.options());
    int64_t num_out = outer * inner;
    if (num_out == 0) return y;

    min_dim_kernel<<<(unsigned int)num_out, BLOCK_SIZE>>>(xc.data_ptr<float>(), y.data_ptr<float>(), (int)rdim, (int)inner);
    return y;
}
"""

cpp_source = "torch::Tensor min_dim_forward(torch::Tensor x, int64_t dim);"

min_module = load_inline(
    name="oakb_level1_14_min_reduction_over_a_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["min_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return min_module.min_dim_forward(x, self.dim)
