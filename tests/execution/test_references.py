"""The reference cache on the CPU: its file format gives back every tensor bit for bit (dtypes, shapes,
empty and 0-d tensors), references are computed once per key under its lock and read back by another
cache, a damaged file is computed again, and nothing is written where it would fill the disk."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

from oracleaudit.execution import references
from oracleaudit.execution.references import ReferenceCache


def made() -> tuple[list, list]:
    x = torch.arange(10, dtype=torch.float32)
    return [x], [x.double()]


def test_every_dtype_and_shape_comes_back_bit_for_bit(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(3)
    ref32 = [torch.randn(3, 5, generator=gen), torch.tensor(float("nan")), torch.empty(0, 4),
             torch.randn(7, generator=gen).to(torch.bfloat16), torch.randn(2, 2, generator=gen).half(),
             torch.tensor([-0.0, float("inf")]), torch.randint(0, 9, (4,), generator=gen),
             torch.tensor([True, False, True]), torch.randn(6, 4, generator=gen).t()]  # last: not contiguous
    ref64 = [t.double() if t.is_floating_point() else t for t in ref32]
    cache = ReferenceCache(tmp_path)
    assert cache.save("k", ref32, ref64)
    got32, got64 = cache.load("k")
    for want, got in zip(ref32 + ref64, got32 + got64):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.reshape(-1).view(torch.uint8).tolist() == want.contiguous().reshape(-1).view(torch.uint8).tolist()
    with open(cache.path("k"), "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        assert (8 + size) % 64 == 0


def test_references_are_computed_once_then_read_from_the_file(tmp_path: Path) -> None:
    calls = []
    cache = ReferenceCache(tmp_path)
    ref32, ref64 = cache.compute_once("k", lambda: calls.append(1) or made())
    assert cache.path("k").is_file() and calls == [1]
    again32, again64 = ReferenceCache(tmp_path).compute_once("k", lambda: calls.append(2) or made())
    assert calls == [1] and torch.equal(again32[0], ref32[0]) and torch.equal(again64[0], ref64[0])


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
    ref32, _ = cache.compute_once("k", made)
    assert not cache.path("k").exists() and ref32[0].numel() == 10


def test_a_failed_write_is_only_a_missed_cache_entry(tmp_path: Path, monkeypatch, capsys) -> None:
    def failing(self, key, ref32, ref64):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ReferenceCache, "save", failing)
    ref32, _ = ReferenceCache(tmp_path).compute_once("k", made)
    assert ref32[0].numel() == 10 and not ReferenceCache(tmp_path).path("k").exists()
    assert "reference cache not written" in capsys.readouterr().err


def test_a_disabled_cache_computes_every_time(tmp_path: Path) -> None:
    calls = []
    cache = ReferenceCache(tmp_path, enabled=False)
    cache.compute_once("k", lambda: calls.append(1) or made())
    cache.compute_once("k", lambda: calls.append(1) or made())
    assert calls == [1, 1] and not any(tmp_path.iterdir())
