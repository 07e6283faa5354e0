"""Shape variants made through a problem's module-level int constants."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracleaudit.pool.shapes import DroppedVariant, ShapeVariant, odd_size, shape_variants, small_sizes
from oracleaudit.problem import bundled_root

SOFTMAX = bundled_root() / "level1" / "23_Softmax.py"


def is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))


@pytest.mark.parametrize("value", [16, 17, 31, 32, 64, 100, 128, 1000, 1024, 4096, 16384, 65536])
def test_odd_size_is_a_prime_between_six_and_eight_tenths_of_the_value(value: int) -> None:
    odd = odd_size(value)
    assert is_prime(odd) and odd % 32 != 0 and 0.6 * value <= odd <= 0.8 * value


def test_small_sizes_keep_equal_values_equal_and_order() -> None:
    assert small_sizes({"batch": 64, "n": 4096, "m": 64, "k": 16}) == {"batch": 19, "n": 23, "m": 19, "k": 17}


def test_the_exemplar_has_official_odd_and_small_variants() -> None:
    variants = shape_variants(SOFTMAX)
    assert variants.variants == (
        ShapeVariant("official"),
        ShapeVariant("odd", (("batch_size", 43), ("dim", 2861))),
        ShapeVariant("small", (("batch_size", 17), ("dim", 19))),
    )
    assert variants.dropped == ()


def test_a_divisibility_constraint_keeps_the_constrained_constant_unchanged(problem_root: Path) -> None:
    variants = shape_variants(problem_root / "level1" / "2_GroupNormed.py")
    assert variants.get("odd") == ShapeVariant("odd", (("batch_size", 23), ("length", 89)))
    assert variants.get("small") == ShapeVariant("small", (("batch_size", 17), ("length", 23)))


def test_constants_below_sixteen_are_never_changed(problem_root: Path) -> None:
    variants = shape_variants(problem_root / "level1" / "2_GroupNormed.py")
    assert all("groups" not in v.as_dict() for v in variants.variants)


def test_a_variant_the_reference_rejects_is_dropped_with_the_reason(problem_root: Path) -> None:
    variants = shape_variants(problem_root / "level1" / "3_FixedView.py")
    assert variants.variants == (ShapeVariant("official"),)
    assert [d.name for d in variants.dropped] == ["odd", "small"]
    assert "RuntimeError" in variants.dropped[0].reason and "batch_size=43, dim=2861" in variants.dropped[0].reason


def test_a_problem_without_large_constants_drops_both_variants(tmp_path: Path) -> None:
    path = tmp_path / "level1" / "1_Tiny.py"
    path.parent.mkdir()
    path.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "n = 8\ndef get_inputs():\n    return [torch.rand(n)]\ndef get_init_inputs():\n    return []\n"
    )
    assert shape_variants(path).dropped == (
        DroppedVariant("odd", "no module-level int constant ≥ 16 to change"),
        DroppedVariant("small", "no module-level int constant ≥ 16 to change"),
    )


def test_shape_variants_are_deterministic(problem_root: Path) -> None:
    path = problem_root / "level1" / "2_GroupNormed.py"
    assert shape_variants(path) == shape_variants(path)
