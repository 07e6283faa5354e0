import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Small CNN: (Conv3x3 -> ReLU -> MaxPool2) x 2, flatten, Linear classifier.

    The pools use ceil_mode so every spatial size >= 1 gives a valid network.
    """

    def __init__(self, in_channels, conv1_channels, conv2_channels, height, width, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, conv1_channels, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(conv1_channels, conv2_channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2, ceil_mode=True)
        out_h = ((height + 1) // 2 + 1) // 2
        out_w = ((width + 1) // 2 + 1) // 2
        self.fc = nn.Linear(conv2_channels * out_h * out_w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc(x)


batch_size = 16
in_channels = 3
conv1_channels = 16
conv2_channels = 32
height = 32
width = 32
num_classes = 10


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, conv1_channels, conv2_channels, height, width, num_classes]
