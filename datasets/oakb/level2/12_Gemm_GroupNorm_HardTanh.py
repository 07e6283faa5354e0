import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, GroupNorm over the output features, then HardTanh."""

    def __init__(self, in_features: int, out_features: int, num_groups: int, hardtanh_min: float, hardtanh_max: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = self.group_norm(x)
        return self.hardtanh(x)


batch_size = 128
in_features = 1024
num_groups = 8
channels_per_group = 64  # out_features = num_groups * channels_per_group
hardtanh_min = -2.0
hardtanh_max = 2.0


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, num_groups * channels_per_group, num_groups, hardtanh_min, hardtanh_max]
