"""Problems whose reference cannot run the way a checker that casts every input to one dtype runs it.

KernelBench (current) and KernelBench-verified move each input tensor, and each init input, to the GPU cast
to the evaluation precision (float32 by default), integer labels included; the reference Model then runs on
those tensors. Where that raises — CrossEntropyLoss's class-index targets become floats — the evaluation
fails for every kernel of the problem, the correct one included. That is a property of the problem file and
of torch, not of the GPU, so it is found here on the CPU: the problem's `get_inputs()` and init inputs are
made on the meta device (no memory, any size); where any tensor is not already of the dtype, the cast Model
is run there, and a failure on the meta device is confirmed on the CPU (an operator without a meta kernel
must not pass for a failing reference).

A probe's answer is kept in the cache folder (`casts/`, by the problem file's sha256, the dtype and torch's
version): the first tensor made under torch's device context imports torch._dynamo, so probing the 70 bundled
problems took 2.7 s against 0.015 s with the answers kept (bench/cast_probe_cost.py; 5.3 s of a 16 s profiled
`score --oracle kernelbench` on shards 1 and 2 of the complete run).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from oracleaudit.cache import cache_root
from oracleaudit.files import file_sha256, write_atomic
from oracleaudit.problem import first_line, load_problem_module
from oracleaudit.shipped import shipped_dir
from oracleaudit.tensors import map_tensors, tensors

CAST_DTYPES = {"float32": torch.float32}
_KNOWN: dict[tuple[str, str, str], str | None] = {}  # (path, sha256, dtype) → the failure, or None


def cast_failure(path: Path, dtype: str) -> str | None:
    """Why the problem's reference raises with every input cast to `dtype`, or None if it runs (or no input
    needs the cast). Raises OSError/SyntaxError-like errors of an unreadable problem file to the caller."""
    digest = file_sha256(path)
    key = (str(Path(path).resolve()), digest, dtype)
    if key not in _KNOWN:
        kept = _kept(digest, dtype)
        try:
            _KNOWN[key] = json.loads(kept.read_text())["failure"]
        except (OSError, ValueError, KeyError, TypeError):  # not kept yet, or unreadable: probed again
            _KNOWN[key] = _probe(Path(path), CAST_DTYPES[dtype])
            try:
                write_atomic(kept, json.dumps({"failure": _KNOWN[key]}))
            except OSError:  # a cache that cannot be written costs the probe again next time, nothing else
                pass
    return _KNOWN[key]


def _kept(digest: str, dtype: str) -> Path:
    """Where the answer for a problem file (by its sha256) and dtype under this torch is kept."""
    name = hashlib.sha256(f"{digest}\0{dtype}\0{torch.__version__}".encode()).hexdigest()[:32]
    return cache_root() / "casts" / f"{name}.json"


def _probe(path: Path, dtype: torch.dtype) -> str | None:
    module = load_problem_module(path)
    if _runs(module, dtype, "meta") is None:
        return None
    return _runs(module, dtype, "cpu")


def _runs(module: Any, dtype: torch.dtype, device: str) -> str | None:
    """None if the Model runs on `device` with its inputs cast to `dtype` (or none needs the cast); else the
    error's first line."""
    with torch.random.fork_rng(devices=[]), torch.device(device), torch.no_grad():
        torch.manual_seed(0)
        inputs = list(module.get_inputs())
        init = list(module.get_init_inputs())
        if all(t.dtype == dtype for t in tensors([*inputs, *init])):
            return None
        try:
            model = module.Model(*map_tensors(init, lambda t: t.to(dtype)))
            model(*map_tensors(inputs, lambda t: t.to(dtype)))
        except Exception as err:  # the reference's own failure is the finding
            return first_line(err)
    return None


def cast_failures(problem_files: dict[str, Any], dtype: str) -> tuple[dict[str, str], list[str]]:
    """For each problem (name → its file, as mutants.jsonl records it): the failures of the cast reference,
    and the problems whose file could not be read or run (their verdicts are left as the evidence gives)."""
    failures: dict[str, str] = {}
    unknown: list[str] = []
    for problem, path in sorted(problem_files.items()):
        found = _locate(path)
        if found is None:
            unknown.append(problem)
            continue
        try:
            reason = cast_failure(found, dtype)
        except Exception:  # a problem file that does not load here: no claim about it
            unknown.append(problem)
            continue
        if reason is not None:
            failures[problem] = reason
    return failures, unknown


def _locate(path: Any) -> Path | None:
    """A problem file as mutants.jsonl records it: relative to the working folder, or (the bundled dataset's
    `datasets/...`) to the folder the shipped datasets sit in."""
    if not isinstance(path, str):
        return None
    for candidate in (Path(path), shipped_dir("datasets").parent / path):
        if candidate.is_file():
            return candidate
    return None
