"""The local scheduler on the CPU: a job cut into slices goes through the real work queue, memory admission,
supervisor threads and phase accounting, with scripted workers (tests/execution/test_supervisor.py) standing
in for the GPU worker processes. Only the GPU's size and the build are faked: the scripted workers build
nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from oracleaudit.execution import plan, scheduler
from oracleaudit.execution.protocol import ORIGINAL
from oracleaudit.execution.recorder import RunResult
from tests.execution.test_supervisor import INPUTS, ScriptedWorker, World, every_pair, make_job


def built_at_once(jobs, ready, stop) -> None:
    for job in jobs:
        ready(job, 0.0, True)


def run(world: World, job, monkeypatch, workers_per_gpu: int = 2, job_size: int = 2, hand_off: bool = True,
        build=built_at_once, watch=None, timeout_floor_s: float = 0.3):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=80 << 30))
    monkeypatch.setattr(scheduler, "prebuild_in_order", build)
    recorded: dict[tuple[str, str], list[dict]] = {}

    def on_rows(variant: str, rows: list[dict]) -> None:
        key = (variant, rows[0]["input_id"])
        assert key not in recorded, f"{key} recorded twice"
        recorded[key] = rows

    result = RunResult()
    supervise = {"timeout_factor": 1.0, "timeout_floor_s": timeout_floor_s, "start": lambda gpu: ScriptedWorker(world)}
    scheduler.Scheduler([job], 1, workers_per_gpu, job_size, on_rows, result, supervise, hand_off, watch).run()
    return result, recorded


def test_the_slices_of_a_job_are_recorded_whole_and_a_slot_waiting_for_the_last_slice_counts_as_idle(
        monkeypatch) -> None:
    """Two slots, two slices: m3's slice hangs on its first input (its 0.3 s deadline, then waited for to twice
    it) while the other slot, its slice done in milliseconds, waits for the run's end: that wait is idle time."""
    world, job = World({("m3", INPUTS[0]): ["hang"]}), make_job()
    result, recorded = run(world, job, monkeypatch)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert [j.variants() for j in world.jobs][:2] in ([[ORIGINAL, "m1", "m2"], ["m3"]],
                                                      [["m3"], [ORIGINAL, "m1", "m2"]])
    assert result.hangs == 2 and result.seconds["hung"] >= 0.59
    assert result.idle_s >= 0.8 * result.seconds["hung"], (result.idle_s, result.seconds)
    assert result.execution_wall_s >= result.seconds["hung"] / 2


def test_a_variant_that_crashed_goes_back_to_the_queue_and_another_slot_runs_it(monkeypatch) -> None:
    """One slice and two slots: m1's crash hands its remaining inputs to the queue, where the idle slot takes
    them while the first slot goes on with the others."""
    world, job = World({("m1", key): ["crash"] for key in INPUTS}, by_input=True), make_job()
    result, recorded = run(world, job, monkeypatch, job_size=4)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert result.handed_off == 1 and result.crashes == 3
    handed = [j for j in world.jobs if j.faults]
    assert handed[0].work == (("m1", INPUTS[1:]),) and handed[0].faults == (("m1", 1, False, (), ()),)

    world = World({("m1", key): ["crash"] for key in INPUTS}, by_input=True)
    result, recorded = run(world, job, monkeypatch, job_size=4, hand_off=False)  # the slice runs m1 itself
    assert set(recorded) == every_pair(job) and result.handed_off == 0 and not any(j.faults for j in world.jobs)


def test_slots_waiting_for_a_build_run_warm_up_jobs_on_at_most_half_of_them_and_drop_the_rest(monkeypatch) -> None:
    """While the job builds (0.5 s), idle slots take its warm-up jobs (one input each, 0.2 s), at most two of
    the four slots at once; once it is built the warm-up jobs not taken are dropped and its slices run. Every
    pair is recorded once; the warm-up jobs start no slice of the execution phase, and their seconds count."""
    import time

    def late(jobs, ready, stop) -> None:
        time.sleep(0.5)
        built_at_once(jobs, ready, stop)

    world, job = World(warm_s=0.2), make_job(inputs=tuple(f"i{n}/s={n}/official" for n in range(12)))
    monkeypatch.setattr(scheduler, "warm_jobs", lambda jobs: plan.warm_jobs(jobs, inputs=1))
    result, recorded = run(world, job, monkeypatch, workers_per_gpu=4, job_size=4, build=late)
    assert set(recorded) == every_pair(job) and result.errors == []
    warm = [j for j in world.jobs if j.warm]
    assert 2 <= len(warm) < 12 and world.most_warming == 2  # dropped after the build: not all 12 ran
    assert all(j.work == () and j.mutants == () and len(j.entry_keys) == 1 for j in warm)
    assert {j.entry_keys[0] for j in warm} <= set(job.entry_keys)
    assert world.jobs.index(warm[-1]) < min(world.jobs.index(j) for j in world.jobs if not j.warm) + 2
    assert result.seconds["references"] == pytest.approx(0.2 * len(warm)) and result.execution_wall_s < 1.0


class StalledWatch:
    """A StallWatch stand-in: the GPU stands still for the first 2 s after it starts."""

    made: list = []

    def __init__(self, gpu: int):
        self.closed = False
        StalledWatch.made.append(self)

    def start(self) -> "StalledWatch":
        import time

        self.began = time.monotonic()
        return self

    def stalled(self) -> float:
        import time

        return min(time.monotonic() - self.began, 2.0)

    def close(self) -> None:
        self.closed = True


def test_a_run_with_a_stall_watch_gives_each_slot_its_gpu_s_stalls_and_closes_it(monkeypatch) -> None:
    """With a watch, a pair past its 1 s deadline while the GPU stood still is recorded as it ends, not as a
    Timeout; the run reports the stalled seconds and closes the watch."""
    job = make_job(variants=(ORIGINAL, "m1"), inputs=INPUTS[:1], references=())
    result, recorded = run(World({("m1", INPUTS[0]): ["slow"]}), job, monkeypatch, watch=StalledWatch,
                           timeout_floor_s=1.0)
    assert recorded[("m1", INPUTS[0])][0]["status"] == "Ok" and result.hangs == 0
    assert 1.5 <= result.gpu_stalled_s <= 2.0 and [w.closed for w in StalledWatch.made] == [True]
