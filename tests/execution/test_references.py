"""The reference cache on the CPU: its file format gives back every tensor bit for bit (dtypes, shapes,
empty and 0-d tensors) and an input's tensors and scalars in order, keeps no input it could not give back
exactly, references are computed once per key under its lock and read back by another cache, a damaged file is
computed again, and nothing is written where it would fill the disk."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

from oracleaudit.execution import references
from oracleaudit.execution.references import ReferenceCache


def made() -> tuple[list, list, list]:
    x = torch.arange(10, dtype=torch.float32)
    return [x], [x.double()], [x + 1, 4]


def test_every_dtype_and_shape_comes_back_bit_for_bit(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(3)
    ref32 = [torch.randn(3, 5, generator=gen), torch.tensor(float("nan")), torch.empty(0, 4),
             torch.randn(7, generator=gen).to(torch.bfloat16), torch.randn(2, 2, generator=gen).half(),
             torch.tensor([-0.0, float("inf")]), torch.randint(0, 9, (4,), generator=gen),
             torch.tensor([True, False, True]), torch.randn(6, 4, generator=gen).t()]  # last: not contiguous
    ref64 = [t.double() if t.is_floating_point() else t for t in ref32]
    cache = ReferenceCache(tmp_path)
    assert cache.save("k", ref32, ref64)
    got32, got64, inputs = cache.load("k")
    assert inputs is None  # none given
    for want, got in zip(ref32 + ref64, got32 + got64):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.reshape(-1).view(torch.uint8).tolist() == want.contiguous().reshape(-1).view(torch.uint8).tolist()
    with open(cache.path("k"), "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        assert (8 + size) % 64 == 0


def test_references_are_computed_once_then_read_from_the_file(tmp_path: Path) -> None:
    calls = []
    cache = ReferenceCache(tmp_path)
    ref32, ref64, inputs = cache.compute_once("k", lambda: calls.append(1) or made())
    assert cache.path("k").is_file() and calls == [1] and inputs[1] == 4
    again32, again64, again = ReferenceCache(tmp_path).compute_once("k", lambda: calls.append(2) or made())
    assert calls == [1] and torch.equal(again32[0], ref32[0]) and torch.equal(again64[0], ref64[0])
    assert torch.equal(again[0], inputs[0]) and again[1] == 4 and type(again[1]) is int


@pytest.mark.parametrize("damage", [b"", b"\x05\x00\x00\x00\x00\x00\x00\x00{bad", b"not a cache file at all"])
def test_a_damaged_file_is_computed_again(tmp_path: Path, damage: bytes) -> None:
    cache = ReferenceCache(tmp_path)
    cache.save("k", *made())
    cache.path("k").write_bytes(damage)
    assert cache.load("k") is None
    calls = []
    cache.compute_once("k", lambda: calls.append(1) or made())
    assert calls == [1] and cache.load("k") is not None


def test_references_that_would_fill_the_disk_are_not_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(references, "MIN_FREE_BYTES", 1 << 62)
    cache = ReferenceCache(tmp_path)
    ref32, _, inputs = cache.compute_once("k", made)
    assert not cache.path("k").exists() and ref32[0].numel() == 10 and inputs[1] == 4


def test_a_failed_write_is_only_a_missed_cache_entry(tmp_path: Path, monkeypatch, capsys) -> None:
    def failing(self, key, ref32, ref64, inputs=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ReferenceCache, "save", failing)
    ref32, _, _ = ReferenceCache(tmp_path).compute_once("k", made)
    assert ref32[0].numel() == 10 and not ReferenceCache(tmp_path).path("k").exists()
    assert "reference cache not written" in capsys.readouterr().err


def test_a_disabled_cache_computes_every_time(tmp_path: Path) -> None:
    calls = []
    cache = ReferenceCache(tmp_path, enabled=False)
    cache.compute_once("k", lambda: calls.append(1) or made())
    cache.compute_once("k", lambda: calls.append(1) or made())
    assert calls == [1, 1] and not any(tmp_path.iterdir())


def test_an_input_comes_back_in_order_its_tensors_bit_for_bit_and_its_scalars_of_their_type(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(5)
    inputs = [torch.randn(4, 3, generator=gen), 7, torch.randint(-5, 5, (6,), generator=gen), 0.1, True,
              torch.tensor(float("nan")), float("-inf"), torch.empty(0, 2)]
    cache = ReferenceCache(tmp_path)
    assert cache.save("k", *made()[:2], inputs)
    _, _, back = cache.load("k")
    assert [type(x) for x in back] == [type(x) for x in inputs]
    for want, got in zip(inputs, back):
        if isinstance(want, torch.Tensor):
            assert got.dtype == want.dtype and got.shape == want.shape and got.is_contiguous()
            assert got.reshape(-1).view(torch.uint8).tolist() == want.reshape(-1).view(torch.uint8).tolist()
        elif want == want:
            assert got == want
        else:
            assert got != got
    assert back[3] == 0.1 and back[6] == float("-inf")


@pytest.mark.parametrize("why", ["transposed", "a slice", "one storage twice", "a gradient", "nested", "a string"])
def test_an_input_that_would_not_come_back_exactly_is_not_kept(tmp_path: Path, why: str) -> None:
    """The references are still cached; the input is left for the worker to make again."""
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    inputs = {"transposed": [base.t()], "a slice": [base[1:]], "one storage twice": [base, base.view(12)],
              "a gradient": [base.clone().requires_grad_()], "nested": [(base, 2)], "a string": [base, "mean"]}[why]
    assert not references.storable(inputs)
    cache = ReferenceCache(tmp_path)
    assert cache.save("k", *made()[:2], inputs)
    ref32, _, back = cache.load("k")
    assert back is None and ref32[0].numel() == 10
    assert references.storable([base, base.clone(), 3, 2.5, False, torch.empty(0)])


def test_a_cache_file_of_the_earlier_format_is_computed_again(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path)
    cache.save("k", *made())
    data = bytearray(cache.path("k").read_bytes())
    at = data.index(b'"format": 3')
    data[at:at + 11] = b'"format": 2'
    cache.path("k").write_bytes(bytes(data))
    assert cache.load("k") is None


def test_references_that_fit_only_without_their_input_are_kept_without_it(tmp_path: Path, monkeypatch) -> None:
    ref32, ref64, _ = made()  # 120 bytes
    monkeypatch.setattr(references, "MAX_CACHED_BYTES", 200)
    cache = ReferenceCache(tmp_path)
    assert cache.save("k", ref32, ref64, [torch.zeros(100)])
    assert cache.load("k").inputs is None
    assert cache.save("k", ref32, ref64, [torch.zeros(10)]) and cache.load("k").inputs[0].numel() == 10
