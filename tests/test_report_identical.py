"""The committed REPORT.md, README results blocks and figures are what the code renders from the
committed records: rendering them again into a temporary folder gives the same tables and,
with the matplotlib version that rendered them, byte-identical figures (issue 17: the redesign
preserves behaviour; and no table can be edited by hand without this test noticing)."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import matplotlib
import pytest

from thesis_repro.markdown import table_head, table_row
from thesis_repro.report import write_report

ROOT = Path(__file__).resolve().parent.parent
# Lines that depend on when and where the report is rendered, not on the records.
# What the records' folders hold beside records and tables (models, checkpoints, run locks).
IGNORED = ("*.keras", "checkpoints", "*.lock")
VOLATILE = re.compile(r"^(Generated \d{4}-\d\d-\d\d \d\d:\d\d |- Rendered with: )")


def _stable(text: str) -> list[str]:
    return [line for line in text.splitlines() if not VOLATILE.match(line)]


def _rendered_matplotlib(report: str) -> str | None:
    found = re.search(r"^- Rendered with: .*?matplotlib ([\w.]+)", report, re.M)
    return found.group(1) if found else None


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if not (ROOT / "results").is_dir() or not (ROOT / "REPORT.md").exists():
        pytest.skip("no committed records in this checkout")
    out = tmp_path_factory.mktemp("render")
    shutil.copy(ROOT / "README.md", out / "README.md")
    # A copy of the records: rendering also writes each table's table.md beside its records.
    shutil.copytree(ROOT / "results", out / "results", ignore=shutil.ignore_patterns(*IGNORED))
    write_report(out / "results", out / "figures", out / "REPORT.md", out / "README.md")
    return out


def test_report_tables_are_those_of_the_committed_report(rendered):
    committed = _stable((ROOT / "REPORT.md").read_text())
    again = _stable((rendered / "REPORT.md").read_text())
    # Figure links are relative to the report's folder; compare their targets' names.
    strip_links = re.compile(r"\]\((?:[^)]*/)?([^/)]+\.pdf)\)")
    assert [strip_links.sub(r"](\1)", line) for line in again] == [
        strip_links.sub(r"](\1)", line) for line in committed
    ]


def test_readme_results_blocks_are_unchanged_by_rendering(rendered):
    assert (rendered / "README.md").read_text() == (ROOT / "README.md").read_text()


def test_figures_are_byte_identical(rendered):
    figures = sorted((rendered / "figures").glob("*.pdf"))
    assert figures, "the report renders figures"
    assert {p.name for p in figures} <= {p.name for p in (ROOT / "figures").glob("*.pdf")}
    version = _rendered_matplotlib((ROOT / "REPORT.md").read_text())
    if version != matplotlib.__version__:
        pytest.skip(
            f"figures were rendered with matplotlib {version}, not {matplotlib.__version__}"
        )
    differ = [p.name for p in figures if p.read_bytes() != (ROOT / "figures" / p.name).read_bytes()]
    assert not differ, f"re-rendered figures differ from the committed ones: {differ}"


def test_every_rendered_table_row_has_as_many_cells_as_its_header(rendered):
    """Each table's rule and rows have the header's column count (``markdown.table_head`` counts
    the rule from the labels; a row or header written by hand could drift)."""
    report = (rendered / "REPORT.md").read_text().splitlines()
    cells = re.compile(r"(?<!\\)\|")  # a cell may hold an escaped \|
    tables = 0
    for i, line in enumerate(report):
        if not line.startswith("|---"):
            continue
        tables += 1
        columns = len(cells.split(report[i - 1])) - 2
        assert line == "|" + "---|" * columns, report[i - 1]
        for row in itertools.takewhile(lambda r: r.startswith("|"), report[i + 1 :]):
            assert len(cells.split(row)) - 2 == columns, row
    assert tables > 10, "the report renders its tables"


def test_table_head_counts_its_rule_from_the_labels():
    assert table_head(["a", "b, c", "T0 = 50"]) == ["| a | b, c | T0 = 50 |", "|---|---|---|"]
    assert table_row(["x", "", "1.0%"]) == "| x |  | 1.0% |"
