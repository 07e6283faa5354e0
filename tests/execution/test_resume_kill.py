"""The run stage's recording survives SIGKILL, on the CPU: a recording process (the real `Supervisor`s, one
per slot, driving scripted stand-ins for the GPU worker, and the real `Recorder` committing parts to the
real `EvidenceStore` every 50 ms) is killed with SIGKILL at moments drawn from a seeded random generator and
resumed each time, planning only the pairs without rows, as `plan_jobs` does. After every kill the store
opens (every committed part whole, its sha256 as the manifest says) and holds only rows the uninterrupted run
has too, each (variant, input) with all its output rows, no key twice; the store finally left equals the one
an uninterrupted run writes: nothing lost, nothing duplicated. A run on a finished store adds nothing. And
kills placed inside a commit (a part half written, a part in place but not yet in the manifest, a manifest
half written) leave only leftovers that readers ignore, and the run resumed after them is whole too.

Rows are a pure function of (problem, variant, input), so the runs are comparable; each pair takes
`PAIR_S`, so a run lasts a few seconds and the kills land while parts are being committed. The recording
process is forked from the test process (which has torch, imported by the store, loaded already) so that a
start costs milliseconds instead of seconds."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import random
import signal
import threading
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from oracleaudit.execution.protocol import (
    ORIGINAL,
    REFERENCE,
    Built,
    Done,
    Fatal,
    Job,
    Rows,
    Started,
)
from oracleaudit.execution.recorder import Recorder, RunResult
from oracleaudit.execution.supervisor import Supervisor
from oracleaudit.store import KEY_COLUMNS, MANIFEST_FILE, RUN_IDENTITY, EvidenceStore
from tests.execution.test_supervisor import ScriptedWorker, World, work_with_timing

PAIR_S = 0.02  # seconds each (variant, input) pair takes in the scripted worker
FLUSH_S = 0.05  # the Recorder's commit interval: parts are committed all through a run
SLOTS = 2  # supervisor threads sharing one Recorder, as the scheduler's slots do
KILLS = 5
SEED = 1234
PROBLEMS = tuple(f"level1/{n}_P{n}" for n in range(1, 5))
MUTANTS = tuple(f"m{n}" for n in range(1, 10))
INPUTS = tuple(f"{dist}/s={n}/{shape}" for n, (dist, shape) in
               enumerate([("official", "official"), ("normal", "official"), ("uniform", "official"),
                          ("odd", "official"), ("official", "big"), ("normal", "big"), ("uniform", "big"),
                          ("odd", "big")]))
# What some pairs do instead of answering with rows, every time they run (so a pair whose row was lost in a
# kill gives the same row again): crash (rows, then Fatal: a fresh worker goes on), die (the worker vanishes;
# the supervisor records the row), oom (an OOM row; the GPU is never shared here, so it is recorded).
ACTIONS = {(PROBLEMS[0], "m3", INPUTS[2]): "crash", (PROBLEMS[1], "m5", INPUTS[6]): "die",
           (PROBLEMS[2], ORIGINAL, INPUTS[4]): "crash", (PROBLEMS[3], "m9", INPUTS[0]): "oom",
           (PROBLEMS[3], "m2", INPUTS[7]): "die"}


def outputs(problem: str) -> int:
    """Output tensors per pair: two for every other problem, so that a pair's rows are several."""
    return 1 + PROBLEMS.index(problem) % 2


def entry(key: str) -> tuple[str, int, str, str]:
    dist, seed, shape = key.split("/")
    return key, int(seed[2:]), shape, dist


def rows_of(problem: str, variant: str, key: str, status: str = "Ok") -> tuple[dict, ...]:
    """The rows of one pair: a pure function of (problem, variant, input)."""
    _, seed, shape, dist = entry(key)
    rows = []
    for index in range(outputs(problem) if status == "Ok" else 1):
        h = zlib.crc32(f"{problem}|{variant}|{key}|{index}".encode())
        row = {"problem": problem, "mutant_id": variant, "input_id": key, "input_seed": seed,
               "shape_variant": shape, "distribution": dist, "output_index": index, "status": status,
               "time_ms": h / 1e6, "repeat_bitwise_equal": h % 3 != 0}
        if variant != REFERENCE:
            row.update({"fp32_max_abs": (h % 9973) / 7.0, "fp32_n": h % 4096, "fp32_out_dtype": "float32"})
        if status != "Ok":
            row.update({"error_class": "CudaError" if status == "RuntimeError" else "OutOfMemoryError",
                        "error_message": f"{status} on {key}"})
        rows.append(row)
    return tuple(rows)


