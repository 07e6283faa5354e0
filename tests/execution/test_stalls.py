"""The GPU's stall watch (stalls.py): on the CPU with a scripted probe that stalls on cue; on a GPU (gpu) with the
real probe, which a kernel spinning beside it does not stall, and whose stalls stop growing once it is gone. The
record of a GPU's worker kills (Teardowns) on a scripted clock."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from oracleaudit.execution import stalls
from oracleaudit.execution.stalls import GRACE_S, StallWatch, Teardowns

STALL_AT, STALL_S = 10, 0.8  # the scripted probe's 10th beat takes 0.8 s: 0.55 s of stall past the grace
HANG_AT = 30  # its 30th never ends


def scripted_beat(gpu: int):
    """A probe (in the watch's process) that stalls once, then hangs for good."""
    beats = iter(range(1, 10**9))

    def beat() -> None:
        n = next(beats)
        if n == STALL_AT:
            time.sleep(STALL_S)
        elif n == HANG_AT:
            time.sleep(3600)

    return beat


def wait_for(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.02)


def test_a_late_probe_counts_past_its_grace_a_hung_one_up_to_now_and_a_dead_one_no_more() -> None:
    with StallWatch(0, make_beat=scripted_beat) as watch:
        assert watch.stalled() == 0.0
        wait_for(lambda: watch.stalled() > 0.4)  # the 10th beat: 0.8 s, 0.25 s of it grace
        wait_for(lambda: watch.last_done.value > 0 and watch.total.value > 0)
        settled = watch.total.value
        assert settled == pytest.approx(STALL_S - GRACE_S, abs=0.1)
        wait_for(lambda: watch.stalled() > settled + 0.5)  # the 30th beat hangs: its stall grows with the clock
        growing = watch.stalled()
        time.sleep(0.3)
        assert watch.stalled() > growing + 0.2
        watch.process.kill()
        watch.process.join(5)
        assert watch.stalled() == pytest.approx(settled)  # a dead probe: its past stalls, nothing ongoing
        time.sleep(0.2)
        assert watch.stalled() == pytest.approx(settled)


def _spin(ready) -> None:
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda._sleep(1 << 40)  # a kernel that spins as a hung mutant's does
    ready.set()
    time.sleep(3600)


@pytest.mark.gpu
def test_on_a_gpu_the_probe_sees_no_stall_when_idle_nor_beside_a_spinning_kernel() -> None:
    with StallWatch(0) as watch:
        wait_for(lambda: watch.last_done.value > 0, seconds=120)
        time.sleep(1.0)
        assert watch.stalled() < 0.05
        context = multiprocessing.get_context("spawn")
        ready = context.Event()
        spinner = context.Process(target=_spin, args=(ready,), daemon=True)
        spinner.start()
        try:
            assert ready.wait(120)
            before, beats = watch.stalled(), watch.last_done.value
            time.sleep(2.0)
            assert watch.last_done.value > beats and watch.stalled() - before < 0.05  # beats went on
        finally:
            spinner.kill()
            spinner.join(30)


def test_teardowns_count_the_seconds_any_kill_was_in_flight_since_a_moment_once_each(monkeypatch) -> None:
    """Two kills overlapping count once; one still in flight counts up to now; one reaped before the moment
    asked about does not count; one ended longer ago than KEEP_S is forgotten when the next begins."""
    clock = [100.0]
    monkeypatch.setattr(stalls.time, "monotonic", lambda: clock[0])
    teardowns = Teardowns()
    with teardowns.during():  # 100-102: before the pair
        clock[0] = 102.0
    assert teardowns.seconds_since(103.0) == 0.0
    first, second = teardowns.during(), teardowns.during()
    clock[0] = 104.0
    first.__enter__()  # 104-110
    clock[0] = 106.0
    second.__enter__()  # 106-108, within the first
    clock[0] = 108.0
    second.__exit__(None, None, None)
    clock[0] = 110.0
    first.__exit__(None, None, None)
    clock[0] = 112.0
    with teardowns.during():  # 112-, in flight
        clock[0] = 115.0
        assert teardowns.seconds_since(103.0) == pytest.approx(6.0 + 3.0)
        assert teardowns.seconds_since(107.0) == pytest.approx(3.0 + 3.0)
    clock[0] = 115.0 + Teardowns.KEEP_S + 1.0
    with teardowns.during():
        assert len(teardowns.spans) == 1
