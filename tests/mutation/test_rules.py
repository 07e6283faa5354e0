"""Every rule of the shipped catalog rewrites one concrete site of the showcase solution, and the result
compiles. The showcase marks each such site with a comment `// site: RULE [RULE...]`; the table below is
the spec of what each rule writes there and what the compile check says about it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from oracleaudit.mutant import COMPILE_ERROR, DUPLICATE, EQUIVALENT, PENDING, Mutant
from oracleaudit.mutation import find_mutants, mutate
from oracleaudit.mutation.catalog import load_catalog

TESTDATA = Path(__file__).parents[1] / "testdata"
SHOWCASE = TESTDATA / "showcase" / "rules_showcase.py"
RULES = [rule for family in load_catalog() for rule in family.rules]
RULE_NAMES = [rule.name for rule in RULES]
_MARK = re.compile(r"// site: ([\w. ]+)$")

TAIL_LOOP = (
    "for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {  // site: loop.delete_tail_loop\n"
    "        float v = expf(a[i]) + logf(b[i] + 1.0f) + tanhf(a[i]) + erff(b[i]);  // site: prec.expf_to_fast "
    "prec.logf_to_fast prec.tanhf_to_fast_formula prec.erff_to_tanh_approx\n"
    "        v += __expf(a[i]) * rsqrtf(b[i] + EPS) + 1.0f / sqrtf(b[i] + 1e-6f);  // site: prec.fast_to_expf "
    "prec.rsqrtf_to_recip_sqrtf prec.recip_sqrtf_to_rsqrtf prec.epsilon_tenfold\n"
    "        y[i] = v > 0.0f ? v : 0.0f;  // site: arith.negate_assigned_value rel.gt_to_ge rel.ternary_swap_branches\n"
    "    }"
)
GUARDED_BODY = (
    "{  // site: rel.remove_bounds_guard rel.negate_if_condition\n"
    "        C[row * N + col] = (float)acc;\n"
    "    }"
)

# rule: (original text at the marked site, its replacement, status after the compile check)
EXPECTED: dict[str, tuple[str, str, str]] = {
    "arith.add_to_sub": ("+", "-", PENDING),
    "arith.sub_to_add": ("-", "+", PENDING),
    "arith.mul_to_div": ("*", "/", PENDING),
    "arith.div_to_mul": ("/", "*", PENDING),
    "arith.swap_sub_operands": ("va.y - b[4 * i + 1]", "b[4 * i + 1] - va.y", PENDING),
    "arith.swap_div_operands": ("va.w / (b[4 * i + 3] + 2.0f)", "(b[4 * i + 3] + 2.0f) / va.w", PENDING),
    "arith.drop_added_term": ("va.x + b[4 * i]", "va.x", PENDING),
    "arith.negate_assigned_value": ("v > 0.0f ? v : 0.0f", "-(v > 0.0f ? v : 0.0f)", PENDING),
    "arith.compound_add_to_sub": ("+=", "-=", PENDING),
    "arith.perturb_float_constant": ("0.5f", "0.505f", PENDING),
    "arith.fmaxf_to_fminf": ("fmaxf", "fminf", PENDING),
    "arith.fminf_to_fmaxf": ("fminf", "fmaxf", PENDING),
    "idx.index_plus_one": ("row * cols + c", "(row * cols + c) + 1", PENDING),
    "idx.index_minus_one": ("row * cols + c", "(row * cols + c) - 1", PENDING),
    "idx.thread_to_block": ("threadIdx", "blockIdx", PENDING),
    "idx.block_to_thread": ("blockIdx", "threadIdx", PENDING),
    "idx.swap_x_y": ("y", "x", PENDING),
    "idx.blockdim_to_griddim": ("blockDim", "gridDim", PENDING),
    "idx.swap_row_col": ("row * cols + c", "c * cols + row", PENDING),
    "idx.offset_add_to_sub": ("+", "-", PENDING),
    "launch.grid_ceil_to_floor_div": ("(n + threads - 1) / threads", "n / threads", PENDING),
    "launch.grid_ceil_literal_to_floor_div": ("(N + 15) / 16", "N / 16", PENDING),
    "launch.grid_minus_one": ("rows", "(rows) - 1", PENDING),
    "launch.block_halved": ("BLOCK_SIZE", "(BLOCK_SIZE) / 2", PENDING),
    "launch.block_doubled": ("BLOCK_SIZE", "(BLOCK_SIZE) * 2", PENDING),
    "launch.dynamic_shared_halved": ("64 * sizeof(float)", "(64 * sizeof(float)) / 2", PENDING),
    # The macro's value as the grammar sees it runs to the end of the line, comment included.
    "launch.block_macro_halved": ("256  // site: launch.block_macro_halved", "128", PENDING),
    "launch.block_constant_halved": ("128", "64", PENDING),
    "loop.bound_minus_one": ("cols", "(cols) - 1", PENDING),
    "loop.start_plus_one": ("threadIdx.x", "(threadIdx.x) + 1", PENDING),
    "loop.tree_reduction_stops_early": ("0", "1", PENDING),
    "loop.tree_reduction_starts_late": ("16", "(16) / 2", PENDING),
    "loop.delete_tail_loop": (TAIL_LOOP, ";", PENDING),
    "loop.tiles_ceil_to_floor_div": ("(K + TILE - 1) / TILE", "K / TILE", PENDING),
    "loop.grid_stride_to_block_stride": ("blockDim.x * gridDim.x", "blockDim.x", PENDING),
    "loop.skip_accumulator_init": ("sum = 0.0f", "sum", PENDING),
    # The showcase's break sits in a loop with no effect at all, so continue compiles to the same code.
    "loop.break_to_continue": ("break;", "continue;", EQUIVALENT),
    "mem.zeros_to_empty": ("torch::zeros", "torch::empty", PENDING),
    "mem.zeros_like_to_empty_like": ("torch::zeros_like", "torch::empty_like", PENDING),
    "mem.remove_memset": ("total.zero_();", ";", PENDING),
    "mem.shared_to_local": ("__shared__", "", PENDING),
    "mem.read_output_as_input": ("b", "y", PENDING),
    "mem.remove_restrict": ("__restrict__", "", PENDING),
    "mem.ldg_to_plain_load": ("__ldg(&b[4 * i + 2])", "(*(&b[4 * i + 2]))", PENDING),
    # __half / __nv_bfloat16 accumulators compile at this site (`sum` only meets +=, * and a float
    # argument); at `total` and `v` in the same file they are CompileErrors (ambiguous / and >).
    "prec.round_accumulation_to_half": ("sum += v * 0.5f", "sum = __half2float(__float2half(sum + (v * 0.5f)))",
                                        PENDING),
    "prec.round_accumulation_to_bfloat16": ("sum += v * 0.5f",
                                            "sum = __bfloat162float(__float2bfloat16(sum + (v * 0.5f)))", PENDING),
    "prec.double_to_float": ("double", "float", PENDING),
    "prec.expf_to_fast": ("expf", "__expf", PENDING),
    "prec.logf_to_fast": ("logf", "__logf", PENDING),
    "prec.tanhf_to_fast_formula": ("tanhf(a[i])", "(1.0f - 2.0f / (__expf(2.0f * (a[i])) + 1.0f))", PENDING),
    "prec.fast_to_expf": ("__expf", "expf", PENDING),
    "prec.div_to_fdividef": ("va.w / (b[4 * i + 3] + 2.0f)", "__fdividef(va.w, (b[4 * i + 3] + 2.0f))", PENDING),
    "prec.epsilon_tenfold": ("1e-6f", "1e-05f", PENDING),
    "prec.epsilon_in_define": ("1e-5f  // site: prec.epsilon_in_define", "0.0001f", PENDING),
    "prec.rsqrtf_to_recip_sqrtf": ("rsqrtf(b[i] + EPS)", "(1.0f / sqrtf(b[i] + EPS))", PENDING),
    "prec.recip_sqrtf_to_rsqrtf": ("1.0f / sqrtf(b[i] + 1e-6f)", "rsqrtf(b[i] + 1e-6f)", PENDING),
    "prec.max_identity_to_zero": ("-INFINITY", "0.0f", PENDING),
    "prec.min_identity_to_zero": ("FLT_MAX", "0.0f", PENDING),
    "prec.erff_to_tanh_approx": ("erff(b[i])", "tanhf(1.1283792f * (b[i]))", PENDING),
    "rel.lt_to_le": ("<", "<=", PENDING),
    "rel.le_to_lt": ("<=", "<", PENDING),
    "rel.gt_to_ge": (">", ">=", PENDING),
    "rel.ge_to_gt": (">=", ">", PENDING),
    # `(threadIdx.x & 31) != 0` is the same machine code as rel.negate_if_condition's `!(... == 0)`.
    "rel.eq_to_ne": ("==", "!=", DUPLICATE),
    "rel.negate_if_condition": ("row < M && col < N", "!(row < M && col < N)", PENDING),
    "rel.remove_bounds_guard": ("if (row < M && col < N) " + GUARDED_BODY, GUARDED_BODY, PENDING),
    "rel.remove_early_return": ("if (row >= rows) return;", ";", PENDING),
    "rel.ternary_swap_branches": ("v > 0.0f ? v : 0.0f", "v > 0.0f ? 0.0f : v", PENDING),
    "sync.remove_syncthreads": ("__syncthreads();", ";", PENDING),
    "sync.remove_syncwarp": ("__syncwarp();", ";", PENDING),
    "sync.remove_threadfence": ("__threadfence();", ";", PENDING),
    "sync.atomic_add_to_plain": ("atomicAdd(total, x[i])", "(*(total) += (x[i]))", PENDING),
    "sync.atomic_max_to_plain": ("atomicMax(best, labels[i])", "(*(best) = (labels[i]))", PENDING),
    "sync.shfl_offset_plus_one": ("offset", "(offset) + 1", PENDING),
    "sync.shfl_offset_halved": ("16", "8", PENDING),
    "sync.shfl_mask_half_warp": ("0xffffffff", "0x0000ffff", PENDING),
    "sync.shfl_xor_to_down": ("__shfl_xor_sync", "__shfl_down_sync", PENDING),
    "sync.remove_volatile": ("volatile", "", PENDING),
}


def marked_sites(text: str) -> dict[str, list[int]]:
    """rule name → the 1-based lines whose `// site:` comment names it."""
    marks: dict[str, list[int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        found = _MARK.search(line)
        if found:
            for name in found.group(1).split():
                marks.setdefault(name, []).append(number)
    return marks


MARKS = marked_sites(SHOWCASE.read_text())


def at_marked_site(mutants: list[Mutant], rule: str) -> list[Mutant]:
    return [m for m in mutants if m.rule == rule and m.start_line in MARKS.get(rule, [])]


@pytest.fixture(scope="module")
def showcase(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("showcase")
    return Path(shutil.copy2(SHOWCASE, folder / SHOWCASE.name))


@pytest.fixture(scope="module")
def candidates(showcase: Path) -> list[Mutant]:
    units, solutions, errors, _ = find_mutants([showcase], RULES)
    assert (solutions, errors) == (1, [])
    return [m for unit in units for m in unit.mutants]


@pytest.fixture(scope="module")
def compiled(showcase: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Mutant]:
    """The whole showcase through the real mutate stage: device batches and the (slow) host batch."""
    result = mutate([showcase], out=tmp_path_factory.mktemp("out"), problems=None, show_progress=False)
    assert result.errors == []
    return result.mutants


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_every_catalog_rule_has_a_marked_site_in_the_showcase(rule: str) -> None:
    assert rule in MARKS, f"add a line marked `// site: {rule}` to {SHOWCASE.name}"


def test_every_rule_named_in_a_site_comment_is_a_catalog_rule() -> None:
    assert sorted(set(MARKS) - set(RULE_NAMES)) == []


def test_the_expected_table_covers_exactly_the_shipped_catalog() -> None:
    assert sorted(EXPECTED) == sorted(RULE_NAMES)


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_each_rule_rewrites_its_marked_site_as_the_table_says(rule: str, candidates: list[Mutant]) -> None:
    original, replacement, _ = EXPECTED[rule]
    found = [(m.original, m.replacement) for m in at_marked_site(candidates, rule)]
    assert (original, replacement) in found


@pytest.mark.nvcc
@pytest.mark.slow
def test_the_unmutated_showcase_passes_the_device_and_host_compile_checks(compiled: list[Mutant]) -> None:
    assert [m.status_reason for m in compiled if m.status_reason.startswith("unchecked")] == []


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("rule", RULE_NAMES)
def test_each_rule_s_mutant_at_its_marked_site_gets_the_compile_status_the_table_says(
        rule: str, compiled: list[Mutant]) -> None:
    original, replacement, status = EXPECTED[rule]
    mutants = [m for m in at_marked_site(compiled, rule) if (m.original, m.replacement) == (original, replacement)]
    assert mutants, f"no {rule} mutant {original!r} -> {replacement!r} on a marked line"
    for mutant in mutants:  # idx.swap_x_y rewrites two `.y` on its line
        assert mutant.status == status != COMPILE_ERROR, mutant.status_reason
        assert not mutant.status_reason.startswith("unchecked"), mutant.status_reason
