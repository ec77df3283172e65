"""``python -m thesis_repro reproduce`` and the report: order of the grids, corpus handling,
REPORT.md, figures, and the README's results blocks (``report.replace_block``).

Nothing here writes into the repository's ``results/`` or ``figures/``: every run goes to a
temporary folder.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import keras
import pytest

from thesis_repro import __main__ as cli
from thesis_repro import experiment, lm, report

ROOT = Path(__file__).resolve().parents[1]

# The header of every experiment's table in REPORT.md.
TABLE_HEADERS = (
    "### Raffel & Ellis Table 1",
    "### Thesis 3.1: addition problem",
    "### Table 3.1: test perplexity",
    "### Table 3.2: test perplexity",
    "### PTB: 5-gram vs 5-gram + 5-word prefix",
    "### Thesis 4.2, prefix-length generalisation",
    "### Thesis 4.2, position-aware attention",
    "### Thesis 4.2 on PTB, prefix-length generalisation",
    "### Thesis 4.2 on PTB, position-aware attention",
)
# The figures of the smoke preset (the LM's are named after corpus and preset).
SMOKE_FIGURES = (
    "ffattention_accuracy_smoke.pdf",
    "addition_training.pdf",
    "addition_generalisation.pdf",
    "lm_fig3.4_synthetic_smoke.pdf",
    "lm_fig3.5_synthetic_smoke.pdf",
    "lm_ptb_synthetic_smoke.pdf",
    "lm_future-prefix_synthetic_smoke.pdf",
    "lm_future-position_synthetic_smoke.pdf",
    "lm_future-prefix-ptb_synthetic_smoke.pdf",
    "lm_future-position-ptb_synthetic_smoke.pdf",
    "attention_wsj_1_smoke.pdf",  # thesis 3.2.4 examples: smoke draws synthetic sentences
    "attention_eltec_3_smoke.pdf",
    "attention_eltec_position_1_smoke.pdf",
)


# --- report.replace_block -----------------------------------------------------------------

README = """\
# Title

<!-- results:ffattention -->
old table
<!-- /results:ffattention -->

text between

