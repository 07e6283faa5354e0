"""CUDA sources of a solution: the CUDA text inside a Python `load_inline` call or a `.cu` file, mapped back to
the original file so every mutation site has an exact line and column there."""

from __future__ import annotations

import ast
import bisect
import hashlib
from dataclasses import dataclass
from pathlib import Path

from oracleaudit.errors import OracleAuditError

_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class CudaUnit:
    """One CUDA translation unit of a solution file, with the way back to that file's characters.

    `text` is the CUDA source exactly as nvcc sees it. `raw_offsets[i]` is the character offset, in the
    original file, of `text[i]`; one extra entry marks the end. `raw` tells whether text is inserted into
    the file verbatim (a `.cu` file or a raw/escape-free Python string) or must be escaped.
    """

    path: Path
    index: int
    text: str
    file_text: str
    raw_offsets: tuple[int, ...]
    escape: bool
    quote: str = '"""'

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.file_text.encode()).hexdigest()

    def file_span(self, start: int, end: int) -> tuple[int, int]:
        """Map a [start, end) character span of `text` to the same span in the original file."""
        return self.raw_offsets[start], self.raw_offsets[end]

    def cuda_edit(self, file_start: int, file_end: int, file_replacement: str) -> tuple[int, int, str]:
        """The CUDA-text span and replacement of an edit given in file terms (inverse of file_span/encode)."""
        start = bisect.bisect_left(self.raw_offsets, file_start)
        end = bisect.bisect_left(self.raw_offsets, file_end)
        if self.raw_offsets[start] != file_start or self.raw_offsets[end] != file_end:
            raise OracleAuditError(f"{self.path}: edit at offsets {file_start}-{file_end} is not inside its CUDA string")
        text = _decode_escapes(file_replacement)[0] if self.escape else file_replacement
        return start, end, text

    def edited(self, file_start: int, file_end: int, file_replacement: str) -> str:
        """The CUDA text with one edit (given in file terms) applied."""
        start, end, text = self.cuda_edit(file_start, file_end, file_replacement)
        return self.text[:start] + text + self.text[end:]

    def encode(self, replacement: str) -> str:
        """Spell CUDA text as it must appear in the original file (escaped inside non-raw Python strings)."""
        if not self.escape:
            return replacement
        text = replacement.replace("\\", "\\\\").replace("\n", "\\n")
        # Only the literal's own delimiter needs escaping: one quote character, or a run of three.
        return text.replace(self.quote, "\\" + self.quote) if len(self.quote) == 1 else \
            text.replace(self.quote, "\\" + self.quote[0] + self.quote[1:])


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset in `text`."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def load_units(path: Path) -> list[CudaUnit]:
    """Read the CUDA translation units of a solution file (`.py` with load_inline, or `.cu`/`.cuh`)."""
    if not path.is_file():
        raise OracleAuditError(f"{path}: no such file")
    try:
        text = path.read_text()
    except UnicodeDecodeError as err:
        raise OracleAuditError(f"{path}: not UTF-8 text ({err.reason})") from None
    if path.suffix in (".cu", ".cuh"):
        if not text.strip():
            raise OracleAuditError(f"{path}: empty CUDA file")
        return [CudaUnit(path, 0, text, text, tuple(range(len(text) + 1)), escape=False)]
    if path.suffix != ".py":
        raise OracleAuditError(f"{path}: not a solution file (expected .py with load_inline, or .cu)")
    literals = _load_inline_cuda_literals(path, text)
    units = []
    for index, node in enumerate(literals):
        value, offsets, escape, quote = _map_literal(path, text, node)
        units.append(CudaUnit(path, index, value, text, offsets, escape, quote))
    return units


def _load_inline_cuda_literals(path: Path, text: str) -> list[ast.Constant]:
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError as err:
        raise OracleAuditError(f"{path}:{err.lineno}: Python syntax error: {err.msg}") from None
    assigned: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            assigned[node.target.id] = node.value
    literals: list[ast.Constant] = []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _call_name(n.func) == "load_inline"]
    if not calls:
        raise OracleAuditError(f"{path}: no load_inline call (no inline CUDA to mutate)")
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        arg = next((kw.value for kw in call.keywords if kw.arg == "cuda_sources"), None)
        if arg is None and len(call.args) >= 3:
            arg = call.args[2]
        if arg is None:
            continue
        for item in _flatten(arg, assigned):
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                literals.append(item)
            else:
                raise OracleAuditError(
                    f"{path}:{item.lineno}: cuda_sources is built at run time, not a string literal; "
                    "cannot map mutations back to the file")
    if not literals:
        raise OracleAuditError(f"{path}: load_inline is called without cuda_sources (no CUDA to mutate)")
    unique = {id(n): n for n in literals}
    return sorted(unique.values(), key=lambda n: (n.lineno, n.col_offset))


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _flatten(node: ast.expr, assigned: dict[str, ast.expr], depth: int = 0) -> list[ast.expr]:
    if depth > 8:
        return [node]
    if isinstance(node, ast.Name) and node.id in assigned:
        return _flatten(assigned[node.id], assigned, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [leaf for elt in node.elts for leaf in _flatten(elt, assigned, depth + 1)]
    return [node]


def _map_literal(path: Path, text: str, node: ast.Constant) -> tuple[str, tuple[int, ...], bool, str]:
    """Locate the body of a string literal in the file and map each value character to its file offset."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def char_offset(lineno: int, byte_col: int) -> int:
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode()[:byte_col].decode())

    begin = char_offset(node.lineno, node.col_offset)
    end = char_offset(node.end_lineno, node.end_col_offset)
    segment = text[begin:end]
    prefix_len = 0
    while prefix_len < len(segment) and segment[prefix_len] not in "'\"":
        prefix_len += 1
    prefix = segment[:prefix_len].lower()
    quote = segment[prefix_len:prefix_len + 3]
    if quote not in ('"""', "'''"):
        quote = segment[prefix_len]
    body_start = begin + prefix_len + len(quote)
    body = segment[prefix_len + len(quote):len(segment) - len(quote)]
    if not segment.endswith(quote) or "f" in prefix or "b" in prefix:
        raise OracleAuditError(f"{path}:{node.lineno}: CUDA string literal is not a plain string; cannot map it")
    if "r" in prefix or "\\" not in body:
        if body != node.value:
            raise OracleAuditError(
                f"{path}:{node.lineno}: CUDA string is made of several adjacent literals; cannot map it")
        return node.value, tuple(range(body_start, body_start + len(body) + 1)), "r" not in prefix, quote
    value, offsets = _decode_escapes(body)
    if value != node.value:
        raise OracleAuditError(f"{path}:{node.lineno}: CUDA string uses escapes that cannot be mapped")
    return value, tuple(body_start + o for o in offsets), True, quote


def _decode_escapes(body: str) -> tuple[str, list[int]]:
    """Decode Python string escapes, keeping for every decoded character the offset of its spelling."""
    out: list[str] = []
    offsets: list[int] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 >= len(body):
            out.append(ch)
            offsets.append(i)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "\n":
            i += 2
            continue
        if nxt in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[nxt])
            offsets.append(i)
            i += 2
            continue
        if nxt in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1:j], 8)))
            offsets.append(i)
            i = j
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(nxt)
        if width:
            out.append(chr(int(body[i + 2:i + 2 + width], 16)))
            offsets.append(i)
            i += 2 + width
            continue
        out.append(ch)
        offsets.append(i)
        i += 1
    offsets.append(len(body))
    return "".join(out), offsets
