"""The packed layout of the evidence store (packed.py): real rows of the bundled evidence packed and read
back bit for bit with their dtypes, the catalog oracles' verdicts unchanged, the same rows packed into the
same bytes, and what a packed store refuses."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from oracleaudit.errors import OracleAuditError
from oracleaudit.packed import FAST_CODEC, FILES, PACKED_DIR
from oracleaudit.scoring import Audit
from oracleaudit.scoring.oracle import Oracle, catalog
from oracleaudit.shipped import shipped_dir
from oracleaudit.store import KEY_COLUMNS, OBSERVATION_SCHEMA, EvidenceStore, pack_rows

BUNDLE = shipped_dir("kill_matrix")
# errors, inferred rows and NaN (HingeLoss), integer outputs (Argmax), pairs missing and incomplete hulls
# (FrobeniusNorm), the largest hulls (Conv2d_InstanceNorm_Tanh), many errors (Cumprod), a level-3 model
SAMPLE = ("level1/50_HingeLoss", "level1/15_Argmax_over_a_dim", "level1/20_FrobeniusNorm",
          "level2/9_Conv2d_InstanceNorm_Tanh", "level1/45_Cumprod", "level3/4_GRUCell_Sequence")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory, bundled_mutants) -> Path:
    """A plain store (`plain/`, the rows in two parts, not in key order) and the mutants folder
    (`mutants/`) of the bundled evidence of SAMPLE's problems."""
    root = tmp_path_factory.mktemp("sample")
    bundled = EvidenceStore(BUNDLE / "evidence").open()
    rows = bundled.read_table(filters=[("problem", "in", list(SAMPLE))]).to_pylist()
    store = EvidenceStore(root / "plain").create(bundled.meta)
    store.append(rows[1::2])
    store.append(rows[0::2])
    bundled_mutants(root / "mutants", SAMPLE)
    store.pack(root / "packed")
    return root


def by_key(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in KEY_COLUMNS])


def assert_same_rows(packed: pa.Table, plain: pa.Table) -> None:
    """Equal rows (pandas, exact), the same dtypes and schema metadata, every float equal to the bit."""
    expected = by_key(plain)
    assert packed.schema.equals(expected.schema) and packed.schema.metadata == expected.schema.metadata
    pd.testing.assert_frame_equal(packed.to_pandas(), expected.to_pandas(), check_exact=True)
    for name, kind in zip(packed.column_names, packed.schema.types):
        a, b = packed.column(name), expected.column(name)
        if pa.types.is_list(kind):
            assert a.is_valid().equals(b.is_valid()) and pc.list_value_length(a).equals(pc.list_value_length(b)), name
            a, b = pc.list_flatten(a), pc.list_flatten(b)
        if pa.types.is_floating(a.type):
            assert a.is_valid().equals(b.is_valid()), name
            bits = [pc.fill_null(c, 0.0).to_numpy().view(np.int64) for c in (a, b)]
            assert np.array_equal(*bits), name


def test_a_packed_store_reads_back_every_row_bit_for_bit(sample: Path) -> None:
    plain, packed = EvidenceStore(sample / "plain").open(), EvidenceStore(sample / "packed").open()
    assert packed.packed and not plain.packed and packed.parts == [] and packed.orphans() == []
    assert packed.num_rows == plain.num_rows > 6000 and packed.meta == plain.meta
    assert_same_rows(packed.read_table(), plain.read_table())
    assert packed.done_keys() == plain.done_keys()
    manifest = json.loads(packed.manifest_path.read_text())
    assert manifest["layout"] == "packed" and manifest["packed_version"] == 3 and manifest["schema_version"] == 2
    assert sorted(manifest["files"]) == sorted(FILES) and "parts" not in manifest
    # less than 40% of the bytes of the plain parts
    size = sum(p.stat().st_size for p in (sample / "packed" / PACKED_DIR).iterdir())
    assert size < 0.4 * sum(p.stat().st_size for p in plain.parts)


@pytest.mark.parametrize("columns", [["fp32_within_1e-04", "status"], ["fp64_rmse", "fp64_max_rel", "fp32_max_abs"],
                                     ["fp64_hull_d"], ["fp32_hull_r", "inferred"], []])
