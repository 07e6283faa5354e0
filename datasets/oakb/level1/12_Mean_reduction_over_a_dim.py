import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over one dimension (the dimension is removed)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 64
dim1 = 8192


def get_inputs():
    x = torch.rand(batch_size, dim1)
    return [x]


def get_init_inputs():
    return [1]  # reduce over dim 1
