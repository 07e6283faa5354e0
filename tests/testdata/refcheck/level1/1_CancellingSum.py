# Written to be unrefereeable: each row sums large values that cancel (x·1e6, x, −x·1e6), so the fp32 sum
# keeps rounding errors of the size of the large terms while the true result is the small sum of x.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cat([x * 1e6, x, -x * 1e6], dim=1).sum(dim=1)


batch_size = 8
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