def test_columns_and_filters_read_from_a_packed_store_as_from_the_plain_one(sample: Path, columns: list[str]) -> None:
    plain, packed = EvidenceStore(sample / "plain").open(), EvidenceStore(sample / "packed").open()
    assert_same_rows(packed.read_table(columns=[*KEY_COLUMNS, *columns]),
                     plain.read_table(columns=[*KEY_COLUMNS, *columns]))
    where = [("status", "==", "Ok"), ("problem", "==", SAMPLE[0])]
    assert_same_rows(packed.read_table(columns=[*KEY_COLUMNS, *columns], filters=where),
                     plain.read_table(columns=[*KEY_COLUMNS, *columns], filters=where))


def test_every_catalog_oracle_gives_the_same_verdicts_on_the_packed_store(sample: Path) -> None:
    plain = Audit.load(sample / "plain", sample / "mutants")
    packed = Audit.load(sample / "packed", sample / "mutants")
    pd.testing.assert_frame_equal(packed.witness, plain.witness)
    for name in sorted(catalog()):
        oracle = Oracle.load(name)
        a, b = packed.verdicts(oracle), plain.verdicts(oracle)
        assert np.array_equal(a.killed, b.killed) and np.array_equal(a.complete, b.complete), name
        assert (a.original_trials, a.original_trials_failed, a.inexact) == (b.original_trials, b.original_trials_failed,
                                                                             b.inexact), name
        assert packed.score(oracle) == plain.score(oracle), name


def test_the_same_rows_pack_into_the_same_bytes(sample: Path, tmp_path: Path) -> None:
    plain = EvidenceStore(sample / "plain").open()
    other = EvidenceStore(tmp_path / "other").create(plain.meta)  # the rows in one part, in another order
    other.append(plain.read_table().take(pa.array(np.random.default_rng(0).permutation(plain.num_rows))).to_pylist())
    other.pack(tmp_path / "again")
    EvidenceStore(sample / "packed").pack(tmp_path / "repacked")  # rows read from a packed store
    for again in ("again", "repacked"):
        for name in FILES:
            assert (tmp_path / again / PACKED_DIR / f"{name}.parquet").read_bytes() == \
                   (sample / "packed" / PACKED_DIR / f"{name}.parquet").read_bytes(), (again, name)
        assert (tmp_path / again / "manifest.json").read_bytes() == (sample / "packed" / "manifest.json").read_bytes()


def test_the_fast_codec_packs_the_same_rows_into_other_bytes_the_same_every_time(sample: Path, tmp_path: Path) -> None:
    packed = EvidenceStore(sample / "packed").open()
    fast = packed.pack(tmp_path / "fast", codec=FAST_CODEC)
    assert_same_rows(fast.read_table(), packed.read_table())
    assert fast.done_keys() == packed.done_keys()
    path = lambda root, name: root / PACKED_DIR / f"{name}.parquet"  # noqa: E731
    assert any(path(tmp_path / "fast", n).read_bytes() != path(sample / "packed", n).read_bytes() for n in FILES)
    packed.pack(tmp_path / "again", codec=FAST_CODEC)
    assert all(path(tmp_path / "fast", n).read_bytes() == path(tmp_path / "again", n).read_bytes() for n in FILES)


def test_values_no_prediction_reaches_are_kept_to_the_bit(sample: Path, tmp_path: Path) -> None:
    """NaN payloads, −0.0, a count null among present ones, hull points whose difference is not the output's,
    statistics the hull does not predict, empty and null lists."""
    table = by_key(EvidenceStore(sample / "plain").open().read_table()).slice(0, 400)
    rows = table.to_pylist()
    payload = np.array([0x7FF8_0000_DEAD_BEEF], dtype=np.int64).view(np.float64)[0]
    for i, row in enumerate(rows):
        if row["fp64_hull_d"]:
            row["fp64_hull_d"] = [d * (1 + 2 ** -40) if k % 2 else d for k, d in enumerate(row["fp64_hull_d"])]
            row["fp64_max_abs"] = math.pi
            row["fp64_max_rel"] = -0.0
            row["fp64_rmse"] = payload if i % 3 == 0 else row["fp64_rmse"]
        if row["fp32_n"] is not None and i % 5 == 0:
            row["fp32_within_1e-03"] = None
            row["fp32_l2_diff"] = -0.0
        if i % 7 == 0:
            row["fp32_out_shape"] = []
            row["fp32_hull_r"] = row["fp32_hull_d"] = [] if row["fp32_hull_r"] is not None else None
    changed = pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA)
    store = pack_rows(tmp_path / "odd", {"pool": "default"}, changed)
    assert_same_rows(EvidenceStore(store.path).open().read_table(), changed)


