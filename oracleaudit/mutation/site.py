"""Mutation sites: where a catalog rule matches a CUDA source, whether its predicates hold there, and the
replacement text its template renders."""

from __future__ import annotations

import re
from dataclasses import dataclass

from oracleaudit.mutation.catalog import Predicate, Rule
from oracleaudit.mutation.cudatree import CudaTree
from oracleaudit.mutation.semantics import TypeFacts

_LOOPS = {"for_statement", "while_statement", "do_statement", "for_range_loop"}
_NUMBER = re.compile(r"^\s*(?P<body>(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))"
                     r"(?P<suffix>[uUlLfF]*)\s*(?://.*)?$")


@dataclass(frozen=True)
class Site:
    """A rule's match: the byte span of the replaced text in the CUDA source and the rendered replacement."""

    rule: Rule
    start: int
    end: int
    replacement: str
    scope: str
    function: str | None


def find_sites(tree: CudaTree, facts: TypeFacts | None, rules: list[Rule]) -> list[Site]:
    """Every site where a rule matches, its predicates hold and its template renders a real change."""
    from tree_sitter import QueryCursor

    sites: list[Site] = []
    seen: set[tuple[str, int, int, str]] = set()
    for rule in rules:
        for _, captures in QueryCursor(rule.compiled).matches(tree.root):
            nodes = {name: found[0] for name, found in captures.items() if found}
            site = nodes.get(rule.site)
            if site is None:
                continue
            function = tree.function_at(site.start_byte)
            scope = "both" if function is None else ("device" if function.on_device else "host")
            if rule.scope == "device" and scope != "device":
                continue
            if rule.scope == "host" and scope != "host":
                continue
            if not all(_holds(p, nodes, tree, facts) for p in rule.where):
                continue
            replacement = render(rule.replace, nodes)
            original = site.text.decode()
            if replacement is None or replacement == original:
                continue
            key = (rule.name, site.start_byte, site.end_byte, replacement)
            if key in seen:
                continue
            seen.add(key)
            sites.append(Site(rule, site.start_byte, site.end_byte, replacement, scope,
                              function.name if function else None))
    return sorted(sites, key=lambda s: (s.start, s.end, s.rule.name, s.replacement))


def _holds(predicate: Predicate, nodes: dict, tree: CudaTree, facts: TypeFacts | None) -> bool:
    node = nodes.get(predicate.capture)
    if node is None:
        return False
    name, arg = predicate.name, predicate.argument
    if name in ("float", "double", "int"):
        return facts is not None and facts.type_class(node.start_byte, node.end_byte) == name
    if name in ("float_decl", "double_decl"):
        return facts is not None and facts.decl_class(node.start_byte) == name.removesuffix("_decl")
    if name == "accumulator":
        return facts is not None and node.start_byte in facts.accumulators
    if name == "in_kernel":
        function = tree.function_at(node.start_byte)
        return function is not None and function.kind == "kernel"
    if name == "in_loop":
        return _has_ancestor(node, _LOOPS)
    if name == "inside":
        return _has_ancestor(node, {arg})
    if name == "not_in":
        return not _has_ancestor(node, {arg})
    if name == "text_matches":
        return re.search(arg, node.text.decode()) is not None
    if name == "not_text_matches":
        return re.search(arg, node.text.decode()) is None
    if name == "declares_shared":
        return "__shared__" in node.text.decode()
    raise AssertionError(f"predicate {name} is validated by the catalog loader")


def _has_ancestor(node, types: set[str]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in types:
            return True
        parent = parent.parent
    return False


def render(template: str, nodes: dict) -> str | None:
    """Expand `{capture}` and `{capture|transform}`; None when a transform does not apply at this site."""
    out = []
    pos = 0
    for match in re.finditer(r"\{(\w+)(?:\|(\w+))?\}", template):
        out.append(template[pos:match.start()])
        node = nodes.get(match.group(1))
        if node is None:
            return None
        text = node.text.decode()
        if match.group(2) == "output_pointer":
            text = output_pointer(node)
        elif match.group(2):
            text = transform(match.group(2), text)
        if text is None:
            return None
        out.append(text)
        pos = match.end()
    out.append(template[pos:])
    return "".join(out)


def transform(name: str, text: str) -> str | None:
    """Computed replacements for literal and field sites (perturbing constants, halving sizes, ...)."""
    if name == "swap_xy":
        return {"x": "y", "y": "x"}.get(text.strip())
    if name == "swap_yx":
        return {"y": "z", "z": "y"}.get(text.strip())
    match = _NUMBER.match(text)
    if not match:
        return None
    body, suffix = match.group("body"), match.group("suffix")
    is_float = "f" in suffix.lower() or (not body.lower().startswith("0x") and any(c in body for c in ".eE"))
    value = float(body) if is_float else int(body, 0)
    if name == "negate_literal":
        return None if value == 0 else f"-{body}{suffix}"
    if name == "zero":
        return f"0.0{suffix}" if is_float else "0"
    if is_float:
        factors = {"perturb": 1.01, "halve": 0.5, "double": 2.0, "tenfold": 10.0, "tenth": 0.1}
        if name in ("plus_one", "minus_one"):
            value = value + (1 if name == "plus_one" else -1)
        elif name in factors:
            if value == 0:
                return None
            value *= factors[name]
        else:
            return None
        return _float_literal(value, suffix)
    if name in ("perturb", "plus_one"):
        value += 1
    elif name == "minus_one":
        value -= 1
    elif name == "halve":
        if value < 2:
            return None
        value //= 2
    elif name in ("double", "tenfold"):
        value *= 2 if name == "double" else 10
    elif name == "bump_shift":
        if value < 1:
            return None
        value = value // 2 if value > 1 else 2
    else:
        return None
    int_suffix = "".join(c for c in suffix if c in "uUlL")
    return f"{hex(value) if body.lower().startswith('0x') else value}{int_suffix}"


def output_pointer(node) -> str | None:
    """For an identifier naming a const pointer parameter, the name of its function's first non-const
    pointer parameter (the output); None elsewhere."""
    function = node.parent
    while function is not None and function.type != "function_definition":
        function = function.parent
    if function is None:
        return None
    params = [p for p in _descendants(function.child_by_field_name("declarator"), "parameter_declaration")]
    name = node.text.decode()
    const_inputs, outputs = set(), []
    for param in params:
        declarator = param.child_by_field_name("declarator")
        if declarator is None or declarator.type != "pointer_declarator":
            continue
        ident = declarator
        while ident is not None and ident.type != "identifier":
            ident = ident.child_by_field_name("declarator")
        if ident is None:
            continue
        is_const = any(c.type == "type_qualifier" and c.text == b"const" for c in param.children)
        (const_inputs.add(ident.text.decode()) if is_const else outputs.append(ident.text.decode()))
    if name not in const_inputs or not outputs:
        return None
    return outputs[0]


def _descendants(node, node_type: str):
    stack = [node] if node is not None else []
    found = []
    while stack:
        current = stack.pop()
        if current.type == node_type:
            found.append(current)
            continue
        stack.extend(reversed(current.children))
    return found


def _float_literal(value: float, suffix: str) -> str:
    text = repr(float(f"{value:.7g}")) if "f" in suffix.lower() else repr(value)
    if "e" not in text and "." not in text and "inf" not in text:
        text += ".0"
    return text + suffix