class SlowWorker(ScriptedWorker):
    """The scripted worker of test_supervisor, taking `PAIR_S` per pair and answering with `rows_of`."""

    def _run(self, job: Job) -> None:
        put = self.outbox.put
        put(Built(0.01))
        for key in job.record_references:
            put(Rows(REFERENCE, key, rows_of(job.problem, REFERENCE, key)))
        for variant, inputs in work_with_timing(job):  # the original first: timed, unrecorded
            for key in inputs:
                put(Started(variant, key))
                time.sleep(PAIR_S)
                if self.dead:
                    return
                action = ACTIONS.get((job.problem, variant, key), "ok")
                if action == "die":
                    self._die(None)
                    return
                if action == "crash":
                    put(Rows(variant, key, rows_of(job.problem, variant, key, "RuntimeError")))
                    put(Fatal(variant, key, "CUDA error: an illegal memory access was encountered"))
                    self._die(3)
                    return
                put(Rows(variant, key, rows_of(job.problem, variant, key, "OOM" if action == "oom" else "Ok")))
        put(Done({"execution": 0.0}, 1 << 20))


def plan(done: set[tuple[str, str, str]]) -> list[Job]:
    """One job per problem with the pairs and reference rows not in `done`, as `plan_jobs` plans them."""
    jobs = []
    for problem in PROBLEMS:
        work = tuple((v, todo) for v in (ORIGINAL, *MUTANTS)
                     if (todo := tuple(k for k in INPUTS if (problem, v, k) not in done)))
        references = tuple(k for k in INPUTS if (problem, REFERENCE, k) not in done)
        if work or references:
            jobs.append(Job(solution=f"/s/{problem}.py", problem_path=f"/p/{problem}.py", problem=problem,
                            mutants=(), pool="scripted", entry_keys=tuple(entry(k) for k in INPUTS),
                            build_dir="/b", work=work, record_references=references))
    return jobs


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def die_in_commit(window: str, nth: int) -> None:
    """Make this (forked) process SIGKILL itself in the middle of a commit to the store, at one of the moments
    the store's docstring promises to survive: "part-written": the `nth` part half written (under whatever
    name the store writes it); "part-renamed": the part of the `nth` commit in place, the manifest not yet
    replaced; "manifest-written": the `nth` manifest half written (as `files.write_atomic` writes it). The
    store's own code does the writing; only the moment of death is added."""
    from oracleaudit import files, store

    count = itertools.count(1)

    def torn(write):
        def half(tmp: Path) -> None:
            write(tmp)
            os.truncate(tmp, Path(tmp).stat().st_size // 2)
            kill_self()
        return half

    if window == "part-written":  # the store writes parts with its `write_with`
        write_part = store.write_with
        store.write_with = lambda path, write, sync=False: write_part(
            path, torn(write) if next(count) == nth else write, sync)
    elif window == "part-renamed":  # the store writes manifests with its `write_atomic`, after the part
        write_manifest = store.write_atomic
        store.write_atomic = lambda path, text, sync=False: (
            kill_self() if next(count) == nth else write_manifest(path, text, sync))
    elif window == "manifest-written":  # `files.write_atomic` writes through `files.write_with`
        write_file = files.write_with

        def write_with(path, write, sync=False):
            if Path(path).name == MANIFEST_FILE and next(count) == nth:
                write = torn(write)
            return write_file(path, write, sync)
        files.write_with = write_with
    else:
        raise ValueError(window)


def record(path: str, conn, die: tuple[str, int] | None = None) -> None:
    """The recording process: resume the store at `path` and record what it lacks. Sends ("planned", pairs)
    once planned, ("done", pairs recorded, errors) at the end. `die`: (window, nth) for `die_in_commit`."""
    try:
        if die is not None:
            die_in_commit(*die)
        store = EvidenceStore(path).open_or_create({"pool": "scripted"}, identity=RUN_IDENTITY)
        jobs = plan(store.done_keys())
        conn.send(("planned", sum(j.pairs + len(j.record_references) for j in jobs)))
        todo: queue.Queue = queue.Queue()
        for job in jobs:
            todo.put(job)
        result, errors = RunResult(solutions=len(jobs)), []

        def slot(gpu: int, recorder: Recorder) -> None:
            supervisor = Supervisor(gpu, recorder, timeout_floor_s=120, start=lambda g: SlowWorker(World()))
            try:
                while True:
                    try:
                        job = todo.get_nowait()
                    except queue.Empty:
                        return
                    errors.extend(supervisor.run(job).errors)
            except Exception:  # noqa: BLE001 (reported to the test as an error)
                errors.append(traceback.format_exc())
            finally:
                supervisor.close()

        with Recorder(store, result, lambda n: None, interval=FLUSH_S) as recorder:
            slots = [threading.Thread(target=slot, args=(gpu, recorder)) for gpu in range(SLOTS)]
            for thread in slots:
                thread.start()
            for thread in slots:
                thread.join()
        conn.send(("done", result.pairs, errors))
    except Exception:  # noqa: BLE001 (reported to the test)
        conn.send(("failed", traceback.format_exc()))


class Recording:
    """A recording process forked from this one."""

    def __init__(self, path: Path, die: tuple[str, int] | None = None):
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe(duplex=False)
        self.process = context.Process(target=record, args=(str(path), child, die), daemon=True)
        self.process.start()
        child.close()
        self.planned = self._message("planned")[1]

    def _message(self, kind: str, timeout: float = 60.0):
        assert self.conn.poll(timeout), f"no {kind!r} message from the recording process within {timeout} s"
        message = self.conn.recv()
        assert message[0] == kind, f"the recording process said {message}"
        return message

    def finish(self) -> tuple[int, list[str]]:
        _, pairs, errors = self._message("done")
        self.process.join(30)
        assert self.process.exitcode == 0
        return pairs, errors

    def died(self) -> None:
        """It killed itself (`die`) with SIGKILL."""
        self.process.join(60)
        assert self.process.exitcode == -signal.SIGKILL, f"exit code {self.process.exitcode}"

    def kill_after(self, seconds: float) -> bool:
        """SIGKILL it `seconds` after it planned; whether it was still running then."""
        time.sleep(seconds)
        running = self.process.exitcode is None
        self.process.kill()  # SIGKILL
        self.process.join(30)
        return running


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(KEY_COLUMNS)).reset_index(drop=True)


