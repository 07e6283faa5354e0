import torch
import torch.nn as nn


class Model(nn.Module):
    """Cosine similarity loss: mean(1 - cosine_similarity(predictions, targets, dim=1))."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        cosine_sim = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cosine_sim)


batch_size = 128
input_size = 4096


def get_inputs():
    predictions = torch.rand(batch_size, input_size)
    targets = torch.rand(batch_size, input_size)
    return [predictions, targets]


def get_init_inputs():
    return []