<!-- results:lm -->
old lm
<!-- /results:lm -->
"""


def test_replace_block_replaces_only_the_named_block():
    text = report.replace_block(README, "ffattention", "| new | table |\n\n\n")
    assert "<!-- results:ffattention -->\n| new | table |\n<!-- /results:ffattention -->" in text
    assert "old table" not in text
    assert "old lm" in text and "text between" in text and text.startswith("# Title")


def test_replace_block_is_idempotent_and_leaves_absent_blocks_alone():
    once = report.replace_block(README, "lm", "new lm")
    assert report.replace_block(once, "lm", "new lm") == once
    assert report.replace_block(README, "addition", "anything") == README


def test_replace_block_inserts_content_literally():
    content = r"a \1 backreference, a \n and $1 stay as written"
    text = report.replace_block(README, "lm", content)
    assert content in text
    assert report.replace_block(README, "l.", "x") == README, "the name is not a pattern"


# --- which corpus each language model gets ------------------------------------------------


def test_smoke_trains_every_lm_table_on_the_synthetic_corpus():
    sources, note = lm.table_sources("smoke", "/does/not/matter")
    assert set(sources) == set(lm.LM_TABLES) and note == ""
    assert all(source.synthetic for source in sources.values())


def test_missing_corpus_skips_the_language_models_with_one_line(tmp_path):
    sources, note = lm.table_sources("cpu", None)
    assert sources == {} and "--data" in note and "\n" not in note
    sources, note = lm.table_sources("paper", tmp_path / "nowhere")
    assert sources == {} and "does not exist" in note
    (tmp_path / "eltec-pol").mkdir()
    (tmp_path / "eltec-pol" / "eltec-pol.txt").write_text("jeden dwa trzy\n")
    sources, note = lm.table_sources("cpu", tmp_path)
    assert set(sources) == {"3.1", "3.2", "future-prefix", "future-position", "gap"}
    assert sources["3.1"].name == "eltec-pol"
    assert "table ptb" in note and "table future-position-ptb" in note and "\n" not in note


# --- reproduce: the order of the steps (grids replaced by stand-ins) -----------------------


@pytest.fixture
def calls(monkeypatch) -> list[tuple]:
    """Replace every grid and the report by stand-ins that only record their call."""
    seen: list[tuple] = []
    monkeypatch.setattr(
        experiment,
        "run_grid",
        lambda exp, configs, results_dir, verbose=1: seen.append(
            (exp.name, len(configs), results_dir)
        ),
    )
    monkeypatch.setattr(
        lm, "run_grid", lambda table, source, preset, *a, **kw: seen.append(("lm", table, source))
    )
    monkeypatch.setattr(
        lm,
        "table_baselines",
        lambda table, source, preset, *a, **kw: seen.append(("kn", table, source)),
    )
    monkeypatch.setattr(cli, "write_report", lambda *args, **kw: seen.append(("report", *args)))
    return seen


def test_reproduce_runs_the_grids_in_order_then_reports(calls, tmp_path):
    lines: list[str] = []
    timings = cli.reproduce(
        "smoke", tmp_path / "r", tmp_path / "f", tmp_path / "R.md", None, log=lines.append
    )
    runs = {name: len(experiment.experiment(name).runs("smoke")) for name in experiment.NAMES}
    assert [c[:2] for c in calls] == [
        ("ffattention", runs["ffattention"]),
        ("addition", runs["addition"]),
        *(("lm", table) for table in lm.LM_TABLES),
        *(("kn", table) for table in lm.KN_TABLES),
        ("report", tmp_path / "r"),
    ]
    assert lm.LM_TABLES[:3] == ("3.1", "3.2", "ptb"), "the thesis tables first"
    assert calls[0][2] == tmp_path / "r" and all(c[2].synthetic for c in calls[2:-1])
    assert lm.KN_TABLES == ("3.1", "3.2", "ptb"), "Kneser-Ney rows for the thesis tables"
    assert calls[-1][1:] == (tmp_path / "r", tmp_path / "f", tmp_path / "R.md", None)
    lm_steps = [f"lm {table} (synthetic)" for table in lm.LM_TABLES]
    assert list(timings) == [
        "ffattention",
        "addition",
        *lm_steps,
        *(f"Kneser-Ney {table} (synthetic)" for table in lm.KN_TABLES),
        "lm attention examples",
        "report",
    ]
    assert any("SYNTHETIC" in line for line in lines)


def test_reproduce_without_corpus_skips_the_lm_and_still_reports(calls, tmp_path, monkeypatch):
    monkeypatch.delenv(cli.DATA_ENV, raising=False)
    lines: list[str] = []
    cli.reproduce("cpu", tmp_path, tmp_path, tmp_path / "R.md", None, None, log=lines.append)
    assert [c[0] for c in calls] == ["ffattention", "addition", "report"]
    skipped = [line for line in lines if "language models skipped" in line]
    assert len(skipped) == 1 and "--data" in skipped[0]


def test_reproduce_jobs_trains_in_workers_then_runs_every_step_here(calls, tmp_path, monkeypatch):
    """``reproduce --jobs N``: N workers (``reproduce ... --jobs 1 --no-report``, which parses)
    train the grids side by side; then every step runs here (the grids find their runs done)
    and the report is written once. A worker (``train_only``) runs the grids alone."""
    started: list[tuple] = []
    monkeypatch.setattr(cli, "run_jobs", lambda *args: started.append(args) or 0)
    timings = cli.reproduce(
        "smoke", tmp_path / "r", tmp_path / "f", tmp_path / "R.md", None, "D", log=print, jobs=3
    )
    ((module, argv, jobs, _),) = started
    assert (module, jobs) == ("thesis_repro", 3)
    worker = cli.build_parser().parse_args([*argv, "--jobs", "1", "--no-report"])
    assert (worker.preset, worker.results, worker.data) == ("smoke", tmp_path / "r", "D")
    assert worker.no_report and worker.jobs == 1
    assert next(iter(timings)) == "training (3 jobs)" and calls[-1][0] == "report"
    assert sum(c[0] == "kn" for c in calls) == len(lm.KN_TABLES)

    calls.clear()
    timings = cli.reproduce("smoke", tmp_path / "r", log=print, train_only=True)
    assert [c[0] for c in calls] == ["ffattention", "addition", *("lm" for _ in lm.LM_TABLES)]
    assert "report" not in timings and "lm attention examples" not in timings


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="preset"):
        cli.reproduce("huge", tmp_path)


# --- reproduce for real, on tiny presets -----------------------------------------------------


def shrink_smoke_presets(setitem: Callable, set_attribute: Callable) -> None:
    """Shrink every experiment's ``smoke`` preset to a few updates (seconds per experiment).

    Raffel & Ellis: Table 1 only (the variable-length runs score 100 test batches each). Used
    here with ``monkeypatch`` and, through its source, inside the kernels of
    ``tests/test_notebooks.py`` with ``operator.setitem`` and ``setattr``.
    """
    from dataclasses import replace

    from thesis_repro import addition, ffattention, lm
    from thesis_repro.ffattention import config as ffattention_config

    smoke = ffattention.PRESETS["smoke"]
    setitem(
        ffattention.PRESETS,
        "smoke",
        replace(smoke, epoch_caps={50: 1}, steps_per_epoch=2, test_size=20),
    )
    every_run = ffattention_config.preset_runs
    set_attribute(
        ffattention_config,
        "preset_runs",
        lambda *args: [run for run in every_run(*args) if run.experiment == "table1"],
    )
    setitem(
        addition.PRESETS,
        "smoke",
        replace(
            addition.PRESETS["smoke"],
            models=("lstm",),
            steps=2,
            steps_per_epoch=2,
            min_length=12,
            max_length=14,
            eval_lengths=(12, 24),
            eval_size=4,
            gate_size=2,
        ),
    )
    setitem(
        lm.PRESETS,
        "smoke",
        replace(lm.PRESETS["smoke"], epochs=1, seeds=(0,), max_words=2000, ptb_max_words=2000),
    )


@pytest.fixture
def tiny_presets(monkeypatch) -> None:
    shrink_smoke_presets(monkeypatch.setitem, monkeypatch.setattr)


def test_reproduce_tiny_writes_report_figures_and_readme_blocks(tiny_presets, tmp_path):
    results, figures = tmp_path / "results", tmp_path / "figures"
    readme = tmp_path / "README.md"
    readme.write_text(README)
    started = time.time()
    timings = cli.reproduce(
        "smoke", results, figures, tmp_path / "out" / "REPORT.md", readme, verbose=0, log=print
    )
    print(f"tiny reproduce: {time.time() - started:.0f} s, {timings}")
    text = (tmp_path / "out" / "REPORT.md").read_text()
    for header in TABLE_HEADERS:
        assert header in text
    for name in SMOKE_FIGURES:
        assert (figures / name).is_file(), name
        assert f"](../figures/{name})" in text, "links are relative to the report"
    assert f"Keras backend {keras.backend.backend()}" in text and "CPUs" in text
    assert "| total |" in text and "reproduce --preset smoke" in text
    blocks = readme.read_text()
    assert "old table" not in blocks and "### Raffel & Ellis Table 1" in blocks
    assert "old lm" not in blocks and "### Table 3.1: test perplexity" in blocks

    # A second call finds every run finished: nothing is trained again.
    stamps = {p: p.stat().st_mtime_ns for p in results.rglob("*.json")}
    cli.reproduce("smoke", results, figures, tmp_path / "R2.md", None, verbose=0, log=print)
    assert {p: p.stat().st_mtime_ns for p in results.rglob("*.json")} == stamps


# --- the command line, end to end ------------------------------------------------------------


@pytest.mark.slow
def test_reproduce_smoke_command_line(tmp_path_factory):
    """The full ``smoke`` preset through the CLI (~3.5 min on 2 busy cores).

    It writes into the session's shared smoke folder, which ``tests/test_notebooks.py`` also
    uses: whichever runs first trains, the other finds the runs finished.
    """
    smoke = tmp_path_factory.getbasetemp() / "smoke"
    results, figures = smoke / "results", smoke / "figures"
    command = [
        sys.executable,
        "-m",
        "thesis_repro",
        "reproduce",
        "--preset",
        "smoke",
        "--results",
        str(results),
        "--figures",
        str(figures),
        "--report",
        str(results / "REPORT.md"),
        "--no-readme",
        "--verbose",
        "0",
    ]
    readme_before = (ROOT / "README.md").read_text()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = (results / "REPORT.md").read_text()
    for header in TABLE_HEADERS:
        assert header in text
    for name in (*SMOKE_FIGURES, "ffattention_variable_smoke.pdf"):  # the tiny one has none
        assert (figures / name).is_file(), name
    assert (ROOT / "README.md").read_text() == readme_before
