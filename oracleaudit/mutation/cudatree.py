"""A CUDA source parsed with tree-sitter-cuda: its functions (kernel, device or host), its includes and
macros, and the device-only view of it that batched compile checks use."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

# Headers that only host code needs; the device-only view drops them (they are the slow part of a build).
_PRAGMA = re.compile(rb"^[ \t]*#[ \t]*pragma[^\n]*", re.M)
_HOST_HEADER = re.compile(r"^\s*#\s*include\s*[<\"](torch|ATen|c10|pybind11|Python)[/.]")


@lru_cache(maxsize=1)
def cuda_language():
    """The tree-sitter CUDA language (imported lazily: the GPU machine does not need it)."""
    import tree_sitter_cuda
    from tree_sitter import Language

    return Language(tree_sitter_cuda.language())


def parse(text: bytes):
    from tree_sitter import Parser

    return Parser(cuda_language()).parse(text)


@dataclass(frozen=True)
class Function:
    """A function definition in a CUDA source, by kind: `kernel` (__global__), `device` or `host`."""

    name: str
    kind: str
    start: int
    end: int

    @property
    def on_device(self) -> bool:
        return self.kind in ("kernel", "device")


class CudaTree:
    """Syntax of one CUDA source. Offsets are byte offsets into `data` (the UTF-8 encoded text)."""

    def __init__(self, text: str):
        self.text = text
        self.data = text.encode()
        # `#pragma unroll` may sit between a for header and its body, where the C grammar allows no
        # directive: parse with pragma lines blanked (same byte offsets); compile views keep them.
        self.tree = parse(_PRAGMA.sub(lambda m: b" " * len(m.group(0)), self.data))

    @property
    def root(self):
        return self.tree.root_node

    @cached_property
    def error_lines(self) -> list[int]:
        """1-based lines holding syntax errors (ERROR or MISSING nodes)."""
        lines: set[int] = set()
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.is_error or node.is_missing:
                lines.add(node.start_point[0] + 1)
            elif node.has_error:
                stack.extend(node.children)
        return sorted(lines)

    @cached_property
    def functions(self) -> list[Function]:
        found: list[Function] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.type == "function_definition":
                found.append(self._function(node))
                continue
            if node.type in ("translation_unit", "linkage_specification", "template_declaration",
                             "namespace_definition", "declaration_list", "preproc_ifdef", "preproc_if",
                             "preproc_else", "preproc_elif"):
                stack.extend(node.children)
        return sorted(found, key=lambda f: f.start)

    def _function(self, node) -> Function:
        specifiers = {c.type for c in node.children} | {c.text.decode() for c in node.children if c.child_count == 0}
        if "__global__" in specifiers:
            kind = "kernel"
        elif "__device__" in specifiers:
            kind = "device"
        else:
            kind = "host"
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
        name = name_node.text.decode() if name_node is not None else "?"
        return Function(name, kind, node.start_byte, node.end_byte)

    def function_at(self, offset: int) -> Function | None:
        for function in self.functions:
            if function.start <= offset < function.end:
                return function
        return None

    @cached_property
    def macros(self) -> list[str]:
        """Names of the macros the source defines (a clone #undefs them so clones do not clash)."""
        names = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.type in ("preproc_def", "preproc_function_def"):
                name = node.child_by_field_name("name")
                if name is not None and name.text.decode() not in names:
                    names.append(name.text.decode())
            elif node.type in ("translation_unit", "preproc_ifdef", "preproc_if", "preproc_else",
                               "preproc_elif", "namespace_definition", "declaration_list"):
                stack.extend(reversed(node.children))
        return names

    @cached_property
    def includes(self) -> list[tuple[int, int, str]]:
        """(start, end, line) of every top-level #include."""
        return [(n.start_byte, n.end_byte, n.text.decode().strip())
                for n in self.root.children if n.type == "preproc_include"]

    @cached_property
    def host_spans(self) -> list[tuple[int, int]]:
        """Byte spans the device-only view blanks out: host functions, host-only declarations, host headers,
        and `extern "C"` (which would make namespace clones clash)."""
        spans: list[tuple[int, int]] = []
        for function in self.functions:
            if not function.on_device:
                spans.append((function.start, function.end))
        for node in self.root.children:
            text = node.text.decode()
            if node.type == "preproc_include" and _HOST_HEADER.match(text):
                spans.append((node.start_byte, node.end_byte))
            elif node.type in ("declaration", "using_declaration", "alias_declaration") and \
                    re.search(r"\b(torch|at|c10|pybind11|py)::|\bnamespace\s+(torch|at|py)\b", text):
                spans.append((node.start_byte, node.end_byte))
            elif node.type == "linkage_specification":
                body = node.child_by_field_name("body")
                if body is not None:
                    spans.append((node.start_byte, body.start_byte))
            elif node.type in ("expression_statement",) and "PYBIND11_MODULE" in text:
                spans.append((node.start_byte, node.end_byte))
        return sorted(spans)

    def in_host_span(self, start: int, end: int) -> bool:
        return any(s <= start and end <= e for s, e in self.host_spans)

    def clone_view(self, keep_host: bool) -> bytes:
        """The source as it goes inside a namespace clone: every #include blanked (they are hoisted to the
        top of the batch), and for a device-only clone the host-only parts too. Newlines are kept, so line
        numbers and byte offsets stay those of the original."""
        spans = [(s, e) for s, e, _ in self.includes]
        if not keep_host:
            spans += self.host_spans
        return blank(self.data, spans)

    def hoisted_includes(self, keep_host: bool) -> list[str]:
        return [line for _, _, line in self.includes if keep_host or not _HOST_HEADER.match(line)]


def blank(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """Blank the given byte spans, keeping newlines."""
    out = bytearray(data)
    for start, end in spans:
        for i in range(start, end):
            if out[i] != 0x0A:
                out[i] = 0x20
    return bytes(out)
