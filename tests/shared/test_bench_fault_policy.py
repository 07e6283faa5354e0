"""bench/fault_policy.py: which observed rows each policy would have left unobserved (CPU; the scores of the
bundled evidence under them are the benchmark's own output)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from bench import fault_policy

ROOT = Path(__file__).parents[2]
ORDER = {"P": {"a": 0, "b": 1, "c": 2, "d": 3}}


def rows() -> pd.DataFrame:
    """m1 is Ok on a, hangs on b (its first Timeout) and times out on d (a cover input); m2 crashes on all four
    inputs, d with two output rows; m3's d was inferred already; the original is Ok everywhere."""
    data = [("original", k, 0, "Ok", None, False) for k in "abcd"]
    data += [("m1", "a", 0, "Ok", None, False), ("m1", "b", 0, "Timeout", "TimeoutError", False),
             ("m1", "c", 0, "Timeout", "TimeoutError", True), ("m1", "d", 0, "Timeout", "TimeoutError", False)]
    data += [("m2", k, 0, "RuntimeError", "AcceleratorError", False) for k in "abcd"]
    data += [("m2", "d", 1, "RuntimeError", "AcceleratorError", False)]
    data += [("m3", "a", 0, "RuntimeError", "WorkerDied", False), ("m3", "d", 0, "RuntimeError", "NotRun", True)]
    frame = pd.DataFrame(data, columns=["mutant_id", "input_id", "output_index", "status", "error_class", "inferred"])
    frame.insert(0, "problem", "P")
    return frame


def inferred(policy: str) -> list[tuple[str, str, int]]:
    frame = rows()
    mask = fault_policy.inferred_by(policy, frame, ORDER)
    return [tuple(r) for r in frame.loc[mask, ["mutant_id", "input_id", "output_index"]].itertuples(index=False)]


def test_each_policy_infers_what_follows_its_cut_off_in_run_order() -> None:
    assert inferred("now") == []
    assert inferred("hung-once") == [("m1", "d", 0)]  # after m1's first Timeout (b); c was inferred already
    assert inferred("crash-cap-1") == [("m2", "c", 0), ("m2", "d", 0), ("m2", "d", 1)]  # after its 2nd crash
    assert inferred("crash-cap-3") == []  # four crashes: not more than 3 + 1
    assert inferred("both") == [("m1", "d", 0)]


