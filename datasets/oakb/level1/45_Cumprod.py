import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix product along dimension 1 of a 2D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=1)


batch_size = 128
seq_len = 512


def get_inputs():
    # Factors in [0.75, 1.25) keep the running product well inside float32 range.
    x = torch.rand(batch_size, seq_len) * 0.5 + 0.75
    return [x]


def get_init_inputs():
    return []
