import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scale_shift_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = 2.0f * x[i] + 1.0f;
    }
}

torch::Tensor scale_shift(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_shift_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_source = "torch::Tensor scale_shift(torch::Tensor x);"

module = load_inline(name="oracleaudit_test_scale_shift", cpp_sources=cpp_source, cuda_sources=cuda_source,
                     functions=["scale_shift"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.scale_shift(x)
