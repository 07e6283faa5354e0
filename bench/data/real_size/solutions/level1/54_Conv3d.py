import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define MAX_FILTER_FLOATS 8192

// Direct 3-D convolution (stride 1, no padding, no bias). grid = (ceil(Do*Ho*Wo / BLOCK_SIZE), Cout, N):
// the filter of output channel blockIdx.y is staged in shared memory and each thread computes one
// output voxel, summing over input channels and the kernel window.
__global__ void conv3d_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                              int Cin, int D, int H, int W, int Cout, int K, int Do, int Ho, int Wo) {
    __shared__ float w_s[MAX_FILTER_FLOATS];
    int co = blockIdx.y;
    int n = blockIdx.z;
    int fsize = Cin * K * K * K;
    const float* wc = w + (long long)co * fsize;
    for (int i = threadIdx.x; i < fsize; i += blockDim.x) w_s[i] = wc[i];
    __syncthreads();

    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long volume = (long long)Do * Ho * Wo;
    if (p >= volume) return;
    int ow = p % Wo;
    int oh = (p / Wo) % Ho;
    int od = p / ((long long)Wo * Ho);
    const float* xn = x + (long long)n * Cin * D * H * W;

    float acc = 0.0f;
    for (int ci = 0; ci < Cin; ++ci) {
        const float* xc = xn + (long long)ci * D * H * W;
        const float* wk = w_s + ci * K * K * K;
        for (int kd = 0; kd < K; ++kd) {
            for (int kh = 0; kh < K; ++kh) {
                const float* row = xc + ((long long)(od + kd) * H + (oh + kh)) * W + ow;
                for (int kw = 0; kw < K; ++kw) {
                    acc += row[kw] * wk[(kd * K + kh) * K + kw];
                }
            }
        }
    }
    y[((long long)n * Cout + co) * volume + p] = acc;
}

torch::Tensor conv3d_forward(torch::Tensor x, torch::Tensor weight) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.dim() == 5 && weight.dim() == 5, "x and weight must be 5-D");
    TORCH_CHECK(x.size(1) == weight.size(1), "in_channels mismatch");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    int N = xc.size(0), Cin = xc.size(1), D = xc.size(2), H = xc.size(3), W = xc.size(4);
    int Cout = wc.size(0), K = wc.size(2);
    TORCH_CHECK(D >= K && H >= K && W >= K, "kernel larger than input");
    TORCH_CHECK(Cin * K * K * K <= MAX_FILTER_FLOATS, "filter too large for shared memory");
    int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1;
    auto y = torch::empty({N, Cout, Do, Ho, Wo}, xc.options());
    if (y.numel() == 0) return y;
    long long volume = (long long)Do * Ho * Wo;
    dim3 grid((unsigned)((volume + BLOCK_SIZE - 1) / BLOCK_SIZE), Cout, N);
    conv3d_kernel<<<grid, BLOCK_SIZE>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(),
                                        Cin, D, H, W, Cout, K, Do, Ho, Wo);
    return y;
}
"""

cpp_source = "torch::Tensor conv3d_forward(torch::Tensor x, torch::Tensor weight);"

conv3d_module = load_inline(name="oa_bench_level1_54_conv3d", cpp_sources=cpp_source, cuda_sources=cuda_source,
                            functions=["conv3d_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv3d_module.conv3d_forward(x, self.conv3d.weight)
