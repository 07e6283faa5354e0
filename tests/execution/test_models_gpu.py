"""Templates of ModelNew kept on the host for a CUDA device: pinned, copied to the GPU asynchronously, and each
copy still a fresh construction (needs a GPU)."""

from __future__ import annotations

import pytest
import torch

from oracleaudit.execution.models import PINNED_ENV, ModelTemplates
from oracleaudit.kernelbench import WEIGHT_SEED


class TiedOnDevice(torch.nn.Module):
    """Random weights (two modules holding one), a buffer a forward updates, draws from the device's RNG."""

    def __init__(self, width: int):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, width)
        self.head.weight = self.fc.weight
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.head(self.fc(x)) + torch.rand(1, device=x.device)


def _fresh_the_kernelbench_way(width: int) -> torch.nn.Module:
    torch.manual_seed(WEIGHT_SEED)
    return TiedOnDevice(width).to("cuda").eval()


@pytest.mark.gpu
def test_a_template_on_the_host_is_pinned_and_its_copies_are_fresh_constructions_on_the_gpu() -> None:
    templates = ModelTemplates(TiedOnDevice, "cuda", on_host=True)
    x = torch.ones(4, 256, device="cuda")
    models = []
    with torch.no_grad():
        for _ in range(4):  # the first is constructed, the others are copies of its template
            model = templates.fresh(("width", 256), [256])  # as the worker does: right before the forward
            out = model(x)
            assert torch.equal(out, _fresh_the_kernelbench_way(256)(x))
            assert model.fc.weight.is_cuda and model.head.weight is model.fc.weight
            models.append(model)
    template = templates.templates[("width", 256)][0]
    assert all(t.is_pinned() for t in (*template.parameters(), *template.buffers()))
    assert template.head.weight is template.fc.weight
    assert template.calls.item() == 0 and all(m.calls.item() == 1 for m in models)
    assert len({m.fc.weight.data_ptr() for m in models}) == 4


@pytest.mark.gpu
def test_templates_stay_in_pageable_memory_where_the_benchmark_switch_says_so(monkeypatch) -> None:
    monkeypatch.setenv(PINNED_ENV, "0")
    templates = ModelTemplates(TiedOnDevice, "cuda", on_host=True)
    templates.fresh(("width", 8), [8])
    copy = templates.fresh(("width", 8), [8])
    template = templates.templates[("width", 8)][0]
    assert not any(t.is_pinned() for t in template.parameters()) and copy.fc.weight.is_cuda
