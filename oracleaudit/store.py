"""The evidence store: the append-only folder of observations that the run stage writes and scoring reads.

Folder contract

    EVIDENCE/
      manifest.json                      schema_version, meta (the run's identity: pool, mutants, ...),
                                         parts: [{file, rows, sha256}] — the committed parts, in order
      parts/part-<seq>-<worker>.parquet  one batch of observation rows each (zstd; `OBSERVATION_SCHEMA`,
                                         with schema_version in the Parquet metadata)

A packed store (`EvidenceStore.pack`, `pack_rows`; contract in `packed.py`) holds the same rows in about
a third of the bytes, for shipping (the bundled kill_matrix/evidence): its manifest has layout "packed",
packed_version and `files` in place of `parts`, it is read like any other store (the same rows, values and
dtypes, in key order), and it is read-only. Readers older than the packed layout refuse it (no `parts`).

Only parts listed in the manifest count. `append` writes a part under a temporary name, renames it into
place, then replaces the manifest atomically; a crash in between leaves an orphan part that every reader
ignores (`remove_orphans` deletes it), never a half-written manifest, so a resumed run neither loses nor
duplicates rows. A store has one writer at a time (a run's `Recorder` commits for all its workers); runs on
separate machines write stores of their own, which `merge` unions.

Rows are keyed by `KEY_COLUMNS` = (problem, mutant_id, input_id, output_index): the problem is part of the
key because the unmutated kernel of every problem is `"original"` and the pool's input keys do not name the
problem. Append all outputs of one (problem, mutant, input) in one call: `done_keys` reports a
(problem, mutant_id, input_id) as done once any of its rows is committed.

Row schema (`OBSERVATION_SCHEMA`; every column not in `REQUIRED_COLUMNS` is nullable):
    problem, mutant_id ("original" for the unmutated kernel, "reference" for the fp32 reference itself),
    input_id (the pool entry key), input_seed (int64), shape_variant, distribution, output_index (int32),
    status (a `status.Status`), error_class, error_message, time_ms (float64: the first kernel run, timed on
    its CUDA stream with events), repeat_bitwise_equal,
    fp32_* (the `ErrorEvidence` of the output against the fp32 reference; empty on "reference" rows),
    fp64_* (against the fp64 reference; on "reference" rows: the fp32 reference against the fp64 one),
    ref_matmul_tf32, ref_cudnn_tf32, ref_matmul_precision, ref_device (the fp32 reference's math mode),
    inferred (schema 2: True on a row that was not observed but stands for one — the inputs of a variant
    after it hung, or after it crashed the CUDA context more often than the run allows; its status is the
    one inferred, its error_message says from what. Scoring never judges such a row: the input counts as
    unobserved. Null or False: observed).

Schema versions: 2 adds `inferred`. Version 1 stores and parts are read as version 2 with `inferred` null;
appending to a version 1 store writes version 2 parts and manifest.

Determinism: running the same mutants on the same pool and machine gives the same rows for kernels whose
outputs are bitwise deterministic, except `time_ms` (wall-clock kernel time; timeouts in oracles use it)
and the `error_message` of Timeout rows (which quotes the time waited). Kernels with atomics or races give
other values on another run, which is what `repeat_bitwise_equal` records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oracleaudit import packed
from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import arrow_fields
from oracleaudit.files import file_sha256, write_atomic, write_with
from oracleaudit.status import Status

__all__ = [
    "EvidenceStore",
    "KEY_COLUMNS",
    "MANIFEST_FILE",
    "OBSERVATION_SCHEMA",
    "PARTS_DIR",
    "REQUIRED_COLUMNS",
    "RUN_IDENTITY",
    "STORE_SCHEMA_VERSION",
    "merge_stores",
    "pack_rows",
]

STORE_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
MANIFEST_FILE = "manifest.json"
WRITER_LOCK = ".writer.lock"  # held by the one process writing the store (EvidenceStore.writing)
PACKED = "packed"  # the manifest's layout of a packed store
PARTS_DIR = "parts"
SCHEMA_VERSION_KEY = b"oracleaudit.schema_version"


KEY_COLUMNS = ("problem", "mutant_id", "input_id", "output_index")
# The meta keys on which the stores of one run agree: a resumed run and `merge_stores` compare only these;
# the other keys (e.g. mutants_sha256) record the run that created the store.
RUN_IDENTITY = ("pool",)
REQUIRED_COLUMNS = ("problem", "mutant_id", "input_id", "input_seed", "shape_variant", "distribution",
                    "output_index", "status")

OBSERVATION_SCHEMA = pa.schema(
    [
        pa.field("problem", pa.string(), nullable=False),
        pa.field("mutant_id", pa.string(), nullable=False),
        pa.field("input_id", pa.string(), nullable=False),
        pa.field("input_seed", pa.int64(), nullable=False),
        pa.field("shape_variant", pa.string(), nullable=False),
        pa.field("distribution", pa.string(), nullable=False),
        pa.field("output_index", pa.int32(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error_class", pa.string()),
        pa.field("error_message", pa.string()),
        pa.field("time_ms", pa.float64()),
        pa.field("repeat_bitwise_equal", pa.bool_()),
        *arrow_fields("fp32_"),
        *arrow_fields("fp64_"),
        pa.field("ref_matmul_tf32", pa.bool_()),
        pa.field("ref_cudnn_tf32", pa.bool_()),
        pa.field("ref_matmul_precision", pa.string()),
        pa.field("ref_device", pa.string()),
        pa.field("inferred", pa.bool_()),
    ],
    metadata={SCHEMA_VERSION_KEY: str(STORE_SCHEMA_VERSION).encode()},
)
_V1_SCHEMA = OBSERVATION_SCHEMA.remove(OBSERVATION_SCHEMA.get_field_index("inferred")).remove_metadata()

_PART_NAME = re.compile(r"part-(\d{6,})-(\w+)\.parquet")
_WORKER = re.compile(r"\w+")
_SORT = [(name, "ascending") for name in KEY_COLUMNS]


def _write_part(table: pa.Table, path: Path) -> None:
    """Write a Parquet part deterministically (same rows → same bytes), whole and synced (files.write_with)."""
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd", compression_level=3,
                                                row_group_size=1 << 20), sync=True)


def _meta_differences(a: Mapping[str, Any], b: Mapping[str, Any], identity: Sequence[str] | None) -> list[str]:
    """The keys of `identity` (default: every key of either) on which two stores' meta differ, sorted."""
    keys = set(a) | set(b) if identity is None else set(identity)
    return sorted(k for k in keys if a.get(k) != b.get(k))


