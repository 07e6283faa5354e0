"""The document (document.py) written out: one self-contained HTML page — figures embedded as data: URIs,
styles inline, no script and no reference to anything outside the file, every string escaped — and a
Markdown page whose figures are PNG files beside it."""

from __future__ import annotations

import base64
import html
import re
from typing import Mapping, Sequence

from oracleaudit.reporting.document import Block, Code, Figure, Heading, Table, Text

__all__ = ["FIGURES_DIR", "to_html", "to_markdown"]

FIGURES_DIR = "figures"

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
.add { color: #075; } .del { color: #a11; } .hunk { color: #55a; }
nav a { margin-right: 1em; }
"""


def _html_block(block: Block, images: Mapping[str, bytes]) -> str:
    e = html.escape
    if isinstance(block, Heading):
        return f'<h{block.level} id="{e(block.anchor)}">{e(block.text)}</h{block.level}>'
    if isinstance(block, Text):
        return f"<p>{e(block.text)}</p>"
    if isinstance(block, Table):
        head = "".join(f"<th>{e(c)}</th>" for c in block.columns)
        body = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>\n" for row in block.rows)
        return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"
    if isinstance(block, Figure):
        data = base64.b64encode(images[block.name]).decode("ascii")
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{e(block.caption)}">'
                f"<figcaption>{e(block.caption)}</figcaption></figure>")
    if isinstance(block, Code):
        lines = []
        for line in block.text.splitlines():
            kind = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++")
                    else "del" if line.startswith("-") and not line.startswith("---") else "")
            lines.append(f'<span class="{kind}">{e(line)}</span>' if kind else e(line))
        return f'<pre id="{e(block.anchor)}">' + "\n".join(lines) + "</pre>"
    raise TypeError(f"not a report block: {block!r}")


def to_html(blocks: Sequence[Block], images: Mapping[str, bytes], title: str = "oracleaudit report") -> str:
    """The page as one HTML document that needs nothing but itself."""
    nav = " ".join(f'<a href="#{html.escape(b.anchor)}">{html.escape(b.text)}</a>'
                   for b in blocks if isinstance(b, Heading) and b.level == 2)
    body = "\n".join(_html_block(b, images) for b in blocks)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<nav>{nav}</nav>\n{body}\n</body>\n</html>\n")


def _md_cell(value: str) -> str:
    """A Markdown table cell: pipes and backslashes escaped, line breaks folded, emphasis characters escaped."""
    value = value.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return re.sub(r"([*_`<>\[\]])", r"\\\1", value)


def _md_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {_md_cell(block.text)}"
    if isinstance(block, Text):
        return _md_cell(block.text)
    if isinstance(block, Table):
        lines = ["| " + " | ".join(_md_cell(c) for c in block.columns) + " |",
                 "|" + "|".join(["---"] + ["--:"] * (len(block.columns) - 1)) + "|"]
        lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Figure):
        return f"![{_md_cell(block.caption)}]({FIGURES_DIR}/{block.name})"
    if isinstance(block, Code):
        longest = max((len(run) for run in re.findall(r"`+", block.text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f'<a id="{html.escape(block.anchor)}"></a>\n\n{fence}diff\n{block.text.rstrip()}\n{fence}'
    raise TypeError(f"not a report block: {block!r}")


def to_markdown(blocks: Sequence[Block]) -> str:
    """The page as Markdown; figures are linked as `figures/<name>.png`."""
    return "\n\n".join(_md_block(b) for b in blocks) + "\n"
