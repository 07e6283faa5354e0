import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies the input by a constant factor."""

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


batch_size = 64
dim = 100
factor = 2.5


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [factor]
