import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalisation; the channel count must be a multiple of the group count."""

    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 32
channels = 64
groups = 8
length = 128


def get_inputs():
    return [torch.rand(batch_size, channels, length)]


def get_init_inputs():
    return [groups, channels]
