"""Planning the run stage on the CPU: one job per solution, resumption by recorded variants, and clear
errors for mutants that cannot be run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oracleaudit import execution as runner
from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import read_mutants
from tests.execution.test_run_gpu import DATA, EDITS, make_mutants


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    make_mutants(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def plan(workdir: Path, done: set[str] = frozenset(), per_solution: int | None = None):
    return runner.plan_jobs(read_mutants(Path("mutants")), str(workdir / "tiny_pool.toml"), workdir / "b", set(done),
                            per_solution)


def test_a_solution_becomes_one_job_with_every_pending_mutant_and_every_pool_input(workdir: Path) -> None:
    jobs, errors, recorded = plan(workdir)
    assert errors == [] and recorded == 0
    (job,) = jobs
    assert len(job.mutants) == len(EDITS) and job.problem == "level1/1_ScaleShift"
    keys = ("official/s=734796314/official", "normal/s=0/official")
    assert [key for key, *_ in job.entry_keys] == list(keys)
    assert job.work == (("original", keys), *((m["id"], keys) for m in job.mutants))
    assert job.record_references == keys and job.pairs == (len(EDITS) + 1) * 2


def test_jobs_name_their_files_by_absolute_path_for_workers_in_another_folder(workdir: Path) -> None:
    (job,) = runner.plan_jobs(read_mutants(Path("mutants")), "tiny_pool.toml", workdir / "b", set())[0]
    assert job.solution == str(workdir.resolve() / "solutions" / "level1" / "1_ScaleShift.py")
    assert job.problem_path == str(workdir.resolve() / "level1" / "1_ScaleShift.py")
    assert job.pool == str(workdir.resolve() / "tiny_pool.toml")
    (job,) = runner.plan_jobs(read_mutants(Path("mutants")), "default", workdir / "b", set())[0]
    assert job.pool == "default"  # a shipped pool's name stays a name


def test_a_per_solution_limit_takes_the_first_mutants_by_id(workdir: Path) -> None:
    (job,) = plan(workdir, per_solution=2)[0]
    expected = sorted(m.id for m in read_mutants(Path("mutants")))[:2]
    assert [m["id"] for m in job.mutants] == expected
    assert job.variants() == ["original", *expected]


def test_a_resumed_run_plans_only_the_pairs_without_rows(workdir: Path) -> None:
    mutants = read_mutants(Path("mutants"))
    label, official, normal = "level1/1_ScaleShift", "official/s=734796314/official", "normal/s=0/official"
    done = {(label, "reference", official), (label, "reference", normal), (label, "original", official),
            (label, "original", normal), (label, mutants[0].id, official)}
    (job,), _, recorded = plan(workdir, done)
    assert recorded == 3 and job.record_references == ()
    assert dict(job.work) == {mutants[0].id: (normal,), **{m.id: (official, normal) for m in mutants[1:]}}
    everything = {(label, v, k) for v in ["reference", "original", *(m.id for m in mutants)] for k in (official, normal)}
    jobs, _, recorded = plan(workdir, everything)
    assert jobs == [] and recorded == (len(mutants) + 1) * 2


def test_a_job_is_cut_into_even_slices_the_first_with_the_original_and_the_references(workdir: Path) -> None:
    from dataclasses import replace

    (job,) = plan(workdir)[0]
    # 12 mutants: 4 of the test solution's, three times under distinct ids (slicing looks only at ids)
    four = [(v, inputs) for v, inputs in job.work if v != "original"][:4]
    extra = [(f"{v}-{n}", inputs) for n in range(3) for v, inputs in four]
    job = replace(job, work=(job.work[0], *extra))
    slices = runner.split_job(job, 5)
    assert len(slices) == 3  # 12 mutants in at most 5 each: three slices of 4, not 5 + 5 + 2
    assert [len(piece.work) for piece in slices] == [5, 4, 4]
    assert slices[0].work[0][0] == "original" and slices[0].record_references == job.record_references
    assert all(piece.record_references == () and "original" not in piece.variants() for piece in slices[1:])
    assert [w for piece in slices for w in piece.work] == list(job.work)
    assert all(piece.mutants == job.mutants for piece in slices)  # the same build plan in every slice
    assert sum(piece.pairs for piece in slices) == job.pairs
    assert runner.split_job(job, len(extra)) == [job]
    with pytest.raises(ValueError):
        runner.split_job(job, 0)


def test_prebuilding_reports_each_job_once_and_whether_it_built(workdir: Path) -> None:
    """Two jobs whose builds fail at once (no GPU or nvcc needed): a mutant of another version of the file,
    and a solution file that is gone. Each is handed over once, marked not built, so the runner gives it
    whole to one worker to find and report the failure."""
    import threading
    from dataclasses import replace

    (job,) = plan(workdir)[0]
    stale = replace(job, mutants=tuple({**m, "source_sha256": "0" * 64} for m in job.mutants))
    gone = replace(job, solution=str(workdir / "solutions" / "level1" / "missing.py"))
    handed: list[tuple[str, bool]] = []
    runner.prebuild_in_order([stale, gone], lambda j, seconds, built: handed.append((j.solution, built)),
                             threading.Event(), processes=2)
    assert sorted(handed) == sorted([(stale.solution, False), (gone.solution, False)])


def _listed_extensions(job) -> list[tuple[str, int]]:
    """A build plan read from the job's build folder (the prebuild test's stand-in for build.extensions_of)."""
    import json

    return [tuple(e) for e in json.loads((Path(job.build_dir) / "extensions.json").read_text())]


def _logged_build(job, name: str | None = None) -> tuple[float, bool, dict[str, str]]:
    """A build that logs what it was asked for, fails for the extension "bad", and (a whole job's) drops m1."""
    with (Path(job.build_dir).parent / "log").open("a") as log:
        log.write(f"{Path(job.build_dir).name} {name}\n")
    return 1.0, name != "bad", {"m1": "error: x"} if name is None else {}


def test_each_extension_of_a_job_is_prebuilt_on_its_own_the_largest_first_and_a_failure_rebuilds_it_whole(
        workdir: Path) -> None:
    """Job a has three extensions: they are built one by one (one process: in the order of their variants),
    and as one fails a is built again whole once they are done (its culprits found there); job b has one
    extension and is built whole at once. Each job is handed over once, with the seconds of all its builds."""
    import json
    import threading
    from dataclasses import replace

    from oracleaudit.execution.plan import variants_to_run

    (job,) = plan(workdir)[0]
    jobs = []
    for name, extensions in [("a", [["small", 2], ["big", 90], ["bad", 40]]), ("b", [["only", 3]])]:
        (workdir / "builds" / name).mkdir(parents=True)
        (workdir / "builds" / name / "extensions.json").write_text(json.dumps(extensions))
        jobs.append(replace(job, build_dir=str(workdir / "builds" / name)))
    handed = []
    runner.prebuild_in_order(jobs, lambda j, seconds, built: handed.append((Path(j.build_dir).name, j.unbuildable,
                                                                           seconds, built)),
                             threading.Event(), processes=1, plan=_listed_extensions, build=_logged_build)
    order = (workdir / "builds" / "log").read_text().split("\n")[:-1]
    assert [line for line in order if line.startswith("a")] == ["a big", "a bad", "a small", "a None"]
    assert order.index("b None") == sum(v >= variants_to_run(job) for v in (90, 40, 2))  # whole: all its variants
    assert sorted(handed) == [("a", (("m1", "error: x"),), 4.0, True), ("b", (("m1", "error: x"),), 1.0, True)]


def test_each_job_carries_the_cover_of_the_oracles_it_is_planned_for(workdir: Path) -> None:
    from functools import partial

    from oracleaudit.scoring.oracle import Oracle, input_cover

    cover = partial(input_cover, oracles=[Oracle.load("kernelbench"), Oracle.load("sol-execbench")])
    (job,), _, _ = runner.plan_jobs(read_mutants(Path("mutants")), str(workdir / "tiny_pool.toml"), workdir / "b",
                                    set(), None, cover)
    # sol-execbench draws none of the tiny pool's inputs: only kernelbench's first trial is covered
    assert job.cover == ("official/s=734796314/official",)
    assert plan(workdir)[0][0].cover == ()


def test_run_s_cover_flags_exclude_each_other(workdir: Path, capsys) -> None:
    from oracleaudit.cli import main

    assert main(["run", "--mutants", "mutants", "--out", "evidence", "--no-cover", "--cover-oracle", "kernelbench"]) == 2
    assert capsys.readouterr().err.strip() == "oracleaudit: error: --no-cover and --cover-oracle exclude each other"
    assert main(["run", "--mutants", "mutants", "--out", "evidence", "--cover-oracle", "nope"]) == 2
    assert "no catalog oracle named 'nope'" in capsys.readouterr().err


def test_a_solution_changed_since_mutate_is_reported_and_not_run(workdir: Path) -> None:
    solution = workdir / "solutions" / "level1" / "1_ScaleShift.py"
    solution.write_text(solution.read_text() + "\n# edited\n")
    jobs, errors, _ = plan(workdir)
    assert jobs == [] and len(errors) == 1 and "changed since its mutants were made" in errors[0]


def test_run_without_a_gpu_says_so_in_one_line(workdir: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(OracleAuditError, match="no CUDA device"):
        runner.run(Path("mutants"), Path("evidence"), pool=str(workdir / "tiny_pool.toml"), show_progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout_factor": 0}, "--timeout-factor must be > 0"),
    ({"backend": "slurm"}, "--backend must be local or dask"),
    ({"backend": "dask"}, "--backend dask needs --scheduler"),
    ({"per_solution": 0}, "--per-solution must be ≥ 1"),
    ({"workers_per_gpu": 0}, "--workers-per-gpu must be ≥ 1"),
    ({"job_size": 0}, "--job-size must be ≥ 1"),
    ({"evidence_engine": "fast"}, "--evidence-engine must be one of auto, fused, torch"),
    ({"max_crashes": -1}, "--max-crashes must be ≥ 0"),
])
def test_bad_run_options_are_refused_naming_the_flag(workdir: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(OracleAuditError, match=message):
        runner.run(Path("mutants"), Path("evidence"), show_progress=False, **kwargs)


def test_admission_lets_slices_share_a_gpu_only_as_far_as_their_memory_fits() -> None:
    from oracleaudit.execution.admission import WORKER_OVERHEAD_BYTES, GpuMemory

    gib = 1 << 30
    memory = GpuMemory(100 * gib, slots=4)  # 90 GiB usable, a default share of 22.5 GiB
    assert memory.default_need == 90 * gib // 4
    first = memory.acquire(40 * gib)
    second = memory.acquire(40 * gib)
    assert first.shared and second.shared and memory.in_use() == 80 * gib
    assert memory.acquire(20 * gib, stop=lambda: True) is None  # would not fit: it waits (here: gives up)
    second.release()
    third = memory.acquire(20 * gib)
    assert third is not None and memory.in_use() == 60 * gib
    first.grow(60 * gib)  # a measured peak larger than the lease: the GPU is overcommitted, no one waits
    assert memory.in_use() == 80 * gib
    first.release()
    third.release()
    lone = memory.acquire(95 * gib)  # more than fits, but the GPU is idle: it runs
    assert lone is not None and not lone.shared
    lone.release()
    assert memory.acquire(1).need == WORKER_OVERHEAD_BYTES


def test_an_exclusive_lease_waits_for_the_gpu_and_keeps_others_out_meanwhile() -> None:
    import threading
    import time

    from oracleaudit.execution.admission import GpuMemory

    memory = GpuMemory(100 << 30, slots=8)
    running = memory.acquire()
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(memory.acquire(exclusive=True)))
    waiter.start()
    time.sleep(0.3)
    assert got == [] and memory.exclusive_waiting == 1
    assert memory.acquire(stop=lambda: True) is None  # no new lease while an exclusive one waits
    running.release()
    waiter.join(5)
    (alone,) = got
    assert alone is not None and not alone.shared
    assert memory.acquire(stop=lambda: True) is None
    alone.release()
    assert memory.acquire(stop=lambda: True) is not None


def test_the_work_queue_hands_out_exclusive_retries_after_the_slices_and_ends_when_all_is_done() -> None:
    import threading
    from dataclasses import replace

    from oracleaudit.execution.protocol import Job

    first = Job(solution="s", problem_path="p", problem="level1/1_X", mutants=(), pool="default", entry_keys=(),
                build_dir="b")
    second = replace(first, solution="t")
    work = runner.WorkQueue()
    stop = threading.Event()
    work.put(first)
    assert work.take(stop) is first
    retry = replace(first, exclusive=True)
    work.finished(first, retry)
    work.put(second)
    handed = replace(first, solution="u")
    work.put(handed, first=True)  # a variant a supervisor handed off: before the slices waiting
    work.fed()
    assert work.take(stop) is handed
    assert work.take(stop) is second  # slices first, exclusive retries after them
    assert work.take(stop) is retry
    for done in (handed, second, retry):
        work.finished(done, None)
    assert work.take(stop) is None


def test_a_divisible_job_is_cut_as_it_is_taken_smaller_as_the_run_nears_its_end(workdir: Path) -> None:
    import threading
    from dataclasses import replace

    (job,) = plan(workdir)[0]
    four = [(v, inputs) for v, inputs in job.work if v != "original"][:4]
    mutants = [(f"{v}-{n}", inputs) for n in range(40) for v, inputs in four]  # 160 mutants
    job = replace(job, work=(job.work[0], *mutants))
    other = replace(job, solution="other")  # a second planned job, still building
    work = runner.WorkQueue(slots=4, job_size=48)
    work.expect(runner.variants_to_run(job) + runner.variants_to_run(other))
    work.put(job, divisible=True, planned=True)
    stop = threading.Event()
    first = work.take(stop)  # 322 variants left over 2 slices for each of 4 slots: 41 mutants and the original
    assert first.work == (job.work[0], *mutants[:41]) and first.record_references == job.record_references
    work.put(other, divisible=True, planned=True)  # built: no longer expected, queued behind the first job
    pieces = []
    while work.divisible:
        pieces.append(work.take(stop))
    sizes = [(piece.solution == "other", sum(v != "original" for v, _ in piece.work)) for piece in pieces]
    # what is left over 8, at least 8; the rest of a job whole where fewer than 8 would be left (26, then 12)
    assert sizes == [(False, 35), (False, 31), (False, 27), (False, 26), (True, 21), (True, 18), (True, 16),
                     (True, 14), (True, 12), (True, 10), (True, 9), *[(True, 8)] * 6, (True, 12)]
    assert [w for piece in [first, *pieces[:4]] for w in piece.work] == list(job.work)
    assert [w for piece in pieces[4:] for w in piece.work] == list(other.work)
    assert all(piece.record_references == () for piece in pieces if piece is not pieces[4])
    assert all(piece.mutants == job.mutants for piece in pieces)  # the same build plan in every slice
    assert runner.take_slice(job, 500) == (job, None)
    with pytest.raises(ValueError):
        runner.take_slice(job, 0)


class ListStore:
    """Stands in for an EvidenceStore: records each committed batch."""

    def __init__(self, fail: bool = False):
        self.parts: list[list[dict]] = []
        self.fail = fail

    def append(self, rows: list[dict]) -> None:
        if self.fail:
            raise OracleAuditError("disk full")
        self.parts.append(list(rows))


def pair_row(variant: str, key: str, status: str = "Ok", **extra) -> dict:
    return {"problem": "level1/1_X", "mutant_id": variant, "input_id": key, "status": status, **extra}


def test_the_recorder_commits_rows_within_its_interval_even_when_no_more_rows_come() -> None:
    """A worker in a 30 s hang sends nothing: what arrived before it must reach the store anyway."""
    import time

    store, advanced = ListStore(), []
    result = runner.RunResult()
    with runner.Recorder(store, result, advanced.append, interval=0.05) as record:
        record("reference", [pair_row("reference", "a")])
        record("original", [pair_row("original", "a")])
        deadline = time.monotonic() + 5
        while not store.parts and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sum(len(p) for p in store.parts) == 2
        record("m1", [pair_row("m1", "a", "Timeout", inferred=True)])
    assert sum(len(p) for p in store.parts) == 3  # leaving commits the rest
    assert (result.pairs, result.variants, result.inferred, advanced) == (2, 2, 1, [1, 1])
    assert dict(result.by_status) == {"Ok": 2, "Timeout": 1}


def test_a_commit_that_fails_in_the_recorder_s_thread_stops_the_next_call() -> None:
    import time

    record = runner.Recorder(ListStore(fail=True), runner.RunResult(), lambda n: None, interval=0.02)
    with pytest.raises(OracleAuditError, match="disk full"):
        with record:
            record("original", [pair_row("original", "a")])
            time.sleep(0.2)
            record("m1", [pair_row("m1", "a")])


def test_a_store_resumes_only_under_a_pool_that_gives_the_same_inputs(workdir: Path) -> None:
    """The store records the pool's digest: a comment edited in the pool file resumes it; a pool whose
    inputs changed (here its derivation) is refused in one line; a store made before the digest was
    recorded is held to the pool's name alone."""
    from oracleaudit.pool import Pool
    from oracleaudit.store import EvidenceStore

    pool = workdir / "tiny_pool.toml"
    mutants = workdir / "mutants" / "mutants.jsonl"
    store = runner.open_store(workdir / "evidence", str(pool), mutants)
    assert store.meta["pool_sha256"] == Pool.load(pool).digest()
    pool.write_text("# a comment\n" + pool.read_text())
    runner.open_store(workdir / "evidence", str(pool), mutants)
    pool.write_text(pool.read_text().replace("schema_version = 1", 'schema_version = 1\nderive = "draws"'))
    with pytest.raises(OracleAuditError, match=r"manifest.json: made with other inputs of pool .* new store"):
        runner.open_store(workdir / "evidence", str(pool), mutants)
    EvidenceStore(workdir / "old").create({"pool": str(pool), "mutants_sha256": "0" * 64})
    assert "pool_sha256" not in runner.open_store(workdir / "old", str(pool), mutants).meta


def test_a_worker_runs_the_first_input_of_every_shape_group_first_and_keeps_that_order_when_continuing() -> None:
    """Entries of three groups (official, odd, and one with its own weight seed): the first of each group,
    then the rest group by group, as runs of one group each; a worker continuing the job with some inputs
    done keeps the order of the whole job."""
    from types import SimpleNamespace

    from oracleaudit.execution.plan import input_runs

    def entry(key: str, overrides: tuple, seed: int = 42):
        return SimpleNamespace(key=key, overrides=overrides, weight_seed=seed)

    odd = (("n", 3),)
    entries = [entry("o1", ()), entry("o2", ()), entry("t1", (), seed=7), entry("o3", ()), entry("d1", odd),
               entry("d2", odd)]
    keys = [[e.key for e in run] for run in input_runs(entries, {e.key for e in entries})]
    assert keys == [["o1"], ["t1"], ["d1"], ["o2", "o3"], ["d2"]]
    assert [[e.key for e in run] for run in input_runs(entries, {"o2", "d1", "d2", "o3"})] == [
        ["d1"], ["o2", "o3"], ["d2"]]
    one_group = [entry(k, ()) for k in ("a", "b", "c")]
    assert [[e.key for e in run] for run in input_runs(one_group, {"a", "b", "c"})] == [["a", "b", "c"]]
    # a variant that crashed, alone in its job (Job.first): its deciding inputs first, then the order above
    assert [[e.key for e in run] for run in input_runs(entries, {"o2", "d1", "d2", "o3"}, ("d2", "o3"))] == [
        ["d2"], ["o3"], ["d1"], ["o2"]]


def test_warm_up_jobs_take_the_inputs_each_job_needs_a_few_at_a_time_dealt_round_the_jobs() -> None:
    """Warm-up jobs carry no mutants and no work: only the inputs the job's pairs or reference rows need, in
    its order, `inputs` to a job; the first inputs of every job come before the next of any."""
    from oracleaudit.execution.plan import warm_jobs
    from oracleaudit.execution.protocol import Job

    def job(name: str, keys: list[str], work: list[str], references: list[str] = ()) -> Job:
        return Job(solution=name, problem_path=name, problem=name, mutants=({"id": "m"},), pool="default",
                   entry_keys=tuple((k, 0, "official", "d") for k in keys), build_dir="/b",
                   work=(("original", tuple(work)), ("m", tuple(work))), record_references=tuple(references))

    a = job("a", ["a1", "a2", "a3", "a4", "a5"], ["a1", "a2", "a4"], ["a5"])  # a3 is recorded already
    b = job("b", ["b1", "b2"], ["b1", "b2"])
    warm = warm_jobs([a, b], inputs=2)
    assert [(j.solution, [e[0] for e in j.entry_keys]) for j in warm] == [
        ("a", ["a1", "a2"]), ("b", ["b1", "b2"]), ("a", ["a4", "a5"])]
    assert all(j.warm and j.work == () and j.mutants == () and j.record_references == () for j in warm)
