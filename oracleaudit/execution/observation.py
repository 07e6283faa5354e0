"""One observation of a (variant, pool input) pair as the worker sends it: the row (store.OBSERVATION_SCHEMA)
and how an exception becomes its status and message."""

from __future__ import annotations

from oracleaudit.status import Status


def is_out_of_memory(err: BaseException) -> bool:
    import torch

    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err).lower()


def context_alive() -> bool:
    """Whether this process's CUDA context still works (a sticky error fails every later call)."""
    import torch

    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


def status_of(err: BaseException) -> str:
    return Status.OOM if is_out_of_memory(err) else Status.RUNTIME_ERROR


def first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[0] if lines else type(err).__name__)[:400]


def row(mutant_id, problem: str, entry: tuple, index, status, error_class, error_message, time_ms, repeat_equal,
        mode, ev32, ev64, inferred: bool | None = None) -> dict:
    """One observation row (store.OBSERVATION_SCHEMA). `entry` is (key, seed, shape variant, distribution);
    `ev32`/`ev64` are the ErrorEvidence against the fp32/fp64 reference; on "reference" rows `ev64` is the
    fp32 reference's own evidence against fp64."""
    key, seed, variant, distribution = entry
    out = {"mutant_id": mutant_id, "problem": problem, "input_id": key, "input_seed": seed,
           "shape_variant": variant, "distribution": distribution, "output_index": index, "status": status,
           "error_class": error_class, "error_message": error_message, "time_ms": time_ms,
           "repeat_bitwise_equal": repeat_equal, **(mode or {})}
    if inferred is not None:
        out["inferred"] = inferred
    if ev32 is not None:
        out.update(ev32.to_row("fp32_"))
    if ev64 is not None:
        out.update(ev64.to_row("fp64_"))
    return out
