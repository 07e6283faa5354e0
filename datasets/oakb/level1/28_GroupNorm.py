import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalization with per-channel affine parameters."""

    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)
        # Non-trivial affine parameters (drawn from a fixed generator) so weight and bias both matter.
        g = torch.Generator().manual_seed(28)
        with torch.no_grad():
            self.gn.weight.copy_(torch.rand(num_features, generator=g) + 0.5)
            self.gn.bias.copy_(torch.rand(num_features, generator=g) - 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


batch_size = 16
num_groups = 8
channels_per_group = 8  # features = num_groups * channels_per_group, so every variant is valid
height = 64
width = 64


def get_inputs():
    x = torch.rand(batch_size, num_groups * channels_per_group, height, width)
    return [x]


def get_init_inputs():
    return [num_groups * channels_per_group, num_groups]
