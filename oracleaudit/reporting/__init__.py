"""Reporting (stage 5): an audit's scores and analyses as pictures and pages, and as mutation-testing-elements
reports, for people who would rather look than read.

Output folder (`oracleaudit report --out DIR`)
    report.html        one self-contained page: figures embedded as data: URIs, no script, no network reference
    report.md          the same page in Markdown, its figures in figures/*.png
    mte/<oracle>.json  one mutation-testing-elements report (schemaVersion "2") per oracle (mte.py)
The same inputs give the same bytes (the PNGs carry no date or software version).

Modules: `contents` (what scoring says, gathered once as plain data; the --json output), `figures`
(matplotlib, Agg), `document` (the page as blocks), `render` (HTML and Markdown), `mte`, `command` (the CLI
arguments and the one call). Importing this package loads none of them.
"""
