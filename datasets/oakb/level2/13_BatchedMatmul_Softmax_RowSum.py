import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matmul, softmax over the last dimension, then sum over the rows: (B, M, K) x (B, K, N) -> (B, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(a, b)
        probs = torch.softmax(scores, dim=-1)
        return probs.sum(dim=1)


batch_size = 16
m = 256
k = 256
n = 256


def get_inputs():
    a = torch.rand(batch_size, m, k)
    b = torch.rand(batch_size, k, n)
    return [a, b]


def get_init_inputs():
    return []
