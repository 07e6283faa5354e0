"""A developer's timeline of the workers' lives: when `ORACLEAUDIT_TRACE` names a folder, the scheduler (the
run's start, each job's build done), the supervisors and their workers each append one JSON line per event to
`<pid>.jsonl` there — the event's name, the system-wide monotonic clock (comparable between the processes of one
machine), the process and thread ids (a supervisor is a thread of the run's process) and the event's fields.
What a restart after a crash is made of (the fork, CUDA's start, the spare's wait, the job's load) is read from
these files by bench/restart_cost.py, a run's rate beside hung kernels by bench/trace_rates.py. Off (the
default), `mark` only looks up the environment variable.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

__all__ = ["TRACE_ENV", "mark", "read"]

TRACE_ENV = "ORACLEAUDIT_TRACE"


def mark(event: str, **fields) -> None:
    """Append `event` at this moment, with `fields` (JSON values), to this process's trace file, if tracing."""
    folder = os.environ.get(TRACE_ENV)
    if not folder:
        return
    line = json.dumps({"event": event, "t": time.monotonic(), "pid": os.getpid(), "tid": threading.get_native_id(),
                       **fields}, sort_keys=True)
    path = Path(folder) / f"{os.getpid()}.jsonl"
    try:
        sink = open(path, "a")
    except FileNotFoundError:  # the folder is made on the first mark (a run traced into a missing one failed)
        path.parent.mkdir(parents=True, exist_ok=True)
        sink = open(path, "a")
    with sink:  # one write of one line: whole, if cut off
        sink.write(line + "\n")


def read(folder: Path) -> list[dict]:
    """Every event in the trace files of `folder`, in time order (a line cut off by a killed process is left
    out)."""
    events = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return sorted(events, key=lambda e: (e["t"], e["pid"]))
