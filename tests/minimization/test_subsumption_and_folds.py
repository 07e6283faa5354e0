"""Dominator mutants of a kill relation, and the folds and tallies of held-out validation."""

from __future__ import annotations

import numpy as np
import pytest

from oracleaudit.errors import OracleAuditError
from oracleaudit.minimization.kills import ProblemKills, seed_group
from oracleaudit.minimization.subsumption import dominators
from oracleaudit.minimization.suite import Suite, choose
from oracleaudit.minimization.validation import folds, tally


def relation(kills: np.ndarray, alarms: np.ndarray | None = None, families: list[str] | None = None,
             observed: np.ndarray | None = None, fails: np.ndarray | None = None) -> ProblemKills:
    """A problem's relation from bool [tolerance, mutant, input] kills."""
    t, m, n = kills.shape
    return ProblemKills(
        problem="level1/1_X", tolerances=[10.0 ** -(7 - i) for i in range(t)], inputs=[f"in{i}" for i in range(n)],
        mutants=[f"m{j}" for j in range(m)], families=families or ["arithmetic"] * m, rules=[f"r{j % 3}" for j in range(m)],
        kills=kills, observed=np.ones((m, n), dtype=bool) if observed is None else observed,
        false_alarms=np.zeros((t, n), dtype=np.int64) if alarms is None else alarms,
        fails=np.zeros((t, n), dtype=bool) if fails is None else fails, cost_ms=np.zeros(n))


def test_dominators_are_the_mutants_with_minimal_sets_of_rejecting_inputs_one_per_set() -> None:
    kills = np.array([[1, 0, 0],    # m0: {0}
                      [1, 1, 0],    # m1: {0, 1} ⊃ m0's set: subsumed
                      [0, 1, 0],    # m2: {1}
                      [1, 0, 0],    # m3: {0}, the same set as m0
                      [0, 0, 0]],   # m4: caught by nothing
                     dtype=bool)
    d = dominators(kills, ["m0", "m1", "m2", "m3", "m4"])
    assert d.mutants == ["m0", "m2"] and d.dominating == ["m0", "m2", "m3"] and d.caught == 4


def test_random_folds_split_the_mutants_once_each_and_the_same_way_every_time() -> None:
    k = relation(np.zeros((1, 40, 2), dtype=bool))
    split = folds(k, "random", 5)
    tests = np.array([test for _, _, test in split])
    assert (tests.sum(axis=0) == 1).all() and all((train == ~test).all() for _, train, test in split)
    assert [g for g, _, _ in split] == [g for g, _, _ in folds(k, "random", 5)]
    assert all((a[2] == b[2]).all() for a, b in zip(split, folds(k, "random", 5)))


def test_family_folds_hold_out_one_family_at_a_time_and_bad_modes_are_errors() -> None:
    k = relation(np.zeros((1, 4, 2), dtype=bool), families=["loop", "memory", "loop", "precision"])
    assert [(g, test.tolist()) for g, _, test in folds(k, "family", 5)] == [
        ("loop", [True, False, True, False]), ("memory", [False, True, False, False]),
        ("precision", [False, False, False, True])]
    with pytest.raises(OracleAuditError, match="--holdout must be one of"):
        folds(k, "problem", 5)
    with pytest.raises(OracleAuditError, match="--folds must be ≥ 2"):
        folds(k, "random", 1)


def test_a_tally_counts_caught_escaped_and_unobserved_on_the_chosen_inputs() -> None:
    kills = np.array([[[1, 0], [0, 0], [0, 0]]], dtype=bool)
    observed = np.array([[1, 1], [1, 1], [1, 0]], dtype=bool)
    k = relation(kills, observed=observed)
    t = tally(k, Suite(0, (0, 1)))
    assert (t.caught, t.escaped, t.unobserved, t.detection) == (1, 1, 1, 0.5)
    assert tally(k, Suite(0, (0,)), np.array([False, True, True])).escaped == 2


def test_the_tightest_tolerance_wins_a_tie_and_a_looser_one_wins_when_it_allows_a_better_input() -> None:
    kills = np.zeros((3, 2, 2), dtype=bool)
    kills[0] = [[1, 1], [1, 1]]  # at 1e-7 input 0 rejects everything, but the original fails it there
    kills[1] = [[1, 0], [1, 0]]
    kills[2] = [[1, 0], [0, 0]]
    alarms = np.array([[1, 0], [0, 0], [0, 0]])
    k = relation(kills, alarms=alarms)
    assert choose(k, np.ones(2), 1) == Suite(0, (1,))  # 1e-7, input 1: both mutants
    alarms[0, 1] = 1  # now nothing is allowed at 1e-7: 1e-6 with input 0 catches both
    assert choose(k, np.ones(2), 1) == Suite(1, (0,))


def test_an_input_the_original_fails_is_never_chosen_whatever_false_alarms_are_allowed() -> None:
    kills = np.array([[[1, 1, 0], [1, 0, 1]]], dtype=bool)  # input 0 rejects both mutants: it rejects anything
    alarms = np.array([[1, 1, 1]])  # inputs 0 and 1 are seeds of one group, input 2 of a group with a failure
    fails = np.array([[True, False, False]])
    k = relation(kills, alarms=alarms, fails=fails)
    assert choose(k, np.ones(2), 1, allowance=5) == Suite(0, (1,))
    assert choose(k, np.ones(2), 2, allowance=5) == Suite(0, (1, 2))
    assert choose(k, np.ones(2), 2, allowance=1) == Suite(0, (1,))  # two groups' alarms would be 2
    assert choose(k, np.ones(2), 1, allowance=0) == Suite(None, ())


def test_with_nothing_to_catch_the_tolerance_that_allows_the_most_inputs_is_taken_and_filled() -> None:
    alarms = np.array([[1, 1, 0], [0, 0, 1], [0, 0, 1]])
    k = relation(np.zeros((3, 2, 3), dtype=bool), alarms=alarms)
    assert choose(k, np.ones(2), 2) == Suite(2, (0, 1))
    assert choose(k, np.ones(2), 2, method="greedy") == Suite(2, (0, 1))


def test_the_seed_group_of_an_input_drops_only_its_seed() -> None:
    assert seed_group("normal/x=1000/s=42/official") == "normal/x=1000/official"
    assert seed_group("official/s=734796314/odd") == "official/odd"
