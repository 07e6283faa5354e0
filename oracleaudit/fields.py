"""Validation of the fields of the project's TOML files (pool files, oracle protocols): each failure is one
`Invalid` message naming the field and showing the value; the loader prefixes the file's name."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping


class Invalid(Exception):
    """A validation failure inside one file (the loader turns it into an OracleAuditError naming the file)."""


def type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


def number(value: Any, where: str, *, low: float = -math.inf, high: float = math.inf, open_low: bool = False) -> float:
    """A finite number within [low, high] (or (low, high] with `open_low`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Invalid(f"{where} must be a finite number, got {type_name(value)} ({value!r})")
    if value < low or (open_low and value == low) or value > high:
        bound = f"> {low:g}" if open_low else f"≥ {low:g}"
        if high != math.inf:
            bound += f" and ≤ {high:g}"
        raise Invalid(f"{where} must be a number {bound}, got {value!r}")
    return float(value)


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{where} must be true or false, got {type_name(value)} ({value!r})")
    return value


def one_of(value: Any, choices: tuple[str, ...], where: str) -> str:
    """One of the allowed spellings."""
    if value not in choices:
        raise Invalid(f"{where} must be one of {', '.join(choices)}, got {value!r}")
    return value


def table(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise Invalid(f"{where} must be a table, got {type_name(value)}")
    return value


def known(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Every field of `data` is one of `allowed`."""
    allowed = tuple(allowed)
    for name in data:
        if name not in allowed:
            prefix = f"{where}: " if where else ""
            raise Invalid(f"{prefix}unknown field {name!r} (allowed: {', '.join(allowed)})")
