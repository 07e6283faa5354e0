"""execution/turn.py: GPU turns between processes, with real processes and a real lock file (no GPU needed)."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from oracleaudit.execution.turn import GpuTurn, turn_for

CONTEXT = multiprocessing.get_context("spawn")


def _hold(path: str, seconds: float, taken, release: bool, die: bool) -> None:
    turn = GpuTurn(Path(path), lease_s=60.0)
    turn.take()
    taken.set()
    time.sleep(seconds)
    if die:
        os._exit(3)  # still holding: the kernel gives the lock back
    if release:
        turn.release()


def _holder(tmp_path: Path, seconds: float, release: bool = True, die: bool = False):
    taken = CONTEXT.Event()
    process = CONTEXT.Process(target=_hold, args=(str(tmp_path / "gpu.lock"), seconds, taken, release, die))
    process.start()
    assert taken.wait(30)
    return process


def test_a_turn_waits_for_the_other_process_to_give_it_back(tmp_path: Path) -> None:
    process = _holder(tmp_path, 0.6)
    turn = GpuTurn(tmp_path / "gpu.lock")
    started = time.perf_counter()
    turn.take()
    waited = time.perf_counter() - started
    turn.release()
    process.join(30)
    assert 0.3 < waited < 10 and turn.waited_s == pytest.approx(waited, abs=0.05)


def test_a_holder_that_dies_gives_the_turn_back(tmp_path: Path) -> None:
    process = _holder(tmp_path, 0.2, die=True)
    process.join(30)
    assert process.exitcode == 3
    turn = GpuTurn(tmp_path / "gpu.lock")
    started = time.perf_counter()
    turn.take()
    assert time.perf_counter() - started < 1.0
    turn.release()


def test_the_lease_gives_the_turn_back_to_the_others_and_is_counted(tmp_path: Path) -> None:
    mine = GpuTurn(tmp_path / "gpu.lock", lease_s=0.2)
    mine.take()  # never released by hand
    other = GpuTurn(tmp_path / "gpu.lock")
    started = time.perf_counter()
    other.take()
    waited = time.perf_counter() - started
    other.release()
    assert 0.1 < waited < 5 and mine.expired == 1
    mine.release()  # after the lease ran out: nothing to give back, no error
    assert mine.expired == 1


def test_a_lease_runs_from_the_latest_take(tmp_path: Path) -> None:
    mine = GpuTurn(tmp_path / "gpu.lock", lease_s=0.3)
    mine.take()
    mine.release()
    time.sleep(0.2)
    mine.take()
    time.sleep(0.2)  # 0.4 s after the first take, 0.2 s after this one
    assert mine.expired == 0
    time.sleep(0.3)
    assert mine.expired == 1


def test_held_gives_the_turn_back_on_an_exception(tmp_path: Path) -> None:
    turn = GpuTurn(tmp_path / "gpu.lock")
    with pytest.raises(ValueError):
        with turn.held():
            raise ValueError("a pair failed")
    process = _holder(tmp_path, 0.0)
    process.join(30)
    assert process.exitcode == 0


def test_no_turns_off_cuda() -> None:
    assert not turn_for("cpu").enabled
    turn = GpuTurn(None)
    turn.take()
    turn.release()
    with turn.held():
        pass
    assert turn.waited_s == 0.0 and not turn.enabled
