"""The output folder of `oracleaudit score --out DIR`.

Output folder (`write_outputs`, the `--out DIR` of `oracleaudit score`)
    kill_matrix.parquet   one row per scored mutant: mutant_id, problem, level, family, rule, witnessed,
                          witness_kind, witness_input, witness_error, then one boolean column per oracle
                          (killed); schema_version in the Parquet metadata
    scores.json           the per-oracle results (the `--json` output)
    escaped/<oracle>.jsonl  every witnessed mutant the oracle did not kill, with its witness and diff (one
                          file per scored oracle: those of oracles an earlier call scored are removed)
    unwitnessed.jsonl     every scored mutant no input witnesses (possibly equivalent, possibly just hard),
                          with the oracles that reject it anyway
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oracleaudit.errors import OracleAuditError
from oracleaudit.files import write_atomic, write_with
from oracleaudit.scoring.audit import Audit, escaped
from oracleaudit.scoring.oracle import Oracle

__all__ = ["ESCAPED_DIR", "KILL_MATRIX_FILE", "KILL_MATRIX_SCHEMA_VERSION", "SCORES_FILE", "UNWITNESSED_FILE",
           "kill_matrix", "read_kill_matrix", "write_outputs"]

KILL_MATRIX_FILE = "kill_matrix.parquet"
UNWITNESSED_FILE = "unwitnessed.jsonl"
SCORES_FILE = "scores.json"
ESCAPED_DIR = "escaped"
KILL_MATRIX_SCHEMA_VERSION = 1
SCHEMA_VERSION_KEY = b"oracleaudit.schema_version"


def _write_parquet(table: pa.Table, path: Path) -> None:
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def kill_matrix(audit: Audit, oracles: Sequence[Oracle]) -> pa.Table:
    """The kill matrix: one row per scored mutant, one boolean column per oracle."""
    w = audit.witness
    error = w["error"].to_numpy(dtype=np.float64, na_value=np.nan)
    columns: dict[str, Any] = {
        "mutant_id": pa.array(audit.mutants["mutant_id"].astype(str).tolist(), pa.string()),
        "problem": pa.array(audit.mutants["problem"].astype(str).tolist(), pa.string()),
        "level": pa.array([None if pd.isna(x) else int(x) for x in audit.mutants["level"]], pa.int32()),
        "family": pa.array(audit.mutants["family"].astype(str).tolist(), pa.string()),
        "rule": pa.array(audit.mutants["rule"].astype(str).tolist(), pa.string()),
        "witnessed": pa.array(w["witnessed"].to_numpy(dtype=bool)),
        "witness_kind": pa.array([k if isinstance(k, str) else None for k in w["kind"]], pa.string()),
        "witness_input": pa.array([k if isinstance(k, str) else None for k in w["input_id"]], pa.string()),
        "witness_error": pa.array(error, pa.float64(), mask=np.isnan(error)),
    }
    for oracle in oracles:
        if oracle.name in columns:
            raise OracleAuditError(f"oracle name {oracle.name!r} repeats or clashes with a kill-matrix column")
        columns[oracle.name] = pa.array(audit.verdicts(oracle).killed.astype(bool))
    table = pa.table(columns)
    return table.replace_schema_metadata({SCHEMA_VERSION_KEY: str(KILL_MATRIX_SCHEMA_VERSION).encode()})


def write_outputs(out: Path, audit: Audit, oracles: Sequence[Oracle], scores: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Write the output folder (see the module docstring); returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / KILL_MATRIX_FILE, out / SCORES_FILE]
    _write_parquet(kill_matrix(audit, oracles), written[0])
    write_atomic(written[1], json.dumps(list(scores), indent=2, sort_keys=True) + "\n")
    unwitnessed = []
    mask = ~audit.witness["witnessed"].to_numpy()
    killers = {o.name: audit.verdicts(o).killed for o in oracles}
    for i in np.flatnonzero(mask):
        m = audit.mutants.iloc[i]
        unwitnessed.append(json.dumps({"mutant_id": m["mutant_id"], "problem": m["problem"], "family": m["family"],
                                       "rule": m["rule"], "rejected_by": [n for n, k in killers.items() if k[i]]},
                                      sort_keys=True))
    written.append(out / UNWITNESSED_FILE)
    write_atomic(written[-1], "".join(line + "\n" for line in unwitnessed))
    for oracle in oracles:
        lines = []
        for record in escaped(audit, audit.verdicts(oracle)):
            lines.append(json.dumps({**record, "diff": audit.diff(record["mutant_id"])}, sort_keys=True))
        path = out / ESCAPED_DIR / f"{oracle.name}.jsonl"
        write_atomic(path, "".join(line + "\n" for line in lines))
        written.append(path)
    _remove_stale_escapes(out / ESCAPED_DIR, written)
    return written


def _remove_stale_escapes(folder: Path, written: Sequence[Path]) -> None:
    """Delete the `escaped/<oracle>.jsonl` of oracles this call did not score: left by an earlier `score
    --out` with other oracles, they would sit beside a kill matrix that lacks them."""
    for stale in sorted(set(folder.glob("*.jsonl")) - set(written)):
        stale.unlink()


def read_kill_matrix(path: Path) -> pd.DataFrame:
    """A kill matrix written by `write_outputs`, its schema version checked."""
    table = pq.read_table(path)
    version = (table.schema.metadata or {}).get(SCHEMA_VERSION_KEY)
    if version != str(KILL_MATRIX_SCHEMA_VERSION).encode():
        raise OracleAuditError(f"{path}: schema_version must be {KILL_MATRIX_SCHEMA_VERSION}, got {version!r}")
    return table.to_pandas()
