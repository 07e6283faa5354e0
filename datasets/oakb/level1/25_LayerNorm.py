import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension, with elementwise affine parameters."""

    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        # Non-trivial affine parameters (drawn from a fixed generator) so weight and bias both matter.
        g = torch.Generator().manual_seed(25)
        with torch.no_grad():
            self.ln.weight.copy_(torch.rand(normalized_shape, generator=g) + 0.5)
            self.ln.bias.copy_(torch.rand(normalized_shape, generator=g) - 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 32
dim = 4096


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return [dim]