PAYLOADS = np.array([0x7FF8_0000_DEAD_BEEF, 0xFFF0_0000_0000_0001, 0x7FF0_0000_0000_0001], dtype=np.uint64).view(np.float64)
ODD_FLOATS = [-0.0, 0.0, math.inf, -math.inf, 5e-324, -5e-324, 1.401298464324817e-45, 3.4028235677973366e38, 1e300,
              2.0 ** -126, *PAYLOADS]


def _both(rows: list[dict]) -> list[dict]:
    """The rows with evidence under both prefixes (their fp32 evidence has the fp64 one as partner)."""
    return [row for row in rows if row["fp32_n"] is not None and row["fp64_n"] is not None and row["fp64_hull_r"]]


def _odd_hulls(i: int, row: dict) -> None:
    """NaN payloads, ±0, ±inf, subnormals and float32 overflow in hull points; r not a float32 value, negative r,
    d far from and near r (q far, q near, q = 0); empty hulls on one side or both."""
    odd = ODD_FLOATS[i % len(ODD_FLOATS)]
    r, d = list(row["fp64_hull_r"]), list(row["fp64_hull_d"])
    row["fp64_hull_r"] = [odd, *r[1:]] if i % 3 else r
    row["fp64_hull_d"] = [d[0], *(odd if k == 1 else x for k, x in enumerate(d[1:], 1))] if i % 3 == 1 else d
    if row["fp32_hull_r"]:
        r32 = list(row["fp32_hull_r"])
        row["fp32_hull_r"] = [r32[0] * (1 + 2 ** -40), -r32[-1], *r32[1:-1], odd][:len(r32)] if i % 4 == 0 else r32
        row["fp32_hull_d"] = [x * 3 if i % 4 == 1 else x for x in row["fp32_hull_d"]]
        if i % 4 == 2:
            row["fp32_hull_d"] = list(row["fp32_hull_r"])  # an all-zero output: q = 0
    if i % 11 == 0:
        row["fp32_hull_r"] = row["fp32_hull_d"] = []
    if i % 13 == 0:
        row["fp64_hull_r"] = row["fp64_hull_d"] = []


def _odd_statistics(i: int, row: dict) -> None:
    """Odd floats in the statistics of a row and of its partner, apart or alike."""
    for k, name in enumerate(("l2_diff", "l2_ref", "cosine", "rel_l1", "rmse", "max_abs", "max_rel", "hull_slack")):
        odd = ODD_FLOATS[(i + k) % len(ODD_FLOATS)]
        prefix = ("fp32_", "fp64_", None)[(i + k) % 3]
        for p in ("fp32_", "fp64_") if prefix is None else (prefix,):
            row[p + name] = odd


def _odd_nulls(i: int, row: dict) -> None:
    """A count or statistic null on one side of a partner only, or on both; a hull null on one side."""
    names = ("within_1e-03", "within_1e-07", "within_1e-01", "l2_diff", "n_unequal", "hull_r", "n_nan_out", "cosine")
    name = names[i % len(names)]
    for p in (("fp32_",), ("fp64_",), ("fp32_", "fp64_"))[i % 3]:
        row[p + name] = None
        if name == "hull_r":
            row[p + "hull_d"] = None


def _odd_integers(i: int, row: dict) -> None:
    """int64 extremes in the counts a partner predicts (their differences wrap)."""
    big, small = 2 ** 63 - 1, -2 ** 63
    row["fp32_n_unequal"], row["fp64_n_unequal"] = (big, small) if i % 2 else (small, big)
    row["fp32_within_1e-05"], row["fp64_within_1e-05"] = (small, big) if i % 2 else (0, small)
    row["fp32_n_inf_mismatch"] = big


