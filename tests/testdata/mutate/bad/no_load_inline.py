"""A Python file with no load_inline call: nothing to mutate."""
import torch


def forward(x: torch.Tensor) -> torch.Tensor:
    return x + 1
