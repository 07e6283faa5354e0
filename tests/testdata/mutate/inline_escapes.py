"""A solution whose CUDA is a plain (not raw) Python string: `\\n` in the file is a backslash-n in CUDA, so
file columns run ahead of CUDA columns after every escape."""
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <cstdio>

__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) printf("scale:\\t%d values\\n", n); if (i < n) y[i] = x[i] * 2.0f;
    char sep = i < n ? '\\n' : '\\t';
    if (i < n) y[i] += (float)sep;
}
"""

module = load_inline(name="inline_escapes", cpp_sources="", cuda_sources=cuda_source, functions=[])
