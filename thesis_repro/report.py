"""Tables from records into ``REPORT.md`` and the README's results blocks.

Every experiment module has ``report(results_dir, figures_dir) -> str`` that renders its
Markdown tables (and figures) from its JSON records. This module gathers them: the README holds
blocks delimited by ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` whose content is
replaced by the experiment's rendered tables, so README, report and figures come from the same
records and cannot disagree.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from thesis_repro.records import RESULTS_DIR, hardware, library_versions, load_records


def _experiments() -> dict[str, Callable[[Path, Path], str]]:
    """Name -> report function of every experiment that is present in the package."""
    import importlib

    found = {}
    for name in ("ffattention", "addition", "lm"):
        try:
            module = importlib.import_module(f"thesis_repro.{name}")
        except ImportError:
            continue
        if hasattr(module, "report"):
            found[name] = module.report
    return found


def replace_block(text: str, name: str, content: str) -> str:
    """Replace the body of the ``results:NAME`` block of ``text`` (unchanged if absent)."""
    pattern = re.compile(
        rf"(<!-- results:{re.escape(name)} -->\n).*?(<!-- /results:{re.escape(name)} -->)",
        re.DOTALL,
    )
    return pattern.sub(lambda m: m.group(1) + content.rstrip() + "\n" + m.group(2), text)


def write_report(
    results_dir: Path = RESULTS_DIR,
    figures_dir: Path = Path("figures"),
    report_path: Path = Path("REPORT.md"),
    readme_path: Path | None = Path("README.md"),
) -> str:
    """Render every experiment's tables and figures; write REPORT.md and the README blocks."""
    sections = {}
    for name, render in _experiments().items():
        if any(load_records(Path(results_dir) / name)) or name == "ffattention":
            sections[name] = render(Path(results_dir), Path(figures_dir))
    total_seconds = sum(float(r.get("wall_seconds", 0.0)) for r in load_records(Path(results_dir)))
    figures = sorted(Path(figures_dir).glob("*.pdf"))
    parts = [
        "# thesis_repro: results report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} from the JSON records under "
        f"`{results_dir}/` by `python -m thesis_repro report`.",
        "",
        f"- Library versions: {library_versions()}",
        f"- Hardware: {hardware()}",
        f"- Training wall time summed over all records: {total_seconds / 3600:.2f} h",
        "- Figures: " + ", ".join(f"[{p.name}]({p.as_posix()})" for p in figures),
        "",
    ]
    for name, text in sections.items():
        parts += [f"## {name}", "", text, ""]
    report = "\n".join(parts)
    Path(report_path).write_text(report)
    if readme_path is not None and Path(readme_path).exists():
        readme = Path(readme_path).read_text()
        for name, text in sections.items():
            readme = replace_block(readme, name, text)
        Path(readme_path).write_text(readme)
    return report
