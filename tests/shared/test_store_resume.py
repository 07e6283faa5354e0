"""Resume under SIGKILL, the CPU part: a writer process that commits a real store's observations group by group
(as the run stage's recorder does) is killed with SIGKILL at random points and started again; the final store
holds exactly the rows of an uninterrupted copy, none lost and none twice. (The real runner on the GPU:
tests/execution/test_run_gpu.py.)"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracleaudit.store import KEY_COLUMNS, EvidenceStore

GROUPS = 300  # (problem, mutant, input) groups written, one part each

WRITER = """
import sys, time
from oracleaudit.store import EvidenceStore
source, target = EvidenceStore(sys.argv[1]).open(), EvidenceStore(sys.argv[2])
target.open_or_create(source.meta)
target.remove_orphans()
done = target.done_keys()
groups = {}
for row in source.read_table().to_pylist():
    groups.setdefault((row["problem"], row["mutant_id"], row["input_id"]), []).append(row)
for key, rows in list(groups.items())[:int(sys.argv[3])]:
    if key not in done:
        target.append(rows)
        time.sleep(0.002)
"""


def rows_by_key(store: EvidenceStore) -> list[tuple]:
    frame = store.read().sort_values(list(KEY_COLUMNS)).astype(str)
    return [tuple(row) for row in frame.itertuples(index=False)]


@pytest.mark.slow  # about 40 s on 2 cores: seven writer processes, 900 synced parts
def test_a_writer_killed_at_random_points_and_resumed_loses_and_repeats_no_row(small: Path, tmp_path: Path) -> None:
    rng = random.Random(23)
    target = tmp_path / "resumed"
    command = [sys.executable, "-c", WRITER, str(small / "evidence"), str(target), str(GROUPS)]
    kills = 0
    for _ in range(5):
        process = subprocess.Popen(command)
        time.sleep(rng.uniform(1.0, 2.0))  # past the imports (about 1 s), within the appends
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
    subprocess.run(command, check=True)
    resumed = EvidenceStore(target).open()
    uninterrupted = tmp_path / "uninterrupted"
    subprocess.run([*command[:-2], str(uninterrupted), str(GROUPS)], check=True)
    keys = resumed.read(columns=list(KEY_COLUMNS))
    assert kills >= 1 and len(resumed.parts) == GROUPS and not keys.duplicated().any()
    assert rows_by_key(resumed) == rows_by_key(EvidenceStore(uninterrupted).open())
