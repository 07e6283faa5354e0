import torch
import torch.nn as nn


class Model(nn.Module):
    """Index of the minimum over one dimension (int64, first index on ties)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=self.dim)


batch_size = 16
dim1 = 4096
dim2 = 64


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [1]  # reduce over dim 1
