import torch
import torch.nn as nn


class Model(nn.Module):
    """Smooth L1 (Huber, beta=1) loss between predictions and targets, mean reduction."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.smooth_l1_loss(predictions, targets)


batch_size = 128
input_size = 4096


def get_inputs():
    predictions = torch.rand(batch_size, input_size)
    targets = torch.rand(batch_size, input_size)
    return [predictions, targets]


def get_init_inputs():
    return []
