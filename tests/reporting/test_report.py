"""`oracleaudit report` on the bundled evidence: the HTML page stands alone and escapes what it shows, the
Markdown page's tables and figure links hold together, the numbers are scoring's, the output is the same
bytes run to run, bad arguments fail on one line, and the page renders in a real headless Chromium."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from headless_chromium import find_chromium, render

from oracleaudit.cli import main
from oracleaudit.scoring import Audit, score
from oracleaudit.scoring.oracle import Oracle
from oracleaudit.shipped import shipped_dir

REPO = Path(__file__).resolve().parents[2]
ORACLES = ("kernelbench-v0.1", "kernelbench")  # consecutive KernelBench versions: one attribution pair
MINIMIZE = REPO / "reports" / "minimize" / "minimize.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _report(out: Path, *extra: str) -> int:
    args = ["report", "--out", str(out), "--minimize", str(MINIMIZE)]
    for name in ORACLES:
        args += ["--oracle", name]
    return main([*args, *extra])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    assert _report(out) == 0
    return out


@pytest.fixture(scope="module")
def bundle() -> Audit:
    km = shipped_dir("kill_matrix")
    return Audit.load(km / "evidence", km / "mutants")


class _Page(HTMLParser):
    """Every tag and attribute of a page, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_the_html_page_needs_nothing_outside_itself(report: Path) -> None:
    page = _parse(report / "report.html")
    tags = {tag for tag, _ in page.tags}
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    for tag, attrs in page.tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("data:image/png;base64,", "#")), (tag, value[:80])
    assert "url(" not in (report / "report.html").read_text(encoding="utf-8")  # no stylesheet fetches either
    images = [base64.b64decode(a["src"].split(",", 1)[1]) for t, a in page.tags if t == "img"]
    files = sorted((report / "figures").glob("*.png"))
    # the same figures as the Markdown page's, the minimize curve among them
    assert sorted(images) == sorted(p.read_bytes() for p in files) and len(files) == 7
    assert all(image.startswith(PNG_MAGIC) for image in images)
    assert "minimize.png" in {p.name for p in files}


def test_source_text_is_escaped_in_html(report: Path, bundle: Audit) -> None:
    text = (report / "report.html").read_text(encoding="utf-8")
    page = _parse(report / "report.html")
    shown = "".join(page.text)
    diffs = [bundle.diff(m) for m in re.findall(r'<pre id="diff-([0-9a-f]+)"', text)]
    assert diffs and all(diffs)
    # every escaped mutant's diff appears verbatim as text (the parser unescapes it), whatever it holds
    assert all(line in shown for d in diffs for line in d.splitlines())
    angled = [line for d in diffs for line in d.splitlines() if "<" in line]
    assert angled, "the diffs shown hold no '<' (CUDA launches, includes): the check would prove nothing"
    assert not any(line in text for line in angled)  # …and never as raw markup
    assert {tag for tag, _ in page.tags} <= {"html", "head", "meta", "title", "style", "body", "nav", "a", "h1", "h2",
                                             "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "figure",
                                             "img", "figcaption", "pre", "span"}


def _md_tables(markdown: str) -> list[list[list[str]]]:
    tables, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
        elif current:
            tables.append(current)
            current = []
    return tables


def test_markdown_tables_are_whole_and_its_figures_exist(report: Path) -> None:
    markdown = (report / "report.md").read_text(encoding="utf-8")
    tables = _md_tables(markdown)
    assert len(tables) >= 8
    for table in tables:
        assert {len(row) for row in table} == {len(table[0])}, table[0]
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(links) == 7 and all((report / link).is_file() for link in links)


def test_the_numbers_are_scorings(report: Path, bundle: Audit) -> None:
    markdown = (report / "report.md").read_text(encoding="utf-8")
    overview = next(t for t in _md_tables(markdown) if t[0][:2] == ["oracle", "reference"])
    rows = {r[0]: dict(zip(overview[0], r)) for r in overview[2:]}
    for result in score(bundle, [Oracle.load(n) for n in ORACLES]):
        row = rows[result["oracle"]]
        assert row["detection"] == f"{100 * result['detection']:.1f}%"
        assert (int(row["witnessed"]), int(row["killed"]), int(row["escaped"])) == (
            result["witnessed"], result["killed"], result["escaped"])
    problems = next(t for t in _md_tables(markdown) if t[0][0] == "problem" and t[0][1] == "mutants")
    assert len(problems) - 2 == bundle.mutants["problem"].nunique()
    assert "kernelbench-v0.1 → kernelbench" in markdown  # the default attribution pair


@pytest.mark.slow
def test_same_inputs_give_the_same_bytes(report: Path, tmp_path: Path) -> None:
    assert _report(tmp_path) == 0
    first = sorted(p.relative_to(report) for p in report.rglob("*") if p.is_file())
    second = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert first == second and len(first) == 2 + 7 + len(ORACLES)
    for rel in first:
        assert (report / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel


def test_bad_arguments_fail_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    not_minimize = tmp_path / "other.json"
    not_minimize.write_text(json.dumps({"budget": 2}))
    assert main(["report", "--oracle", "kernelbench", "--minimize", str(not_minimize), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(not_minimize) in err and "curve" in err
    assert main(["report", "--oracle", "kernelbench", "--format", "html,pdf", "--out", str(tmp_path)]) == 2
    assert "--format" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()


def test_the_reference_report_is_current_in_its_figures_and_numbers(report: Path) -> None:
    """reports/ was regenerated with the code that made it: its overview table holds the same numbers for the
    oracles both reports show."""
    reference = (REPO / "reports" / "report.md").read_text(encoding="utf-8")
    ours = (report / "report.md").read_text(encoding="utf-8")
    pick = lambda md: {r[0]: r for r in next(t for t in _md_tables(md) if t[0][:2] == ["oracle", "reference"])[2:]}
    theirs, mine = pick(reference), pick(ours)
    assert all(theirs[name] == mine[name] for name in ORACLES)
    assert all((REPO / "reports" / link).is_file() for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", reference))


def test_the_page_renders_every_figure_in_chromium_without_console_errors(report: Path, tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium on PATH (apt-get install chromium; .ci/run installs it where apt works)")
    result = render(binary, report / "report.html", tmp_path / "profile")
    assert len(result["images"]) == 7
    assert all(i["complete"] and i["width"] > 0 and i["height"] > 0 and i["scheme"] == "data" for i in result["images"])
    assert result["errors"] == []
    assert all(url.startswith(("file:", "data:")) for url in result["requests"])


def test_the_browser_check_sees_a_broken_figure_and_a_console_error(tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium on PATH (apt-get install chromium; .ci/run installs it where apt works)")
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img src="data:image/png;base64,AAAA">'
                    "<script>console.error('drawn wrong')</script></body></html>")
    result = render(binary, page, tmp_path / "profile")
    assert [i["width"] for i in result["images"]] == [0]
    assert any("drawn wrong" in e for e in result["errors"])

