"""Choosing inputs: the integer program is exact (it equals a brute-force search on small relations) and
never worse than greedy (on random relations), keeps to the budget and the false-alarm allowance, takes the
cheapest optimal suite when runtime is the cost, and tops a suite up to the budget."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from oracleaudit.minimization.selection import caught, greedy_select, ilp_select, upper_bound


def random_relation(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    m, n = int(rng.integers(1, 30)), int(rng.integers(1, 12))
    kills = rng.random((m, n)) < rng.uniform(0.05, 0.5)
    weights = rng.integers(1, 4, m).astype(float) if rng.random() < 0.5 else rng.uniform(0.1, 3.0, m)
    alarms = np.where(rng.random(n) < 0.3, rng.integers(1, 3, n), 0)
    return kills, weights, alarms, int(rng.integers(1, 5)), int(rng.integers(0, 3))


def brute_force(kills: np.ndarray, weights: np.ndarray, budget: int, alarms: np.ndarray, allowance: int) -> float:
    best = 0.0
    for k in range(1, budget + 1):
        for subset in combinations(range(kills.shape[1]), k):
            if alarms[list(subset)].sum() <= allowance:
                best = max(best, caught(kills, weights, list(subset)))
    return best


def test_the_integer_program_equals_the_brute_force_optimum_and_is_never_worse_than_greedy() -> None:
    rng = np.random.default_rng(7)
    beaten = 0
    for _ in range(400):
        kills, weights, alarms, budget, allowance = random_relation(rng)
        ilp = ilp_select(kills, weights, budget, alarms=alarms, allowance=allowance, fill=False)
        greedy = greedy_select(kills, weights, budget, alarms=alarms, allowance=allowance, fill=False)
        assert len(ilp) <= budget and alarms[ilp].sum() <= allowance
        assert len(greedy) <= budget and alarms[greedy].sum() <= allowance
        best = brute_force(kills, weights, budget, alarms, allowance)
        assert caught(kills, weights, ilp) == pytest.approx(best)
        assert caught(kills, weights, ilp) >= caught(kills, weights, greedy) - 1e-9
        assert best <= upper_bound(kills, weights, budget, alarms, allowance) + 1e-9
        beaten += caught(kills, weights, ilp) > caught(kills, weights, greedy) + 1e-9
    assert beaten > 0  # the random relations include cases where greedy is not optimal


def test_greedy_takes_the_biggest_input_first_and_misses_the_pair_that_catches_everything() -> None:
    # input 0 rejects mutants 0-3; input 1 rejects 0, 1, 4; input 2 rejects 2, 3, 5
    kills = np.zeros((6, 3), dtype=bool)
    kills[[0, 1, 2, 3], 0] = kills[[0, 1, 4], 1] = kills[[2, 3, 5], 2] = True
    weights = np.ones(6)
    assert ilp_select(kills, weights, 2, fill=False) == [1, 2]
    assert greedy_select(kills, weights, 2, fill=False) == [0, 1]
    assert caught(kills, weights, [1, 2]) == 6 and caught(kills, weights, [0, 1]) == 5


def test_with_runtime_as_the_cost_the_cheapest_of_the_best_suites_is_taken_and_not_filled() -> None:
    kills = np.array([[True, True, False], [True, True, True]])
    assert ilp_select(kills, np.ones(2), 2, cost=np.array([5.0, 1.0, 0.1]), fill=False) == [1]
    assert ilp_select(kills, np.ones(2), 2, fill=False) == [0]  # no cost: the fewest inputs, earlier first


def test_a_suite_that_catches_all_it_can_is_topped_up_with_the_inputs_that_reject_the_most() -> None:
    kills = np.array([[1, 0, 0, 1], [1, 0, 1, 1], [1, 1, 0, 0]], dtype=bool)
    assert ilp_select(kills, np.ones(3), 1) == [0]
    assert ilp_select(kills, np.ones(3), 3) == [0, 1, 3]  # then input 3 (two mutants), then 1 before 2
    assert greedy_select(kills, np.ones(3), 3) == [0, 1, 3]


def test_inputs_that_bring_false_alarms_are_used_only_within_the_allowance() -> None:
    kills = np.array([[1, 0], [1, 1]], dtype=bool)
    alarms = np.array([2, 0])
    assert ilp_select(kills, np.ones(2), 1, alarms=alarms, allowance=0) == [1]
    assert ilp_select(kills, np.ones(2), 1, alarms=alarms, allowance=2) == [0]
    assert ilp_select(kills, np.ones(2), 2, alarms=alarms, allowance=1) == [1]  # filling keeps the allowance too


def test_nothing_to_catch_gives_the_first_inputs_in_pool_order_or_nothing_without_filling() -> None:
    kills = np.zeros((3, 4), dtype=bool)
    assert ilp_select(kills, np.ones(3), 2) == [0, 1]
    assert ilp_select(kills, np.ones(3), 2, fill=False) == []
    assert greedy_select(np.zeros((0, 4), dtype=bool), np.ones(0), 2, fill=False) == []
