"""The reference cache on the CPU: computed once per key under its lock, written by a background thread
that holds the lock until the file is there, read back by another process's cache, and never written
where it would fill the disk."""

from __future__ import annotations

import fcntl
import multiprocessing
from pathlib import Path

import torch

from oracleaudit.execution import references
from oracleaudit.execution.references import ReferenceCache


def made() -> tuple[list, list]:
    x = torch.arange(10, dtype=torch.float32)
    return [x], [x.double()]


def test_references_are_computed_once_then_read_from_the_file(tmp_path: Path) -> None:
    calls = []
    cache = ReferenceCache(tmp_path)
    ref32, ref64 = cache.compute_once("k", lambda: calls.append(1) or made())
    references.flush()
    assert cache.path("k").is_file() and calls == [1]
    again32, again64 = ReferenceCache(tmp_path).compute_once("k", lambda: calls.append(2) or made())
    assert calls == [1] and torch.equal(again32[0], ref32[0]) and torch.equal(again64[0], ref64[0])


def _try_lock(path: str, answer) -> None:
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            answer.put(True)
        except BlockingIOError:
            answer.put(False)


def test_the_key_stays_locked_until_the_writer_thread_has_written_the_file(tmp_path: Path, monkeypatch) -> None:
    import threading

    release = threading.Event()
    real_save = ReferenceCache.save

    def slow_save(self, key, ref32, ref64):
        release.wait(10)
        return real_save(self, key, ref32, ref64)

    monkeypatch.setattr(ReferenceCache, "save", slow_save)
    cache = ReferenceCache(tmp_path)
    cache.compute_once("k", made)
    lock = str(tmp_path / "locks" / "k.lock")
    answer = multiprocessing.get_context("fork").Queue()
    process = multiprocessing.get_context("fork").Process(target=_try_lock, args=(lock, answer))
    process.start()
    process.join(10)
    assert answer.get(timeout=5) is False and not cache.path("k").exists()  # another process must wait
    release.set()
    references.flush()
    process = multiprocessing.get_context("fork").Process(target=_try_lock, args=(lock, answer))
    process.start()
    process.join(10)
    assert answer.get(timeout=5) is True and cache.path("k").is_file()


def test_references_that_would_fill_the_disk_are_not_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(references, "MIN_FREE_BYTES", 1 << 62)
    cache = ReferenceCache(tmp_path)
    ref32, _ = cache.compute_once("k", made)
    references.flush()
    assert not cache.path("k").exists() and ref32[0].numel() == 10


def test_a_failed_write_is_only_a_missed_cache_entry(tmp_path: Path, monkeypatch, capsys) -> None:
    def failing(self, key, ref32, ref64):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ReferenceCache, "save", failing)
    cache = ReferenceCache(tmp_path)
    ref32, _ = cache.compute_once("k", made)
    references.flush()
    assert ref32[0].numel() == 10 and not cache.path("k").exists()
    assert "reference cache not written" in capsys.readouterr().err


def test_a_disabled_cache_computes_every_time(tmp_path: Path) -> None:
    calls = []
    cache = ReferenceCache(tmp_path, enabled=False)
    cache.compute_once("k", lambda: calls.append(1) or made())
    cache.compute_once("k", lambda: calls.append(1) or made())
    assert calls == [1, 1] and not any(tmp_path.iterdir())
