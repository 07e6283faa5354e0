"""The hull codec of the packed layout (contract: packed.py's docstring): hull_r and hull_d of the distinct
evidence as values.parquet, points.parquet and linked.parquet, and back."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oracleaudit import packed_arrays as arrays
from oracleaudit.errors import OracleAuditError

NEAR = 1 << 22  # q within this many float32 steps of r is stored as the step (measured: 2**16 to 2**24 alike)
PAIRS = 1 << 16  # the most point pairs of two hulls that `_links` compares (hulls of 256 points: all)
CHUNK = 1 << 22  # point pairs compared at once


def flat_hull(ev: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(r, d, lengths, offsets) of the hulls, refusing what the layout cannot keep."""
    r_col, d_col = arrays.one(ev.column("hull_r")), arrays.one(ev.column("hull_d"))
    lengths = arrays.num(r_col.value_lengths(), np.int64)
    if (not r_col.is_valid().equals(d_col.is_valid()) or not np.array_equal(lengths, arrays.num(d_col.value_lengths(), np.int64))
            or r_col.flatten().null_count or d_col.flatten().null_count):
        raise OracleAuditError("cannot pack evidence whose hull_r and hull_d differ in length or nullness, or hold "
                               "a null point")
    flat = [c.flatten().to_numpy(zero_copy_only=False).astype(np.float64) for c in (r_col, d_col)]
    return flat[0], flat[1], lengths, arrays.offsets(lengths)


def _choose_q(r: np.ndarray, d: np.ndarray, wide: np.ndarray) -> np.ndarray:
    """q (float32, the output relative to the reference's sign): r − d or r + d rounded to float32, the first
    from which `_d_from` gives d back."""
    with np.errstate(all="ignore"):
        low, high = (r - d).astype(np.float32), (r + d).astype(np.float32)
    return np.where(arrays.bits(arrays.d_from(r, low, wide)) == arrays.bits(d), low, high)


