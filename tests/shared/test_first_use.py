"""What a new user hit (issue 23), each symptom reproduced through the real CLI on real files: code shown as
written, output files readable under the umask, no stale output, tables on narrow terminals, silent
mismatches warned about, and the exit-code rule (0 done, 1 partly done, 2 nothing done)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import stat
from pathlib import Path

import pytest

from oracleaudit.cli import main
from oracleaudit.mutant import DIFFS_DIR, MUTANTS_FILE
from oracleaudit.scoring import ESCAPED_DIR, KILL_MATRIX_FILE, SCORES_FILE
from oracleaudit.shipped import shipped_dir
from oracleaudit.store import EvidenceStore

ORACLES = ("kernelbench", "kernelbench-v0.1", "kernelbench-verified", "kernelbench-x")


def run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys, *extra) -> list[dict]:
    code, out, _ = run(capsys, "mutate", "k.cu", "--list", "--json", *extra)
    assert code == 0
    return json.loads(out)["candidates"]


# ---- code shown as written ---------------------------------------------------------------------------------

def test_mutate_list_prints_code_that_looks_like_markup_as_written(kernel: Path, capsys) -> None:
    code, out, err = run(capsys, "mutate", "k.cu", "--list")
    assert (code, err) == (0, "")
    assert "y[/*out*/i]" in out and "x[i]" in out


def test_mutate_rules_shows_the_brackets_of_the_index_rules(capsys) -> None:
    code, out, _ = run(capsys, "mutate", "--rules", "--format", "csv")
    rows = {r[1]: r[3] for r in csv.reader(io.StringIO(out)) if len(r) == 4}
    assert code == 0 and rows["idx.index_plus_one"] == "a[i] becomes a[i + 1]"


# ---- narrow terminals and other formats ----------------------------------------------------------------------

def test_mutate_list_keeps_ids_and_locations_whole_on_a_narrow_terminal(kernel: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    candidates = listed(capsys)
    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = run(capsys, "mutate", "k.cu", "--list")
    assert code == 0 and "…" not in out
    for c in candidates:
        assert any(c["id"] in line and c["location"] in line for line in out.splitlines()), c


def test_csv_and_markdown_tables_hold_every_cell_as_written(kernel: Path, capsys) -> None:
    candidates = listed(capsys)
    code, out, _ = run(capsys, "mutate", "k.cu", "--list", "--format", "csv")
    title, *lines = out.strip().splitlines()
    rows = list(csv.DictReader(lines))
    assert code == 0 and title == f"# {len(candidates)} candidate mutants"
    assert rows == [{k: c[k] for k in ("id", "rule", "location", "original", "replacement")} for c in candidates]
    code, out, _ = run(capsys, "mutate", "k.cu", "--list", "--format", "markdown")
    body = [line for line in out.splitlines() if line.startswith("| ")][1:]
    assert code == 0 and len(body) == len(candidates)
    assert r"y\[/\*out\*/i\]" in out  # Markdown's syntax escaped: renders as y[/*out*/i]


def test_score_headers_stay_distinguishable_on_a_narrow_terminal(small: Path, capsys,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "70")
    args = [a for name in ORACLES for a in ("--oracle", name)]
    code, out, _ = run(capsys, "score", *args, "--evidence", small / "evidence", "--mutants", small / "mutants")
    assert code == 0 and "…" not in out
    oracles_table = out.split("Detection by family")[0]
    assert all(any(f" {name} " in line for line in oracles_table.splitlines()) for name in ORACLES)
    family_header = out.split("Detection by family")[1].split("┡")[0]
    cells = ["".join(parts) for parts in zip(*[[c.strip() for c in line.split("┃")[2:-1]]
                                               for line in family_header.splitlines() if "┃" in line])]
    assert cells == list(ORACLES)  # the wrapped header lines join back to the names


# ---- output files ------------------------------------------------------------------------------------------

def modes(folder: Path) -> set[int]:
    return {stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}


def test_output_files_get_the_permissions_of_the_umask(kernel: Path, small: Path, capsys) -> None:
    old = os.umask(0o022)
    try:
        assert run(capsys, "mutate", "k.cu", "--no-compile", "--out", "mutants")[0] == 0
        assert run(capsys, "score", "--oracle", "kernelbench", "--evidence", small / "evidence", "--mutants",
                   small / "mutants", "--out", "scores")[0] == 0
        assert run(capsys, "merge", small / "evidence", "--into", "merged")[0] == 0
    finally:
        os.umask(old)
    for folder in ("mutants", "scores", "merged"):
        assert modes(kernel.parent / folder) == {0o644}, folder


def test_score_out_with_fewer_oracles_leaves_no_escaped_list_of_the_others(small: Path, tmp_path: Path,
                                                                          capsys) -> None:
    where = ["--evidence", small / "evidence", "--mutants", small / "mutants", "--out", tmp_path / "out"]
    assert run(capsys, "score", "--oracle", "kernelbench", "--oracle", "kernelbench-v0.1", *where)[0] == 0
    assert run(capsys, "score", "--oracle", "kernelbench", *where)[0] == 0
    assert sorted(p.name for p in (tmp_path / "out" / ESCAPED_DIR).iterdir()) == ["kernelbench.jsonl"]
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {KILL_MATRIX_FILE, SCORES_FILE}


def test_mutate_out_an_existing_file_fails_before_compiling(kernel: Path, capsys) -> None:
    (kernel.parent / "taken").write_text("")
    cached = sorted(Path(os.environ["ORACLEAUDIT_CACHE"]).rglob("*"))
    code, out, err = run(capsys, "mutate", "k.cu", "--out", "taken")
    assert (code, out) == (2, "") and err == "oracleaudit: error: --out taken: is a file, not a folder\n"
    assert sorted(Path(os.environ["ORACLEAUDIT_CACHE"]).rglob("*")) == cached  # no nvcc result was made


# ---- silent mismatches ---------------------------------------------------------------------------------------

def test_a_mutants_file_missing_mutants_of_the_store_is_warned_about(small: Path, tmp_path: Path,
                                                                      capsys) -> None:
    lines = (small / "mutants" / MUTANTS_FILE).read_text().splitlines()
    half = tmp_path / "half"
    (half / DIFFS_DIR).mkdir(parents=True)
    (half / MUTANTS_FILE).write_text("".join(line + "\n" for line in lines[: len(lines) // 2]))
    code, _, err = run(capsys, "score", "--oracle", "kernelbench", "--evidence", small / "evidence", "--mutants", half)
    (warning,) = err.splitlines()
    assert code == 0 and warning.startswith(f"oracleaudit: warning: {half / MUTANTS_FILE}: not the mutants file")
    assert f"{len(lines) - len(lines) // 2} mutants observed in the store are missing from it" in warning


def test_the_full_mutants_file_and_a_subset_without_missing_mutants_give_no_warning(small: Path,
                                                                                     capsys) -> None:
    code, _, err = run(capsys, "score", "--oracle", "kernelbench", "--evidence", small / "evidence", "--mutants",
                       small / "mutants")
    assert (code, err) == (0, "")


def test_a_mutants_folder_without_diffs_whose_sources_are_gone_is_warned_about(small: Path, tmp_path: Path,
                                                                              capsys) -> None:
    (tmp_path / "m").mkdir()
    records = [json.loads(line) for line in (small / "mutants" / MUTANTS_FILE).read_text().splitlines()]
    for record in records:  # sources changed since mutate: no diff can be made from them
        record["source_sha256"] = "0" * 64
    (tmp_path / "m" / MUTANTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = run(capsys, "score", "--oracle", "kernelbench", "--evidence", small / "evidence", "--mutants",
                       tmp_path / "m")
    assert code == 0 and err.splitlines() == [
        (f"oracleaudit: warning: {tmp_path / 'm'}: no diffs/ folder; escaped mutants are shown and written without "
         "their diffs")]


def test_without_diffs_the_escapes_show_the_diffs_made_from_their_sources(small: Path, tmp_path: Path,
                                                                          capsys) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / MUTANTS_FILE).write_bytes((small / "mutants" / MUTANTS_FILE).read_bytes())
    code, _, err = run(capsys, "score", "--oracle", "kernelbench", "--evidence", small / "evidence", "--mutants",
                       tmp_path / "m", "--out", tmp_path / "scored")
    assert (code, err) == (0, "")
    plain = run(capsys, "score", "--oracle", "kernelbench", "--evidence", small / "evidence", "--mutants",
                small / "mutants", "--out", tmp_path / "with_diffs")
    assert plain[0] == 0
    made, shipped = (sorted((tmp_path / d / "escaped").rglob("*.jsonl")) for d in ("scored", "with_diffs"))
    assert made and [p.read_bytes() for p in made] == [p.read_bytes() for p in shipped]
    assert any('"diff": "--- a/' in p.read_text() for p in made)


def test_mutate_without_problems_warns_that_run_refuses_its_mutants(kernel: Path, capsys) -> None:
    code, _, err = run(capsys, "mutate", "k.cu", "--no-compile", "--out", "out")
    assert code == 0 and err.splitlines() == [
        ('oracleaudit: warning: no --problems ROOT: the mutants of 1 solution get no problem ("problem": '
         "null), which `run` refuses; pass --problems ROOT to pair them")]


# ---- exit codes: 0 done, 1 partly done, 2 nothing done ----------------------------------------------------

def test_mutate_with_one_bad_and_one_good_file_is_partly_done(kernel: Path, capsys) -> None:
    code, _, err = run(capsys, "mutate", "k.cu", "missing.cu", "--no-compile", "--out", "out")
    assert code == 1 and "oracleaudit: missing.cu: no such file or directory" in err.splitlines()
    assert (kernel.parent / "out" / MUTANTS_FILE).read_text()


def test_merge_of_a_bad_and_a_good_store_is_partly_done_and_of_bad_ones_only_nothing(
        small: Path, tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "merge", tmp_path / "missing", small / "evidence", "--into", tmp_path / "x")
    assert code == 1 and EvidenceStore(tmp_path / "x").open().num_rows == EvidenceStore(small / "evidence").num_rows
    assert err.splitlines()[0].endswith("missing/manifest.json: no such file (not an evidence store)")
    assert run(capsys, "merge", tmp_path / "missing", "--into", tmp_path / "y")[0] == 2


def test_the_readme_states_the_exit_code_rule() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    rule = readme.split("## Exit codes")[1].split("\n## ")[0]
    assert all(f"`{code}`" in rule for code in (0, 1, 2, 130))


def test_the_readme_names_every_benchmark_script() -> None:
    root = Path(__file__).parents[2]
    readme = (root / "README.md").read_text()
    scripts = sorted(p.name for p in (root / "bench").iterdir()
                     if p.suffix in (".py", ".sh") and p.name != "__init__.py")
    assert scripts and [name for name in scripts if f"`{name}`" not in readme] == []


def test_a_gzipped_mutants_file_reads_as_the_plain_one_and_a_broken_one_is_one_line(tmp_path: Path, capsys) -> None:
    from oracleaudit.mutant import MUTANTS_GZ, gzipped, mutants_file, mutants_sha256, read_mutants

    bundle = shipped_dir("kill_matrix")
    plain = tmp_path / "plain"
    plain.mkdir()
    text = mutants_file(bundle / "mutants").read_bytes()
    (plain / MUTANTS_FILE).write_bytes(gzip.decompress(text))
    assert [m.id for m in read_mutants(plain)] == [m.id for m in read_mutants(bundle / "mutants")]
    assert mutants_sha256(plain / MUTANTS_FILE) == mutants_sha256(bundle / "mutants" / MUTANTS_GZ)
    assert gzipped((plain / MUTANTS_FILE).read_text()) == text  # the bundle's bytes: no name or time inside
    both = tmp_path / "both"
    both.mkdir()
    (both / MUTANTS_FILE).write_text("")
    (both / MUTANTS_GZ).write_bytes(text)
    assert mutants_file(both) == both / MUTANTS_FILE  # the plain file wins where both are there
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / MUTANTS_GZ).write_bytes(text[: len(text) // 2])
    assert main(["score", "--oracle", "kernelbench", "--evidence", str(bundle / "evidence"), "--mutants",
                 str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mutants.jsonl.gz: not a gzip-compressed mutants file" in err[0]
