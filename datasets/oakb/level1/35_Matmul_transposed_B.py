import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix multiplication with a transposed second operand: C (M, N) = A @ B.T, B is (N, K)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


M = 1024
K = 2048
N = 768


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(N, K)
    return [A, B]


def get_init_inputs():
    return []
