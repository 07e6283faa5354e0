import torch
import torch.nn as nn


class Model(nn.Module):
    """2D convolution (stride 1, no padding), plus a learned per-channel bias, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x + self.bias
        return torch.relu(x)


batch_size = 128
in_channels = 64
out_channels = 128
kernel_size = 3
height = 128
width = 128


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
