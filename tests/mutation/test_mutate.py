"""The mutate stage end to end: determinism, stable ids, the output folder contract, compile checks with
TCE, inline CUDA in escaped Python strings, bad input through the CLI, pairing and the shipped catalog."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from oracleaudit import cli
from oracleaudit.mutant import COMPILE_ERROR, DUPLICATE, EQUIVALENT, PENDING, STATUSES, Mutant, read_mutants
from oracleaudit.mutation import DEVICE_BATCH, MutateResult, find_mutants, mutate
from oracleaudit.mutation.catalog import load_catalog
from oracleaudit.shipped import shipped_dir

REPO = Path(__file__).resolve().parents[2]
TESTDATA = Path(__file__).parents[1] / "testdata"
# Device-only sources: compile checks of these take seconds (no torch headers).
GOOD = ["mutate/kernels.cu", "mutate/inline_escapes.py", "mutate/inline_one_line.py"]
# The fields of a mutants.jsonl record: the contract the run stage reads.
FIELDS = {"schema_version", "id", "problem", "problem_file", "source", "source_sha256", "unit", "rule", "family",
          "start", "end", "start_line", "start_col", "end_line", "end_col", "original", "replacement", "scope",
          "function", "status", "status_reason", "duplicate_of"}
CANDIDATE_KEYS = {"id", "rule", "family", "location", "original", "replacement", "scope"}


@dataclass
class Run:
    root: Path
    out: Path
    cache: Path
    result: MutateResult

    def text(self, mutant: Mutant) -> str:
        return (self.root / mutant.source).read_text()

    def find(self, source: str, rule: str, **fields) -> list[Mutant]:
        return [m for m in self.result.mutants if m.source == source and m.rule == rule
                and all(getattr(m, k) == v for k, v in fields.items())]


def copy_fixtures(root: Path) -> Path:
    """Copy tests/testdata/mutate to ROOT/mutate (mutant sources are paths relative to ROOT)."""
    shutil.copytree(TESTDATA / "mutate", root / "mutate")
    return root


def run_in(root: Path, out: Path | None, cache: Path, paths: list[str], **options) -> Run:
    """Run the mutate stage with ROOT as the working directory and CACHE as the compile cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setenv("ORACLEAUDIT_CACHE", str(cache))
        result = mutate([Path(p) for p in paths], out=out, show_progress=False, **options)
    return Run(root, out, cache, result)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def offset_of(text: str, line: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[:line - 1]) + col - 1


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One compiled run over the device-only fixtures, with a compile cache of its own."""
    root = copy_fixtures(tmp_path_factory.mktemp("compiled"))
    return run_in(root, root / "out", root / "cache", GOOD)


@pytest.fixture(scope="module")
def uncompiled(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = copy_fixtures(tmp_path_factory.mktemp("uncompiled"))
    return run_in(root, root / "out", root / "cache", GOOD, compile_check=False)


@pytest.fixture(params=["uncompiled", pytest.param("compiled", marks=pytest.mark.nvcc)])
def output(request: pytest.FixtureRequest) -> Run:
    """The output folder of a run without and (where nvcc is present) with compile checks."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixtures in a fresh folder that is the working directory."""
    copy_fixtures(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = cli.main(["mutate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- determinism and ids -------------------------------------------------------------------------------------

def test_two_runs_without_compiling_write_byte_identical_mutants_and_diffs(tmp_path: Path) -> None:
    root = copy_fixtures(tmp_path)
    first = run_in(root, root / "first", root / "cache", GOOD, compile_check=False)
    second = run_in(root, root / "second", root / "cache", GOOD, compile_check=False)
    assert first.result.mutants and not (root / "cache").exists()
    assert folder_bytes(first.out) == folder_bytes(second.out)


@pytest.mark.nvcc
def test_a_second_compiled_run_from_the_same_cache_writes_byte_identical_output(compiled: Run) -> None:
    cached = sorted(p.name for p in compiled.cache.rglob("*.json"))
    again = run_in(compiled.root, compiled.root / "again", compiled.cache, GOOD)
    assert folder_bytes(again.out) == folder_bytes(compiled.out)
    assert sorted(p.name for p in compiled.cache.rglob("*.json")) == cached  # nothing was recompiled


@pytest.mark.nvcc
def test_a_compiled_run_with_an_empty_cache_gives_the_same_statuses_byte_for_byte(compiled: Run) -> None:
    fresh = run_in(compiled.root, compiled.root / "fresh", compiled.root / "fresh-cache", GOOD)
    assert folder_bytes(fresh.out) == folder_bytes(compiled.out)


def test_changing_one_file_leaves_the_ids_of_another_file_s_mutants_unchanged(tmp_path: Path) -> None:
    root = copy_fixtures(tmp_path)
    paths = ["mutate/kernels.cu", "mutate/inline_escapes.py"]
    before = run_in(root, None, root / "cache", paths, compile_check=False).result.mutants
    escapes = root / "mutate" / "inline_escapes.py"
    escapes.write_text("# edited\n" + escapes.read_text())
    after = run_in(root, None, root / "cache", paths, compile_check=False).result.mutants

    def of(mutants: list[Mutant], source: str) -> list[Mutant]:
        return [m for m in mutants if m.source == source]

    assert of(after, "mutate/kernels.cu") == of(before, "mutate/kernels.cu") != []
    # the edited file's ids hash the moved offsets, so they change
    assert {m.id for m in of(after, "mutate/inline_escapes.py")} != {m.id for m in of(before, "mutate/inline_escapes.py")}


def test_mutant_ids_are_unique_16_digit_hex_strings(output: Run) -> None:
    ids = [m.id for m in output.result.mutants]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


# --- the output folder contract ------------------------------------------------------------------------------

def test_the_output_folder_holds_mutants_jsonl_and_one_diff_per_mutant_and_nothing_else(output: Run) -> None:
    expected = {"mutants.jsonl"} | {f"diffs/{m.id}.diff" for m in output.result.mutants}
    assert set(folder_bytes(output.out)) == expected


def test_every_mutants_jsonl_line_has_schema_version_1_and_the_documented_fields(output: Run) -> None:
    lines = (output.out / "mutants.jsonl").read_text().splitlines()
    assert len(lines) == len(output.result.mutants)
    for line in lines:
        record = json.loads(line)
        assert set(record) == FIELDS
        assert record["schema_version"] == 1
        assert record["status"] in STATUSES
    assert read_mutants(output.out) == output.result.mutants


def test_mutants_jsonl_lists_mutants_in_file_then_position_order(output: Run) -> None:
    keys = [(m.source, m.unit, m.start, m.end, m.rule, m.replacement) for m in output.result.mutants]
    assert keys == sorted(keys)


def test_one_based_lines_and_columns_point_at_the_original_text_in_the_file(output: Run) -> None:
    for mutant in output.result.mutants:
        text = output.text(mutant)
        assert offset_of(text, mutant.start_line, mutant.start_col) == mutant.start
        assert offset_of(text, mutant.end_line, mutant.end_col) == mutant.end
        assert text[mutant.start:mutant.end] == mutant.original


def apply_unified_diff(text: str, diff: str) -> str:
    """Apply a one-file unified diff strictly: every context and removed line must match exactly."""
    old = text.splitlines(keepends=True)
    lines = diff.splitlines(keepends=True)
    assert lines[0].startswith("--- a/") and lines[1].startswith("+++ b/")
    out: list[str] = []
    pos, i = 0, 2
    while i < len(lines):
        header = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n$", lines[i])
        assert header, lines[i]
        start = int(header.group(1)) - (0 if header.group(2) == "0" else 1)
        out.extend(old[pos:start])
        pos, i = start, i + 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, body = lines[i][0], lines[i][1:]
            if i + 1 < len(lines) and lines[i + 1].startswith("\\ "):
                body, i = body.removesuffix("\n"), i + 1
            assert tag in " -+", lines[i]
            if tag in " -":
                assert old[pos] == body
                pos += 1
            if tag in " +":
                out.append(body)
            i += 1
    return "".join(out + old[pos:])


def test_every_diff_round_trips_to_the_mutated_file(output: Run) -> None:
    for mutant in output.result.mutants:
        diff = (output.out / "diffs" / f"{mutant.id}.diff").read_text()
        assert diff.startswith(f"--- a/{mutant.source}\n+++ b/{mutant.source}\n")
        assert apply_unified_diff(output.text(mutant), diff) == mutant.apply(output.text(mutant))


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_every_diff_applies_to_the_original_file_with_patch_p1(output: Run, tmp_path: Path) -> None:
    for mutant in output.result.mutants:
        patched = tmp_path / f"{mutant.id}.out"
        proc = subprocess.run(["patch", "-p1", "-s", "-o", str(patched), "-i",
                               str(output.out / "diffs" / f"{mutant.id}.diff")],
                              cwd=output.root, capture_output=True, text=True)
        assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
        assert patched.read_text() == mutant.apply(output.text(mutant))


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_a_diff_that_changes_the_unterminated_last_line_of_a_file_applies_with_patch(workdir: Path) -> None:
    out = workdir / "out"
    run = run_in(workdir, out, workdir / "cache", ["mutate/no_final_newline.cu"], compile_check=False,
                 rule_names=["arith.add_to_sub"])
    (mutant,) = run.result.mutants
    proc = subprocess.run(["patch", "-p1", "-s", "--dry-run", "-i", str(out / "diffs" / f"{mutant.id}.diff")],
                          cwd=workdir, capture_output=True, text=True)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


# --- compile checks and TCE ----------------------------------------------------------------------------------

@pytest.mark.nvcc
def test_dropping_restrict_from_a_kernel_that_reads_each_input_once_is_equivalent(compiled: Run) -> None:
    dropped = compiled.find("mutate/kernels.cu", "mem.remove_restrict")
    assert len(dropped) == 3
    assert {(m.status, m.status_reason) for m in dropped} == {(EQUIVALENT, "same machine code as the original (TCE)")}


@pytest.mark.nvcc
def test_turning_plus_into_minus_in_axpy_is_pending_with_different_machine_code(compiled: Run) -> None:
    (mutant,) = compiled.find("mutate/kernels.cu", "arith.add_to_sub")
    assert (mutant.original, mutant.replacement) == ("+", "-")
    assert (mutant.status, mutant.status_reason) == (PENDING, "compiles; machine code differs from the original")


@pytest.mark.nvcc
@pytest.mark.parametrize("first, second", [
    # 1.0f / x[i]: `x[i] / 1.0f` and `1.0f * x[i]` are both x[i]
    ({"rule": "arith.swap_div_operands", "replacement": "x[i] / 1.0f"}, {"rule": "arith.div_to_mul", "start_line": 16}),
    # a doubled __syncthreads(): removing the first or the second leaves the same single barrier
    ({"rule": "sync.remove_syncthreads", "start_line": 24}, {"rule": "sync.remove_syncthreads", "start_line": 25}),
], ids=["one-over-x", "doubled-barrier"])
def test_two_different_edits_that_compile_to_the_same_machine_code_are_duplicates(
        compiled: Run, first: dict, second: dict) -> None:
    (kept,) = compiled.find("mutate/kernels.cu", **first)
    (duplicate,) = compiled.find("mutate/kernels.cu", **second)
    text = compiled.text(kept)
    assert kept.apply(text) != duplicate.apply(text)
    assert kept.status == PENDING
    assert (duplicate.status, duplicate.duplicate_of) == (DUPLICATE, kept.id)
    assert duplicate.status_reason == "same machine code as an earlier mutant (TCE)"


@pytest.mark.nvcc
def test_an_edit_that_breaks_compilation_is_a_compile_error_naming_the_error_while_its_batch_mates_compile(
        workdir: Path) -> None:
    run = run_in(workdir, workdir / "out", workdir / "cache", ["mutate/kernels.cu"],
                 catalog=workdir / "mutate" / "catalogs" / "broken_type")
    broken = [m for m in run.result.mutants if m.rule == "test.int_to_undeclared_type"]
    others = [m for m in run.result.mutants if m.rule != "test.int_to_undeclared_type"]
    assert len(run.result.mutants) <= DEVICE_BATCH  # all in one translation unit with the original
    assert len(broken) == 6 and len(others) == 5
    for mutant in broken:
        assert mutant.status == COMPILE_ERROR
        assert mutant.status_reason == 'error: identifier "undeclared_index_t" is undefined'
    for mutant in others:
        assert mutant.status == PENDING, mutant.status_reason
        assert mutant.status_reason == "compiles; machine code differs from the original"


@pytest.mark.nvcc
def test_device_code_relying_on_torch_headers_for_flt_max_is_still_compile_checked(workdir: Path) -> None:
    run = run_in(workdir, None, workdir / "cache", ["mutate/flt_max_from_torch.py"],
                 rule_names=["prec.min_identity_to_zero", "arith.fminf_to_fmaxf"])
    assert len(run.result.mutants) == 2
    assert [m.status_reason for m in run.result.mutants if m.status_reason.startswith("unchecked")] == []


# --- inline CUDA in escaped Python strings -------------------------------------------------------------------

def cuda_literal(source: str) -> tuple[str, int, str]:
    """The `cuda_source = "..."` literal of a solution: its value, the file offset of its body, its quote."""
    tree = ast.parse(source)
    (node,) = [n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "cuda_source"]
    start = offset_of(source, node.lineno, node.col_offset + 1)
    quote = '"""' if source.startswith('"""', start) else '"'
    return node.value, start + len(quote), quote


def decode(fragment: str, quote: str) -> str:
    """What a piece of a (non-raw) string literal's body means, decoded by Python itself."""
    return ast.literal_eval(quote + fragment + " " + quote)[:-1]


def test_a_site_after_escapes_in_a_plain_python_string_gets_the_file_s_line_and_column(workdir: Path) -> None:
    path = workdir / "mutate" / "inline_escapes.py"
    units, _, errors, _ = find_mutants([path], [r for f in load_catalog() for r in f.rules])
    assert errors == []
    mutants = [m for u in units for m in u.mutants]
    lines = path.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, start=1) if "y[i] = x[i] * 2.0f" in text)
    star = lines[line - 1].index("x[i] * 2.0f") + len("x[i] ") + 1
    (times,) = [m for m in mutants if m.rule == "arith.mul_to_div"]
    (two,) = [m for m in mutants if m.rule == "arith.perturb_float_constant"]
    assert (times.start_line, times.start_col, times.end_col, times.original) == (line, star, star + 1, "*")
    assert (two.start_line, two.start_col, two.original, two.replacement) == (line, star + 2, "2.0f", "2.02f")
    (swap,) = [m for m in mutants if m.rule == "rel.ternary_swap_branches"]
    assert (swap.original, swap.replacement) == ("i < n ? '\\\\n' : '\\\\t'", "i < n ? '\\\\t' : '\\\\n'")


@pytest.mark.parametrize("name", [
    "inline_escapes.py",
    "inline_one_line.py",
])
def test_a_mutant_applied_to_the_python_file_gives_a_file_whose_cuda_string_is_the_mutated_cuda(
        workdir: Path, name: str) -> None:
    path = workdir / "mutate" / name
    text = path.read_text()
    cuda, body, quote = cuda_literal(text)
    units, _, errors, _ = find_mutants([path], [r for f in load_catalog() for r in f.rules])
    mutants = [m for u in units for m in u.mutants]
    assert errors == [] and len(mutants) > 5
    for mutant in mutants:
        mutated, _, _ = cuda_literal(mutant.apply(text))  # the mutated file is still Python
        at = len(decode(text[body:mutant.start], quote))
        original, replacement = decode(mutant.original, quote), decode(mutant.replacement, quote)
        assert cuda[at:at + len(original)] == original
        assert mutated == cuda[:at] + replacement + cuda[at + len(original):], mutant.rule


@pytest.mark.nvcc
def test_the_compile_check_compiles_the_same_cuda_as_the_mutated_file_when_the_edit_holds_an_escape(
        compiled: Run) -> None:
    (swap,) = compiled.find("mutate/inline_escapes.py", "rel.ternary_swap_branches")
    assert "\\\\n" in swap.replacement
    assert swap.status != COMPILE_ERROR, swap.status_reason


# --- bad input through the CLI -------------------------------------------------------------------------------

BAD_FILES = [
    pytest.param("mutate/missing.cu", "no such file or directory", id="missing-file"),
    pytest.param("mutate/bad/no_load_inline.py", "no load_inline call", id="no-load-inline"),
    pytest.param("mutate/bad/runtime_sources.py", "cuda_sources is built at run time", id="runtime-sources"),
    pytest.param("mutate/bad/syntax_error.cu", "CUDA does not parse (syntax error on line 3", id="syntax-error"),
    pytest.param("mutate/bad/empty.cu", "empty CUDA file", id="empty-cu"),
]
@pytest.mark.parametrize("bad, cause", BAD_FILES)
def test_a_bad_input_file_is_reported_on_one_stderr_line_naming_it_and_the_cause(
        workdir: Path, capsys, bad: str, cause: str) -> None:
    code, _, err = run_cli(capsys, "mutate/kernels.cu", bad, "--no-compile", "--out", "out", "--json")
    assert code == 1  # partly done: README, "Exit codes"
    errors = [line for line in err.splitlines() if not line.startswith("oracleaudit: warning: no --problems")]
    assert errors == [line for line in errors if bad in line and cause in line]
    assert len(errors) == 1 and errors[0].startswith("oracleaudit: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("bad, cause", BAD_FILES)
def test_the_good_file_beside_a_bad_one_is_still_mutated(workdir: Path, capsys, bad: str, cause: str) -> None:
    code, out, _ = run_cli(capsys, "mutate/kernels.cu", bad, "--no-compile", "--out", "out", "--json")
    summary = json.loads(out)
    mutants = read_mutants(workdir / "out")
    assert code == 1 and summary["mutants"] == len(mutants) > 0
    assert {m.source for m in mutants} == {"mutate/kernels.cu"}
    assert summary["errors"] and all(bad in e for e in summary["errors"])


@pytest.mark.parametrize("bad, cause", BAD_FILES)
def test_a_run_whose_only_input_is_bad_exits_2_with_one_line_naming_the_file(
        workdir: Path, capsys, bad: str, cause: str) -> None:
    code, out, err = run_cli(capsys, bad, "--no-compile", "--out", "out", "--json")
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("oracleaudit: error: no mutants were produced") and bad in line and cause in line
    assert not (workdir / "out").exists()


@pytest.mark.parametrize("args, names, cause", [
    (["--catalog", "mutate/catalogs/bad_query", "--no-compile"], "mutate/catalogs/bad_query/rules.toml",
     "rule broken.unclosed_query: bad tree-sitter query"),
    (["--catalog", "mutate/catalogs/unknown_predicate", "--no-compile"], "mutate/catalogs/unknown_predicate/rules.toml",
     "rule broken.unknown_predicate: unknown predicate 'floating'"),
    (["--catalog", "mutate/catalogs/wrong_schema", "--no-compile"], "mutate/catalogs/wrong_schema/rules.toml",
     "schema_version must be 1, got 2"),
    (["--family", "nosuch", "--no-compile"], "--family nosuch", "unknown family"),
    (["--rule", "nosuch.rule", "--no-compile"], "--rule nosuch.rule", "unknown rule"),
    (["--jobs", "0"], "--jobs", "must be ≥ 1, got 0"),
], ids=["bad-query", "unknown-predicate", "wrong-schema-version", "unknown-family", "unknown-rule", "zero-jobs"])
def test_a_bad_catalog_or_flag_stops_the_run_with_exit_2_and_one_line_naming_it(
        workdir: Path, capsys, args: list[str], names: str, cause: str) -> None:
    code, out, err = run_cli(capsys, "mutate/kernels.cu", *args, "--out", "out", "--json")
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("oracleaudit: error: ") and names in line and cause in line
    assert not (workdir / "out").exists()


# --- JSON output, pairing ------------------------------------------------------------------------------------

def test_list_json_prints_every_candidate_with_the_documented_keys_and_writes_nothing(workdir: Path, capsys) -> None:
    code, out, err = run_cli(capsys, "mutate/kernels.cu", "--list", "--json")
    listed = json.loads(out)
    expected = run_in(workdir, None, workdir / "cache", ["mutate/kernels.cu"], compile_check=False).result.mutants
    assert (code, err) == (0, "")
    assert set(listed) == {"solutions", "candidates", "errors"}
    assert (listed["solutions"], listed["errors"]) == (1, [])
    assert all(set(row) == CANDIDATE_KEYS for row in listed["candidates"])
    assert [row["id"] for row in listed["candidates"]] == [m.id for m in expected]
    assert {"rule": "arith.add_to_sub", "location": "mutate/kernels.cu:9:27", "original": "+", "replacement": "-",
            "family": "arithmetic", "scope": "device"}.items() <= \
        next(r for r in listed["candidates"] if r["rule"] == "arith.add_to_sub").items()
    assert sorted(p.name for p in workdir.iterdir()) == ["mutate"]


def test_json_summary_counts_solutions_and_mutants_by_status_and_by_family(workdir: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, "mutate/kernels.cu", "mutate/inline_escapes.py", "--no-compile", "--out", "out",
                           "--json")
    summary = json.loads(out)
    mutants = read_mutants(workdir / "out")
    assert code == 0
    assert {"solutions", "mutants", "by_status", "by_family", "errors", "unpaired", "out"} <= set(summary)
    assert (summary["solutions"], summary["mutants"]) == (2, len(mutants))
    assert summary["by_status"] == {s: sum(m.status == s for m in mutants) for s in STATUSES}
    assert summary["by_family"] == {
        family: {s: sum(m.family == family and m.status == s for m in mutants) for s in STATUSES}
        for family in sorted({m.family for m in mutants})}


def test_problems_root_fills_the_problem_of_a_level_prefixed_solution(
        problem_root: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for name in ("level1_4_AddOne.py", "level1_9_Missing.py"):
        shutil.copy2(TESTDATA / "mutate" / "pairing" / name, problem_root / "solutions" / name)
    monkeypatch.chdir(problem_root.parent)
    code, _, err = run_cli(capsys, "problem_root/solutions/level1_4_AddOne.py",
                           "problem_root/solutions/level1_9_Missing.py", "--problems", "problem_root",
                           "--no-compile", "--out", "out", "--json")
    mutants = read_mutants(problem_root.parent / "out")
    paired = [m for m in mutants if m.source.endswith("level1_4_AddOne.py")]
    unpaired = [m for m in mutants if m.source.endswith("level1_9_Missing.py")]
    assert code == 0 and paired and unpaired
    assert {(m.problem, m.problem_file) for m in paired} == {("level1/4_AddOne", "problem_root/level1/4_AddOne.py")}
    assert {(m.problem, m.problem_file) for m in unpaired} == {(None, None)}
    assert err.splitlines() == ["oracleaudit: warning: unpaired: problem_root/solutions/level1_9_Missing.py: "
                                "no problem level1/9_Missing.py; its mutants get no problem (\"problem\": null), "
                                "which `run` refuses"]


# --- the shipped catalog, in a checkout and in a wheel -------------------------------------------------------

def test_the_shipped_mutators_folder_resolves_to_the_checkout() -> None:
    assert shipped_dir("mutators") == REPO / "mutators"
    assert {f.origin for f in load_catalog()} == {str(p) for p in (REPO / "mutators").glob("*.toml")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a clean copy of the checkout: tracked and untracked-but-not-ignored files only, as a
    fresh clone has them (so no empty folder that git does not keep)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    tmp = tmp_path_factory.mktemp("wheel")
    clean = tmp / "checkout"
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (clean / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clean / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(clean), "--no-deps", "--no-build-isolation",
                           "-w", str(tmp / "dist")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = (tmp / "dist").glob("oracleaudit-*.whl")
    return built


def test_a_wheel_built_from_a_clean_checkout_ships_the_catalog_and_the_clang_prelude(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    catalog = {f"oracleaudit/_shipped/mutators/{p.name}" for p in (REPO / "mutators").glob("*.toml")}
    assert len(catalog) == 8 and catalog <= names
    assert "oracleaudit/data/cuda_prelude.h" in names


def test_the_package_from_the_wheel_loads_its_catalog_from_inside_itself(wheel: Path, tmp_path: Path) -> None:
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    probe = ("import oracleaudit, oracleaudit.mutation.catalog as c, oracleaudit.mutation.semantics as s; "
             "print(oracleaudit.__file__); print(c.default_catalog_dir()); "
             "print(sum(len(f.rules) for f in c.load_catalog())); print(s.PRELUDE.is_file())")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    package, catalog, rules, prelude = proc.stdout.splitlines()
    assert Path(package).parent == tmp_path / "site" / "oracleaudit"
    assert Path(catalog) == tmp_path / "site" / "oracleaudit" / "_shipped" / "mutators"
    assert int(rules) == sum(len(f.rules) for f in load_catalog())
    assert prelude == "True"
