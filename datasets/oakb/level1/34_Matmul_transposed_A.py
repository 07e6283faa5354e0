import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix multiplication with a transposed first operand: C (M, N) = A.T @ B, A is (K, M)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


M = 1024
K = 2048
N = 1024


def get_inputs():
    A = torch.rand(K, M)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []
