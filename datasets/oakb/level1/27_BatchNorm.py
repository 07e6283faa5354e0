import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Batch normalization (2D) in inference mode: uses the running statistics, not the batch's."""

    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)
        # Deterministic, non-trivial running statistics and affine parameters (fixed generator).
        g = torch.Generator().manual_seed(27)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.randn(num_features, generator=g) * 0.5 + 0.25)
            self.bn.running_var.copy_(torch.rand(num_features, generator=g) * 1.5 + 0.25)
            self.bn.weight.copy_(torch.rand(num_features, generator=g) + 0.5)
            self.bn.bias.copy_(torch.rand(num_features, generator=g) - 0.5)
        self.bn.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(
            x,
            self.bn.running_mean,
            self.bn.running_var,
            self.bn.weight,
            self.bn.bias,
            training=False,
            momentum=0.0,
            eps=self.bn.eps,
        )


batch_size = 16
features = 64
height = 64
width = 64


def get_inputs():
    x = torch.rand(batch_size, features, height, width)
    return [x]


def get_init_inputs():
    return [features]
