import torch
import torch.nn as nn


class Model(nn.Module):
    """1D max pooling."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 16
features = 64
length = 4096
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    x = torch.rand(batch_size, features, length)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
