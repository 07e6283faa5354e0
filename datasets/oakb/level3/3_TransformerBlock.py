import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pre-LayerNorm transformer encoder block.

    x = x + out_proj(softmax(q k^T / sqrt(head_dim)) v)   with q, k, v projections of LN1(x)
    x = x + fc2(gelu(fc1(LN2(x))))
    """

    def __init__(self, d_model, num_heads, ff_dim):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ff_dim)
        self.fc2 = nn.Linear(ff_dim, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, D = x.shape
        H = self.num_heads
        hd = D // H
        h = self.ln1(x)
        q = self.q_proj(h).view(B, S, H, hd).transpose(1, 2)
        k = self.k_proj(h).view(B, S, H, hd).transpose(1, 2)
        v = self.v_proj(h).view(B, S, H, hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)
        attn = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(attn, v).transpose(1, 2).reshape(B, S, D)
        x = x + self.out_proj(ctx)
        h = self.ln2(x)
        x = x + self.fc2(F.gelu(self.fc1(h)))
        return x


batch_size = 4
seq_len = 128
num_heads = 4
head_dim = 64
ff_dim = 1024


def get_inputs():
    x = torch.rand(batch_size, seq_len, num_heads * head_dim)
    return [x]


def get_init_inputs():
    return [num_heads * head_dim, num_heads, ff_dim]