def _dictionary(r: np.ndarray, group: np.ndarray, groups: int) -> tuple[pa.Array, np.ndarray]:
    """Each group's distinct r bits, ascending (as the steps from the one before, the first from 0), and
    each point's index in its group's list."""
    bits = arrays.bits(r)
    order = np.lexsort((bits, group))
    g, b = group[order], bits[order]
    new = np.ones(len(b), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (b[1:] != b[:-1])
    entry = np.cumsum(new) - 1
    index = np.empty(len(b), dtype=np.int64)
    starts = arrays.offsets(np.bincount(g[new], minlength=groups))
    index[order] = entry - starts[g]
    eg, eb = g[new], b[new]
    steps = eb.copy()
    steps[1:] -= np.where(eg[1:] == eg[:-1], eb[:-1], 0)
    return pa.ListArray.from_arrays(pa.array(starts.astype(np.int32)), pa.array(steps, type=pa.int64())), index


def _links(r: np.ndarray, d: np.ndarray, q: np.ndarray, wide: np.ndarray, lengths: np.ndarray,
           partner: np.ndarray) -> np.ndarray:
    """For each hull point (flat r, d, q, wide) of an evidence with a partner: the flat index of the partner's
    point whose q gives its d back (`_d_from`, in its own evidence's arithmetic) and whose r rounded to float32
    is nearest to its r as bits (the first of equals); -1 for none, or where the two hulls make more than
    `PAIRS` point pairs."""
    offsets = arrays.offsets(lengths)
    row = np.repeat(np.arange(len(lengths)), lengths)
    link = np.full(len(r), -1, dtype=np.int64)
    mate = partner[row]
    with np.errstate(all="ignore"):
        single = arrays.bits(r) == arrays.bits(r.astype(np.float32).astype(np.float64))
    points = np.flatnonzero((mate >= 0) & single & (lengths[row] * lengths[np.maximum(mate, 0)] <= PAIRS))
    pairs = arrays.offsets(lengths[mate[points]])
    bounds = [*(np.searchsorted(pairs, np.arange(0, pairs[-1], CHUNK), side="right") - 1), len(points)]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        chunk = points[start:stop]
        sizes = lengths[mate[chunk]]
        own = np.repeat(chunk, sizes)
        other = arrays.ranges(offsets[mate[chunk]], sizes)
        found = arrays.bits(arrays.d_from(r[own], q[other], wide[own])) == arrays.bits(d[own])
        own, other = own[found], other[found]
        order = np.lexsort((other, np.abs(arrays.f32(r[own]) - arrays.f32(r[other])), own))
        own, other = own[order], other[order]
        first = np.unique(own, return_index=True)[1]  # own is sorted: its first point pair
        link[own[first]] = other[first]
    return link


def _near_steps(q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Each q's `q_step`: 1 + the zigzag of its float32 bits minus those of r rounded to float32 where that
    is within ±`NEAR`, else 0 (q is in far.parquet)."""
    step = q.view(np.int32).astype(np.int64) - arrays.f32(r)
    return np.where(np.abs(step) < NEAR, arrays.zig(step) + 1, 0).astype(np.int32)


def _firsts(lengths: np.ndarray) -> np.ndarray:
    """Whether each point of hulls of these lengths is its hull's first."""
    first = np.zeros(int(lengths.sum()), dtype=bool)
    first[arrays.offsets(lengths)[:-1][lengths > 0]] = True
    return first


def _far_steps(q: np.ndarray, far: np.ndarray, first: np.ndarray) -> np.ndarray:
    """far.parquet's `q_step` of the `far` points: see `arrays.steps`."""
    return arrays.zig(arrays.steps(q.view(np.int32).astype(np.int64), first)[far])


def _q_back(step: np.ndarray, r: np.ndarray, known: np.ndarray, first: np.ndarray, far: np.ndarray) -> np.ndarray:
    """q of points (in hull order) from their `q_step` and far.parquet's steps `far` for those whose q_step is 0;
    `known` where q_step is null (the q of linked points)."""
    near = (arrays.f32(r) + arrays.unzig(np.maximum(step, 1) - 1)).astype(np.int32).view(np.float32)
    bits = np.where(step > 0, near, known).view(np.int32).astype(np.int64)
    bits[step == 0] = arrays.unzig(far)
    return arrays.chain(bits, step == 0, first).view(np.float32)


def encode_hull(ev: pa.Table, hull: tuple[np.ndarray, ...], partner: np.ndarray,
                group: np.ndarray) -> tuple[dict[str, pa.Table], np.ndarray]:
    """The hull files' tables (values, points, linked, mates, loose, far) of the hulls (r, d, lengths, offsets)
    and each point's q."""
    r, d, lengths, offsets = hull
    row = np.repeat(np.arange(ev.num_rows), lengths)
    wide = np.repeat(arrays.num(pc.equal(ev.column("compare_dtype"), "float64"), bool), lengths)
    q = _choose_q(r, d, wide)
    own, on = np.repeat(partner < 0, lengths), np.repeat(partner >= 0, lengths)
    values, index = _dictionary(r[own], group[row[own]], int(group.max(initial=-1)) + 1)
    own_step = _near_steps(q[own], r[own])
    own_first = _firsts(lengths[partner < 0])
    points = pa.table({"r_step": arrays.steps(index, own_first).astype(np.int32),  # indices: far below 2**31
                       "q_step": own_step,
                       "d_xor": arrays.bits(d[own]) ^ arrays.bits(arrays.d_from(r[own], q[own], wide[own]))})
    at = _links(r, d, q, wide, lengths, partner)[on]
    linked = at >= 0
    at = np.where(linked, at, 0)
    lr, lq = r[on], np.where(linked, q[at], q[on])
    place = np.flatnonzero(on) - offsets[row[on]]
    first = _firsts(lengths[partner >= 0])
    links = pa.table({"link": pa.array(np.where(linked, arrays.zig(at - offsets[row[at]] - place) + 1, 0), type=pa.int32()),
                      "d_xor": arrays.bits(d[on]) ^ arrays.bits(arrays.d_from(lr, lq, wide[on]))})
    mates = pa.table({"r_diff": arrays.zig(arrays.f32(lr) - arrays.f32(r[at]))[linked]})
    with np.errstate(all="ignore"):
        single = arrays.bits(lr) == arrays.bits(lr.astype(np.float32).astype(np.float64))
    r_step = arrays.zig(arrays.steps(arrays.f32(lr), first))
    loose_step = _near_steps(lq, lr)
    loose = pa.table({"r_step": pa.array(r_step[~linked], mask=~single[~linked]),
                      "r": pa.array(lr[~linked], mask=single[~linked]), "q_step": loose_step[~linked]})
    step = np.where(linked, -1, loose_step)
    far = pa.table({"q_step": np.concatenate([_far_steps(q[own], own_step == 0, own_first), _far_steps(lq, step == 0, first)])})
    q[on] = lq
    return {"values": pa.table({"r": values}), "points": points, "linked": links, "mates": mates, "loose": loose,
            "far": far}, q


def decode_hull(tables: Mapping[str, pa.Table], lengths: np.ndarray, partner: np.ndarray, group: np.ndarray,
                wide: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hulls' flat r, q and d (see `encode_hull`): the points without a partner, then those with one."""
    offsets = arrays.offsets(lengths)
    r = np.zeros(offsets[-1], dtype=np.float64)
    q = np.zeros(offsets[-1], dtype=np.float32)
    xor = np.zeros(offsets[-1], dtype=np.int64)
    values = arrays.one(tables["values"].column("r"))
    starts = arrays.num(values.offsets, np.int64)
    entries = arrays.segment_sums(arrays.num(values.flatten(), np.int64), starts)
    far = arrays.num(tables["far"].column("q_step"), np.int64)
    rows = np.flatnonzero(partner < 0)
    at = arrays.ranges(offsets[rows], lengths[rows])
    points = tables["points"]
    index = arrays.segment_sums(arrays.num(points.column("r_step"), np.int64), arrays.offsets(lengths[rows]))
    r[at] = arrays.floats(entries[starts[np.repeat(group[rows], lengths[rows])] + index])
    step = arrays.num(points.column("q_step"), np.int64)
    own_far = int((step == 0).sum())
    q[at] = _q_back(step, r[at], q[at], _firsts(lengths[rows]), far[:own_far])
    xor[at] = arrays.num(points.column("d_xor"), np.int64)
    rows = np.flatnonzero(partner >= 0)
    at = arrays.ranges(offsets[rows], lengths[rows])
    first = _firsts(lengths[rows])
    link = arrays.num(tables["linked"].column("link"), np.int64)
    linked = link > 0
    mate = np.where(linked, np.repeat(offsets[partner[rows]] - offsets[rows], lengths[rows]) + at + arrays.unzig(link - 1), 0)
    loose = tables["loose"]
    bits = arrays.f32(r[mate])
    bits[linked] += arrays.unzig(arrays.num(tables["mates"].column("r_diff"), np.int64))
    single = np.zeros(len(at), dtype=bool)
    single[~linked] = arrays.num(loose.column("r_step").is_valid(), bool)
    wide_r = np.zeros(len(at), dtype=np.float64)
    wide_r[~linked] = arrays.num(loose.column("r"), np.float64)
    bits[~linked] = np.where(single[~linked], arrays.unzig(arrays.num(loose.column("r_step"), np.int64)), arrays.f32(wide_r[~linked]))
    bits = arrays.chain(bits, single & ~linked, first).astype(np.int64)
    r[at] = np.where(linked | single, bits.astype(np.int32).view(np.float32).astype(np.float64), wide_r)
    step = np.full(len(at), -1, dtype=np.int64)
    step[~linked] = arrays.num(loose.column("q_step"), np.int64)
    q[at] = _q_back(step, r[at], q[mate], first, far[own_far:])
    xor[at] = arrays.num(tables["linked"].column("d_xor"), np.int64)
    return r, q, arrays.floats(arrays.bits(arrays.d_from(r, q, np.repeat(wide, lengths))) ^ xor)