def _dedupe_first(table: pa.Table) -> pa.Table:
    """The first row of each key, in the table's order."""
    if table.num_rows == 0:
        return table
    keys = zip(*(table.column(name).to_pylist() for name in KEY_COLUMNS))
    seen: set[tuple] = set()
    keep = []
    for index, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            keep.append(index)
    return table if len(keep) == table.num_rows else table.take(pa.array(keep, type=pa.int64()))


class EvidenceStore:
    """One evidence folder. `EvidenceStore(path).create(meta)` makes a new one, `.open()` reads an existing
    one (validating the manifest and every committed part's sha256), `.open_or_create(meta)` resumes."""

    def __init__(self, path: Path | str, worker: str = "0"):
        self.path = Path(path)
        if not _WORKER.fullmatch(worker):
            raise OracleAuditError(f"worker must be letters, digits or _, got {worker!r}")
        self.worker = worker
        self._manifest: dict[str, Any] | None = None
        self._keys: set[tuple] | None = None

    def __repr__(self) -> str:
        return f"EvidenceStore({str(self.path)!r})"

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def parts_dir(self) -> Path:
        return self.path / PARTS_DIR

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    # ---- opening --------------------------------------------------------------------------------------

    def create(self, meta: Mapping[str, Any]) -> "EvidenceStore":
        """A new, empty store identified by `meta` (JSON data: the run's pool, mutants, ...)."""
        if self.exists():
            raise OracleAuditError(f"{self.manifest_path}: an evidence store already exists here")
        meta = self._check_meta(meta)
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self._write_manifest({"schema_version": STORE_SCHEMA_VERSION, "meta": meta, "parts": []})
        self._keys = set()
        return self

    def open(self) -> "EvidenceStore":
        if not self.exists():
            raise OracleAuditError(f"{self.manifest_path}: no such file (not an evidence store)")
        where = self.manifest_path
        try:
            manifest = json.loads(where.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise OracleAuditError(f"{where}: not JSON ({err})") from None
        if not isinstance(manifest, dict):
            raise OracleAuditError(f"{where}: not an evidence manifest")
        version = manifest.get("schema_version")
        if version not in READABLE_SCHEMA_VERSIONS:
            raise OracleAuditError(f"{where}: schema_version must be one of "
                                   f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}, got {version!r}")
        if manifest.get("layout") == PACKED:
            self._check_packed(manifest)
            self._manifest = manifest
            self._keys = None
            return self
        parts = manifest.get("parts")
        if not isinstance(manifest.get("meta"), dict) or not isinstance(parts, list):
            raise OracleAuditError(f"{where}: needs a `meta` object and a `parts` list")
        self._check_entries(parts, lambda file: bool(_PART_NAME.fullmatch(Path(file).name)), "part")
        self._manifest = manifest
        self._keys = None
        return self

    def open_or_create(self, meta: Mapping[str, Any], identity: Sequence[str] | None = None) -> "EvidenceStore":
        """Resume the store at this path if it exists, else create it with `meta`. A resumed store's meta must
        equal `meta` on the keys in `identity` (default: all keys); other keys record the creating run."""
        if not self.exists():
            return self.create(meta)
        self.open()
        meta = self._check_meta(meta)
        changed = _meta_differences(meta, self.meta, identity)
        if changed:
            raise OracleAuditError(
                f"{self.manifest_path}: made for a different run (meta differs in {', '.join(changed)})")
        return self

    @property
    def meta(self) -> dict[str, Any]:
        return self._require()["meta"]

    @property
    def parts(self) -> list[Path]:
        """The committed parts, in commit order (none in a packed store)."""
        return [self.path / entry["file"] for entry in self._require().get("parts", [])]

    @property
    def num_rows(self) -> int:
        manifest = self._require()
        if self.packed:
            return manifest["files"]["rows"]["rows"]
        return sum(entry["rows"] for entry in manifest["parts"])

    @property
    def packed(self) -> bool:
        """Whether this is a packed store (read-only: see `pack`)."""
        return self._require().get("layout") == PACKED

    def orphans(self) -> list[Path]:
        """Files a crash left: in parts/ those no manifest entry names, and half-written manifests beside
        it (temporary files renamed into place only when whole); readers ignore them."""
        committed = {p.name for p in self.parts}
        left = sorted(self.path.glob(f".{MANIFEST_FILE}.*.tmp"))
        if not self.parts_dir.is_dir():
            return left
        return sorted(p for p in self.parts_dir.iterdir() if p.name not in committed) + left

    @contextlib.contextmanager
    def writing(self) -> Iterator["EvidenceStore"]:
        """Hold the store as its one writer for the block (an exclusive lock on `.writer.lock`, released when
        the holder ends, even by SIGKILL), after removing what a crashed writer left (`orphans`); another
        process asking meanwhile gets a one-line error instead of a second writer."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / WRITER_LOCK, "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OracleAuditError(f"{self.path}: another process is writing this evidence store "
                                       "(its lock .writer.lock is held); wait for it or use another --out") from None
            if self.exists():
                self.remove_orphans()
            yield self

    def remove_orphans(self) -> list[Path]:
        removed = self.orphans()
        for path in removed:
            path.unlink()
        return removed

    # ---- writing --------------------------------------------------------------------------------------

    def append(self, rows: Sequence[Mapping[str, Any]]) -> Path:
        """Commit rows as one new part; returns its path. Keys already committed are refused."""
        manifest = self._writable()
        if not rows:
            raise OracleAuditError(f"{self.path}: no rows to append")
        table = self._table(rows)
        keys = self._key_set()
        batch = set()
        for key in zip(*(table.column(name).to_pylist() for name in KEY_COLUMNS)):
            if key in keys or key in batch:
                raise OracleAuditError(f"{self.path}: row {key} is already recorded (problem, mutant_id, "
                                       f"input_id, output_index must be unique)")
            batch.add(key)
        path = self._commit([table], manifest["parts"])
        keys |= batch
        return path

    def merge(self, others: Iterable["EvidenceStore | Path | str"], identity: Sequence[str] | None = None) -> int:
        """Add the rows of other stores (partial stores of other workers or machines of the same run) whose
        keys this store lacks, as one part sorted by key; a key present in several stores is taken from the
        first (this store, then `others` in order). Their meta must equal this store's on the keys in
        `identity` (default: all keys). Returns the number of rows added."""
        manifest = self._writable()
        keys = set(self._key_set())
        tables = []
        for other in others:
            store = other if isinstance(other, EvidenceStore) else EvidenceStore(other)
            if store._manifest is None:
                store.open()
            if _meta_differences(store.meta, self.meta, identity):
                raise OracleAuditError(
                    f"{store.manifest_path}: cannot merge a store of a different run into {self.path}")
            table = _dedupe_first(store.read_table())
            if table.num_rows == 0:
                continue
            columns = [table.column(name).to_pylist() for name in KEY_COLUMNS]
            take = []
            for index, key in enumerate(zip(*columns)):
                if key not in keys:
                    keys.add(key)
                    take.append(index)
            if take:
                tables.append(table.take(pa.array(take, type=pa.int64())))
        if not tables:
            return 0
        merged = pa.concat_tables(tables).sort_by(_SORT)
        self._commit([merged], manifest["parts"])
        self._keys = keys
        return merged.num_rows

    def compact(self) -> Path | None:
        """Rewrite all committed rows as one part sorted by key (first committed row of a key kept): the
        same rows give a byte-identical part whatever order they arrived in (with the same pyarrow). Old
        parts are deleted after the manifest names the new one. None (and nothing written) for an empty
        store."""
        self._writable()
        table = _dedupe_first(self.read_table())
        if table.num_rows == 0:
            return None
        old = self.parts
        path = self._commit([table.sort_by(_SORT)], [])
        for part in old:
            part.unlink(missing_ok=True)
        self._keys = None
        return path

    def pack(self, dest: Path | str, codec: tuple[str, int] | None = None) -> "EvidenceStore":
        """Write this store's rows as a new packed store at `dest` (see `pack_rows`; `codec` default
        packed.CODEC) and return it open."""
        return pack_rows(dest, self.meta, self.read_table(), codec or packed.CODEC)

    # ---- reading --------------------------------------------------------------------------------------

    def done_keys(self) -> set[tuple[str, str, str]]:
        """(problem, mutant_id, input_id) of every committed observation: the work a resumed run skips."""
        return {key[:3] for key in self._key_set()}

    def read_table(self, columns: Sequence[str] | None = None, filters: Any = None) -> pa.Table:
        """All committed rows as one Arrow table, in commit order. `filters`: a pyarrow compute expression
        or DNF list such as [("status", "==", "Ok")]."""
        self._require()
        if columns is not None:
            unknown = [c for c in columns if c not in OBSERVATION_SCHEMA.names]
            if unknown:
                raise OracleAuditError(f"{self.path}: unknown columns {unknown}")
        expression = pq.filters_to_expression(filters) if isinstance(filters, list) else filters
        if self.packed:
            files = {name: self.path / entry["file"] for name, entry in self._manifest["files"].items()}
            table = packed.load(files, OBSERVATION_SCHEMA, None if expression is not None else columns)
            table = table.filter(expression) if expression is not None else table
            return table.select(list(columns)) if columns is not None else table
        tables = [self._read_part(part, columns, expression) for part in self.parts]
        if not tables:
            empty = OBSERVATION_SCHEMA.empty_table()
            return empty.select(list(columns)) if columns is not None else empty
        return pa.concat_tables(tables)

    def read(self, columns: Sequence[str] | None = None, filters: Any = None) -> pd.DataFrame:
        """All committed rows as a DataFrame (see `read_table`)."""
        return self.read_table(columns, filters).to_pandas()

    # ---- internals ------------------------------------------------------------------------------------

    def _require(self) -> dict[str, Any]:
        if self._manifest is None:
            self.open()
        return self._manifest

    def _writable(self) -> dict[str, Any]:
        manifest = self._require()
        if self.packed:
            raise OracleAuditError(f"{self.path}: a packed store is read-only (merge it into a new store to add rows)")
        return manifest

    def _check_packed(self, manifest: dict[str, Any]) -> None:
        """Refuse a packed manifest that is malformed, of another version, or whose files changed."""
        where = self.manifest_path
        if manifest.get("packed_version") != packed.PACKED_VERSION:
            raise OracleAuditError(f"{where}: packed_version {manifest.get('packed_version')!r} is not the one this "
                                   f"oracleaudit reads ({packed.PACKED_VERSION}): merge the store into a plain one with "
                                   f"the oracleaudit that packed it, then pack that")
        if manifest.get("schema_version") != STORE_SCHEMA_VERSION:
            raise OracleAuditError(f"{where}: a packed store must have schema_version {STORE_SCHEMA_VERSION}, got "
                                   f"{manifest.get('schema_version')!r}")
        files = manifest.get("files")
        if not isinstance(manifest.get("meta"), dict) or not isinstance(files, dict) or sorted(files) != sorted(packed.FILES):
            raise OracleAuditError(f"{where}: a packed store needs a `meta` object and `files` "
                                   f"{', '.join(packed.FILES)}")
        for name, entry in files.items():
            expected = f"{packed.PACKED_DIR}/{name}.parquet"
            self._check_entries([entry], lambda file, expected=expected: file == expected, "packed file")

    def _check_entries(self, entries: list[Any], valid_file: Any, what: str) -> None:
        """Refuse a manifest entry {file, rows, sha256} that is malformed, or whose file is missing or changed."""
        for entry in entries:
            if not (isinstance(entry, dict) and set(entry) == {"file", "rows", "sha256"}
                    and isinstance(entry["file"], str) and valid_file(entry["file"])):
                raise OracleAuditError(f"{self.manifest_path}: bad {what} entry {entry!r}")
            path = self.path / entry["file"]
            if not path.is_file():
                raise OracleAuditError(f"{path}: committed {what} is missing")
            if file_sha256(path) != entry["sha256"]:
                raise OracleAuditError(f"{path}: sha256 differs from {MANIFEST_FILE} (changed after it was committed)")

    def _check_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return json.loads(json.dumps(dict(meta), sort_keys=True))
        except (TypeError, ValueError) as err:
            raise OracleAuditError(f"{self.manifest_path}: meta must be JSON data ({err})") from None

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        """Replace manifest.json atomically, then adopt it."""
        write_atomic(self.manifest_path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        self._manifest = manifest

    def _key_set(self) -> set[tuple]:
        if self._keys is None:
            table = self.read_table(columns=list(KEY_COLUMNS))
            self._keys = set(zip(*(table.column(name).to_pylist() for name in KEY_COLUMNS)))
        return self._keys

    def _next_part(self) -> Path:
        used = [int(m.group(1)) for p in (self.parts_dir.iterdir() if self.parts_dir.is_dir() else [])
                if (m := re.search(r"part-(\d+)-", p.name))]
        return self.parts_dir / f"part-{max(used, default=0) + 1:06d}-{self.worker}.parquet"

    def _commit(self, tables: list[pa.Table], keep: list[dict[str, Any]]) -> Path:
        """Write one part and make the manifest list `keep` + it, atomically."""
        table = pa.concat_tables(tables).combine_chunks().replace_schema_metadata(OBSERVATION_SCHEMA.metadata)
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        path = self._next_part()
        _write_part(table, path)
        entry = {"file": f"{PARTS_DIR}/{path.name}", "rows": table.num_rows, "sha256": file_sha256(path)}
        self._write_manifest({**self._manifest, "schema_version": STORE_SCHEMA_VERSION, "parts": [*keep, entry]})
        return path

    def _table(self, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        names = set(OBSERVATION_SCHEMA.names)
        for index, row in enumerate(rows):
            unknown = sorted(set(row) - names)
            if unknown:
                raise OracleAuditError(f"{self.path}: row {index} has unknown columns {unknown}")
            for name in REQUIRED_COLUMNS:
                if row.get(name) is None:
                    raise OracleAuditError(f"{self.path}: row {index} needs {name}, got None")
            if row["status"] not in set(Status):
                raise OracleAuditError(
                    f"{self.path}: row {index} status must be one of {', '.join(Status)}, got {row['status']!r}")
        try:
            return pa.Table.from_pylist([dict(row) for row in rows], schema=OBSERVATION_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as err:
            raise OracleAuditError(f"{self.path}: rows do not fit the observation schema ({err})") from None

    def _read_part(self, path: Path, columns: Sequence[str] | None, expression: Any) -> pa.Table:
        try:
            handle = pq.ParquetFile(path)
        except (OSError, pa.ArrowInvalid) as err:
            raise OracleAuditError(f"{path}: not a Parquet file ({err})") from None
        schema = handle.schema_arrow
        version = (schema.metadata or {}).get(SCHEMA_VERSION_KEY)
        if version not in [str(v).encode() for v in READABLE_SCHEMA_VERSIONS]:
            shown = version.decode() if version is not None else None
            raise OracleAuditError(f"{path}: schema_version must be one of "
                                   f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}, got {shown!r}")
        old = version == b"1"
        expected = _V1_SCHEMA if old else OBSERVATION_SCHEMA.remove_metadata()
        if not schema.remove_metadata().equals(expected):
            raise OracleAuditError(f"{path}: columns differ from the observation schema")
        wanted = None if columns is None or expression is not None else [c for c in columns if not old or c != "inferred"]
        try:
            table = handle.read(columns=wanted)
        except (OSError, pa.ArrowException) as err:  # a corrupt page: ZSTD, dictionary index, ...
            raise OracleAuditError(f"{path}: cannot be read ({err})") from None
        if old and (wanted is None or "inferred" in columns):
            table = table.append_column(OBSERVATION_SCHEMA.field("inferred"), pa.nulls(table.num_rows, pa.bool_()))
        table = table.replace_schema_metadata(OBSERVATION_SCHEMA.metadata)
        if expression is not None:
            table = table.filter(expression)
        if columns is not None:
            table = table.select(list(columns))
        return table

def merge_stores(target: Path, sources: Sequence[Path], compact: bool = False) -> dict[str, Any]:
    """`oracleaudit merge`: add to the store at `target` the rows of each source store whose keys it lacks
    (the target's rows first, then the sources' in order), creating the target with the first readable
    source's meta when it does not exist. Sources must agree with the target on `RUN_IDENTITY`. A source
    that cannot be read or belongs to another run is reported (one line naming it) and skipped; the others
    are merged (nothing is, when the target is missing and no source can be read). With `compact`, the
    target is rewritten as one part sorted by key.
    Returns {"into", "added" (rows per source), "rows", "errors"}."""
    errors: list[str] = []
    readable: list[EvidenceStore] = []
    for source in sources:
        if Path(source).resolve() == Path(target).resolve():
            errors.append(f"{source}: is the target store itself")
            continue
        try:
            readable.append(EvidenceStore(source).open())
        except OracleAuditError as err:
            errors.append(str(err))
    into = EvidenceStore(target)
    if into.exists():
        into.open()
    elif readable:
        into.create(readable[0].meta)
    else:
        errors.append(f"{into.manifest_path}: no such file, and no readable source store to make it from")
        return {"into": str(into.path), "added": {}, "rows": 0, "errors": errors}
    added: dict[str, int] = {}
    for store in readable:
        try:
            added[str(store.path)] = into.merge([store], identity=RUN_IDENTITY)
        except OracleAuditError as err:
            errors.append(str(err))
    if compact:
        into.compact()
    return {"into": str(into.path), "added": added, "rows": into.num_rows, "errors": errors}


def pack_rows(dest: Path | str, meta: Mapping[str, Any], table: pa.Table,
              codec: tuple[str, int] = packed.CODEC) -> EvidenceStore:
    """A new packed store (packed.py) at `dest` holding `table`'s rows (the observation schema; the first row
    of a key kept, sorted by key) with `meta`: the same rows give byte-identical files (with the same
    pyarrow and `codec`: packed.FAST_CODEC for a store on its way elsewhere). `dest` must not hold a store;
    its manifest is written last, so a crash leaves no store."""
    store = EvidenceStore(dest)
    if store.exists():
        raise OracleAuditError(f"{store.manifest_path}: an evidence store already exists here")
    if not table.schema.remove_metadata().equals(OBSERVATION_SCHEMA.remove_metadata()):
        raise OracleAuditError(f"{store.path}: rows to pack must have the observation schema")
    meta = store._check_meta(meta)
    table = _dedupe_first(table.cast(OBSERVATION_SCHEMA)).sort_by(_SORT)  # cast: the same list item names
    folder = store.path / packed.PACKED_DIR
    if folder.exists():
        shutil.rmtree(folder)
    written = packed.write(packed.encode(table), folder, {SCHEMA_VERSION_KEY: str(STORE_SCHEMA_VERSION).encode()},
                           codec)
    files = {name: {"file": f"{packed.PACKED_DIR}/{path.name}", "rows": pq.ParquetFile(path).metadata.num_rows,
                    "sha256": file_sha256(path)} for name, path in written.items()}
    store._write_manifest({"schema_version": STORE_SCHEMA_VERSION, "layout": PACKED,
                           "packed_version": packed.PACKED_VERSION, "meta": meta, "files": files})
    store._keys = None
    return store
