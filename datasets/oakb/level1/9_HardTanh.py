import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Applies HardTanh with min_val=-1 and max_val=1 elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=-1.0, max_val=1.0)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
