"""A solution that uses FLT_MAX without including <cfloat>: torch/extension.h brings it in, as it does in
every load_inline build."""
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void row_min_kernel(const float* x, float* out, int cols) {
    float low = FLT_MAX;
    for (int c = 0; c < cols; ++c) low = fminf(low, x[blockIdx.x * cols + c]);
    out[blockIdx.x] = low;
}
"""

module = load_inline(name="flt_max_from_torch", cpp_sources="", cuda_sources=cuda_source, functions=[])
