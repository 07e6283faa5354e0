"""Type facts about CUDA device code from libclang, for the catalog's semantic predicates.

How libclang is invoked on CUDA: the device-only view of a source (host functions and every #include
blanked, byte offsets unchanged; see `CudaTree.clone_view`) is parsed in clang's CUDA device mode
(`-x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_90`) with oracleaudit's own prelude
force-included (`oracleaudit/data/cuda_prelude.h`). The libclang wheel ships no clang resource headers, so
clang's CUDA wrapper headers are absent; the prelude declares the CUDA surface kernels use (qualifiers,
builtin index variables, vector and half types, math functions, intrinsics, warp and atomic functions).
Clang's error recovery keeps typing the rest of a kernel if something is still undeclared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

PRELUDE = Path(__file__).resolve().parent.parent / "data" / "cuda_prelude.h"
CLANG_ARGS = ("-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90",
              "--no-cuda-version-check", "-std=c++17", "-ferror-limit=0", "-Wno-everything")

_FLOAT_KINDS = {"FLOAT", "DOUBLE", "HALF", "FLOAT16", "LONGDOUBLE", "BFLOAT16"}
_FLOAT_RECORDS = {"__half", "__nv_bfloat16", "half"}
_INT_KINDS = {"INT", "UINT", "LONG", "ULONG", "LONGLONG", "ULONGLONG", "SHORT", "USHORT", "CHAR_S",
              "SCHAR", "UCHAR", "CHAR_U", "BOOL"}


@lru_cache(maxsize=1)
def _cindex():
    import clang.cindex as cindex

    return cindex


@dataclass
class TypeFacts:
    """What libclang knows about one device-code text, indexed by byte offsets of that text."""

    expr_types: dict[tuple[int, int], str] = field(default_factory=dict)
    decl_types: dict[int, str] = field(default_factory=dict)
    accumulators: set[int] = field(default_factory=set)
    diagnostics: list[str] = field(default_factory=list)

    def type_class(self, start: int, end: int) -> str | None:
        """'float', 'double', 'int' or 'other' for the expression spanning [start, end), None if unknown."""
        return self.expr_types.get((start, end))

    def decl_class(self, start: int) -> str | None:
        return self.decl_types.get(start)


def _classify(ctype) -> str:
    canonical = ctype.get_canonical()
    kind = canonical.kind.name
    if kind == "DOUBLE":
        return "double"
    if kind in _FLOAT_KINDS:
        return "float"
    if kind in _INT_KINDS or kind == "ENUM":
        return "int"
    if kind == "RECORD" and canonical.spelling.split("::")[-1].replace("const ", "") in _FLOAT_RECORDS:
        return "float"
    return "other"


def analyse(device_text: bytes, name: str = "device.cu") -> TypeFacts:
    """Parse a device-only view with libclang and index expression and declaration types by offset."""
    cindex = _cindex()
    index = cindex.Index.create()
    args = [*CLANG_ARGS, "-include", str(PRELUDE)]
    tu = index.parse(name, args=args, unsaved_files=[(name, device_text.decode())],
                     options=cindex.TranslationUnit.PARSE_INCOMPLETE)
    facts = TypeFacts(diagnostics=[str(d) for d in tu.diagnostics if d.severity >= 3])
    expr_kinds = cindex.CursorKind
    accum_targets: set[int] = set()
    decl_of: dict[int, int] = {}
    for cursor in tu.cursor.walk_preorder():
        loc = cursor.location
        if loc.file is None or loc.file.name != name:
            continue
        extent = cursor.extent
        if extent.start.file is None or extent.start.file.name != name:
            continue
        start, end = extent.start.offset, extent.end.offset
        if cursor.kind.is_expression():
            # Pre-order visits outer implicit casts first; the innermost cursor with the same extent is the
            # expression as written, so later visits overwrite earlier ones.
            facts.expr_types[(start, end)] = _classify(cursor.type)
            if cursor.kind == expr_kinds.COMPOUND_ASSIGNMENT_OPERATOR:
                target = next(cursor.get_children(), None)
                while target is not None and target.kind == expr_kinds.UNEXPOSED_EXPR:
                    target = next(target.get_children(), None)
                if target is not None and target.kind == expr_kinds.DECL_REF_EXPR and target.referenced is not None:
                    accum_targets.add(target.referenced.hash)
        elif cursor.kind == expr_kinds.VAR_DECL:
            facts.decl_types[start] = _classify(cursor.type)
            decl_of[cursor.hash] = start
    facts.accumulators = {decl_of[h] for h in accum_targets
                          if h in decl_of and facts.decl_types.get(decl_of[h]) in ("float", "double")}
    return facts
