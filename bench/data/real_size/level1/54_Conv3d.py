import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3-D convolution of a cubic input with a cubic kernel (stride 1, no padding, no bias), at the shapes
    of KernelBench's level1/54_conv_standard_3D__square_input__square_kernel (commit 423217d)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv3d(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
depth = 64
width = 64
height = 64


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, width, height)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
