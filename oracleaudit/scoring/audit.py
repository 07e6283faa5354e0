"""The audit: an evidence store's observations joined with its mutants and the kill witness, and each
oracle's score on it (detection of witnessed mutants, escapes, unobserved mutants, false alarms)."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from oracleaudit.errors import OracleAuditError
from oracleaudit.mutant import DIFFS_DIR, PENDING, mutants_file, mutants_sha256, read_mutants
from oracleaudit.scoring.casting import cast_failures
from oracleaudit.scoring.observations import Observations
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.scoring.verdicts import Verdicts, verdicts
from oracleaudit.scoring.witness import Margin, witness
from oracleaudit.shipped import shipped_dir
from oracleaudit.status import ORIGINAL, REFERENCE, Status
from oracleaudit.store import EvidenceStore

__all__ = ["SEED", "Audit", "escaped", "group_rates", "rate", "score"]


_LEVEL = re.compile(r"^level(\d+)/")


SEED = re.compile(r"/s=\d+")


def _level(problem: str) -> int | None:
    match = _LEVEL.match(problem)
    return int(match.group(1)) if match else None


@dataclass
class Audit:
    """An evidence store with its mutants: what every score and analysis reads."""

    obs: Observations
    mutants: pd.DataFrame          # one row per scored mutant: kernel, problem, mutant_id, family, rule, level, ...
    witness: pd.DataFrame          # per scored mutant (same order): witnessed, kind, kinds, input_id, error, ...
    mutants_dir: Path | None = None
    margin: Margin = Margin()
    excluded: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # mismatches worth a line on stderr (see `load`)
    _cache: dict[Any, "Verdicts"] = field(default_factory=dict, repr=False)
    _casts: dict[str, tuple[dict[str, str], list[str]]] = field(default_factory=dict, repr=False)
    records: dict[str, Any] = field(default_factory=dict, repr=False)  # mutant id → its Mutant record

    @classmethod
    def load(cls, evidence: Path | str, mutants: Path | str, margin: Margin = Margin()) -> "Audit":
        """Read an evidence store and the `mutants.jsonl` of the mutants it ran. `warnings` notes a mutants
        file other than the store's whose mutants the store holds but the file lacks, and a mutants folder
        without `diffs/`."""
        evidence, mutants = Path(evidence), Path(mutants)
        store = EvidenceStore(evidence)
        obs = Observations.read(store)
        records = read_mutants(mutants)
        folder = mutants if mutants.is_dir() else mutants.parent
        path = mutants_file(mutants)
        audit = cls.from_parts(obs, records, folder, margin, where=f"{evidence}", mutants_file=path)
        audit.warnings += _mismatches(store, path, folder, audit.excluded["unknown_in_store"], records)
        return audit

    @classmethod
    def from_parts(cls, obs: Observations, records: Sequence[Any], mutants_dir: Path | None = None,
                   margin: Margin = Margin(), where: str = "the evidence store",
                   mutants_file: Path | str = "mutants.jsonl") -> "Audit":
        if obs.num_rows == 0:
            raise OracleAuditError(f"{where}: the evidence store holds no observations")
        frame = obs.frame
        for pseudo in (REFERENCE, ORIGINAL):
            if not (frame["mutant_id"] == pseudo).any():
                raise OracleAuditError(f"{where}: the evidence store holds no {pseudo!r} rows (every problem needs "
                                       "its reference and original observations)")
        table = pd.DataFrame([{"problem": m.problem, "mutant_id": m.id, "family": m.family, "rule": m.rule,
                               "status": m.status, "source": m.source, "problem_file": m.problem_file}
                              for m in records])
        if table.empty:
            raise OracleAuditError(f"{mutants_file}: lists no mutants")
        excluded = {"not_pending": int((table["status"] != PENDING).sum())}
        table = table[table["status"] == PENDING]
        units = frame[["problem", "mutant_id", "kernel"]].drop_duplicates("kernel")
        units = units.astype({"problem": object, "mutant_id": object})
        joined = table.merge(units, on=["problem", "mutant_id"], how="left")
        excluded["not_run"] = int(joined["kernel"].isna().sum())
        joined = joined[joined["kernel"].notna()].astype({"kernel": np.int64})
        # A clone that did not compile with torch's flags in the run stage is no valid mutant.
        unbuilt = set(frame.loc[frame["status"] == Status.BUILD_ERROR, "kernel"])
        excluded["build_error"] = int(joined["kernel"].isin(unbuilt).sum())
        joined = joined[~joined["kernel"].isin(unbuilt)]
        stored = set(units.loc[~units["mutant_id"].isin([ORIGINAL, REFERENCE]), "mutant_id"])
        excluded["unknown_in_store"] = len(stored - set(joined["mutant_id"]))
        if joined.empty:
            raise OracleAuditError(f"{where}: none of the {len(table)} compiled mutants of {mutants_file} has "
                                   "observations in the evidence store (is it the store of these mutants?)")
        joined["level"] = [_level(p) for p in joined["problem"]]
        joined = joined.sort_values("kernel").reset_index(drop=True)
        keep = np.zeros(frame["kernel"].max() + 1, dtype=bool)
        keep[joined["kernel"].to_numpy()] = True
        scored = keep[frame["kernel"].to_numpy()] | frame["mutant_id"].isin([ORIGINAL, REFERENCE]).to_numpy()
        wit = witness(frame if scored.all() else frame[scored], margin)
        wit = joined[["problem", "mutant_id"]].merge(
            wit.astype({"problem": object, "mutant_id": object}), on=["problem", "mutant_id"], how="left")
        wit["witnessed"] = wit["witnessed"].fillna(False).astype(bool)
        for name in ("kind", "kinds", "input_id"):
            column = wit[name].astype(object)
            wit[name] = column.where(column.notna(), None)
        return cls(obs, joined, wit, mutants_dir, margin, excluded,
                   records={m.id: m for m in records if hasattr(m, "diff")})

    # ---- verdicts ---------------------------------------------------------------------------------------

    def verdicts(self, oracle: Oracle) -> "Verdicts":
        key = _oracle_key(oracle)
        if key not in self._cache:
            broken = frozenset(self.cast_failures(oracle)[0])
            self._cache[key] = verdicts(self.obs, self.mutants, oracle, broken)
        return self._cache[key]

    def cast_failures(self, oracle: Oracle) -> tuple[dict[str, str], list[str]]:
        """The problems whose reference raises with the inputs cast as the oracle casts them (problem → the
        error), and those whose file could not be probed; nothing when the oracle casts nothing."""
        dtype = oracle.reference.cast_inputs
        if dtype is None:
            return {}, []
        if dtype not in self._casts:
            files = self.mutants.drop_duplicates("problem").set_index("problem")["problem_file"].to_dict()
            self._casts[dtype] = cast_failures(files, dtype)
        return self._casts[dtype]

    def score(self, oracle: Oracle, by: Sequence[str] = (), top: int = 10) -> dict[str, Any]:
        return _score(self, oracle, by, top)

    def diff(self, mutant_id: str) -> str | None:
        """The mutant's diff: its file in `diffs/`, else made from its source file where that is at hand and
        unchanged (the bundle ships no diffs/: they are the sources' and the records' to make)."""
        if self.mutants_dir is not None:
            path = self.mutants_dir / DIFFS_DIR / f"{mutant_id}.diff"
            if path.is_file():
                return path.read_text(encoding="utf-8", errors="replace")
        record = self.records.get(mutant_id)
        text = source_text(record) if record is not None else None
        return record.diff(text) if text is not None else None


def source_text(mutant: Any) -> str | None:
    """The text of a mutant's source file as it was mutated (its sha256 checked), found where `mutate` ran
    (the path as recorded, from the working folder) or among the shipped datasets; None if neither."""
    recorded = Path(mutant.source)
    candidates = [recorded]
    if not recorded.is_absolute() and recorded.parts and recorded.parts[0] == "datasets":
        try:
            candidates.append(shipped_dir("datasets").joinpath(*recorded.parts[1:]))
        except FileNotFoundError:
            pass
    for path in candidates:
        if path.is_file():
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() == mutant.source_sha256:
                return data.decode("utf-8")
    return None


def _mismatches(store: EvidenceStore, mutants_file: Path, folder: Path, unknown: int,
                records: Sequence[Any] = ()) -> list[str]:
    """Warnings for a mutants folder that does not match the store: a mutants file that is not the one the
    store was made with (`mutants_sha256`) and lacks mutants the store observed (a subset, e.g. the bundle's,
    or mutate run again, is fine), and a folder without `diffs/` whose sources are not at hand either
    (escapes would print without their diffs)."""
    warnings = []
    recorded = store.meta.get("mutants_sha256")
    if unknown and recorded is not None and recorded != mutants_sha256(mutants_file):
        warnings.append(f"{mutants_file}: not the mutants file {store.path} was made with (sha256 "
                        f"{mutants_sha256(mutants_file)[:12]}, the store records {recorded[:12]}); {unknown} mutants "
                        "observed in the store are missing from it and are not scored")
    if not (folder / DIFFS_DIR).is_dir() and not (records and source_text(records[0]) is not None):
        warnings.append(f"{folder}: no {DIFFS_DIR}/ folder; escaped mutants are shown and written without their "
                        "diffs")
    return warnings


def _oracle_key(oracle: Oracle) -> Any:
    return replace(oracle, name="", description="", source="")


def rate(killed: int, witnessed: int) -> float | None:
    return round(killed / witnessed, 6) if witnessed else None


def group_rates(frame: pd.DataFrame, by: str) -> dict[str, dict[str, Any]]:
    """Counts per group. Detection is over the witnessed mutants the oracle observed on all its inputs or
    killed: a mutant it could not observe on some input is neither caught nor escaped."""
    out = {}
    for key, part in frame.groupby(by, sort=True, dropna=False):
        w = int(part["witnessed"].sum())
        k = int((part["witnessed"] & part["killed"]).sum())
        u = int((part["witnessed"] & ~part["killed"] & ~part["complete"]).sum())
        out[str(key)] = {"mutants": len(part), "witnessed": w, "killed": k, "unobserved": u,
                         "detection": rate(k, w - u)}
    return out


def _score(audit: Audit, oracle: Oracle, by: Sequence[str], top: int) -> dict[str, Any]:
    v = audit.verdicts(oracle)
    frame = audit.mutants[["mutant_id", "problem", "family", "rule", "level"]].copy()
    frame["witnessed"] = audit.witness["witnessed"].to_numpy()
    frame["killed"] = v.killed
    frame["complete"] = v.complete
    frame["level"] = frame["level"].map(lambda x: "unknown" if x is None or pd.isna(x) else f"level{int(x)}")
    w = int(frame["witnessed"].sum())
    k = int((frame["witnessed"] & frame["killed"]).sum())
    unobserved = frame["witnessed"] & ~frame["killed"] & ~frame["complete"]
    u = int(unobserved.sum())
    clean = set(v.original_rejected.index[~v.original_rejected.to_numpy()])
    in_clean = frame["problem"].isin(clean)
    cw = int((frame["witnessed"] & in_clean & ~unobserved).sum())
    ck = int((frame["witnessed"] & frame["killed"] & in_clean).sum())
    escapes = escaped(audit, v)
    result: dict[str, Any] = {
        "oracle": oracle.name,
        "description": oracle.description,
        "reference": f"{oracle.reference.precision} ({oracle.reference.math_mode})",
        "mutants": len(frame),
        "witnessed": w,
        "killed": k,
        "detection": rate(k, w - u),
        "detection_lower_bound": rate(k, w),
        "escaped": w - k - u,
        "unobserved": u,
        "unwitnessed": len(frame) - w,
        "unwitnessed_killed": int((~frame["witnessed"] & frame["killed"]).sum()),
        "false_alarms": int(v.original_rejected.sum()),
        "false_alarm_problems": list(v.original_rejected.index[v.original_rejected.to_numpy()]),
        "false_alarm_trials": v.original_trials_failed,
        "original_trials": v.original_trials,
        "problems": len(v.original_rejected),
        "clean_detection": rate(ck, cw),
        "not_drawn": int((v.drawn == 0).sum()),
        "inexact_verdicts": v.inexact,
        "reference_mode_mismatch_rows": v.mode_mismatch_rows,
        "reference_fails_cast": dict(audit.cast_failures(oracle)[0]),
        "by_family": {key: {x: val[x] for x in ("witnessed", "killed", "unobserved", "detection")}
                      for key, val in group_rates(frame, "family").items()},
        "by_level": group_rates(frame, "level"),
        "escaped_top": [{**e, "diff": audit.diff(e["mutant_id"])} for e in escapes[:top]],
        "excluded_mutants": dict(audit.excluded),
        "witness_margin": audit.margin.as_json(),
    }
    for name in by:
        if name not in ("family", "rule", "problem", "level"):
            raise OracleAuditError(f"--by must be family, rule, problem or level, got {name!r}")
        result[f"by_{name}"] = group_rates(frame, name)
        if name == "family":
            result["by_family"] = {key: {x: val[x] for x in ("witnessed", "killed", "unobserved", "detection")}
                                   for key, val in result["by_family"].items()}
    unprobed = audit.cast_failures(oracle)[1]
    if unprobed:
        result["warning"] = (f"the inputs of {len(unprobed)} problems are cast to {oracle.reference.cast_inputs} by "
                             "this protocol, but their files could not be read here to check that the reference "
                             f"still runs (e.g. {unprobed[0]}); their verdicts ignore the cast")
    if v.mode_mismatch_rows:
        mismatch = (f"{v.mode_mismatch_rows} observations come from an fp32 reference whose TF32 flags differ from "
                    f"this protocol's math mode ({oracle.reference.math_mode}): their verdicts are those of the "
                    "evidence's reference")
        result["warning"] = f"{result['warning']}; {mismatch}" if "warning" in result else mismatch
    return result


def escaped(audit: Audit, v: Verdicts) -> list[dict[str, Any]]:
    """Witnessed mutants the oracle observed on all its inputs and did not kill, the most wrong first (by witness error, status witnesses
    first)."""
    w = audit.witness
    mask = w["witnessed"].to_numpy() & ~v.killed & v.complete
    if not mask.any():
        return []
    frame = audit.mutants.loc[mask, ["mutant_id", "problem", "family", "rule"]].copy()
    frame["witness_kind"] = w.loc[mask, "kind"].to_numpy()
    frame["witness_input"] = w.loc[mask, "input_id"].to_numpy()
    error = w.loc[mask, "error"].to_numpy(dtype=np.float64, na_value=np.nan)
    frame["witness_error"] = error
    frame["_sort"] = np.where(np.isnan(error), np.inf, error)
    frame = frame.sort_values(["_sort", "mutant_id"], ascending=[False, True]).drop(columns="_sort")
    records = frame.to_dict("records")
    for record in records:
        e = record["witness_error"]
        record["witness_error"] = None if e is None or (isinstance(e, float) and math.isnan(e)) else float(e)
    return records


def score(audit: Audit, oracles: Sequence[Oracle], by: Sequence[str] = (), top: int = 10) -> list[dict[str, Any]]:
    """The score of each oracle (see `Audit.score`)."""
    return [audit.score(oracle, by, top) for oracle in oracles]
