# Written to be fp64-incompatible: forward casts its weight to float32, so the fp64 run multiplies a
# float64 input by a float32 matrix (a dtype error).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim))

    def forward(self, x):
        return torch.matmul(x, self.weight.float())


batch_size = 4
dim = 32


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
