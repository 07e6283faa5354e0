import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define MAX_SMEM_FLOATS 12288

// Direct convolution (stride 1, no padding) fused with both biases and ReLU.
// grid = (ceil(Hout*Wout / BLOCK_SIZE), Cout, N); the filter of output channel blockIdx.y is
// staged in dynamic shared memory, and each thread computes one output pixel.
__global__ void conv2d_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ conv_bias, const float* __restrict__ extra_bias,
                                        float* __restrict__ y,
                                        int Cin, int H, int W, int Cout, int KH, int KW, int Hout, int Wout) {
    extern __shared__ float w_s[];
    int co = blockIdx.y;
    int n = blockIdx.z;
    int wsize = Cin * KH * KW;
    const float* wc = w + (long long)co * wsize;
    for (int i = threadIdx.x; i < wsize; i += blockDim.x) w_s[i] = wc[i];
    __syncthreads();

    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int hw = Hout * Wout;
    if (p >= hw) return;
    int oh = p / Wout;
    int ow = p % Wout;
    const float* xn = x + (long long)n * Cin * H * W;

    float acc = 0.0f;
    for (int ci = 0; ci < Cin; ++ci) {
        const float* xc = xn + (long long)ci * H * W;
        const float* wk = w_s + ci * KH * KW;
        float part = 0.0f;
        for (int kh = 0; kh < KH; ++kh) {
            const float* xrow = xc + (oh + kh) * W + ow;
            for (int kw = 0; kw < KW; ++kw) {
                part += xrow[kw] * wk[kh * KW + kw];
            }
        }
        acc += part;
    }
    float v = acc + conv_bias[co];
    v = v + extra_bias[co];
    y[((long long)n * Cout + co) * hw + p] = fmaxf(v, 0.0f);
}

torch::Tensor conv2d_bias_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias,
                                       torch::Tensor extra_bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && conv_bias.is_cuda() && extra_bias.is_cuda(),
                "inputs must be CUDA tensors");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4, "x and weight must be 4D");
    TORCH_CHECK(x.size(1) == weight.size(1), "in_channels mismatch");
    TORCH_CHECK(conv_bias.numel() == weight.size(0) && extra_bias.numel() == weight.size(0), "bias size mismatch");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto cb = conv_bias.contiguous();
    auto eb = extra_bias.contiguous();
    int N = xc.size(0), Cin = xc.size(1), H = xc.size(2), W = xc.size(3);
    int Cout = wc.size(0), KH = wc.size(2), KW = wc.size(3);
    TORCH_CHECK(H >= KH && W >= KW, "kernel larger than input");
    int Hout = H - KH + 1;
    int Wout = W - KW + 1;
    int wsize = Cin * KH * KW;
    TORCH_CHECK(wsize <= MAX_SMEM_FLOATS, "filter too large for shared memory");
    auto y = torch::empty({N, Cout, Hout, Wout}, xc.options());
    if (y.numel() == 0) return y;
    dim3 grid((Hout * Wout + BLOCK_SIZE - 1) / BLOCK_SIZE, Cout, N);
    size_t smem = (size_t)wsize * sizeof(float);
    conv2d_bias_relu_kernel<<<grid, BLOCK_SIZE, smem>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                                        cb.data_ptr<float>(), eb.data_ptr<float>(),
                                                        y.data_ptr<float>(), Cin, H, W, Cout, KH, KW, Hout, Wout);
    return y;
}
"""

cpp_source = ("torch::Tensor conv2d_bias_relu_forward(torch::Tensor x, torch::Tensor weight, "
              "torch::Tensor conv_bias, torch::Tensor extra_bias);")

conv2d_bias_relu_module = load_inline(
    name="oakb_level2_4_conv2d_bias_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv2d_bias_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d_bias_relu_module.conv2d_bias_relu_forward(x, self.conv.weight, self.conv.bias, self.bias)
