# A wrong CPU stand-in for a CUDA solution: correct group norm plus an error of 1e-3.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) + 1e-3