@pytest.mark.parametrize("odd", [_odd_hulls, _odd_statistics, _odd_nulls, _odd_integers])
def test_every_transform_keeps_odd_values_to_the_bit(sample: Path, tmp_path: Path, odd) -> None:
    rows = by_key(EvidenceStore(sample / "plain").open().read_table()).to_pylist()
    chosen = _both(rows)[:300]
    for i, row in enumerate(chosen):
        odd(i, row)
    changed = pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA)
    store = pack_rows(tmp_path / "odd", {"pool": "default"}, changed)
    assert_same_rows(EvidenceStore(store.path).open().read_table(), changed)
    for columns in (["fp32_hull_d", "fp32_max_rel"], ["fp32_within_1e-05", "fp64_cosine"], ["fp32_hull_r"]):
        assert_same_rows(store.read_table(columns=[*KEY_COLUMNS, *columns]), changed.select([*KEY_COLUMNS, *columns]))


def test_a_hull_point_repeated_across_many_rows_is_stored_once(sample: Path, tmp_path: Path) -> None:
    template = _both(by_key(EvidenceStore(sample / "plain").open().read_table()).to_pylist())[0]
    shared = 0.1234567890123
    rows = []
    for k in range(60):
        row = {**template, "mutant_id": f"m{k:03d}"}
        row["fp64_hull_r"] = [shared, 1.0 + k * 2 ** -40]
        row["fp64_hull_d"] = [0.5 + k * 2 ** -20, 0.75 + k * 2 ** -20]
        row["fp32_hull_r"] = [float(np.float32(shared)), float(np.float32(1.0))]
        row["fp32_hull_d"] = [float(np.float32(0.5 + k * 2 ** -20)), 0.25]
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA)
    store = pack_rows(tmp_path / "shared", {"pool": "default"}, table)
    assert_same_rows(store.read_table(), table)
    values = pq.read_table(store.path / PACKED_DIR / "values.parquet").column("r").combine_chunks()
    assert len(values) == 1  # one (problem, input_id, output_index)
    bits = np.cumsum(values.flatten().to_numpy())  # the steps back to the bits
    assert np.sort(bits.view(np.float64)).tolist() == sorted({shared, *(1.0 + k * 2 ** -40 for k in range(60))})
    linked = pq.read_table(store.path / PACKED_DIR / "linked.parquet")
    assert linked.num_rows == 120 and pc.sum(pc.greater(linked.column("link"), 0)).as_py() == 60


def test_a_single_row_packs_and_reads(sample: Path, tmp_path: Path) -> None:
    rows = by_key(EvidenceStore(sample / "plain").open().read_table())
    reference = rows.filter(pc.equal(rows.column("mutant_id"), "reference")).slice(0, 1)
    for name, one in (("both", pa.Table.from_pylist(_both(rows.to_pylist())[:1], schema=OBSERVATION_SCHEMA)),
                      ("reference", reference)):
        assert one.num_rows == 1
        store = pack_rows(tmp_path / name, {"pool": "default"}, one)
        assert_same_rows(EvidenceStore(store.path).open().read_table(), one)


def test_an_empty_store_packs_and_reads_as_empty(tmp_path: Path) -> None:
    empty = EvidenceStore(tmp_path / "empty").create({"pool": "default"}).pack(tmp_path / "packed")
    assert empty.num_rows == 0 and empty.read().empty and list(empty.read().columns) == OBSERVATION_SCHEMA.names
    assert empty.done_keys() == set()


