"""One problem per child process: `measure_isolated` spawns a fresh interpreter for a `Task`, so that a
problem that crashes the interpreter (a segfault, `os._exit`), exhausts memory, kills its CUDA context or
hangs costs that problem only. The child's stdout goes to stderr (a problem's prints never mix with
`--json` output); its result comes back through a pipe."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from typing import Any

from oracleaudit.refcheck.reference import Measured, Task, measure_problem

__all__ = ["measure_isolated"]


def _child(task: Task, conn: Any) -> None:
    os.dup2(2, 1)  # prints of the problem's code go to stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    result = measure_problem(task)
    sys.stdout.flush()
    conn.send(result)
    conn.close()


def _died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"its process died of {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"its process died of signal {-exitcode}"
    return f"its process exited with code {exitcode} before reporting"


def measure_isolated(task: Task, timeout_s: float) -> Measured:
    """`measure_problem(task)` in a fresh spawned process; a crash or a run past `timeout_s` seconds is a
    `Measured` with `failed` saying so."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(task, sender), daemon=True)
    process.start()
    sender.close()
    try:
        if receiver.poll(timeout_s):
            try:
                return receiver.recv()
            except (EOFError, OSError):
                process.join(timeout=30)
                return Measured(failed=_died(process.exitcode))
        process.kill()
        return Measured(failed=f"no result within {timeout_s:g} s (--timeout)")
    finally:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join()
        receiver.close()
