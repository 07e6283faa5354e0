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


def test_crashes_past_the_limit_count_the_cover_after_it_and_every_input_before() -> None:
    """m1 crashed on a and b (past --max-crashes 1) and had c and d inferred; the cover is {d}: over a, b, c, d
    it crashes on a, b (the limit passed), skips c, crashes on d (3); with d first, on d and a only (2). m2
    crashed once, within the limit: not counted."""
    illegal = "CUDA error: an illegal memory access was encountered"
    frame = rows({("m1", "a"): illegal, ("m1", "b"): illegal, ("m2", "a"): illegal}, inputs=("a", "b", "c", "d"))
    inferred = (frame.mutant_id == "m1") & frame.input_id.isin(["c", "d"])
    frame.loc[inferred, ["status", "inferred", "error_message"]] = ["RuntimeError", True, "not run"]

    def cover(problem, keys):
        return [k for k in keys if k == "d"]

    keys = ["a", "b", "c", "d"]
    assert replay_cost.crashes(frame, keys, cover, keys, max_crashes=1) == 3
    assert replay_cost.crashes(frame, ["d", "a", "b", "c"], cover, keys, max_crashes=1) == 2
    assert replay_cost.crashes(frame, keys, cover, keys, max_crashes=2) == 0


def test_the_cover_early_order_puts_the_cover_after_the_first_input_of_every_group() -> None:
    pool = Pool.load("default")
    keys = pool.keys()
    early = {keys[-1], keys[1]}
    order = replay_cost.orders(pool, cover=lambda problem, present: [k for k in present if k in early])
    made = replay_cost.in_order(order["cover-early"], "level1/1_X", set(keys))
    groups = {(e.shape, e.weight_seed) for e in pool.entries}
    assert sorted(made) == sorted(keys) and made[:len(groups)] == order["worker"][:len(groups)]
    assert set(made[len(groups):len(groups) + 2]) == early - set(made[:len(groups)])


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
