"""Planning a run: one job per solution with the (variant, input) pairs the store lacks, cut into slices
that any worker may take."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Container, Sequence

from oracleaudit.execution.protocol import Job
from oracleaudit.mutant import PENDING, Mutant
from oracleaudit.problem import problem_at
from oracleaudit.status import ORIGINAL, REFERENCE

__all__ = ["JOB_SIZE", "WARM_INPUTS", "Cover", "build_root", "input_runs", "plan_jobs", "split_job", "take_slice",
           "variants_to_run", "warm_jobs"]

JOB_SIZE = 48  # variants per slice; every slice loads the extension and runs the original once
WARM_INPUTS = 8  # pool inputs per warm-up job: the slot comes back between them for any slice built meanwhile
# (problem label, its input keys) → the keys never inferred; a cover with a `deciders(problem label, keys)`
# method also gives each job its `Job.deciders` (scoring.oracle.RunCover)
Cover = Callable[[str, Sequence[str]], Sequence[str]]


def plan_jobs(mutants: list[Mutant], pool: str, build_root: Path, done: set[tuple[str, str, str]],
              per_solution: int | None = None, cover: Cover | None = None) -> tuple[list[Job], list[str], int]:
    """One job per solution file: the original and the Pending mutants (or the first `per_solution` of them
    by id, a deterministic sample), each on the pool inputs without a row in `done` ((problem, mutant_id,
    input_id) triples); each job's `cover` is `cover(problem label, its input keys)`, and its `deciders` the
    cover's `deciders` of them where it has that method. Returns the jobs, error lines, and how many pairs are
    already recorded."""
    from oracleaudit.files import file_sha256
    from oracleaudit.pool import Pool, names_a_file

    by_source: dict[tuple[str, str | None], list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        if mutant.status == PENDING:
            by_source[(mutant.source, mutant.problem_file)].append(mutant)
    loaded = Pool.load(pool)
    # Jobs carry absolute paths: a Dask worker (or any process started elsewhere) has its own working folder.
    pool_ref = str(Path(pool).resolve()) if names_a_file(pool) else pool
    jobs, errors, recorded = [], [], 0
    for (source, problem_file), group in sorted(by_source.items(), key=lambda kv: kv[0][0]):
        if per_solution is not None:
            group = sorted(group, key=lambda m: m.id)[:per_solution]
        path = Path(source)
        if problem_file is None:
            errors.append(f"{source}: its mutants have no paired problem (run `oracleaudit mutate --problems ROOT`)")
            continue
        if not path.is_file():
            errors.append(f"{source}: no such file (run from the folder `oracleaudit mutate` ran in)")
            continue
        if file_sha256(path) != group[0].source_sha256:
            errors.append(f"{source}: changed since its mutants were made (sha256 differs); mutate again")
            continue
        problem = problem_at(problem_file)
        label = problem.label
        keys = tuple((e.key, e.seed, e.shape, e.distribution) for e in loaded.entries_for(problem))
        # Resolved once here: a worker would otherwise run the reference on the CPU again to validate them.
        shapes = tuple((v.name, v.overrides, v.input_shapes) for v in loaded.shape_plan(problem).shapes)
        inputs = [key for key, *_ in keys]
        work = []
        for variant in [ORIGINAL, *(m.id for m in group)]:
            todo = tuple(key for key in inputs if (label, variant, key) not in done)
            recorded += len(inputs) - len(todo)
            if todo:
                work.append((variant, todo))
        references = tuple(key for key in inputs if (label, REFERENCE, key) not in done)
        if not work and not references:
            continue
        jobs.append(Job(solution=str(path.resolve()), problem_path=str(Path(problem_file).resolve()),
                        problem=label, mutants=tuple(asdict(m) for m in group), pool=pool_ref, entry_keys=keys,
                        build_dir=str(build_root), work=tuple(work), record_references=references, shapes=shapes,
                        cover=tuple(cover(label, inputs)) if cover else (),
                        deciders=tuple(cover.deciders(label, inputs)) if hasattr(cover, "deciders") else ()))
    return jobs, errors, recorded


def split_job(job: Job, size: int) -> list[Job]:
    """Cut a job into slices of at most `size` of its mutants, as even as possible. Every slice keeps all
    mutants for the build plan (so every slice loads the same extensions); the first slice also has the
    original and the reference rows. A slice without the original runs it first unrecorded to time the
    mutants' deadlines."""
    if size < 1:
        raise ValueError(f"a job slice holds at least one variant, got {size}")
    mutants = [(v, inputs) for v, inputs in job.work if v != ORIGINAL]
    original = [(v, inputs) for v, inputs in job.work if v == ORIGINAL]
    if len(mutants) <= size:
        return [job]
    count = -(-len(mutants) // size)
    width = -(-len(mutants) // count)
    slices = []
    for start in range(0, len(mutants), width):
        part = mutants[start:start + width]
        if start == 0:
            slices.append(replace(job, work=tuple(original + part)))
        else:
            slices.append(replace(job, work=tuple(part), record_references=()))
    return slices


def take_slice(job: Job, size: int) -> tuple[Job, Job | None]:
    """A slice of the job's first `size` mutants, with the original and the reference rows where the job has
    them, and the job of its other mutants (None where none is left): the work queue cuts a built job as
    workers ask for work (`scheduler.WorkQueue`). Every slice keeps all mutants for the build plan."""
    if size < 1:
        raise ValueError(f"a job slice holds at least one variant, got {size}")
    mutants = [(v, inputs) for v, inputs in job.work if v != ORIGINAL]
    if len(mutants) <= size:
        return job, None
    original = [(v, inputs) for v, inputs in job.work if v == ORIGINAL]
    return (replace(job, work=tuple(original + mutants[:size])),
            replace(job, work=tuple(mutants[size:]), record_references=()))


def input_runs(entries: Sequence[Any], wanted: Container[str], first: Sequence[str] = ()) -> list[list[Any]]:
    """The order a worker runs a job's pool entries in, as runs of entries that share one set of models (the
    same shape overrides and weight seed): the first entry of every such group, then the rest of each group,
    groups in pool order of their first entry; then cut to the `wanted` keys. `entries` are all the job's,
    so every worker that continues a job, replays included, keeps one order. The keys of `first` (`Job.first`:
    a variant that crashed or hung, alone in its job) run before all others, in their order.

    A variant that crashes on a shape mostly does so on its first input of that shape, and input by input a
    crash makes the fresh worker replay every other variant's inputs so far (supervisor.py). With each group
    whole, a crash on the odd shapes came after some fifty inputs: shard 1 of the complete run would have
    replayed 0.56 pairs per observed pair, against 0.09 with the first inputs first (bench/replay_cost.py)."""
    def group(entry: Any) -> tuple:
        return tuple(entry.overrides or ()), entry.weight_seed

    groups: dict[tuple, list] = {}
    for entry in entries:
        groups.setdefault(group(entry), []).append(entry)
    ordered = [g[0] for g in groups.values()] + [entry for g in groups.values() for entry in g[1:]]
    if first:
        rank = {key: index for index, key in enumerate(first)}
        ordered.sort(key=lambda entry: rank.get(entry.key, len(rank)))  # stable: the others keep their order
    runs: list[list] = []
    for entry in ordered:
        if entry.key not in wanted:
            continue
        if runs and group(runs[-1][-1]) == group(entry):
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


def warm_jobs(jobs: Sequence[Job], inputs: int = WARM_INPUTS) -> list[Job]:
    """Warm-up jobs (`Job.warm`) for the pool inputs that the jobs' pairs and reference rows need, `inputs` of
    them to a warm-up job, dealt round the jobs in their order: the first inputs of every job, then the next."""
    pieces = []
    for job in jobs:
        wanted = {key for _, keys in job.work for key in keys} | set(job.record_references)
        entries = [entry for entry in job.entry_keys if entry[0] in wanted]
        pieces.append([replace(job, mutants=(), entry_keys=tuple(entries[i:i + inputs]), work=(),
                               record_references=(), time_original=(), replay=(), first=(), faults=(),
                               original_s=(), warm=True)
                       for i in range(0, len(entries), inputs)])
    return [piece for turn in itertools.zip_longest(*pieces) for piece in turn if piece is not None]


def variants_to_run(job: Job) -> int:
    """The variants of a job with pairs still to observe."""
    return len(job.work)


def build_root() -> Path:
    """Where extensions are built: the cache (`$ORACLEAUDIT_CACHE/builds`), shared by all runs on this
    machine; an extension's folder is named by the hash of its sources."""
    from oracleaudit.cache import cache_root

    return (cache_root() / "builds").resolve()
