"""The CPU parts of bench/size_findings.py: the scaled problems (KernelBench's constants, cited), the pool (the
inputs both KernelBench oracles draw, as the default pool makes them), `prepare`'s work folder, the run's
bookkeeping and `compare` on real evidence."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import torch

from oracleaudit.mutant import read_mutants
from oracleaudit.pool import Pool
from oracleaudit.problem import (
    bundled_root,
    int_constants,
    load_problem_module,
    problem_at,
)
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.shipped import shipped_dir
from oracleaudit.store import EvidenceStore

ROOT = Path(__file__).resolve().parents[2]
MIRROR = Path("/work/.mirror/ScalingIntelligence+KernelBench/repo")
TWO = ["level1/30_Square_matrix_multiplication", "level2/12_Gemm_GroupNorm_HardTanh"]
KILL_MATRIX = shipped_dir("kill_matrix") / "evidence"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_size_findings", ROOT / "bench" / "size_findings.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def work(bench, tmp_path_factory) -> Path:
    """`prepare` for two problems, with every sample mutant of their solutions."""
    folder = tmp_path_factory.mktemp("size_findings")
    bench.prepare(argparse.Namespace(work=folder, problems=TWO, per_solution=None, budget_s=480.0, job_size=8,
                                     workers_per_gpu=8))
    return folder


def test_scaled_problems_change_only_the_named_constants(bench, tmp_path):
    assert len(bench.SCALED) >= 10
    for label, spec in bench.SCALED.items():
        path = bench.scale_problem(label, tmp_path)
        assert problem_at(path).label == label
        scaled, bundled = int_constants(load_problem_module(path)), int_constants(load_problem_module(
            bundled_root() / f"{label}.py"))
        assert {n: v for n, v in scaled.items() if v != bundled[n]} == {
            n: v for n, (v, _) in spec.constants.items() if v != bundled[n]}, label
        found = bench.footprint(path)
        assert found["largest_input"] <= 2**28, label  # one input ≤ 1 GiB: 8 workers share the GPU
        assert bench.reduction(label, path) >= bench.reduction(label, bundled_root() / f"{label}.py")


def _kernelbench_module(source: str, commit: str, tmp_path: Path):
    text = subprocess.run(["git", "-C", str(MIRROR), "show", f"{commit}:KernelBench/{source}"],
                          capture_output=True, text=True, check=True).stdout
    path = tmp_path / (re.sub(r"\W", "_", source.removesuffix(".py")) + ".py")
    path.write_text(text)
    return load_problem_module(path)


def test_cited_sizes_are_kernelbench_s_at_the_cited_commit(bench, tmp_path):
    """Every value is the expression it cites in KernelBench's file at the commit, and the scaled problem's
    get_inputs() shapes (meta device) are that file's."""
    have = MIRROR.is_dir() and subprocess.run(["git", "-C", str(MIRROR), "cat-file", "-e", bench.KERNELBENCH_COMMIT],
                                              capture_output=True, check=False).returncode == 0
    if not have:
        pytest.skip(f"no mirror of KernelBench at {MIRROR} with commit {bench.KERNELBENCH_COMMIT}")
    for label, spec in bench.SCALED.items():
        theirs = _kernelbench_module(spec.source, bench.KERNELBENCH_COMMIT, tmp_path)
        for name, (value, expression) in spec.constants.items():
            assert eval(expression, {}, vars(theirs)) == value, (label, name)  # KernelBench's constants
        with torch.device("meta"):
            shapes = [list(t.shape) for t in theirs.get_inputs()]
        assert bench.footprint(bench.scale_problem(label, tmp_path))["input_shapes"] == shapes, label


def test_pool_holds_exactly_the_inputs_both_oracles_draw_as_the_default_pool_makes_them(bench):
    mine, default = Pool.load(bench.POOL), Pool.load("default")
    keys, every = mine.keys(), default.keys()
    drawn = set()
    for name in bench.ORACLES:
        for stage in Oracle.load(name).stages:
            here = {key for key in keys if stage.draws(key)}
            assert here and here == {key for key in every if stage.draws(key)}, (name, stage.name)
            drawn |= here
    assert drawn == set(mine.keys())
    for entry in mine:
        assert entry.as_json() == default.get(entry.key).as_json()
    assert mine.derive == default.derive == "draws"
    # Nothing is scaled down at KernelBench's sizes, and the bundled sizes are the default pool's inputs.
    for label in bench.SCALED:
        assert bench.footprint(bundled_root() / f"{label}.py")["largest_input"] <= default.max_elements
    resolved = {e.key: e for e in default.entries_for(bundled_root() / f"{TWO[0]}.py")}
    for entry in mine.entries_for(bundled_root() / f"{TWO[0]}.py"):
        assert (entry.overrides, entry.input_shapes) == (resolved[entry.key].overrides, resolved[entry.key].input_shapes)


