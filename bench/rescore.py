"""Rescoring benchmark: a synthetic 10,000-mutant × 64-input evidence store, scored for an oracle by
oracleaudit's vectorised engine and by a straightforward per-observation Python loop.

    python bench/rescore.py [--mutants 10000] [--inputs 64] [--problems 200] [--keep DIR]

The store is generated once into a temporary folder: a few thousand real evidence rows (`measure.measure`
on random CPU tensors: originals with fp32 rounding noise, mutants with large errors, tiny errors, NaN,
all-zero outputs, shape mismatches, crashes, timeouts, non-deterministic repeats) are tiled over the
(problem, mutant, input) keys. Printed: the time to load the store (Parquet → columns, witness), the time
to rescore each oracle on the loaded store, the per-observation loop's time for the same verdicts, and
their ratio. The two must agree on every mutant.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from oracleaudit.evidence import ErrorEvidence
from oracleaudit.execution.measure import measure
from oracleaudit.mutant import PENDING, Mutant, write_mutants
from oracleaudit.pool import Pool
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.store import OBSERVATION_SCHEMA, EvidenceStore

TEMPLATES_PER_KIND = 40
FAULT_KINDS = ("large", "tiny", "blind", "nan", "zeros", "shape", "crash", "timeout", "nondeterministic", "same")
MODE = {"ref_matmul_tf32": False, "ref_cudnn_tf32": True, "ref_matmul_precision": "highest", "ref_device": "bench"}


def input_keys(count: int) -> list[tuple[str, int, str, str]]:
    """(key, seed, variant, distribution) of `count` inputs: the default pool's, then more normal seeds."""
    entries = [(e.key, e.seed, e.shape, e.distribution) for e in Pool.load("default")]
    seed = 10
    while len(entries) < count:
        entries.append((f"normal/s={seed}/official", seed, "official", "normal"))
        seed += 1
    return entries[:count]


def templates(rng: np.random.Generator) -> dict[str, list[dict]]:
    """Real evidence rows (without keys) per kind: reference, original and each fault kind."""
    out: dict[str, list[dict]] = {k: [] for k in ("reference", "original", *FAULT_KINDS)}
    for _ in range(TEMPLATES_PER_KIND):
        n = int(rng.choice([64, 256, 1024]))
        ref64 = torch.from_numpy(rng.standard_normal(n) * 10.0 ** rng.uniform(-1, 2))
        ref32 = ref64.float()
        original = (ref64 + torch.from_numpy(rng.standard_normal(n)) * 3e-7 * ref64.abs()).float()

        def row(out: torch.Tensor | None, status: str = "Ok", repeat: bool | None = True) -> dict:
            r = {"status": status, "time_ms": float(rng.uniform(0.01, 1.0)), "repeat_bitwise_equal": repeat, **MODE}
            if out is not None:
                r.update(measure(out, ref32).to_row("fp32_"))
                r.update(measure(out, ref64).to_row("fp64_"))
            return r

        out["reference"].append({"status": "Ok", **MODE, **measure(ref32, ref64).to_row("fp64_")})
        out["original"].append(row(original))
        noise = torch.from_numpy(rng.standard_normal(n)).float()
        out["large"].append(row(original + noise * ref32.abs().mean()))
        out["tiny"].append(row(original * (1 + 5e-4)))
        out["blind"].append(row(original * (1 + 3e-5)))
        nan = original.clone()
        nan[int(rng.integers(0, n))] = float("nan")
        out["nan"].append(row(nan))
        out["zeros"].append(row(torch.zeros_like(original)))
        out["shape"].append(row(original[:-1], status="ShapeMismatch"))
        out["crash"].append(row(None, status="RuntimeError", repeat=None))
        out["timeout"].append(row(None, status="Timeout", repeat=None))
        out["nondeterministic"].append(row(original, repeat=False))
        out["same"].append(row(original))
    return out


