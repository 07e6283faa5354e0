import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cmath>

#define BLOCK_SIZE 256
#define BLOCKS_PER_SM_CAP 2048

// Grid-stride over float4 vectors, then a grid-stride scalar loop over the tail.
__global__ void tanh_vec_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int n_vec) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int i = tid; i < n_vec; i += stride) {
        float4 v = x4[i];
        v.x = tanhf(v.x);
        v.y = tanhf(v.y);
        v.z = tanhf(v.z);
        v.w = tanhf(v.w);
        y4[i] = v;
    }
    for (int i = n_vec * 4 + tid; i < n; i += stride) {
        y[i] = tanhf(x[i]);
    }
}

torch::Tensor tanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int n = xc.numel();
    if (n == 0) return y;
    bool aligned = (reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) & 15) == 0 &&
                   (reinterpret_cast<uintptr_t>(y.data_ptr<float>()) & 15) == 0;
    int n_vec = aligned ? (n >> 2) : 0;
    int work = n_vec > 0 ? n_vec : n;
    int grid = (work + BLOCK_SIZE - 1) / BLOCK_SIZE;
    if (grid > BLOCKS_PER_SM_CAP) grid = BLOCKS_PER_SM_CAP;
    tanh_vec_kernel<<<grid, BLOCK_SIZE>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, n_vec);
    return y;
}
"""

cpp_source = "torch::Tensor tanh_forward(torch::Tensor x);"

tanh_module = load_inline(
    name="oakb_level1_5_tanh",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["tanh_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh_module.tanh_forward(x)