def test_prepare_writes_the_same_mutants_at_both_sizes(bench, work):
    state = json.loads((work / "state.json").read_text())["prepare"]
    assert state["per_solution"] == 16 and state["mutants"] == 32
    bundled, official = read_mutants(work / "mutants-bundled"), read_mutants(work / "mutants-official")
    bundle = read_mutants(shipped_dir("kill_matrix") / "mutants")  # the first 16 by id of each solution
    sample = {m.id: m for label in TWO for m in sorted((m for m in bundle if m.problem == label),
                                                        key=lambda m: m.id)[:16]}
    assert [m.id for m in bundled] == [m.id for m in official] and set(sample) == {m.id for m in bundled}
    for b, o in zip(bundled, official):
        assert b == sample[b.id]
        assert problem_at(o.problem_file).label == o.problem and Path(o.problem_file).parent.parent == work / "problems"
        assert (work / "mutants-official" / "diffs" / f"{o.id}.diff").is_file()
    shapes = {TWO[0]: [[4096, 4096], [4096, 4096]], TWO[1]: [[1024, 8192]]}
    for label in TWO:
        p = state["problems"][label]
        assert p["kernelbench_commit"] == bench.KERNELBENCH_COMMIT and p["official"]["input_shapes"] == shapes[label]
        e = state["estimate"]["official"]["problems"][label]
        assert e["pairs"] == (16 + 2) * 8 and e["workers_that_fit"] == 8 and e["gpu_s"] > 0
    assert 0 < state["estimate"]["official"]["total"]["wall_s"] <= 480


def test_prepare_takes_fewer_mutants_per_solution_when_asked(bench, tmp_path):
    bench.prepare(argparse.Namespace(work=tmp_path, problems=TWO[:1], per_solution=3, budget_s=480.0, job_size=8,
                                     workers_per_gpu=8))
    assert len(read_mutants(tmp_path / "mutants-official")) == 3


def test_pairs_left_counts_what_a_store_lacks(bench, work):
    mutants = read_mutants(work / "mutants-bundled")
    done = EvidenceStore(KILL_MATRIX).open().done_keys()
    assert bench.pairs_left(mutants, done) == 0  # kill_matrix holds every pair of the sample on the pool's inputs
    assert bench.pairs_left(mutants, set()) == (32 + 2 * 2) * 8


def test_compare_of_one_evidence_with_itself_changes_nothing(bench, work, tmp_path, capsys):
    out = tmp_path / "size_findings.json"
    result = bench.compare(argparse.Namespace(work=work, out=out, bundled_evidence=None, official_evidence=KILL_MATRIX))
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["evidence"]["bundled"]["made_by"].startswith("kill_matrix/")
    assert result["mutants_compared"] == 32 and not any(result["left_out"].values())
    assert result["originals_ok"] == {p: {"bundled": "8/8", "official": "8/8"} for p in TWO}
    for name in bench.ORACLES:
        part = result["oracles"][name]
        assert part["total"]["bundled"] == part["total"]["official"] and part["changed"] == []
        assert all(sides["bundled"] == sides["official"] for sides in part["by_problem"].values())
        assert part["total"]["bundled"]["witnessed"] > 0
    printed = capsys.readouterr().out
    assert "kernelbench-verified: bundled | official size (32 mutants" in printed and "1,024 → 4,096" in printed


def test_compare_lists_a_changed_verdict_and_a_mutant_left_out(bench, work, tmp_path):
    """An official store made from the bundled rows, where a mutant unwitnessed on these inputs crashes and a
    killed one never ran."""
    from oracleaudit.scoring import Audit

    keys = Pool.load(bench.POOL).keys()
    audit = Audit.from_parts(bench.observations(KILL_MATRIX, TWO, keys), read_mutants(work / "mutants-bundled"))
    verdicts = bench.mutant_verdicts(audit, Oracle.load("kernelbench"))
    table = EvidenceStore(KILL_MATRIX).open().read_table(filters=[("problem", "in", TWO), ("input_id", "in", keys)])
    crashing = verdicts[verdicts.verdict == "unwitnessed"].mutant_id.iloc[0]
    missing = verdicts[verdicts.verdict == "killed"].mutant_id.iloc[0]
    table = table.filter(pc.not_equal(table["mutant_id"], missing))
    status = pc.if_else(pc.equal(table["mutant_id"], crashing), pa.scalar("RuntimeError"), table["status"])
    table = table.set_column(table.schema.get_field_index("status"), "status", status)
    official = EvidenceStore(tmp_path / "official").create({"pool": str(bench.POOL)})
    official.append(table.to_pylist())
    result = bench.compare_sizes({"bundled": KILL_MATRIX, "official": tmp_path / "official"},
                                 {s: work / f"mutants-{s}" for s in bench.SIZES}, TWO)
    assert result["mutants_compared"] == 31 and result["left_out"] == {"only_bundled": [missing], "only_official": []}
    changed = result["oracles"]["kernelbench"]["changed"]
    assert [(c["mutant_id"], c["verdict_bundled"], c["verdict_official"]) for c in changed] == [
        (crashing, "unwitnessed", "killed")]
    total = result["oracles"]["kernelbench"]["total"]
    assert (total["official"]["witnessed"], total["official"]["killed"]) == (
        total["bundled"]["witnessed"] + 1, total["bundled"]["killed"] + 1)


