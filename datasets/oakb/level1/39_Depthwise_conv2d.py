import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution (groups = in_channels), square kernel, stride 1, padding 1, no bias."""

    def __init__(self, in_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, in_channels, kernel_size, stride=1, padding=1, groups=in_channels, bias=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
in_channels = 64
kernel_size = 3
height = 64
width = 64


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, kernel_size]
