"""Tensors inside nested inputs and outputs: one flatten and one map for every stage."""

from __future__ import annotations

import torch

from oracleaudit import tensors as nested


def test_nested_outputs_are_flattened_depth_first_and_mapped_in_place_of_their_structure() -> None:
    a, b, c = torch.ones(1), torch.zeros(2), torch.full((3,), 2.0)
    value = [a, (b, 7, [c]), "label"]
    assert [t.shape for t in nested.tensors(value)] == [a.shape, b.shape, c.shape]
    doubled = nested.map_tensors(value, lambda t: t * 2)
    assert isinstance(doubled[1], tuple) and doubled[1][1] == 7 and doubled[2] == "label"
    assert torch.equal(doubled[1][2][0], c * 2)


def test_copies_move_floats_to_float64_only_when_asked_and_never_share_storage() -> None:
    x, labels = torch.ones(3), torch.tensor([1, 2])
    copied = nested.copied_to([x, (labels, 4)], "cpu", float64=True)
    assert copied[0].dtype == torch.float64 and copied[1][0].dtype == torch.int64 and copied[1][1] == 4
    same = nested.copied_to([x], "cpu")
    assert same[0].dtype == torch.float32 and same[0].data_ptr() != x.data_ptr()
    assert nested.tensor_bytes([x, (labels, 4)]) == 3 * 4 + 2 * 8
    assert nested.leaves([x, (labels, [4])]) == [x, labels, 4]
