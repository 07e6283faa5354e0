import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """2D convolution, exact (erf) GELU, then global average pooling to (batch, out_channels)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = F.gelu(x)
        x = F.adaptive_avg_pool2d(x, 1)
        return x.squeeze(-1).squeeze(-1)


batch_size = 16
in_channels = 8
out_channels = 32
kernel_size = 3
height = 64
width = 64


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