def test_help_runs_and_an_unknown_policy_is_one_error_line() -> None:
    script = [sys.executable, str(ROOT / "bench" / "fault_policy.py")]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    assert subprocess.run([*script, "--help"], capture_output=True, cwd=ROOT, env=env).returncode == 0
    done = subprocess.run([*script, "--startup-s", "1", "--policies", "now,all"], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert done.returncode == 2 and "unknown policies ['all']" in done.stderr and "Traceback" not in done.stderr


def test_cover_first_infers_a_crashing_variant_s_other_inputs_once_its_cover_crashes_pass_the_cap() -> None:
    """m2 crashes on a-e and is Ok on f; its cover is a, c, d, e. Its first crash (a) is followed by c, d and e,
    four crashes (more than 3): b and f, run after the cover, are inferred; m4 crashes on a and b only (two
    crashes by then): nothing."""
    order = {"P": {key: i for i, key in enumerate("abcdef")}}
    data = [("m2", k, "RuntimeError", "AcceleratorError") for k in "abcde"] + [("m2", "f", "Ok", None)]
    data += [("m4", k, "RuntimeError", "AcceleratorError") for k in "ab"] + [("m4", k, "Ok", None) for k in "cdef"]
    frame = pd.DataFrame(data, columns=["mutant_id", "input_id", "status", "error_class"])
    frame.insert(0, "problem", "P")
    frame["output_index"], frame["inferred"] = 0, False
    mask = fault_policy.inferred_by("cover-first", frame, order, {"P": set("acde")})
    assert [tuple(r) for r in frame.loc[mask, ["mutant_id", "input_id"]].itertuples(index=False)] == [
        ("m2", "b"), ("m2", "f")]


def test_decided_infers_after_a_fault_the_inputs_every_drawing_oracle_failed_already() -> None:
    """Oracle 0 draws a and b, oracle 1 b and c, none draws d. m2 crashes on a-d: after a (oracle 0) b is still
    needed by oracle 1 and crashes, then c is decided; d, drawn by none, is kept. m1 is Ok on a, hangs on b (both
    oracles): c is decided; d kept."""
    deciders = {"P": {"a": (frozenset({0}), {"RuntimeError": frozenset({0}), "Timeout": frozenset({0})}),
                      "b": (frozenset({0, 1}), {"RuntimeError": frozenset({0, 1}), "Timeout": frozenset({0, 1})}),
                      "c": (frozenset({1}), {"RuntimeError": frozenset({1}), "Timeout": frozenset({1})}),
                      "d": (frozenset(), {"RuntimeError": frozenset(), "Timeout": frozenset()})}}
    data = [("m2", k, "RuntimeError", "AcceleratorError") for k in "abcd"]
    data += [("m1", "a", "Ok", None), ("m1", "b", "Timeout", "TimeoutError"), ("m1", "c", "Ok", None),
             ("m1", "d", "Ok", None)]
    frame = pd.DataFrame(data, columns=["mutant_id", "input_id", "status", "error_class"])
    frame.insert(0, "problem", "P")
    frame["output_index"], frame["inferred"] = 0, False
    mask = fault_policy.inferred_by("decided", frame, ORDER, deciders=deciders)
    assert [tuple(r) for r in frame.loc[mask, ["mutant_id", "input_id"]].itertuples(index=False)] == [
        ("m2", "c"), ("m1", "c")]


def test_decided_first_runs_the_deciding_input_after_a_fault_and_counts_pairs_the_evidence_lacks() -> None:
    """Oracle 0 draws a and b, oracle 1 c and d, oracle 2 d only. m2 crashes on a-d: after a, b is decided and d
    (oracles 1 and 2) runs before c (oracle 1): its crash decides c. m3 crashes on a and is Ok on d; its c was
    inferred in the evidence: the order runs it (no observation: one unrecorded pair, counted as a crash)."""
    def sets(*oracles):
        return frozenset(oracles), {"RuntimeError": frozenset(oracles), "Timeout": frozenset(oracles)}

    deciders = {"P": {"a": sets(0), "b": sets(0), "c": sets(1), "d": sets(1, 2)}}
    data = [("m2", k, "RuntimeError", "AcceleratorError", False) for k in "abcd"]
    data += [("m3", "a", "RuntimeError", "AcceleratorError", False), ("m3", "b", "Ok", None, False),
             ("m3", "c", "RuntimeError", "NotRun", True), ("m3", "d", "Ok", None, False)]
    frame = pd.DataFrame(data, columns=["mutant_id", "input_id", "status", "error_class", "inferred"])
    frame.insert(0, "problem", "P")
    frame["output_index"] = 0
    mask = fault_policy.inferred_by("decided-first", frame, ORDER, {}, deciders)
    assert [tuple(r) for r in frame.loc[mask, ["mutant_id", "input_id"]].itertuples(index=False)] == [
        ("m2", "b"), ("m2", "c"), ("m3", "b")]
    assert fault_policy.inferred_by("decided", frame, ORDER, deciders=deciders).sum() == 2  # m2's b, m3's b
    assert fault_policy._decided_first(frame, ORDER, deciders, {}, ORDER)[1] == 1


def test_hang_cap_infers_every_other_input_cover_included_after_the_k_th_hang() -> None:
    """Oracles 0, 1 and 2 draw a, b and c (one each); all three inputs are the cover. m1 hangs on a, b and c:
    decided-first runs all three (each decides one more oracle); a cap of 1 infers b and c after the hang on a,
    a cap of 2 infers c."""
    def sets(*oracles):
        return frozenset(oracles), {"RuntimeError": frozenset(oracles), "Timeout": frozenset(oracles)}

    order = {"P": {key: i for i, key in enumerate("abc")}}
    deciders = {"P": {"a": sets(0), "b": sets(1), "c": sets(2)}}
    frame = pd.DataFrame([("m1", k, "Timeout", "TimeoutError") for k in "abc"],
                         columns=["mutant_id", "input_id", "status", "error_class"])
    frame.insert(0, "problem", "P")
    frame["output_index"], frame["inferred"] = 0, False

    def keys(policy: str) -> str:
        mask = fault_policy.inferred_by(policy, frame, order, {"P": set("abc")}, deciders)
        return "".join(frame.loc[mask, "input_id"])

    assert (keys("decided-first"), keys("hang-cap-1"), keys("hang-cap-2"), keys("hang-cap-3")) == ("", "bc", "c", "")
