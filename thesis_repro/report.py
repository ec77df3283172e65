"""Tables from records into ``REPORT.md`` and the README's results blocks.

Every experiment (``experiment.experiments()``) has ``report(results_dir, figures_dir) -> str``
that renders its Markdown tables (and figures) from its JSON records. This module gathers them: the
README holds blocks delimited by ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` whose
content is replaced by the experiment's rendered tables, so README, report and figures come from
the same records and cannot disagree. ``REPORT.md`` adds what the README leaves out: links to the
figures, the library versions and hardware (of this rendering and of the records) and the wall
times. Failed runs (loss NaN or infinite: ``records``) are named there and left out of every table.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thesis_repro.experiment import experiments
from thesis_repro.markdown import table_head, table_row
from thesis_repro.records import (
    counted,
    failed_note,
    format_hardware,
    hardware,
    hours,
    library_versions,
    load_records,
    run_seconds,
    split_failed,
)
from thesis_repro.settings import FIGURES_DIR, README_PATH, REPORT_PATH, RESULTS_DIR


def replace_block(text: str, name: str, content: str) -> str:
    """Replace the body of the ``results:NAME`` block of ``text`` (unchanged if absent)."""
    pattern = re.compile(
        rf"(<!-- results:{re.escape(name)} -->\n).*?(<!-- /results:{re.escape(name)} -->)",
        re.DOTALL,
    )
    return pattern.sub(lambda m: m.group(1) + content.rstrip() + "\n" + m.group(2), text)


def _format_items(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())


def _relative_link(path: Path, start: Path) -> str:
    """``path`` as a Markdown link target relative to the folder ``start`` (the report's)."""
    return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()


def write_report(
    results_dir: Path = RESULTS_DIR,
    figures_dir: Path = FIGURES_DIR,
    report_path: Path = REPORT_PATH,
    readme_path: Path | None = README_PATH,
    *,
    command: str = "python -m thesis_repro report",
    timings: Mapping[str, float] | None = None,
) -> str:
    """Render every experiment's tables and figures; write REPORT.md and the README blocks.

    ``command`` is named in the report as what produced it; ``timings`` (step -> seconds), when
    given, is the wall time of each step of the run that produced it (``reproduce``) and is
    listed beside the training time summed over the records. Figure links are relative to the
    folder of ``report_path``. Returns the report's text.
    """
    results_dir, figures_dir, report_path = Path(results_dir), Path(figures_dir), Path(report_path)
    sections, titles, figures = {}, {}, {}
    loaded = {e.name: (e, load_records(results_dir / e.name)) for e in experiments()}
    present = {name: pair for name, pair in loaded.items() if pair[1]}
    records = {}
    for name, (experiment, group) in (present or loaded).items():  # none yet: papers' numbers
        sections[name] = experiment.report(results_dir, figures_dir)
        titles[name] = experiment.title
        figures[name] = experiment.figures(figures_dir)
        records[name] = group
    everything = [r for group in records.values() for r in group]
    parts = [
        "# thesis_repro: results report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} from the JSON records under "
        f"`{results_dir.as_posix()}/` by `{command}`. Every table and figure is rendered from "
        "those records; each table gives the papers' numbers beside ours.",
        "",
        "## Environment and wall time",
        "",
        f"- Rendered with: {_format_items(library_versions())}, on {format_hardware(hardware())}",
    ]
    if everything:
        parts += [
            "- Records produced with: "
            + counted([_format_items(r.get("versions", {})) for r in everything]),
            "- Records produced on: "
            + counted([format_hardware(r.get("hardware", {})) for r in everything]),
        ]
    parts += [
        "",
        *table_head(["experiment", "records", "finished", "wall time summed over its records"]),
    ]
    for name, group in records.items():
        finished = sum(bool(r.get("finished")) for r in group)
        seconds = sum(run_seconds(r) for r in group)
        parts.append(table_row([name, str(len(group)), str(finished), hours(seconds)]))
    total = sum(run_seconds(r) for r in everything)
    parts.append(f"| all | {len(everything)} | | {hours(total)} |")
    failed = split_failed(everything)[1]
    if failed:
        parts += ["", failed_note(failed, " of every table and figure") + "."]
    if timings:
        parts += [
            "",
            f"Wall time of each step of `{command}` (finished runs are skipped, so a step "
            "that found its records done takes only seconds):",
            "",
            *table_head(["step", "wall time"]),
            *(table_row([step, hours(seconds)]) for step, seconds in timings.items()),
            table_row(["total", hours(sum(timings.values()))]),
        ]
    parts.append("")
    for name, text in sections.items():
        parts += [f"## {titles[name]} (`{name}`)", ""]
        if figures[name]:
            links = ", ".join(
                f"[{p.name}]({_relative_link(p, report_path.parent)})" for p in figures[name]
            )
            parts += [f"Figures: {links}", ""]
        parts += [text.rstrip(), ""]
    report = "\n".join(parts)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(report)
    if readme_path is not None and Path(readme_path).exists():
        readme = Path(readme_path).read_text()
        for name, text in sections.items():
            readme = replace_block(readme, name, text)
        Path(readme_path).write_text(readme)
    return report