def generate(root: Path, mutants: int, inputs: int, problems: int, seed: int = 0) -> tuple[Path, Path]:
    """Write the synthetic store and mutants.jsonl under `root`; returns (evidence, mutants) folders."""
    rng = np.random.default_rng(seed)
    keys = input_keys(inputs)
    tpl = templates(rng)
    kinds = list(tpl)
    table = pa.Table.from_pylist([{**KEY_DEFAULTS, **r} for k in kinds for r in tpl[k]], schema=OBSERVATION_SCHEMA)
    offsets = {k: i * TEMPLATES_PER_KIND for i, k in enumerate(kinds)}
    per_problem = mutants // problems
    labels = [f"level{1 + p % 3}/{p + 1}_Problem{p}" for p in range(problems)]
    records, texts = [], {}
    pick, problem_col, mutant_col, input_col = [], [], [], []
    families = ["arithmetic", "relational", "indexing", "synchronization", "precision", "launch", "loop", "memory"]
    for p, label in enumerate(labels):
        source = f"solutions/{p}.cu"
        texts[source] = "acc += x;\n"
        ids = ["reference", "original"] + [f"m{p:04d}_{j:03d}" for j in range(per_problem)]
        for j, mid in enumerate(ids):
            if mid == "reference":
                kind_rows = np.full(inputs, offsets["reference"]) + rng.integers(0, TEMPLATES_PER_KIND, inputs)
            elif mid == "original":
                kind_rows = np.full(inputs, offsets["original"]) + rng.integers(0, TEMPLATES_PER_KIND, inputs)
            else:
                kind = FAULT_KINDS[(j - 2) % len(FAULT_KINDS)]
                # a fault shows on a random share of the inputs; elsewhere the mutant behaves like the original
                shows = rng.random(inputs) < rng.choice([0.05, 0.3, 1.0])
                kind_rows = np.where(shows, offsets[kind], offsets["same"]) + rng.integers(0, TEMPLATES_PER_KIND, inputs)
                records.append(Mutant(id=mid, problem=label, problem_file=None, source=source, source_sha256="0" * 64,
                                      unit=0, rule=f"{families[j % 8]}.{kind}", family=families[j % 8], start=4, end=6,
                                      start_line=1, start_col=5, end_line=1, end_col=7, original="+=",
                                      replacement="-=", scope="device", function="k", status=PENDING))
            pick.append(kind_rows)
            problem_col += [label] * inputs
            mutant_col += [mid] * inputs
            input_col.append(np.arange(inputs))
    rows = table.take(pa.array(np.concatenate(pick)))
    which = np.concatenate(input_col)
    columns = {"problem": pa.array(problem_col), "mutant_id": pa.array(mutant_col),
               "input_id": pa.array([keys[i][0] for i in which]),
               "input_seed": pa.array([keys[i][1] for i in which], pa.int64()),
               "shape_variant": pa.array([keys[i][2] for i in which]),
               "distribution": pa.array([keys[i][3] for i in which]),
               "output_index": pa.array(np.zeros(len(which), dtype=np.int32))}
    for name, values in columns.items():
        rows = rows.set_column(rows.schema.get_field_index(name), OBSERVATION_SCHEMA.field(name), values)
    evidence = root / "evidence"
    store = EvidenceStore(evidence).create({"pool": "bench", "mutants": mutants, "inputs": inputs})
    store._commit([rows], [])  # one part; append() would validate 650k Python dicts row by row
    mutants_dir = root / "mutants"
    write_mutants(mutants_dir, records, texts)
    return evidence, mutants_dir


KEY_DEFAULTS = {"problem": "p", "mutant_id": "m", "input_id": "i", "input_seed": 0, "shape_variant": "official",
                "distribution": "normal", "output_index": 0}


# ---------------------------------------------------------------------------------------------------------
# The straightforward way: one Python call chain per observation


