# Written to crash the interpreter: forward reads address 0 through ctypes (a segmentation fault), which no
# exception handler can catch; refcheck must record it and go on with the other problems.
import ctypes

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        ctypes.string_at(0)
        return x


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
