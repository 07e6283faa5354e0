"""execution/trace.py: nothing is written unless ORACLEAUDIT_TRACE names a folder; then each process appends its
own lines, which `read` merges in time order (a line cut off by a killed process is left out)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from oracleaudit.execution import trace

ROOT = Path(__file__).parents[2]


def test_off_by_default_it_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    trace.mark("start", child=1)
    assert list(tmp_path.iterdir()) == []


def test_two_processes_events_merge_in_time_order(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(trace.TRACE_ENV, str(tmp_path))
    trace.mark("start", child=7)
    code = "from oracleaudit.execution.trace import mark; mark('main'); mark('ready', free=3)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), trace.TRACE_ENV: str(tmp_path), "PATH": "/usr/bin:/bin"})
    trace.mark("send", child=7)
    (tmp_path / "99999999.jsonl").write_text('{"event": "cut off", "t": 1')  # a killed writer's last line
    events = trace.read(tmp_path)
    assert [e["event"] for e in events] == ["start", "main", "ready", "send"]
    assert len({e["pid"] for e in events}) == 2 and events[2]["free"] == 3
    assert all(a["t"] <= b["t"] for a, b in zip(events, events[1:]))


def test_a_folder_that_does_not_exist_yet_is_made_by_the_first_mark(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "not" / "yet"
    monkeypatch.setenv(trace.TRACE_ENV, str(folder))
    trace.mark("run", jobs=2)
    trace.mark("job_built", problem="level1/1_X")
    assert [e["event"] for e in trace.read(folder)] == ["run", "job_built"]