def loop_verdicts(frame, oracle: Oracle, scored: set[str]) -> dict[tuple[str, str], bool]:
    """Per (problem, mutant): rejected by the oracle, judged row by row with ErrorEvidence (one-stage,
    allclose-only protocols such as kernelbench)."""
    assert len(oracle.stages) == 1 and oracle.rule.allclose
    stage = oracle.stages[0]
    prefix = "fp64_" if oracle.reference.precision == "fp64" else "fp32_"
    fail_statuses, _ = oracle.stage_statuses(stage)
    drawn: dict[str, bool] = {}
    killed: dict[tuple[str, str], bool] = {}
    for row in frame.to_dict("records"):
        if row["mutant_id"] not in scored:
            continue
        key = row["input_id"]
        if key not in drawn:
            drawn[key] = stage.draws(key)
        if not drawn[key]:
            continue
        unit = (row["problem"], row["mutant_id"])
        rejected = killed.get(unit, False)
        if row["status"] in fail_statuses:
            rejected = True
        elif row["status"] == "Ok":
            if oracle.timeout_s is not None and row["time_ms"] > oracle.timeout_s * 1000:
                rejected = True
            else:
                evidence = ErrorEvidence.from_row(row, prefix)
                tol = oracle.tolerance.lookup(row["problem"], evidence.out_dtype)
                if not evidence.allclose(tol.atol, tol.rtol, equal_nan=oracle.rule.nan == "equal_nan"):
                    rejected = True
        killed[unit] = rejected
    return killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=10_000)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="generate into (or reuse) this folder instead of a temporary one")
    args = parser.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    root = args.keep or Path(tempfile.mkdtemp(prefix="oracleaudit-bench-"))
    try:
        if not (root / "evidence" / "manifest.json").is_file():
            started = time.perf_counter()
            generate(root, args.mutants, args.inputs, args.problems)
            print(f"generated {args.mutants} mutants × {args.inputs} inputs in {time.perf_counter() - started:.1f} s "
                  f"({sum(f.stat().st_size for f in (root / 'evidence').rglob('*.parquet')) / 2**20:.0f} MiB)")
        started = time.perf_counter()
        audit = Audit.load(root / "evidence", root / "mutants")
        load_s = time.perf_counter() - started
        print(f"load: {audit.obs.num_rows} observations, {len(audit.mutants)} mutants, "
              f"{int(audit.witness['witnessed'].sum())} witnessed: {load_s:.2f} s (read, columns, witness)")
        times = {}
        for name in ("kernelbench", "kernelbench-verified", "sol-execbench", "autokernel-ops", "fp64-fuzz"):
            oracle = Oracle.load(name)
            started = time.perf_counter()
            result = audit.score(oracle)
            times[name] = time.perf_counter() - started
            print(f"rescore {name:<22} {times[name]:6.2f} s  detection {result['detection']:.4f}  "
                  f"false alarms {result['false_alarms']}")
        oracle = Oracle.load("kernelbench")
        audit._cache.clear()  # judge again from the evidence, not from the cached verdicts
        started = time.perf_counter()
        killed_vec = audit.verdicts(oracle).killed
        vec_s = time.perf_counter() - started
        frame = EvidenceStore(root / "evidence").read()
        scored = set(audit.mutants["mutant_id"])
        started = time.perf_counter()
        killed_loop = loop_verdicts(frame, oracle, scored)
        loop_s = time.perf_counter() - started
        agree = all(killed_loop.get((p, m), False) == bool(k)
                    for p, m, k in zip(audit.mutants["problem"], audit.mutants["mutant_id"], killed_vec))
        print(f"kernelbench verdicts: vectorised {vec_s:.3f} s, per-observation loop {loop_s:.1f} s, "
              f"ratio {loop_s / vec_s:.0f}×; verdicts agree: {agree}")
        print(f"rescoring a new oracle on the loaded store: at most {max(times.values()):.2f} s (target < 2 s); "
              f"from a cold start (read, witness, one oracle): {load_s + times['kernelbench']:.2f} s")
        return 0 if agree else 1
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
