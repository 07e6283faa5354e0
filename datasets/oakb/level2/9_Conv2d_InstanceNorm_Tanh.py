import torch
import torch.nn as nn


class Model(nn.Module):
    """2D convolution, InstanceNorm2d (no affine), then tanh."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = self.instance_norm(x)
        return torch.tanh(x)


batch_size = 16
in_channels = 8
out_channels = 16
kernel_size = 3
height = 64
width = 64


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
