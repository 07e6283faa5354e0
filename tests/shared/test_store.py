"""The evidence store: append-only Parquet parts under an atomically replaced manifest."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.evidence import ErrorEvidence
from oracleaudit.execution.measure import measure
from oracleaudit.status import ORIGINAL, REFERENCE, Status
from oracleaudit.store import (
    KEY_COLUMNS,
    MANIFEST_FILE,
    OBSERVATION_SCHEMA,
    PARTS_DIR,
    RUN_IDENTITY,
    SCHEMA_VERSION_KEY,
    EvidenceStore,
)

OK, RUNTIME_ERROR = Status.OK, Status.RUNTIME_ERROR

META = {"pool": "default", "pool_sha256": "ab" * 32, "mutants_sha256": "cd" * 32}


def observation(problem: str, mutant: str, input_id: str, output_index: int = 0, seed: int = 0) -> dict:
    """One Ok row with real evidence against both references (deterministic in its arguments)."""
    generator = torch.Generator().manual_seed(zlib.crc32(f"{problem}/{mutant}/{input_id}/{output_index}".encode()))
    ref64 = torch.randn(64, generator=generator, dtype=torch.float64)
    ref32 = ref64.float()
    out = ref32 + 1e-4 * torch.randn(64, generator=generator)
    return {
        "problem": problem, "mutant_id": mutant, "input_id": input_id, "input_seed": seed,
        "shape_variant": "official", "distribution": "normal", "output_index": output_index, "status": OK,
        "time_ms": 0.02, "repeat_bitwise_equal": True,
        **measure(out, ref32).to_row("fp32_"),
        **measure(out, ref64, expected_dtype=torch.float32).to_row("fp64_"),
        "ref_matmul_tf32": False, "ref_cudnn_tf32": True, "ref_matmul_precision": "highest", "ref_device": "cpu",
    }


def reference_row(problem: str, input_id: str) -> dict:
    """The fp32 reference's own evidence against the fp64 reference (fp32_* columns left out: null)."""
    ref64 = torch.randn(64, generator=torch.Generator().manual_seed(zlib.crc32(problem.encode())), dtype=torch.float64)
    row = observation(problem, REFERENCE, input_id)
    row = {k: v for k, v in row.items() if not k.startswith(("fp32_", "fp64_"))}
    return {**row, **measure(ref64.float(), ref64, expected_dtype=torch.float32).to_row("fp64_")}


def crashed(problem: str, mutant: str, input_id: str) -> dict:
    return {"problem": problem, "mutant_id": mutant, "input_id": input_id, "input_seed": 7,
            "shape_variant": "odd", "distribution": "normal", "output_index": 0, "status": RUNTIME_ERROR,
            "error_class": "RuntimeError", "error_message": "CUDA error: an illegal memory access was encountered"}


def all_rows() -> list[dict]:
    rows = []
    for problem in ("1_Softmax", "2_ReLU"):
        for mutant in (ORIGINAL, "0123456789abcdef", "fedcba9876543210"):
            for input_id in ("normal/s=0/official", "normal/s=1/odd"):
                rows.append(observation(problem, mutant, input_id))
        rows.append(crashed(problem, "badbadbadbadbad0", "normal/s=0/official"))
        rows.append(reference_row(problem, "normal/s=0/official"))
    return rows


