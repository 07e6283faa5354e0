import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define THREADS 256
#define MAX_GRID 8192

// Fold the running statistics and the affine parameters into one scale and shift per channel.
__global__ void bn_fold_kernel(const float* __restrict__ running_mean, const float* __restrict__ running_var,
                               const float* __restrict__ weight, const float* __restrict__ bias,
                               float* __restrict__ scale, float* __restrict__ shift, int channels, float eps) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < channels) {
        float s = weight[c] / sqrtf(running_var[c] + eps);
        scale[c] = s;
        shift[c] = bias[c] - running_mean[c] * s;
    }
}

// y = x * scale[c] + shift[c], grid-stride over every element of the NCHW tensor.
__global__ void bn_apply_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                const float* __restrict__ shift, float* __restrict__ y,
                                long long total, int channels, long long plane) {
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        int c = (int)((idx / plane) % channels);
        y[idx] = fmaf(x[idx], scale[c], shift[c]);
    }
}

torch::Tensor batchnorm_inference_forward(torch::Tensor x, torch::Tensor running_mean, torch::Tensor running_var,
                                          torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && running_mean.is_cuda() && running_var.is_cuda() && weight.is_cuda() && bias.is_cuda(),
                "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 2, "x must be (N, C, ...)");
    auto xc = x.contiguous();
    int channels = xc.size(1);
    TORCH_CHECK(running_mean.numel() == channels && running_var.numel() == channels && weight.numel() == channels &&
                    bias.numel() == channels,
                "per-channel tensors must have C elements");
    long long total = xc.numel();
    long long plane = 1;
    for (int d = 2; d < xc.dim(); ++d) plane *= xc.size(d);
    auto y = torch::empty_like(xc);
    if (total == 0) return y;

    auto folded = torch::empty({2, channels}, xc.options());
    float* scale = folded.data_ptr<float>();
    float* shift = scale + channels;
    int fold_blocks = (channels + THREADS - 1) / THREADS;
    bn_fold_kernel<<<fold_blocks, THREADS>>>(running_mean.contiguous().data_ptr<float>(),
                                             running_var.contiguous().data_ptr<float>(),
                                             weight.contiguous().data_ptr<float>(), bias.contiguous().data_ptr<float>(),
                                             scale, shift, channels, (float)eps);

    long long want = (total + THREADS - 1) / THREADS;
    int blocks = (int)(want < MAX_GRID ? want : MAX_GRID);
    bn_apply_kernel<<<blocks, THREADS>>>(xc.data_ptr<float>(), scale, shift, y.data_ptr<float>(), total, channels,
                                         plane);
    return y;
}
"""

cpp_source = (
    "torch::Tensor batchnorm_inference_forward(torch::Tensor x, torch::Tensor running_mean, "
    "torch::Tensor running_var, torch::Tensor weight, torch::Tensor bias, double eps);"
)

batchnorm_module = load_inline(
    name="oakb_level1_27_batchnorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["batchnorm_inference_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)
        g = torch.Generator().manual_seed(27)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.randn(num_features, generator=g) * 0.5 + 0.25)
            self.bn.running_var.copy_(torch.rand(num_features, generator=g) * 1.5 + 0.25)
            self.bn.weight.copy_(torch.rand(num_features, generator=g) + 0.5)
            self.bn.bias.copy_(torch.rand(num_features, generator=g) - 0.5)
        self.bn.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return batchnorm_module.batchnorm_inference_forward(
            x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias, self.bn.eps
        )
