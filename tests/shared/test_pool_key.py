"""The pool input key has one owner: every key a pool writes parses back into the parts it was made of."""

from __future__ import annotations

import pytest

from oracleaudit.pool import Pool, shipped_pools
from oracleaudit.pool.key import input_key, number_text, parse_input_key


def test_keys_parse_into_distribution_params_scale_seed_and_shape() -> None:
    assert parse_input_key("mixed_range/pattern=alternating/s=0/odd") == {
        "distribution": "mixed_range", "params": {"pattern": "alternating"}, "scale": None, "seed": 0,
        "shape": "odd", "draw": 1, "math_mode": "default", "weights": "fixed"}
    parts = parse_input_key("scaled/draw=3/math=no_tf32/weights=trial/x=0.01/s=5/official")
    assert (parts["draw"], parts["math_mode"], parts["weights"], parts["params"], parts["scale"]) == (
        3, "no_tf32", "trial", {}, 0.01)
    assert parse_input_key("scaled/x=0.01/s=734796314/official")["scale"] == 0.01
    assert parse_input_key("not a key") is None
    assert parse_input_key("normal/x=big/s=0/official") is None


@pytest.mark.parametrize("parts", [
    ("official", (), None, 734796314, "official"),
    ("scaled", (), 0.01, 734796314, "official"),
    ("scaled", (), -1.0, 7, "batch"),
    ("normal", (("mean", 0.5), ("std", 2.0)), 1000.0, 42, "odd"),
    ("mixed_range", (("pattern", "alternating"),), None, 0, "small"),
    ("near_max", (), 1e30, 2**64 - 1, "official"),
])
def test_a_written_key_parses_back_into_its_parts(parts) -> None:
    distribution, params, scale, seed, shape = parts
    parsed = parse_input_key(input_key(distribution, params, scale, seed, shape))
    assert parsed == {"distribution": distribution, "scale": scale, "seed": seed, "shape": shape, "draw": 1,
                      "math_mode": "default", "weights": "fixed",
                      "params": {name: number_text(v) if isinstance(v, float) else v for name, v in params}}


@pytest.mark.parametrize("name", shipped_pools())
def test_every_key_of_a_shipped_pool_parses_back_into_its_entry(name: str) -> None:
    for entry in Pool.load(name):
        parsed = parse_input_key(entry.key)
        assert parsed is not None, entry.key
        assert (parsed["distribution"], parsed["seed"], parsed["shape"]) == (entry.distribution, entry.seed,
                                                                             entry.shape)
        assert (parsed["scale"] or 1.0) == pytest.approx(entry.scale)
