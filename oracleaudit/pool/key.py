"""The pool input key: the one spelling of an input's identity, written when a pool file is read and parsed
by oracles and analyses, `{distribution}[/{param}={value}...][/x={scale}]/s={seed}/{shape}` — e.g.
`official/s=734796314/official` or `normal/x=1000/s=42/odd`. An entry's `draw` (when not 1) and
`math_mode` (when not "default") and `weights` (when not "fixed") are written as the last parameters,
`/draw=3`, `/math=no_tf32`, `/weights=trial`, and parsed into their own parts."""

from __future__ import annotations

import re
from typing import Any, Sequence

ENTRY_MATH_MODES = ("default", "no_tf32", "tf32")
"""The math modes a pool entry may run under (see `oracleaudit.pool.entry`)."""
ENTRY_WEIGHTS = ("fixed", "trial")
"""Which seed a pool entry's models are built after (see `oracleaudit.pool.entry`)."""

_KEY = re.compile(r"^(?P<dist>[A-Za-z0-9_]+)(?P<params>(?:/[A-Za-z_]+=[^/]+)*?)(?:/x=(?P<scale>[^/]+))?"
                  r"/s=(?P<seed>\d+)/(?P<shape>[A-Za-z0-9_]+)$")


def number_text(value: float) -> str:
    """A canonical short spelling of a number, for keys and descriptions: 3, 0.01, -1, 1000, 1e+30."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _part(value: Any) -> str:
    return number_text(value) if isinstance(value, float) else str(value)


def input_key(distribution: str, params: Sequence[tuple[str, Any]], scale: float | None, seed: int,
              shape: str) -> str:
    """The key of one pool input."""
    stem = distribution + "".join(f"/{name}={_part(value)}" for name, value in params)
    scaled = "" if scale is None else f"/x={number_text(scale)}"
    return f"{stem}{scaled}/s={seed}/{shape}"


def parse_input_key(key: str) -> dict[str, Any] | None:
    """The parts of a key: {distribution, params (dict of strings), scale (float or None), seed (int),
    shape, draw (int), math_mode, weights}; None if it is not a key."""
    match = _KEY.match(key)
    if match is None:
        return None
    params = dict(part.split("=", 1) for part in match["params"].split("/") if part)
    scale = match["scale"]
    draw = params.pop("draw", "1")
    try:
        scale_value = None if scale is None else float(scale)
        draw_value = int(draw)
    except ValueError:
        return None
    return {"distribution": match["dist"], "params": params, "scale": scale_value, "seed": int(match["seed"]),
            "shape": match["shape"], "draw": draw_value, "math_mode": params.pop("math", "default"),
            "weights": params.pop("weights", "fixed")}
