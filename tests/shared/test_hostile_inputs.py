"""Hostile input, every command: one table of cases, each driven through the real CLI on real files (a slice of
the bundled evidence store, real mutants, real Parquet). Each must give one line on stderr naming the file or
option and the cause, the exit code of the README's rule (2: nothing done), no traceback (`--debug` shows it),
and nothing half-written. The last cases keep the rest of a batch (exit 1, partly done)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from oracleaudit.cli import main
from oracleaudit.mutant import MUTANTS_FILE
from oracleaudit.store import MANIFEST_FILE, EvidenceStore

KERNEL = Path(__file__).parents[1] / "testdata" / "mutate" / "kernels.cu"
def copy_store(small: Path, tmp: Path) -> Path:
    shutil.copytree(small / "evidence", tmp / "evidence")
    return tmp / "evidence"


def corrupt_part_keeping_its_checksum(small: Path, tmp: Path) -> Path:
    """Flip bytes inside the compressed pages of the `status` column, then record the new sha256 in the
    manifest: the store opens, but the part cannot be decompressed (a ZSTD error)."""
    store = copy_store(small, tmp)
    manifest = json.loads((store / MANIFEST_FILE).read_text())
    part = store / manifest["parts"][0]["file"]
    data = bytearray(part.read_bytes())
    group = pq.ParquetFile(part).metadata.row_group(0)
    column = next(group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == "status")
    middle = column.data_page_offset + column.total_compressed_size // 2
    for i in range(middle, middle + 64):
        data[i] ^= 0x5A
    part.write_bytes(bytes(data))
    manifest["parts"][0]["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    (store / MANIFEST_FILE).write_text(json.dumps(manifest))
    return part


def schema_99(small: Path, tmp: Path) -> Path:
    store = copy_store(small, tmp)
    manifest = json.loads((store / MANIFEST_FILE).read_text())
    (store / MANIFEST_FILE).write_text(json.dumps({**manifest, "schema_version": 99}))
    return store / MANIFEST_FILE


def mutants_with(tmp: Path, text: str) -> Path:
    (tmp / "bad_mutants").mkdir()
    (tmp / "bad_mutants" / MUTANTS_FILE).write_text(text)
    return tmp / "bad_mutants"


def a_file(tmp: Path) -> Path:
    (tmp / "a_file").write_text("not a folder\n")
    return tmp / "a_file"


def python_file(tmp: Path, name: str, text: str) -> Path:
    (tmp / name).write_text(text)
    return tmp / name


def score(small: Path, *args) -> list[str]:
    return ["score", "--oracle", "kernelbench", "--evidence", str(small / "evidence"), "--mutants",
            str(small / "mutants"), *map(str, args)]


@dataclass
class Case:
    """argv built from (the small store's folder, a fresh temporary folder); the words the one error line
    must hold (`{tmp}` stands for the temporary folder); the exit code; paths (under tmp) that must not exist
    afterwards."""

    argv: Callable[[Path, Path], list[str]]
    words: tuple[str, ...]
    code: int = 2
    absent: tuple[str, ...] = ()


CASES = {
    "mutate --out an existing file, before any nvcc work": Case(
        lambda s, t: ["mutate", str(KERNEL), "--out", str(a_file(t))],
        ("--out {tmp}/a_file", "is a file, not a folder")),
    "mutate --out under a file": Case(
        lambda s, t: ["mutate", str(KERNEL), "--out", str(a_file(t) / "out")],
        ("--out {tmp}/a_file/out", "{tmp}/a_file is a file, not a folder")),
    "mutate a Python file with a syntax error": Case(
        lambda s, t: ["mutate", str(python_file(t, "bad.py", "import torch\ndef f(:\n    pass\n")), "--list"],
        ("{tmp}/bad.py:2", "Python syntax error")),
    "mutate a Python file without load_inline CUDA": Case(
        lambda s, t: ["mutate", str(python_file(t, "plain.py", "class ModelNew:\n    pass\n")), "--list"],
        ("{tmp}/plain.py", "no load_inline call")),
    "mutate an empty dataset folder": Case(
        lambda s, t: ["mutate", str((t / "empty").mkdir() or t / "empty"), "--out", str(t / "out")],
        ("{tmp}/empty", "holds no .py or .cu"), absent=("out",)),
    "mutate --jobs 0": Case(lambda s, t: ["mutate", "--list", "--jobs", "0"], ("--jobs", "got 0")),
    "refcheck --jobs 0": Case(lambda s, t: ["refcheck", "--device", "cpu", "--out", str(t / "rc"), "--jobs", "0"],
                              ("--jobs", "got 0")),
    "score --out an existing file": Case(lambda s, t: score(s, "--out", a_file(t)),
                                         ("--out {tmp}/a_file", "is a file, not a folder")),
    "score --out under a file": Case(lambda s, t: score(s, "--out", a_file(t) / "x" / "y"),
                                     ("--out {tmp}/a_file/x/y", "is a file, not a folder")),
    "score a store of another schema version": Case(
        lambda s, t: ["score", "--oracle", "kernelbench", "--evidence", str(schema_99(s, t).parent), "--mutants",
                      str(s / "mutants")], ("{tmp}/evidence/manifest.json", "schema_version", "99")),
    "score a store whose part is corrupt but matches its checksum": Case(
        lambda s, t: ["score", "--oracle", "kernelbench", "--evidence",
                      str(corrupt_part_keeping_its_checksum(s, t).parents[1]), "--mutants", str(s / "mutants")],
        ("{tmp}/evidence/parts/part-", "cannot be read")),
    "score a folder that holds a store (kill_matrix)": Case(
        lambda s, t: ["score", "--oracle", "kernelbench", "--evidence", str(s), "--mutants", str(s / "mutants")],
        ("not an evidence store", "--evidence", "/evidence --mutants", "/mutants")),
    "score a mutants file with a line cut short": Case(
        lambda s, t: ["score", "--oracle", "kernelbench", "--evidence", str(s / "evidence"), "--mutants",
                      str(mutants_with(t, '{"schema_version": 1, "id": "ab\n'))],
        ("{tmp}/bad_mutants/mutants.jsonl:1", "not JSON", "Unterminated string starting at: column 29")),
    "score an empty mutants file": Case(
        lambda s, t: ["score", "--oracle", "kernelbench", "--evidence", str(s / "evidence"), "--mutants",
                      str(mutants_with(t, ""))], ("{tmp}/bad_mutants/mutants.jsonl", "lists no mutants")),
    "score an empty store": Case(
        lambda s, t: ["score", "--oracle", "kernelbench", "--evidence",
                      str(EvidenceStore(t / "empty").create({"pool": "default"}).path), "--mutants",
                      str(s / "mutants")], ("{tmp}/empty", "holds no observations")),
    "score an oracle file that is not TOML": Case(
        lambda s, t: ["score", "--oracle", str(python_file(t, "bad.toml", "name = [\n")), "--evidence",
                      str(s / "evidence"), "--mutants", str(s / "mutants")], ("bad.toml", "not valid TOML")),
    "minimize --budget 0": Case(lambda s, t: ["minimize", "--budget", "0", "--evidence", str(s / "evidence"),
                                              "--mutants", str(s / "mutants")], ("--budget", "got 0")),
    "minimize --out an existing file": Case(
        lambda s, t: ["minimize", "--evidence", str(s / "evidence"), "--mutants", str(s / "mutants"), "--out",
                      str(a_file(t))], ("--out {tmp}/a_file", "is a file, not a folder")),
    "analyze ceiling --tolerance -1": Case(
        lambda s, t: ["analyze", "ceiling", "--oracle", "kernelbench", "--tolerance", "-1", "--evidence",
                      str(s / "evidence"), "--mutants", str(s / "mutants")], ("--tolerance", "got -1")),
    "merge into a file": Case(lambda s, t: ["merge", str(s / "evidence"), "--into", str(a_file(t))],
                              ("--into {tmp}/a_file", "is a file, not a folder")),
    "merge only unreadable stores": Case(
        lambda s, t: ["merge", str(t / "missing"), "--into", str(t / "into")],
        ("{tmp}/missing/manifest.json", "no such file"), absent=("into",)),
    "run --out an existing file, before any GPU work": Case(
        lambda s, t: ["run", "--mutants", str(s / "mutants"), "--out", str(a_file(t))],
        ("--out {tmp}/a_file", "is a file, not a folder")),
    "verify --out a folder": Case(lambda s, t: ["verify", "--out", str(t)], ("--out {tmp}", "is a folder, not a file")),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_hostile_input_gives_one_line_naming_the_file_and_the_cause(small: Path, tmp_path: Path, capsys,
                                                                   case: Case) -> None:
    argv = case.argv(small, tmp_path)
    capsys.readouterr()
    code = main(argv)
    _, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("oracleaudit: error: ")]
    assert code == case.code, err
    assert "Traceback" not in err and len(errors) >= 1, err
    assert any(all(w.format(tmp=tmp_path) in line for w in case.words) for line in errors), err
    assert errors == err.splitlines()[-len(errors):] and all("\n" not in e for e in errors)
    assert not [name for name in case.absent if (tmp_path / name).exists()]


def test_debug_shows_the_traceback_of_the_same_error(small: Path, tmp_path: Path) -> None:
    argv = CASES["score --out an existing file"].argv(small, tmp_path)
    with pytest.raises(Exception, match="is a file, not a folder"):
        main(["--debug", *argv])

