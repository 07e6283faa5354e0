import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define THREADS 256
#define WARP_SIZE 32
#define MAX_BLOCKS 512
#define BETA 1.0f

__device__ __forceinline__ float smooth_l1(float a, float b) {
    float d = fabsf(a - b);
    return d < BETA ? 0.5f * d * d / BETA : d - 0.5f * BETA;
}

// Grid-stride accumulation; each warp reduces with __shfl_down_sync and lane 0 of every warp
// adds the warp's sum to the global accumulator with atomicAdd (no shared memory).
__global__ void smooth_l1_sum_kernel(const float* __restrict__ pred, const float* __restrict__ targ,
                                     float* __restrict__ acc, long long n) {
    float s = 0.0f;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)blockDim.x * gridDim.x;
    for (; idx < n; idx += stride) {
        s += smooth_l1(pred[idx], targ[idx]);
    }
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        s += __shfl_down_sync(0xffffffff, s, offset);
    }
    if ((threadIdx.x & (WARP_SIZE - 1)) == 0) atomicAdd(acc, s);
}

__global__ void divide_kernel(const float* __restrict__ acc, float* __restrict__ out, long long n) {
    out[0] = acc[0] / (float)n;
}

torch::Tensor smooth_l1_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda() && targets.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(predictions.sizes() == targets.sizes(), "shape mismatch");
    TORCH_CHECK(predictions.scalar_type() == torch::kFloat32 && targets.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    long long n = p.numel();
    auto acc = torch::zeros({1}, p.options());
    auto out = torch::empty({}, p.options());
    long long want = (n + THREADS - 1) / THREADS;
    int blocks = (int)(want > MAX_BLOCKS ? MAX_BLOCKS : (want < 1 ? 1 : want));
    smooth_l1_sum_kernel<<<blocks, THREADS>>>(p.data_ptr<float>(), t.data_ptr<float>(), acc.data_ptr<float>(), n);
    divide_kernel<<<1, 1>>>(acc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor smooth_l1_forward(torch::Tensor predictions, torch::Tensor targets);"

smooth_l1_module = load_inline(
    name="oakb_level1_52_smoothl1loss",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["smooth_l1_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return smooth_l1_module.smooth_l1_forward(predictions, targets)
