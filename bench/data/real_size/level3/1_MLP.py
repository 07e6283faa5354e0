import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Three-layer perceptron: Linear -> ReLU -> Linear -> ReLU -> Linear."""

    def __init__(self, input_size, hidden1, hidden2, output_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


batch_size = 128
input_size = 16384
hidden1 = 16384
hidden2 = 16384
output_size = 8192


def get_inputs():
    x = torch.rand(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, hidden1, hidden2, output_size]
