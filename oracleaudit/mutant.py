"""A mutant: one edit of one solution file, its stable id, its compile status, and the `mutants/` folder
contract (`mutants.jsonl` plus `diffs/<id>.diff`) that the mutate stage writes and the run stage reads. A
folder may hold `mutants.jsonl.gz` instead: the same lines gzip-compressed (how the bundled evidence ships its
mutants, a sixteenth of the bytes); every reader takes either."""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import plain_bytes, plain_or_gzipped, write_atomic

MUTANTS_SCHEMA_VERSION = 1
MUTANTS_FILE = "mutants.jsonl"
MUTANTS_GZ = MUTANTS_FILE + ".gz"
DIFFS_DIR = "diffs"

PENDING = "Pending"
COMPILE_ERROR = "CompileError"
EQUIVALENT = "Equivalent"
DUPLICATE = "Duplicate"
STATUSES = (PENDING, COMPILE_ERROR, EQUIVALENT, DUPLICATE)


def mutant_id(problem: str | None, source: str, rule: str, start: int, end: int, replacement: str) -> str:
    """Stable id: a hash of (problem, file, rule, span, replacement)."""
    key = "\0".join([problem or "", source, rule, str(start), str(end), replacement])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Mutant:
    """One mutant. Offsets are character offsets into the ORIGINAL file (the .py for inline CUDA); lines
    and columns are 1-based, the end column exclusive. `scope` is device, host or both (a top-level edit,
    e.g. a macro, that device and host code share)."""

    id: str
    problem: str | None
    problem_file: str | None
    source: str
    source_sha256: str
    unit: int
    rule: str
    family: str
    start: int
    end: int
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    original: str
    replacement: str
    scope: str
    function: str | None
    status: str = PENDING
    status_reason: str = ""
    duplicate_of: str | None = None

    def with_status(self, status: str, reason: str = "", duplicate_of: str | None = None) -> "Mutant":
        return replace(self, status=status, status_reason=reason, duplicate_of=duplicate_of)

    def apply(self, file_text: str) -> str:
        """The mutated file text."""
        if file_text[self.start:self.end] != self.original:
            raise OracleAuditError(f"{self.source}: file changed since mutant {self.id} was made")
        return file_text[:self.start] + self.replacement + file_text[self.end:]

    def diff(self, file_text: str) -> str:
        mutated = self.apply(file_text)
        lines = difflib.unified_diff(file_text.splitlines(keepends=True), mutated.splitlines(keepends=True),
                                     fromfile=f"a/{self.source}", tofile=f"b/{self.source}", n=3)
        # A last line without a newline gets the marker that patch(1) expects.
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def to_json(self) -> str:
        record = {"schema_version": MUTANTS_SCHEMA_VERSION, **asdict(self)}
        return json.dumps(record, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str, where: str) -> "Mutant":
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise OracleAuditError(f"{where}: not JSON ({err.msg}: column {err.colno})") from None
        version = record.pop("schema_version", None)
        if version != MUTANTS_SCHEMA_VERSION:
            raise OracleAuditError(f"{where}: schema_version must be {MUTANTS_SCHEMA_VERSION}, got {version!r}")
        try:
            mutant = cls(**record)
        except TypeError as err:
            raise OracleAuditError(f"{where}: not a mutant record ({err})") from None
        if mutant.status not in STATUSES:
            raise OracleAuditError(f"{where}: unknown status {mutant.status!r}")
        return mutant


def write_mutants(out: Path, mutants: list[Mutant], file_texts: dict[str, str]) -> None:
    """Write `mutants.jsonl` and one diff per mutant; stale diffs from an earlier run are removed."""
    diffs = out / DIFFS_DIR
    diffs.mkdir(parents=True, exist_ok=True)
    wanted = {f"{m.id}.diff" for m in mutants}
    for stale in diffs.glob("*.diff"):
        if stale.name not in wanted:
            stale.unlink()
    for mutant in mutants:
        write_atomic(diffs / f"{mutant.id}.diff", mutant.diff(file_texts[mutant.source]))
    write_atomic(out / MUTANTS_FILE, "".join(m.to_json() + "\n" for m in mutants))


def mutants_file(folder: Path) -> Path:
    """The mutants file of `folder` — mutants.jsonl, else mutants.jsonl.gz where only that is there — or
    `folder` itself when it is no folder."""
    return plain_or_gzipped(folder, MUTANTS_FILE) if folder.is_dir() else folder


def mutants_bytes(path: Path) -> bytes:
    """The bytes of a mutants file's lines, gunzipped when its name ends in .gz."""
    return plain_bytes(path, "gzip-compressed mutants file")


def mutants_sha256(path: Path) -> str:
    """The sha256 of a mutants file's lines (of what a .gz holds): a store records it of the file it ran."""
    return hashlib.sha256(mutants_bytes(path)).hexdigest()


def gzipped(text: str) -> bytes:
    """`text` as the bytes of a mutants.jsonl.gz: the same for the same text (no name or time in the header)."""
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def read_mutants(folder: Path) -> list[Mutant]:
    path = mutants_file(folder)
    if not path.is_file():
        raise OracleAuditError(f"{path}: no such file (run `oracleaudit mutate --out {folder}` first)")
    mutants = []
    try:
        text = mutants_bytes(path).decode()
    except UnicodeDecodeError as err:
        raise OracleAuditError(f"{path}: not UTF-8 text ({err})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            mutants.append(Mutant.from_json(line, f"{path}:{number}"))
    return mutants