def every_row_key() -> set[tuple]:
    """(problem, mutant_id, input_id, output_index) of every row a run records: one row for a pair that
    crashes, dies or runs out of memory, `outputs(problem)` for the others."""
    return {(p, v, k, i) for p in PROBLEMS for v in (REFERENCE, ORIGINAL, *MUTANTS) for k in INPUTS
            for i in range(1 if (p, v, k) in ACTIONS else outputs(p))}


@dataclass
class Kill:
    running: bool  # the recording process was still running when killed
    before: int  # rows in the store when the process started
    after: int  # rows in the store after the kill
    frame: pd.DataFrame = field(repr=False)
    orphans: int = 0  # files in parts/ no manifest entry names (a kill during a commit)

    def mid_run(self, total: int) -> bool:
        return self.running and self.before < self.after < total


@dataclass
class Runs:
    uninterrupted: pd.DataFrame = field(repr=False)
    kills: list[Kill]
    resumed: pd.DataFrame = field(repr=False)
    final_errors: list[str]
    again_planned: int
    again_parts: tuple[int, int]  # committed parts before and after a run on the finished store


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The rows of a run never interrupted."""
    whole = tmp_path_factory.mktemp("uninterrupted")
    recording = Recording(whole)
    pairs, errors = recording.finish()
    assert errors == [] and pairs == recording.planned - len(PROBLEMS) * len(INPUTS)  # pairs: not reference rows
    return EvidenceStore(whole).read()


@pytest.fixture(scope="module")
def runs(uninterrupted: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """A run killed `KILLS` times at random moments and resumed each time, then run to the end, then run
    once more."""
    killed = tmp_path_factory.mktemp("resume-kill")
    rng = random.Random(SEED)
    kills = []
    for _ in range(KILLS):
        before = EvidenceStore(killed).num_rows if EvidenceStore(killed).exists() else 0
        running = Recording(killed).kill_after(rng.uniform(0.1, 0.6))
        store = EvidenceStore(killed).open()  # every committed part whole and as the manifest says
        kills.append(Kill(running, before, store.num_rows, store.read(), len(store.orphans())))

    recording = Recording(killed)
    _, final_errors = recording.finish()
    resumed = EvidenceStore(killed).read()

    parts = len(EvidenceStore(killed).open().parts)
    again = Recording(killed)
    again.finish()
    return Runs(uninterrupted, kills, resumed, final_errors, again.planned,
                (parts, len(EvidenceStore(killed).open().parts)))


def test_the_uninterrupted_run_records_every_row_of_the_plan_once(runs: Runs) -> None:
    keys = list(runs.uninterrupted[list(KEY_COLUMNS)].itertuples(index=False, name=None))
    assert len(keys) == len(set(keys)) and set(keys) == every_row_key()
    statuses = runs.uninterrupted.groupby("status").size().to_dict()
    assert statuses["RuntimeError"] == 4 and statuses["OOM"] == 1  # two crashes, two deaths; one OOM


def test_after_every_kill_the_store_opens_with_whole_pairs_the_uninterrupted_run_has_too(runs: Runs) -> None:
    whole = runs.uninterrupted
    per_pair = whole.groupby(["problem", "mutant_id", "input_id"]).size()
    previous: set[tuple] = set()
    for n, kill in enumerate(runs.kills):
        frame = kill.frame
        keys = list(frame[list(KEY_COLUMNS)].itertuples(index=False, name=None))
        assert len(keys) == len(set(keys)), f"kill {n}: a row recorded twice"
        assert previous <= set(keys), f"kill {n}: rows committed before were lost"
        previous = set(keys)
        # a pair counts as done once any of its rows is committed: all of them must be
        counts = frame.groupby(["problem", "mutant_id", "input_id"]).size()
        assert (counts == per_pair.loc[counts.index]).all(), f"kill {n}: a pair committed without all its outputs"
        same = whole.merge(frame[list(KEY_COLUMNS)], on=list(KEY_COLUMNS))
        assert len(same) == len(frame), f"kill {n}: rows the uninterrupted run does not have"
        # dtypes aside: a column without nulls in a subset reads as bool where the whole store's is object
        pd.testing.assert_frame_equal(canonical(frame), canonical(same)[frame.columns], check_dtype=False)


def test_kills_landed_in_the_middle_of_the_recording(runs: Runs) -> None:
    total = len(runs.uninterrupted)
    landed = [kill.mid_run(total) for kill in runs.kills]
    assert sum(landed) >= 2, f"only {sum(landed)} of {KILLS} kills landed mid-run: {runs.kills}"


def test_the_resumed_store_equals_the_uninterrupted_one_nothing_lost_nothing_duplicated(runs: Runs) -> None:
    assert runs.final_errors == []
    keys = list(runs.resumed[list(KEY_COLUMNS)].itertuples(index=False, name=None))
    assert len(keys) == len(set(keys)), "a row recorded twice"
    assert len(runs.resumed) == len(runs.uninterrupted)
    pd.testing.assert_frame_equal(canonical(runs.resumed), canonical(runs.uninterrupted))


def test_a_run_on_the_finished_store_plans_and_adds_nothing(runs: Runs) -> None:
    assert runs.again_planned == 0
    assert runs.again_parts[0] == runs.again_parts[1]


def test_a_kill_inside_a_commit_leaves_only_ignored_leftovers_and_the_resumed_store_is_whole(
        uninterrupted: pd.DataFrame, tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    seen = []
    for window in ("part-written", "part-renamed", "manifest-written"):
        before = EvidenceStore(store_path).num_rows if EvidenceStore(store_path).exists() else 0
        Recording(store_path, die=(window, 3)).died()
        store = EvidenceStore(store_path).open()  # the manifest of the last whole commit, its parts whole
        assert store.num_rows > before  # two commits of this run made it
        frame = store.read()
        assert not frame.duplicated(list(KEY_COLUMNS)).any()
        seen.append((window, [p.name for p in store.orphans()], sorted(p.name for p in store_path.glob(".manifest*"))))
    (_, written, _), (_, renamed, _), (_, _, manifests) = seen
    assert any(name.startswith(".part-") and name.endswith(".tmp") for name in written)  # the torn part
    assert any(name.startswith("part-") and name.endswith(".parquet") for name in renamed)  # whole, unlisted
    assert len(manifests) == 1 and manifests[0].endswith(".tmp")  # the torn manifest

    recording = Recording(store_path)
    assert recording.finish()[1] == []
    store = EvidenceStore(store_path).open()
    pd.testing.assert_frame_equal(canonical(store.read()), canonical(uninterrupted))
    assert store.remove_orphans()  # the leftovers are no part of the store
    pd.testing.assert_frame_equal(canonical(EvidenceStore(store_path).open().read()), canonical(uninterrupted))
