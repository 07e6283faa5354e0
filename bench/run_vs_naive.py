"""Benchmark (GPU): `oracleaudit run` against the naive approach, on the same mutants and inputs, in one run.

Naive = KernelBench style: every mutant is its own solution file built with its own `load_inline`, builds
running in parallel on all cores (one process per core), then run on the same pool inputs against the same
fp32/fp64 references with the same evidence. oracleaudit = `runner.run` (one build per solution for all its
variants), then the same run again with its extensions cached, which bounds what any build scheme could
gain. Prints mutants per minute for each, the ratios, and where oracleaudit's time goes.

Run from the repository root on the GPU machine (mutants prepared on a CPU machine with `oracleaudit mutate`):
    PYTHONPATH=. python bench/run_vs_naive.py --mutants bench/data/mutants_3x20 --pool default
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import shutil
import tempfile
import time
from pathlib import Path


def naive_one(args) -> float:
    """Build one mutated solution with its own load_inline and run it on the pool inputs; returns seconds.
    A mutant that fails (to build, or on the GPU) ends there, as it would in a benchmark harness."""
    started = time.perf_counter()
    try:
        _naive(*args)
    except Exception as err:  # the mutant's failure ends its evaluation
        print(f"naive: {args[0]['id']}: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}",
              flush=True)
    return time.perf_counter() - started


def _naive(mutant_record, pool_name, workdir, gpu) -> None:
    import torch

    from oracleaudit.execution.measure import measure
    from oracleaudit.execution.models import entry_init
    from oracleaudit.kernelbench import WEIGHT_SEED
    from oracleaudit.mutant import Mutant
    from oracleaudit.pool import Pool
    from oracleaudit.problem import load_solution_module, problem_at
    from oracleaudit.tensors import tensors, to_double

    mutant = Mutant(**mutant_record)
    source = Path(mutant.source)
    text = mutant.apply(source.read_text())
    # A unique extension name per mutant, as separate KernelBench submissions would have.
    text = text.replace('name="', f'name="naive_{mutant.id}_', 1)
    path = Path(workdir) / f"naive_{mutant.id}.py"
    path.write_text(text)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(Path(workdir) / f"ext_{mutant.id}")
    device = f"cuda:{gpu}"
    torch.cuda.set_device(device)
    solution = load_solution_module(path)
    problem = problem_at(mutant.problem_file)
    for entry in Pool.load(pool_name).entries_for(problem):
        module = entry.load_problem(problem)
        inputs = entry.make_inputs(module, device)
        torch.manual_seed(WEIGHT_SEED)
        init = entry_init(module, device)
        torch.manual_seed(WEIGHT_SEED)
        model = module.Model(*init).to(device)
        model64 = __import__("copy").deepcopy(model).double()
        torch.manual_seed(WEIGHT_SEED)
        model_new = solution.ModelNew(*init).to(device)
        with torch.no_grad():
            outs = tensors(model_new(*inputs))
            refs = tensors(model(*inputs))
            refs64 = tensors(model64(*to_double(inputs)))
        for out, r32, r64 in zip(outs, refs, refs64):
            measure(out, r32, engine="auto")  # the engine `oracleaudit run` uses by default
            measure(out, r64, engine="auto")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("bench/data/mutants_3x20"))
    parser.add_argument("--pool", default="default")
    parser.add_argument("--cores", type=int, default=None,
                        help="parallel naive builds (default: the CPUs this process may use, e.g. under taskset)")
    parser.add_argument("--workers-per-gpu", type=int, default=4,
                        help="oracleaudit worker processes per GPU (the naive side runs one process per core)")
    args = parser.parse_args()

    import torch

    from oracleaudit import execution as runner
    from oracleaudit.execution.scheduler import usable_cpus
    from oracleaudit.mutant import PENDING, read_mutants

    cores = args.cores or usable_cpus()
    mutants = [m for m in read_mutants(args.mutants) if m.status == PENDING]
    n = len(mutants)
    gpus = torch.cuda.device_count()
    print(f"mutants: {n} on {len({m.problem for m in mutants})} problems; pool {args.pool}; {gpus} GPU(s), "
          f"{cores} cores", flush=True)
    work = Path(tempfile.mkdtemp(prefix="oracleaudit-bench-"))
    os.environ["ORACLEAUDIT_CACHE"] = str(work / "cache")  # no extension built by an earlier run is reused
    try:
        started = time.perf_counter()
        result = runner.run(args.mutants, work / "evidence", pool=args.pool, workers_per_gpu=args.workers_per_gpu,
                            show_progress=False)
        ours = time.perf_counter() - started
        # Printed now: the naive side takes far longer and may be cut short by a time limit.
        print(f"oracleaudit run:  {ours:8.1f} s  {60 * n / ours:8.1f} mutants/min", flush=True)
        summary = result.summary()
        phases = summary["phases"]
        build, execution, evidence = phases["build_cpu_s"], phases["execution_s"], phases["evidence_s"]
        total = max(build + execution + evidence, 1e-9)
        print(f"oracleaudit process-seconds: build {build:.1f} · execution {execution:.1f} · "
              f"evidence {evidence:.1f} (builds overlap execution)")
        print(f"oracleaudit time shares: build {100 * build / total:.0f}% · execution "
              f"{100 * execution / total:.0f}% · evidence {100 * evidence / total:.0f}%")
        print(f"observations by status: {summary['observations_by_status']}; errors: {len(result.errors)}",
              flush=True)
        # The same run again into an empty store, its extensions now in the cache: what remains with no
        # compilation at all (processes, references, execution, evidence). naive / this bounds the ratio
        # any build scheme could reach.
        started = time.perf_counter()
        runner.run(args.mutants, work / "evidence-warm", pool=args.pool, workers_per_gpu=args.workers_per_gpu,
                   show_progress=False)
        warm = time.perf_counter() - started
        print(f"oracleaudit run, extensions already built: {warm:8.1f} s  {60 * n / warm:8.1f} mutants/min",
              flush=True)

        from dataclasses import asdict

        context = multiprocessing.get_context("spawn")
        tasks = [(asdict(m), args.pool, str(work), i % gpus) for i, m in enumerate(mutants)]
        started = time.perf_counter()
        # A fresh process per mutant, as a benchmark harness evaluates each submission: a crashing mutant
        # leaves a dead CUDA context behind.
        with concurrent.futures.ProcessPoolExecutor(max_workers=cores, mp_context=context,
                                                    max_tasks_per_child=1) as pool:
            list(pool.map(naive_one, tasks))
        naive = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"naive (one load_inline per mutant, {cores} parallel builds): {naive:8.1f} s  "
          f"{60 * n / naive:8.1f} mutants/min")
    print(f"ratio (oracleaudit / naive mutants per minute): {naive / ours:.1f}x")
    print(f"ratio with no compilation on our side (naive / the cached run): {naive / warm:.1f}x")


if __name__ == "__main__":
    main()
