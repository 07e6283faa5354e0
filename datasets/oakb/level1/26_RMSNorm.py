import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalization over the last dimension: x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


batch_size = 8
seq_len = 128
dim = 4096


def get_inputs():
    x = torch.rand(batch_size, seq_len, dim)
    return [x]


def get_init_inputs():
    return [dim]