def test_the_run_plans_every_pair_on_the_scaled_problem(bench, work, tmp_path, monkeypatch):
    """What `run` hands the runner, planned as the GPU run plans it (the reference runs on the CPU: at
    KernelBench's size for one problem, ~5 s)."""
    from oracleaudit.execution import plan_jobs

    monkeypatch.chdir(ROOT)  # mutants name their solutions relative to the repository root
    keys = Pool.load(bench.POOL).keys()
    label, jobs_of = TWO[1], {}
    for size in bench.SIZES:
        mutants = [m for m in read_mutants(work / f"mutants-{size}") if m.problem == label]
        jobs, errors, recorded = plan_jobs(mutants, str(bench.POOL), tmp_path, set())
        assert not errors and recorded == 0 and len(jobs) == 1
        job = jobs_of[size] = jobs[0]
        assert job.problem == label and job.pairs == 17 * 8 and set(job.record_references) == set(keys)
        shapes = {name: inputs for name, _, inputs in job.shapes}
        expected = [1024, 8192] if size == "official" else [128, 1024]
        assert [list(s) for s in shapes["official"]] == [expected]
        assert Path(job.problem_path) == (work / "problems" / f"{label}.py" if size == "official"
                                          else bundled_root() / f"{label}.py").resolve()
    # The worker's inputs at KernelBench's size: its entries resolved with the job's shapes and made on the CPU,
    # as the worker makes them (execution/worker.py `_entries`, `_host_entry`).
    path, job = work / "problems" / f"{label}.py", jobs_of["official"]
    entries = [replace(e, overrides=o, input_shapes=i) for e in Pool.load(job.pool) for name, o, i in job.shapes
               if e.shape == name]
    made = {e.key: e.make_inputs(e.load_problem(problem_at(path)), "cpu")[0] for e in entries}
    assert {tuple(x.shape) for x in made.values()} == {(1024, 8192)} and len(made) == 8
    assert not torch.equal(made["scaled/draw=4/x=-1/s=2584932063/official"], -made["official/s=2584932063/official"])


def test_run_resumes_the_store_of_its_size_and_records_each_call(bench, work, tmp_path, monkeypatch, capsys):
    """`run` with the runner replaced by one that records the bundled evidence's rows (no GPU here)."""
    import oracleaudit.execution as runner
    from oracleaudit.execution import RunResult

    work = shutil.copytree(work, tmp_path / "work")
    calls = []

    def fake_run(mutants, out, pool, workers_per_gpu, job_size, stop_after_s, show_progress):
        calls.append((mutants, out, pool, workers_per_gpu, job_size, stop_after_s))
        keys = Pool.load(pool).keys()
        table = EvidenceStore(KILL_MATRIX).open().read_table(filters=[("problem", "in", TWO), ("input_id", "in", keys)])
        EvidenceStore(out).create({"pool": pool}).append(table.to_pylist())
        return RunResult(pairs=table.num_rows, stopped=False)

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _: "a stand-in")
    summary = bench.run(argparse.Namespace(work=work, size="bundled", stop_after=60.0, workers_per_gpu=8,
                                           job_size=None))
    assert calls == [(work / "mutants-bundled", work / "evidence-bundled", str(bench.POOL), 8, 8, 60.0)]
    assert summary["pairs_left"] == 0 and summary["gpu"] == "a stand-in"
    assert json.loads((work / "state.json").read_text())["runs"]["bundled"] == [summary]
    assert "done: every pair observed" in capsys.readouterr().out
    compared = bench.compare(argparse.Namespace(work=work, out=work / "compare.json", bundled_evidence=None,
                                                official_evidence=KILL_MATRIX))
    assert compared["evidence"]["bundled"] == {"path": str(work / "evidence-bundled"), "made_by": "a run"}
    assert all(not part["changed"] for part in compared["oracles"].values())