def test_a_packed_store_is_read_only_and_refuses_what_changed(sample: Path, tmp_path: Path) -> None:
    shutil.copytree(sample / "packed", tmp_path / "packed")
    packed = EvidenceStore(tmp_path / "packed").open()
    row = packed.read_table().slice(0, 1).to_pylist()
    for write in (lambda: packed.append(row), lambda: packed.merge([sample / "plain"]), packed.compact):
        with pytest.raises(OracleAuditError, match="a packed store is read-only"):
            write()
    with pytest.raises(OracleAuditError, match="an evidence store already exists here"):
        EvidenceStore(sample / "plain").pack(tmp_path / "packed")
    # merging a packed store into a plain one gives its rows back
    merged = EvidenceStore(tmp_path / "merged").create(packed.meta)
    assert merged.merge([packed]) == packed.num_rows
    assert_same_rows(merged.read_table(), packed.read_table())

    manifest = json.loads(packed.manifest_path.read_text())
    points = tmp_path / "packed" / PACKED_DIR / "points.parquet"
    points.write_bytes(points.read_bytes()[:-9] + b"123456789")
    with pytest.raises(OracleAuditError, match=rf"{points}: sha256 differs from manifest.json"):
        EvidenceStore(tmp_path / "packed").open()
    # a reader from before the packed layout finds no parts and refuses the store
    old = {k: v for k, v in manifest.items() if k not in ("layout", "packed_version")}
    packed.manifest_path.write_text(json.dumps(old))
    with pytest.raises(OracleAuditError, match="needs a `meta` object and a `parts` list"):
        EvidenceStore(tmp_path / "packed").open()
    for version in (1, 2, 4):  # the layouts before (version 2: the bundle until now) and one after
        packed.manifest_path.write_text(json.dumps({**manifest, "packed_version": version}))
        with pytest.raises(OracleAuditError, match=rf"^{packed.manifest_path}: packed_version {version} is not the one "
                                                   r"this oracleaudit reads \(3\)"):
            EvidenceStore(tmp_path / "packed").open()


def test_a_packed_file_of_another_version_is_refused_naming_it(sample: Path, tmp_path: Path) -> None:
    shutil.copytree(sample / "packed", tmp_path / "packed")
    path = tmp_path / "packed" / PACKED_DIR / "linked.parquet"
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"oracleaudit.packed_version": b"2"}), path)
    manifest = json.loads((tmp_path / "packed" / "manifest.json").read_text())
    manifest["files"]["linked"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "packed" / "manifest.json").write_text(json.dumps(manifest))
    store = EvidenceStore(tmp_path / "packed").open()
    assert store.read_table(columns=["problem", "fp32_n"]).num_rows == store.num_rows  # hulls not read
    with pytest.raises(OracleAuditError, match=rf"^{path}: packed_version '2' is not the one this oracleaudit reads \(3\)$"):
        store.read_table(columns=["fp32_hull_d"])


def test_hulls_the_layout_cannot_keep_are_refused(sample: Path, tmp_path: Path) -> None:
    rows = EvidenceStore(sample / "plain").open().read_table().slice(0, 5).to_pylist()
    rows[0]["fp32_hull_d"] = (rows[0]["fp32_hull_d"] or []) + [1.0]
    with pytest.raises(OracleAuditError, match="differ in length or nullness"):
        pack_rows(tmp_path / "bad", {"pool": "default"}, pa.Table.from_pylist(rows, schema=OBSERVATION_SCHEMA))
    assert not (tmp_path / "bad" / "manifest.json").exists()


def test_each_hull_stream_holds_only_the_points_it_codes(sample: Path) -> None:
    """Version 3's streams (mates, loose, far) on real rows: one row per linked point, per point not linked,
    per far q; no column null where another of its file is not (the masks version 2 paid for), and the rows
    of the sample read back (test above) through every one of them."""
    folder = sample / "packed" / PACKED_DIR
    tables = {name: pq.read_table(folder / f"{name}.parquet") for name in FILES}
    link = tables["linked"].column("link")
    linked = pc.sum(pc.greater(link, 0)).as_py()
    assert 0 < linked < len(link)
    assert tables["mates"].num_rows == linked and tables["loose"].num_rows == len(link) - linked
    far = sum(pc.sum(pc.equal(tables[name].column("q_step"), 0)).as_py() for name in ("points", "loose"))
    assert 0 < far == tables["far"].num_rows
    for name in ("points", "linked", "mates", "far"):
        assert all(column.null_count == 0 for column in tables[name].columns), name
    assert tables["loose"].column("r_step").null_count + tables["loose"].column("r").null_count == tables["loose"].num_rows
