import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer, dropout in inference mode (identity), then mean over the output features."""

    def __init__(self, in_features: int, out_features: int, dropout_p: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout_p = dropout_p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.matmul(x)
        x = F.dropout(x, p=self.dropout_p, training=False)
        return torch.mean(x, dim=1, keepdim=True)


batch_size = 128
in_features = 1024
out_features = 512
dropout_p = 0.2


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
