"""Running one problem's reference as an oracle runs it and in fp64 on the same inputs (in a child process:
`isolation.py`), giving the rows the evidence store calls "reference" rows: the fp32 reference's evidence
against the fp64 one, per pool input and output, one set of rows per TF32 math mode.

Both models are built as the run stage builds them (`torch.manual_seed(WEIGHT_SEED)` before
`get_init_inputs()` and before `Model(...)`, one model per shape group, `eval()`); the fp64 model is a deep
copy cast with `.double()` and takes the inputs' floating-point tensors as float64 (`tensors.to_double`).
Each forward gets its own copy of the inputs (a forward may change them in place). The fp32 reference runs
with the TF32 flags of each math mode asked for (`scoring.oracle.MATH_MODES`); on the CPU those flags change
nothing, so every mode is computed once and its rows are labelled with each mode's flags.

A problem is fp64-incompatible when its fp64 run raises (a float32-only operation, state kept in float32
that meets a float64 tensor) or returns a floating-point output that is not float64 (a cast to float32
inside `forward`): then the fp64 run is no truth to referee with.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from oracleaudit.errors import OracleAuditError
from oracleaudit.problem import first_line

__all__ = ["Measured", "Task", "check_device", "measure_problem"]


@dataclass(frozen=True)
class Task:
    """What a child process measures: one problem file, the pool entry keys the oracles draw on it, the math
    modes (names of `MATH_MODES`) the fp32 reference runs in, and the device."""

    problem_path: str
    pool: str
    keys: tuple[str, ...]
    modes: tuple[str, ...]
    device: str


@dataclass
class Measured:
    """The outcome for one problem: reference rows per math mode, or why there are none (`failed`: the fp32
    reference itself does not run; `incompatible`: the fp64 run is not usable), and the pool inputs the
    problem has no shape for."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    failed: str | None = None
    incompatible: str | None = None
    dropped: list[str] = field(default_factory=list)


class _Incompatible(Exception):
    """The fp64 run of the problem cannot be the truth (the message says why)."""


def measure_problem(task: Task) -> Measured:
    """The reference rows of one problem (see the module docstring); never raises for a problem's fault."""
    result = Measured()
    try:
        _measure_into(result, task)
    except _Incompatible as err:
        result.rows, result.incompatible = {}, str(err)
    except Exception as err:  # the problem's own code failed: the reference cannot be checked
        result.rows, result.failed = {}, first_line(err)
    return result


def _measure_into(result: Measured, task: Task) -> None:
    from oracleaudit.pool import Pool
    from oracleaudit.problem import problem_at

    problem = problem_at(task.problem_path)
    pool = Pool.load(task.pool)
    wanted = [e for e in pool.entries if e.key in set(task.keys)]
    drawn = replace(pool, entries=tuple(wanted))  # only the shape variants the oracles draw are resolved
    entries = drawn.entries_for(problem)
    result.dropped = sorted(set(task.keys) - {e.key for e in entries})
    groups: dict[Any, list] = {}
    for entry in entries:
        groups.setdefault(tuple(entry.overrides or ()), []).append(entry)
    for group in groups.values():
        _measure_group(result, problem, group, task)


def _models(module: Any, device: str) -> tuple[Any, Any]:
    """The fp32 Model as the run stage builds it, and its fp64 copy."""
    import torch

    from oracleaudit.execution.models import entry_init
    from oracleaudit.kernelbench import WEIGHT_SEED

    torch.manual_seed(WEIGHT_SEED)
    init = entry_init(module, device)
    torch.manual_seed(WEIGHT_SEED)
    model = module.Model(*init).to(device).eval()
    try:
        model64 = copy.deepcopy(model).double()
    except Exception as err:
        raise _Incompatible(f"the Model cannot be cast to float64: {first_line(err)}") from err
    return model, model64


def _measure_group(result: Measured, problem: Any, group: list, task: Task) -> None:
    import torch

    from oracleaudit.execution.measure import measure_many
    from oracleaudit.execution.observation import row
    from oracleaudit.pool import recorded_mode
    from oracleaudit.scoring.oracle import MATH_MODES
    from oracleaudit.status import REFERENCE, Status
    from oracleaudit.tensors import copied_to, tensors

    device = task.device
    module = group[0].load_problem(problem)
    model, model64 = _models(module, device)
    on_cuda = device.startswith("cuda")
    name = torch.cuda.get_device_name(torch.device(device)) if on_cuda else "cpu"
    for entry in group:
        inputs = entry.make_inputs(module, "cpu")
        ref64: list | None = None
        computed: list | None = None
        for mode in task.modes:
            matmul, cudnn = MATH_MODES[mode]
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
            if computed is None or on_cuda:  # TF32 flags act on CUDA only
                with torch.no_grad():
                    computed = [t.detach() for t in tensors(model(*copied_to(inputs, device)))]
            if ref64 is None:  # after the first fp32 run: a reference that fails in fp32 is not incompatible
                ref64 = _fp64_outputs(model64, copied_to(inputs, device, float64=True), len(computed))
            evidence, _ = measure_many(list(zip(computed, ref64)))
            where = (entry.key, entry.seed, entry.shape, entry.distribution)
            flags = recorded_mode(mode, name)
            result.rows.setdefault(mode, []).extend(
                row(REFERENCE, problem.label, where, index, Status.OK, None, None, None, None, flags, None, ev)
                for index, ev in enumerate(evidence))


def _fp64_outputs(model64: Any, inputs: list, count: int) -> list:
    """The fp64 run's outputs; `_Incompatible` when it raises, returns another number of outputs than the
    fp32 run (`count`) or a floating-point output that is not float64."""
    import torch

    from oracleaudit.tensors import tensors

    try:
        with torch.no_grad():
            outputs = [t.detach() for t in tensors(model64(*inputs))]
    except Exception as err:
        raise _Incompatible(f"the fp64 run raises {first_line(err)}") from err
    if len(outputs) != count:
        raise _Incompatible(f"the fp64 run returns {len(outputs)} outputs, the fp32 run {count}")
    for index, out in enumerate(outputs):
        if out.is_floating_point() and out.dtype != torch.float64:
            raise _Incompatible(f"the fp64 run returns {str(out.dtype).removeprefix('torch.')} for output {index} "
                                "(state or a cast inside forward keeps float32)")
    return outputs


def check_device(device: str, *, used: bool = True) -> None:
    """An error unless `device` is cpu, cuda or cuda:N and, when it is `used` (something is left to measure
    on it), can be used here."""
    import torch

    if device != "cpu" and not device.startswith("cuda"):
        raise OracleAuditError(f"--device must be cuda or cpu, got {device!r}")
    if used and device.startswith("cuda") and not torch.cuda.is_available():
        raise OracleAuditError("no CUDA device here (torch.cuda.is_available() is False); pass --device cpu")