def test_rows_round_trip_through_real_parquet_files(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    rows = all_rows()
    first = store.append(rows[:5])
    second = store.append(rows[5:])
    assert first.name == "part-000001-0.parquet" and second.name == "part-000002-0.parquet"
    assert pq.read_schema(first).metadata[SCHEMA_VERSION_KEY] == b"2"
    assert pq.ParquetFile(first).metadata.row_group(0).column(0).compression == "ZSTD"

    reopened = EvidenceStore(tmp_path / "evidence").open()
    assert reopened.meta == META and reopened.num_rows == len(rows)
    frame = reopened.read()
    assert list(frame.columns) == OBSERVATION_SCHEMA.names and len(frame) == len(rows)
    for record, row in zip(frame.to_dict("records"), rows):
        for prefix in ("fp32_", "fp64_"):
            assert ErrorEvidence.from_row(record, prefix) == ErrorEvidence.from_row(row, prefix)
        assert record["status"] == row["status"] and record["mutant_id"] == row["mutant_id"]
    crash = frame[frame.status == RUNTIME_ERROR].iloc[0]
    assert crash.error_message.startswith("CUDA error") and ErrorEvidence.from_row(crash, "fp32_") is None
    reference = frame[frame.mutant_id == REFERENCE].iloc[0]
    assert ErrorEvidence.from_row(reference, "fp32_") is None
    assert ErrorEvidence.from_row(reference, "fp64_").allclose(1e-4, 1e-4)


def test_read_selects_columns_and_filters_rows(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    store.append(all_rows())
    frame = store.read(columns=["mutant_id", "status"], filters=[("problem", "==", "2_ReLU"), ("status", "==", OK)])
    assert list(frame.columns) == ["mutant_id", "status"]
    assert len(frame) == 7 and set(frame.status) == {OK}
    assert store.read(columns=["problem"], filters=[("problem", "==", "9_None")]).empty
    with pytest.raises(OracleAuditError, match="unknown columns"):
        store.read(columns=["no_such_column"])


def test_an_empty_store_reads_as_an_empty_frame_with_every_column(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    frame = store.read()
    assert frame.empty and list(frame.columns) == OBSERVATION_SCHEMA.names
    assert store.done_keys() == set() and store.compact() is None


def test_an_orphan_part_left_by_a_crash_is_ignored_and_can_be_removed(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    rows = all_rows()
    store.append(rows[:4])
    manifest_before = (tmp_path / "evidence" / MANIFEST_FILE).read_bytes()
    # the crash: a part renamed into place, but the manifest never updated; and a half-written temp file
    store.append(rows[4:8])
    orphan = store.parts[-1]
    (tmp_path / "evidence" / MANIFEST_FILE).write_bytes(manifest_before)
    (orphan.parent / f".{orphan.name}.x1y2.tmp").write_bytes(b"PAR1 half a part")

    resumed = EvidenceStore(tmp_path / "evidence").open()
    assert resumed.num_rows == 4 and len(resumed.read()) == 4
    assert {p.name for p in resumed.orphans()} == {orphan.name, f".{orphan.name}.x1y2.tmp"}
    # the resumed run appends the lost rows again: nothing lost, nothing duplicated, no name reused
    again = resumed.append(rows[4:8])
    assert again.name == "part-000003-0.parquet"
    assert len(resumed.read()) == 8
    assert sorted(p.name for p in resumed.remove_orphans()) == sorted([f".{orphan.name}.x1y2.tmp", orphan.name])
    assert resumed.orphans() == [] and len(EvidenceStore(tmp_path / "evidence").read()) == 8


def test_the_one_writer_removes_what_a_killed_writer_left_and_keeps_a_second_writer_out(tmp_path: Path):
    import multiprocessing
    import os
    import signal

    store = EvidenceStore(tmp_path / "evidence").create(META)
    rows = all_rows()
    store.append(rows[:4])
    (store.parts_dir / ".part-000002-0.parquet.a1.tmp").write_bytes(b"PAR1 half a part")
    (tmp_path / "evidence" / f".{MANIFEST_FILE}.b2.tmp").write_bytes(b'{"schema_')
    assert len(EvidenceStore(tmp_path / "evidence").orphans()) == 2

    context = multiprocessing.get_context("fork")
    holding, release = context.Event(), context.Event()

    def hold() -> None:
        with EvidenceStore(tmp_path / "evidence").writing():
            holding.set()
            release.wait(30)

    holder = context.Process(target=hold)
    holder.start()
    assert holding.wait(30)
    assert EvidenceStore(tmp_path / "evidence").orphans() == []  # removed by the writer that took the lock
    with pytest.raises(OracleAuditError, match="another process is writing this evidence store"):
        with EvidenceStore(tmp_path / "evidence").writing():
            pass
    os.kill(holder.pid, signal.SIGKILL)  # a killed writer's lock goes with it
    holder.join(30)
    with EvidenceStore(tmp_path / "evidence").writing() as resumed:
        assert resumed.num_rows == 4


def test_done_keys_name_what_a_resumed_run_skips(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    rows = [observation("1_Softmax", "aaaa", "normal/s=0/official", output_index=i) for i in range(2)]
    rows.append(observation("2_ReLU", ORIGINAL, "normal/s=0/official"))
    store.append(rows)
    assert store.done_keys() == {("1_Softmax", "aaaa", "normal/s=0/official"),
                                 ("2_ReLU", ORIGINAL, "normal/s=0/official")}
    resumed = EvidenceStore(tmp_path / "evidence").open_or_create(META)
    assert resumed.done_keys() == store.done_keys()
    # the same original kernel on the same pool input of another problem is different work
    assert ("1_Softmax", ORIGINAL, "normal/s=0/official") not in resumed.done_keys()


def test_appending_a_recorded_key_again_is_refused(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    row = observation("1_Softmax", ORIGINAL, "normal/s=0/official")
    store.append([row])
    with pytest.raises(OracleAuditError, match="already recorded"):
        EvidenceStore(tmp_path / "evidence").append([row])
    with pytest.raises(OracleAuditError, match="already recorded"):
        store.append([observation("2_ReLU", ORIGINAL, "x"), observation("2_ReLU", ORIGINAL, "x")])
    assert store.num_rows == 1


def test_resuming_with_a_different_run_identity_is_refused(tmp_path: Path):
    EvidenceStore(tmp_path / "evidence").create(META)
    with pytest.raises(OracleAuditError, match=r"manifest.json: made for a different run \(meta differs in pool\)"):
        EvidenceStore(tmp_path / "evidence").open_or_create({**META, "pool": "other"})
    with pytest.raises(OracleAuditError, match="already exists"):
        EvidenceStore(tmp_path / "evidence").create(META)


def test_keys_outside_the_identity_may_differ_when_resuming_and_keep_the_creating_runs_value(tmp_path: Path):
    EvidenceStore(tmp_path / "evidence").create({"pool": "default", "mutants_sha256": "a"})
    resumed = EvidenceStore(tmp_path / "evidence").open_or_create({"pool": "default", "mutants_sha256": "b"},
                                                                  identity=("pool",))
    assert resumed.meta == {"pool": "default", "mutants_sha256": "a"}
    with pytest.raises(OracleAuditError, match=r"meta differs in pool\)"):
        EvidenceStore(tmp_path / "evidence").open_or_create({"pool": "tiny", "mutants_sha256": "a"},
                                                            identity=("pool",))


def test_merge_unions_partial_stores_without_duplicates_in_key_order(tmp_path: Path):
    rows = all_rows()
    stores = []
    for worker, chunk in enumerate((rows[:9], rows[6:14], rows[12:])):  # overlapping partial stores
        store = EvidenceStore(tmp_path / f"w{worker}", worker=f"gpu{worker}").create(META)
        store.append(chunk)
        stores.append(store)
    merged = EvidenceStore(tmp_path / "all").create(META)
    added = merged.merge(stores)
    assert added == len(rows)
    frame = merged.read()
    keys = list(zip(*(frame[name] for name in KEY_COLUMNS)))
    assert len(set(keys)) == len(keys) == len(rows)
    assert keys == sorted(keys)
    assert merged.merge([tmp_path / "w1"]) == 0  # idempotent
    assert merged.parts[0].name == "part-000001-0.parquet" and len(merged.parts) == 1

    # merging into a store that has some rows adds only the missing ones
    partial = EvidenceStore(tmp_path / "partial").create(META)
    partial.append(rows[:3])
    assert partial.merge(stores) == len(rows) - 3 and partial.num_rows == len(rows)


def test_merging_a_store_of_another_run_is_refused(tmp_path: Path):
    mine = EvidenceStore(tmp_path / "mine").create(META)
    theirs = EvidenceStore(tmp_path / "theirs").create({**META, "mutants_sha256": "ef" * 32})
    theirs.append(all_rows()[:2])
    with pytest.raises(OracleAuditError, match="theirs/manifest.json: cannot merge a store of a different run"):
        mine.merge([theirs])


def test_merge_with_the_run_identity_accepts_stores_made_from_another_mutants_file(tmp_path: Path):
    """Machines given different shares of the mutants record different mutants_sha256 but the same pool."""
    mine = EvidenceStore(tmp_path / "mine").create(META)
    theirs = EvidenceStore(tmp_path / "theirs").create({**META, "mutants_sha256": "ef" * 32})
    theirs.append(all_rows()[:2])
    assert mine.merge([theirs], identity=RUN_IDENTITY) == 2
    assert mine.meta == META  # the target keeps the meta of the run that created it
    other_pool = EvidenceStore(tmp_path / "other_pool").create({**META, "pool": "extended"})
    other_pool.append(all_rows()[2:3])
    with pytest.raises(OracleAuditError, match="other_pool/manifest.json: cannot merge a store of a different run"):
        mine.merge([other_pool], identity=RUN_IDENTITY)


def test_the_merge_command_unions_stores_reports_bad_ones_and_merges_the_rest(tmp_path: Path, capsys):
    from oracleaudit.cli import main

    rows = all_rows()
    for name, chunk in (("a", rows[:8]), ("b", rows[5:])):
        EvidenceStore(tmp_path / name).create(META).append(chunk)
    (tmp_path / "not_a_store").mkdir()
    EvidenceStore(tmp_path / "other_pool").create({**META, "pool": "extended"}).append(rows[:1])
    code = main(["merge", str(tmp_path / "a"), str(tmp_path / "not_a_store"), str(tmp_path / "other_pool"),
                 str(tmp_path / "b"), "--into", str(tmp_path / "all"), "--compact", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.splitlines() == [
        f"oracleaudit: error: {tmp_path / 'not_a_store' / MANIFEST_FILE}: no such file (not an evidence store)",
        f"oracleaudit: error: {tmp_path / 'other_pool' / MANIFEST_FILE}: cannot merge a store of a different run "
        f"into {tmp_path / 'all'}",
    ]
    summary = json.loads(out)
    assert summary["added"] == {str(tmp_path / "a"): 8, str(tmp_path / "b"): len(rows) - 8}
    merged = EvidenceStore(tmp_path / "all").open()
    assert merged.meta == META and merged.num_rows == len(rows) and len(merged.parts) == 1
    frame = merged.read()
    assert sorted(zip(*(frame[k] for k in KEY_COLUMNS))) == sorted(tuple(r[k] for k in KEY_COLUMNS) for r in rows)
    # running it again adds nothing; a target that is one of the sources is refused for that source only
    assert main(["merge", str(tmp_path / "a"), "--into", str(tmp_path / "all")]) == 0
    assert "0 rows added" in capsys.readouterr().out
    assert main(["merge", str(tmp_path / "all"), "--into", str(tmp_path / "all")]) == 2  # nothing done
    assert "is the target store itself" in capsys.readouterr().err


def test_the_merge_command_without_any_readable_store_says_why_in_one_line_per_file(tmp_path: Path, capsys):
    from oracleaudit.cli import main

    assert main(["merge", str(tmp_path / "missing"), "--into", str(tmp_path / "all")]) == 2  # nothing done
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].endswith("missing/manifest.json: no such file (not an evidence store)")
    assert err[1].endswith("all/manifest.json: no such file, and no readable source store to make it from")
    assert not (tmp_path / "all").exists()


def test_compact_gives_a_byte_identical_part_whatever_the_arrival_order(tmp_path: Path):
    rows = all_rows()
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    first = EvidenceStore(tmp_path / "a").create(META)
    first.append(rows)
    second = EvidenceStore(tmp_path / "b", worker="w2").create(META)
    for start in range(0, len(shuffled), 4):
        second.append(shuffled[start:start + 4])
    assert len(second.parts) > 1
    part_a, part_b = first.compact(), second.compact()
    assert part_a.read_bytes() == part_b.read_bytes()
    assert second.parts == [part_b] and sorted(p.name for p in (tmp_path / "b" / PARTS_DIR).iterdir()) == [part_b.name]
    frame = EvidenceStore(tmp_path / "b").read()
    keys = list(zip(*(frame[name] for name in KEY_COLUMNS)))
    assert keys == sorted(keys) and len(keys) == len(rows)


def test_a_part_with_another_schema_version_is_refused_naming_the_file(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    part = store.append(all_rows()[:3])
    table = pq.read_table(part).replace_schema_metadata({SCHEMA_VERSION_KEY: b"99"})
    pq.write_table(table, part, compression="zstd")
    manifest = json.loads(store.manifest_path.read_text())
    manifest["parts"][0]["sha256"] = hashlib.sha256(part.read_bytes()).hexdigest()
    store.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(OracleAuditError, match=rf"{part}: schema_version must be one of 1, 2, got '99'"):
        EvidenceStore(tmp_path / "evidence").read()


def test_a_manifest_with_another_schema_version_is_refused_naming_the_file(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    manifest = json.loads(store.manifest_path.read_text())
    manifest["schema_version"] = 3
    store.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(OracleAuditError, match=rf"{store.manifest_path}: schema_version must be one of 1, 2, got 3"):
        EvidenceStore(tmp_path / "evidence").open()


def test_a_version_1_store_reads_with_inferred_null_and_takes_version_2_parts(tmp_path: Path):
    """Version 1 had no `inferred` column (the bundled evidence was made then)."""
    store = EvidenceStore(tmp_path / "evidence").create(META)
    part = store.append(all_rows()[:3])
    table = pq.read_table(part).drop_columns(["inferred"]).replace_schema_metadata({SCHEMA_VERSION_KEY: b"1"})
    pq.write_table(table, part, compression="zstd")
    manifest = json.loads(store.manifest_path.read_text())
    manifest["schema_version"] = 1
    manifest["parts"][0]["sha256"] = hashlib.sha256(part.read_bytes()).hexdigest()
    store.manifest_path.write_text(json.dumps(manifest))

    old = EvidenceStore(tmp_path / "evidence").open()
    rows = old.read()
    assert len(rows) == 3 and rows["inferred"].isna().all()
    assert old.read(columns=["inferred", "mutant_id"]).columns.tolist() == ["inferred", "mutant_id"]
    old.append([{**all_rows()[3], "inferred": True}])
    assert json.loads(store.manifest_path.read_text())["schema_version"] == 2
    again = EvidenceStore(tmp_path / "evidence").read()
    assert again["inferred"].tolist()[:3] == [None] * 3 and again["inferred"].tolist()[3] is True


def test_a_part_changed_after_commit_is_refused(tmp_path: Path):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    part = store.append(all_rows()[:3])
    shutil.copy(store.append(all_rows()[3:5]), part)
    with pytest.raises(OracleAuditError, match=rf"{part}: sha256 differs from manifest.json"):
        EvidenceStore(tmp_path / "evidence").open()


BAD_ROWS = [
    ({"status": "Crashed"}, "status must be one of Ok, RuntimeError, Timeout, ShapeMismatch, DtypeMismatch, OOM"),
    ({"problem": None}, "needs problem, got None"),
    ({"colour": "red"}, r"unknown columns \['colour'\]"),
    ({"input_seed": "seven"}, "rows do not fit the observation schema"),
]


@pytest.mark.parametrize("change, message", BAD_ROWS)
def test_bad_rows_are_refused_naming_the_cause(tmp_path: Path, change: dict, message: str):
    store = EvidenceStore(tmp_path / "evidence").create(META)
    with pytest.raises(OracleAuditError, match=message):
        store.append([{**crashed("1_Softmax", ORIGINAL, "normal/s=0/official"), **change}])
    assert store.num_rows == 0 and store.orphans() == []


def test_an_empty_append_and_a_missing_store_are_errors(tmp_path: Path):
    with pytest.raises(OracleAuditError, match="no such file"):
        EvidenceStore(tmp_path / "nowhere").open()
    store = EvidenceStore(tmp_path / "evidence").create(META)
    with pytest.raises(OracleAuditError, match="no rows to append"):
        store.append([])


def test_the_schema_holds_both_evidence_prefixes_and_the_reference_math_mode():
    names = OBSERVATION_SCHEMA.names
    assert names[:8] == ["problem", "mutant_id", "input_id", "input_seed", "shape_variant", "distribution",
                         "output_index", "status"]
    assert {"fp32_hull_r", "fp64_hull_d", "fp32_within_1e-04", "fp64_cosine", "ref_cudnn_tf32"} <= set(names)
    assert OBSERVATION_SCHEMA.field("output_index").type == pa.int32()
    assert OBSERVATION_SCHEMA.metadata[SCHEMA_VERSION_KEY] == b"2"
    assert OBSERVATION_SCHEMA.field("inferred").type == pa.bool_()
    assert np.all([OBSERVATION_SCHEMA.field(n).nullable for n in names[8:]])
