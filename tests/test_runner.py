"""Planning the run stage on the CPU: one job per solution, resumption by recorded variants, and clear
errors for mutants that cannot be run."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from oracleaudit import runner
from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import read_mutants

sys.path.insert(0, str(Path(__file__).parent))
from test_run_gpu import DATA, EDITS, make_mutants  # noqa: E402


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
    assert len(job.mutants) == len(EDITS)
    assert [key for key, *_ in job.entry_keys] == ["official/s=734796314/official", "normal/s=0/official"]
    assert job.skip_variants == ()


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


def test_recorded_variants_are_skipped_and_a_fully_recorded_solution_is_not_run(workdir: Path) -> None:
    mutants = read_mutants(Path("mutants"))
    label = "level1/1_ScaleShift"
    jobs, _, recorded = plan(workdir, {f"{label}::reference", f"{label}::original", f"{label}::{mutants[0].id}"})
    assert recorded == 2 and set(jobs[0].skip_variants) == {"reference", "original", mutants[0].id}
    everything = {f"{label}::{k}" for k in ["reference", "original", *(m.id for m in mutants)]}
    jobs, _, recorded = plan(workdir, everything)
    assert jobs == [] and recorded == len(mutants) + 1


def test_a_job_is_cut_into_even_slices_that_record_each_variant_once(workdir: Path) -> None:
    from dataclasses import replace

    (job,) = plan(workdir)[0]
    # 12 mutants: the test solution's 4, three times under distinct ids (slicing looks only at ids)
    job = replace(job, mutants=tuple({**m, "id": f"{m['id']}-{n}"} for n, m in enumerate(job.mutants * 3)))
    every = [m["id"] for m in job.mutants]
    slices = runner.split_job(job, 5)
    assert len(slices) == 3  # 12 variants in at most 5 each: three slices of 4, not 5 + 5 + 2
    runs = [[v for v in every if v not in piece.skip_variants] for piece in slices]
    assert [len(r) for r in runs] == [4, 4, 4] and sum(runs, []) == every
    assert "original" not in slices[0].skip_variants and "reference" not in slices[0].skip_variants
    assert all({"original", "reference"} <= set(piece.skip_variants) for piece in slices[1:])
    assert all(piece.mutants == job.mutants for piece in slices)  # the same build plan in every slice
    assert sum(runner.variants_to_run(piece) for piece in slices) == runner.variants_to_run(job) == 13


def test_slicing_keeps_recorded_variants_skipped_and_leaves_a_small_job_whole(workdir: Path) -> None:
    from dataclasses import replace

    (job,) = plan(workdir)[0]
    first, *rest = [m["id"] for m in job.mutants]
    resumed = replace(job, skip_variants=("original", "reference", first))
    slices = runner.split_job(resumed, 1)
    assert len(slices) == len(rest)
    assert all({"original", "reference", first} <= set(piece.skip_variants) for piece in slices)
    assert [[v for v in rest if v not in piece.skip_variants] for piece in slices] == [[v] for v in rest]
    assert runner.split_job(job, len(job.mutants)) == [job]
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
])
def test_bad_run_options_are_refused_naming_the_flag(workdir: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(OracleAuditError, match=message):
        runner.run(Path("mutants"), Path("evidence"), show_progress=False, **kwargs)
