"""bench/replay_cost.py: the replays a run makes after crashes, estimated from rows for an input order."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from oracleaudit.pool import Pool

SCRIPT = Path(__file__).parents[2] / "bench" / "replay_cost.py"
spec = importlib.util.spec_from_file_location("replay_cost", SCRIPT)
replay_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay_cost)


def rows(crashes: dict[tuple[str, str], str], variants=("original", "m1", "m2"), inputs=("a", "b", "c")):
    frame = [{"problem": "level1/1_X", "mutant_id": v, "input_id": k, "output_index": 0,
              "status": "RuntimeError" if (v, k) in crashes else "Ok", "error_message": crashes.get((v, k)),
              "inferred": False} for v in variants for k in inputs]
    return pd.DataFrame(frame)


def test_a_crash_replays_what_the_others_ran_and_a_variant_with_nothing_left_replays_nothing() -> None:
    """Input by input over a, b, c: m1 dies on b when the original ran a and b and m2 ran a (3 replays);
    m2 dies on c when only the original, done with c, is left (nothing to replay); a crash the context
    survives ("invalid argument") ends no process."""
    illegal = "CUDA error: an illegal memory access was encountered"
    frame = rows({("m1", "b"): illegal, ("m2", "c"): illegal, ("m1", "a"): "CUDA error: invalid argument"})
    assert replay_cost.replays(frame, ["a", "b", "c"], job_size=48) == (3, [1, 2])
    # with c first, m2 dies on it after the original and m1 ran it (2), then m1 on b after the original ran c and b (2)
    assert replay_cost.replays(frame, ["c", "b", "a"], job_size=48) == (4, [0, 1])
    # one mutant a slice: m2's slice has no original, so its crash replays nothing
    assert replay_cost.replays(frame, ["a", "b", "c"], job_size=1) == (2, [1, 2])


def test_the_worker_s_order_puts_the_first_input_of_every_group_first() -> None:
    pool = Pool.load("default")
    orders = replay_cost.orders(pool)
    assert sorted(orders["worker"]) == sorted(orders["groups"]) == sorted(pool.keys())
    groups = {(e.shape, e.weight_seed) for e in pool.entries}
    first = orders["worker"][:len(groups)]
    assert {(pool.get(k).shape, pool.get(k).weight_seed) for k in first} == groups
    assert orders["groups"][0] == first[0] == pool.keys()[0]
    assert orders["groups"][len(groups)] != orders["worker"][len(groups)]


def test_a_folder_that_is_no_store_is_one_line_naming_it(tmp_path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(SCRIPT), "--store", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"replay_cost.py: error: {tmp_path}/manifest.json: no such file (not an evidence store)"]
