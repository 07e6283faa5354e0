import torch
import torch.nn as nn


class Model(nn.Module):
    """Hinge loss: mean(clamp(1 - predictions * targets, min=0)) with targets in {-1, 1}."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 128
input_size = 4096


def get_inputs():
    predictions = torch.rand(batch_size, input_size)
    targets = (torch.randint(0, 2, (batch_size, input_size)) * 2 - 1).float()
    return [predictions, targets]


def get_init_inputs():
    return []
