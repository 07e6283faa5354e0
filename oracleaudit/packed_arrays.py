"""Array helpers of the packed layout's codec (packed.py, packed_hull.py): numpy views of Arrow columns, float
bits, zigzag, dense codes, list offsets and the arithmetic that predicts hull_d."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def one(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def num(column: pa.Array | pa.ChunkedArray, dtype: Any) -> np.ndarray:
    """A numeric or boolean column as numpy, nulls as 0."""
    fill = False if pa.types.is_boolean(column.type) else 0
    return pc.fill_null(column, fill).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64).view(np.int64)


def floats(bits: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.int64).view(np.float64)


def zig(values: np.ndarray) -> np.ndarray:
    """Zigzag: 0, -1, 1, -2, ... as 0, 1, 2, 3, ... (int64, wrapping)."""
    return (values << 1) ^ (values >> 63)


def unzig(values: np.ndarray) -> np.ndarray:
    return (values.view(np.uint64) >> np.uint64(1)).view(np.int64) ^ -(values & 1)


def dense(values: np.ndarray) -> np.ndarray:
    """Codes 0..k-1 in order of first appearance."""
    return pd.factorize(values)[0].astype(np.int64)


def nullable(values: np.ndarray, like: pa.Array | pa.ChunkedArray) -> pa.Array:
    """values, null where `like` is null."""
    return pa.array(values, mask=num(like.is_null(), bool))


def offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


def per_list(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The maximum of each list's values; 0 for an empty list."""
    out = np.zeros(len(offsets) - 1, dtype=np.float64)
    nonempty = offsets[1:] > offsets[:-1]
    if nonempty.any():
        out[nonempty] = np.maximum.reduceat(values, offsets[:-1][nonempty])
    return out


def f32(r: np.ndarray) -> np.ndarray:
    """The bits of r rounded to float32, as int64."""
    with np.errstate(all="ignore"):
        return r.astype(np.float32).view(np.int32).astype(np.int64)


def far(r: np.ndarray, q: np.ndarray) -> np.ndarray:
    """|r − q| in float64."""
    with np.errstate(all="ignore"):
        return np.abs(r - q.astype(np.float64))


def d_from(r: np.ndarray, q: np.ndarray, wide: np.ndarray) -> np.ndarray:
    """hull_d's prediction from (r, q): |r − q| in float64 where `wide`, else in float32."""
    with np.errstate(all="ignore"):
        return np.where(wide, far(r, q), np.abs(r.astype(np.float32) - q).astype(np.float64))


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices start, start + 1, ... of each (start, length), concatenated."""
    return np.repeat(starts - offsets(lengths)[:-1], lengths) + np.arange(int(lengths.sum()))


def segment_sums(steps: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The running sums of `steps` within each list (the inverse of `_in_hull_steps`)."""
    total = np.concatenate([[0], np.cumsum(steps, dtype=np.int64)])
    return total[1:] - np.repeat(total[offsets[:-1]], np.diff(offsets))


def combine(codes: Sequence[np.ndarray]) -> np.ndarray:
    """Dense codes of tuples of non-negative integer codes."""
    out = np.zeros(len(codes[0]) if codes else 0, dtype=np.int64)
    for code in codes:
        out = dense(out * (int(code.max(initial=0)) + 1) + code)  # both factors ≤ rows: no overflow
    return out


def steps(bits: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each int32 value (as int64) minus the one before it, wrapping as int32; the `first` ones from 0."""
    out = bits.copy()
    out[1:] -= bits[:-1]
    out[first] = bits[first]
    return ((out + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def chain(values: np.ndarray, stepped: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The inverse of `steps` where `stepped` (`values` holds the steps there, the values elsewhere): each
    stepped value is the value before it plus its step (the `first` ones: from 0), wrapping as int32."""
    starts = np.flatnonzero(~stepped | first)
    if len(values) and (not len(starts) or starts[0] != 0):
        starts = np.concatenate([[0], starts])
    sums = segment_sums(values.astype(np.int64), np.concatenate([starts, [len(values)]]))
    return (sums & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
