"""bench/device_call.sh full K/N goes on from a shard committed in bench/results/full_run before it ended when no
carried piece of it is there (a session's carried pieces are lost with its machine): the packed store and its
state are restored into out/, and a shard whose state says it has ended is then skipped. Run on the CPU in a
copy of the parts of the repository the script reads; the GPU part (the run itself) is not reached."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from oracleaudit.store import EvidenceStore
from tests.shared.test_store import META, all_rows

ROOT = Path(__file__).parents[2]


def _root(tmp_path: Path) -> Path:
    """A folder holding what device_call.sh reads: bench/device_call.sh, bench/run_scale.py."""
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    for name in ("device_call.sh", "run_scale.py"):
        shutil.copy(ROOT / "bench" / name, root / "bench" / name)
    (root / "bench" / "__init__.py").write_text("")
    return root


def _commit_shard(root: Path, k: int, state: dict) -> Path:
    plain = EvidenceStore(root / "plain").create(META)
    plain.append(all_rows())
    folder = root / "bench" / "results" / "full_run" / f"shard{k}"
    plain.pack(folder)
    shutil.rmtree(root / "plain")
    (folder.parent / f"scale{k}.json").write_text(json.dumps(state))
    return folder


def _call(root: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    out = tmp_path / "OUT"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "OUT": str(out), "LIMIT": "600"}
    return subprocess.run(["bash", "bench/device_call.sh", "full", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_committed_shard_that_has_ended_is_restored_with_its_state_and_skipped(tmp_path: Path) -> None:
    root = _root(tmp_path)
    state = {"full": {"shard": "2/2", "holes": 0, "calls": [{"stopped": False}]}, "code": "abc"}
    folder = _commit_shard(root, 2, state)
    done = _call(root, tmp_path, "2/2")
    assert done.returncode == 0, done.stderr
    assert "restoring out/shard2-packed from bench/results/full_run/shard2" in done.stdout
    assert "2/2 has ended: skipped" in done.stdout
    assert json.loads((root / "out" / "scale2.json").read_text()) == state
    restored = EvidenceStore(root / "out" / "shard2-packed").open()
    assert restored.read_table().equals(EvidenceStore(folder).open().read_table())


def test_a_carried_piece_wins_over_the_committed_shard(tmp_path: Path) -> None:
    """out/carry/shard2.tar.* (a later state: ended) is restored; the committed shard (not ended) is not."""
    root = _root(tmp_path)
    _commit_shard(root, 2, {"full": {"shard": "2/2", "holes": 5, "calls": [{"stopped": True}]}})
    carried = tmp_path / "carried"
    (carried / "out").mkdir(parents=True)
    plain = EvidenceStore(carried / "plain").create(META)
    plain.append(all_rows())
    plain.pack(carried / "out" / "shard2-packed")
    shutil.rmtree(carried / "plain")
    ended = {"full": {"shard": "2/2", "holes": 0, "calls": [{"stopped": False}]}}
    (carried / "out" / "scale2.json").write_text(json.dumps(ended))
    (root / "out" / "carry").mkdir(parents=True)
    subprocess.run(f"tar -cf - out | split -b 15m - {root}/out/carry/shard2.tar.", shell=True, check=True,
                   cwd=carried)
    done = _call(root, tmp_path, "2/2")
    assert done.returncode == 0, done.stderr
    assert "restoring out/shard2-packed from out/carry/shard2.tar.*" in done.stdout
    assert "from bench/results/full_run" not in done.stdout
    assert "2/2 has ended: skipped" in done.stdout
    assert json.loads((root / "out" / "scale2.json").read_text()) == ended


def test_a_shard_whose_committed_store_is_parked_is_skipped_when_its_state_has_ended(tmp_path: Path) -> None:
    """bench/device_tree.sh park removes the ended shards' stores from the tree a device call copies: their
    committed states still say they ended, so the call skips them instead of running them again from the start."""
    root = _root(tmp_path)
    state = {"full": {"shard": "1/2", "holes": 0, "calls": [{"stopped": False}]}, "code": "abc"}
    shutil.rmtree(_commit_shard(root, 1, state))
    done = _call(root, tmp_path, "1/2")
    assert done.returncode == 0, done.stderr
    assert "1/2 has ended (bench/results/full_run/scale1.json): skipped" in done.stdout
    assert not (root / "out" / "shard1").exists() and not (root / "out" / "scale1.json").exists()


def test_fresh_runs_a_shard_from_its_start_into_a_store_of_its_own_whatever_is_committed(tmp_path: Path) -> None:
    """FRESH=1 (the current code measured on part of the bundle): the committed shard that has ended is neither
    restored nor skipped; the run starts into out/fresh1of2 (here it fails at once: the copy holds no mutants)."""
    root = _root(tmp_path)
    _commit_shard(root, 1, {"full": {"shard": "1/2", "holes": 0, "calls": [{"stopped": False}]}, "code": "abc"})
    out = tmp_path / "OUT"
    out.mkdir()
    done = subprocess.run(["bash", "bench/device_call.sh", "full", "1/2"], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "OUT": str(out), "LIMIT": "600", "FRESH": "1"}, timeout=300)
    assert "has ended" not in done.stdout and "restoring" not in done.stdout
    assert "1/2" in done.stdout.splitlines()
    assert (out / "fresh1of2.log.gz").exists()
    assert not (root / "out" / "scale1.json").exists() and not (root / "out" / "shard1-packed").exists()


STAND_IN = '''import sys
from pathlib import Path
for _ in range(2):
    print("Traceback (most recent call last):\\n  File \\"x.py\\", line 1\\nRuntimeError: CUDA error", file=sys.stderr)
print("queue: 90.0 s, 4 handed off")
print("args:", " ".join(sys.argv[1:]))
Path("out/fault_tail/fault_tail.json").write_text("{}")
'''


def test_fault_tail_keeps_the_mutants_tracebacks_out_of_the_output_and_sends_them_back_gzipped(tmp_path: Path) -> None:
    """bench/fault_tail.py stands in as a script that writes two tracebacks to stderr and a figure to stdout."""
    import gzip

    root = _root(tmp_path)
    (root / "bench" / "fault_tail.py").write_text(STAND_IN)
    (root / "out" / "fault_tail" / "mutants").mkdir(parents=True)  # carried: prepare is not run
    out = tmp_path / "OUT"
    out.mkdir()
    done = subprocess.run(["bash", "bench/device_call.sh", "fault-tail"], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "OUT": str(out), "LIMIT": "600"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "queue: 90.0 s, 4 handed off" in done.stdout and "fault_tail exit 0" in done.stdout
    assert "fault_tail: 2 tracebacks in its stderr" in done.stdout and "Traceback (most" not in done.stdout
    assert done.stdout.count("RuntimeError: CUDA error") == 2  # the errors' lines, not their frames
    assert gzip.decompress((out / "fault_tail.log.gz").read_bytes()).decode().count("RuntimeError: CUDA error") == 2
    assert (out / "fault_tail.json").read_text() == "{}"


def test_fault_tail_gives_the_arguments_after_a_double_dash_to_its_run(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "bench" / "fault_tail.py").write_text(STAND_IN)
    (root / "out" / "fault_tail").mkdir(parents=True)  # no mutants there: prepare runs
    out = tmp_path / "OUT"
    out.mkdir()
    done = subprocess.run(["bash", "bench/device_call.sh", "fault-tail", "--solutions", "2", "--", "--floors", "5,2"],
                          cwd=root, capture_output=True, text=True, env={**os.environ, "OUT": str(out), "LIMIT": "600"},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    prepare, run = [line for line in done.stdout.splitlines() if line.startswith("args:")]
    assert prepare == "args: prepare --work out/fault_tail --solutions 2"
    assert run.startswith("args: run --work out/fault_tail --budget-s ") and run.endswith(" --floors 5,2")
