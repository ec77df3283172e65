"""Bad input to every command line: one ``error:`` line, exit status 2, nothing written (issue
16.2); a rerun with other settings names the record it conflicts with; an unreadable record is
named by run commands and skipped, with a warning, by reports (issue 16.4)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import thesis_repro.__main__ as top
from thesis_repro import addition, ffattention, lm
from thesis_repro.addition import cli as addition_cli
from thesis_repro.ffattention import cli as ffattention_cli
from thesis_repro.files import write_json_atomic
from thesis_repro.lm import cli as lm_cli
from thesis_repro.records import (
    CorruptRecord,
    RunConflict,
    RunRecord,
    load_record,
    load_records,
)
from thesis_repro.run_lock import lock_path

ROOT = Path(__file__).resolve().parents[1]


def call(main: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str]:
    """Exit status and stderr of ``main(argv)`` run in this process (stdout dropped)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, err.getvalue()


def one_error_line(err: str, *words: str) -> None:
    """``err`` is exactly one line, ``error: ...``, containing each of ``words``."""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, (word, err)


FF = ["--results", "results", "--figures", "figures"]
FF_BAD = [
    (["run", "--max-epochs", "0"], "--max-epochs"),
    (["run", "--max-epochs", "-1"], "--max-epochs"),
    (["run", "--steps-per-epoch", "-3"], "--steps-per-epoch"),
    (["run", "--steps-per-epoch", "0"], "--steps-per-epoch"),
    (["run", "--test-size", "0"], "--test-size"),
    (["run", "--lr", "0"], "--lr"),
    (["run", "--lr", "-1e-3"], "--lr"),
    (["run", "--lr", "nan"], "--lr"),
    (["run", "--lr", "inf"], "--lr"),
    (["run", "--seed", "-1"], "--seed"),
    (["run", "--seed", str(2**32)], "--seed"),
    (["run", "--t0", "10"], "--t0"),
    (["run", "--t0", "ten"], "--t0"),
    (["run", "--experiment", "variable", "--t0", "9500"], "--t0"),
    (["--verbose", "3", "run"], "--verbose"),
    (["grid", "--jobs", "0"], "--jobs"),
    (["grid", "--preset", "huge"], "--preset"),
    (["run", "--experiment", "variable", "--unmasked"], "--unmasked"),
    (["grid", "--preset", "paper", "--t0s", "2000"], "--t0s"),
    (["grid", "--preset", "paper", "--lrs", "0.002"], "--lrs: preset paper runs"),
    (["grid", "--preset", "paper", "--lrs", "0"], "--lrs"),
    (["grid", "--only", "variable", "--unmasked"], "no run"),
    (["grid", "--only", "temporal_order", "--tasks", "addition"], "no run"),
]
ADD = ["--results", "results", "--figures", "figures"]
ADD_BAD = [
    (["run", "--steps", "0"], "--steps"),
    (["run", "--steps", "-100"], "--steps"),
    (["run", "--steps-per-epoch", "0"], "--steps-per-epoch"),
    (["run", "--steps", "150"], "multiple of --steps-per-epoch"),
    (["run", "--batch-size", "0"], "--batch-size"),
    (["run", "--lr", "0"], "--lr"),
    (["run", "--min-length", "1"], "--min-length"),
    (["run", "--max-length", "400"], "--max-length (400) must be at least --min-length (500)"),
    (["run", "--min-length", "30", "--max-length", "20"], "--min-length (30)"),
    (["run", "--pretrain-steps", "0"], "--pretrain-steps"),
    (["run", "--eval-lengths", "500", "0"], "--eval-lengths"),
    (["run", "--eval-size", "0"], "--eval-size"),
    (["run", "--seed", "-2"], "--seed"),
    (["run", "--stop-after-epochs", "0"], "--stop-after-epochs"),
    (["grid", "--stop-after-epochs", "-1"], "--stop-after-epochs"),
    (["grid", "--jobs", "-1"], "--jobs"),
]
LM = ["--results", "results", "--verbose", "0"]
SHOW = ["show-attention", "--checkpoint", "a.json", "--sentence", "a b", "--out", "a.pdf"]
LM_BAD = [
    ([*LM, "--epochs", "0"], "--epochs"),
    ([*LM, "--epochs", "-1"], "--epochs"),
    ([*LM, "--max-words", "0"], "--max-words"),
    ([*LM, "--min-count", "0"], "--min-count"),
    ([*LM, "--batch-size", "0"], "--batch-size"),
    ([*LM, "--first-target", "0"], "--first-target"),
    ([*LM, "--order", "1"], "--order"),
    ([*LM, "--prefix", "-1"], "--prefix"),
    ([*LM, "--min-prefix", "-1"], "--min-prefix"),
    ([*LM, "--prefix", "5", "--min-prefix", "7"], "--min-prefix"),
    ([*LM, "--seed", "-1"], "--seed"),
    ([*LM, "--eval-prefix", "0"], "eval prefix"),
    ([*LM, "--eval-prefix", "-2"], "--eval-prefix"),
    ([*LM, "--verbose", "5"], "--verbose"),
    (["grid", *LM, "--seeds", "0", "-1"], "--seeds"),
    (["grid", *LM, "--jobs", "0"], "--jobs"),
    (["grid", *LM, "--epochs", "0"], "--epochs"),
    (["grid", *LM, "--eval-prefix", "0"], "eval prefix"),
    (["evaluate", "--results", "results", "--eval-prefix", "0"], "eval prefix"),
    (["evaluate", "--results", "results", "--eval-prefix", "some"], "--eval-prefix"),
    (["evaluate", "--results", "results", "--verbose", "2"], "--verbose"),
    ([*SHOW, "--prefix", "0"], "--prefix"),
    (["examples", "--results", "results", "--preset", "huge"], "--preset"),
]
TOP = ["--results", "results", "--figures", "figures", "--report", "R.md", "--no-readme"]
TOP_BAD = [
    (["reproduce", *TOP, "--preset", "smoke", "--verbose", "7"], "--verbose"),
    (["reproduce", *TOP, "--preset", "tiny"], "--preset"),
    (["reproduce", *TOP], "--preset"),
]
BAD = (
    [
        pytest.param(ffattention_cli.main, FF + argv, word, id=f"ffattention {argv}")
        for argv, word in FF_BAD
    ]
    + [
        pytest.param(addition_cli.main, ADD + argv, word, id=f"addition {argv}")
        for argv, word in ADD_BAD
    ]
    + [pytest.param(lm_cli.main, argv, word, id=f"lm {argv}") for argv, word in LM_BAD]
    + [pytest.param(top.main, argv, word, id=f"thesis_repro {argv}") for argv, word in TOP_BAD]
)


@pytest.mark.parametrize("main, argv, word", BAD)
def test_bad_value_is_one_error_line_exit_2_and_writes_nothing(
    main: Callable[[list[str]], int],
    argv: list[str],
    word: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(lm.DATA_ENV, raising=False)
    code, err = call(main, argv)
    assert code == 2, err
    one_error_line(err, word)
    assert not list(tmp_path.iterdir()), "bad input must write nothing"


def test_bad_value_exit_status_in_a_process(tmp_path: Path) -> None:
    """``python -m thesis_repro.ffattention run --max-epochs 0``: status 2, one line, no files."""
    result = subprocess.run(
        [sys.executable, "-m", "thesis_repro.ffattention", "run", "--max-epochs", "0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 2, result.stderr
    one_error_line(result.stderr, "--max-epochs", "at least 1")
    assert not result.stdout and not list(tmp_path.iterdir())


# --- a rerun with other settings ------------------------------------------------------------


def test_conflicting_ffattention_rerun_names_the_record(tmp_path: Path) -> None:
    """The record name leaves ``--max-epochs`` out: a rerun with another cap conflicts."""
    config = ffattention.RunConfig("table1", "addition", 100, "attention", 1e-3, 0, 100)
    path = ffattention.record_path(config, tmp_path)
    write_json_atomic(path, {"config": asdict(config), "epochs": [], "finished": False})
    before = path.read_text()
    code, err = call(ffattention_cli.main, ["--results", str(tmp_path), "run", "--max-epochs", "5"])
    assert code == 2
    one_error_line(err, str(path), "max_epochs 100 there, 5 now", "delete", "--results")
    assert path.read_text() == before and not lock_path(path).exists()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_conflicting_addition_rerun_names_the_record(tmp_path: Path) -> None:
    config = addition.RunConfig("gated-pretrained")
    path = addition.record_path(config, tmp_path)
    recorded = replace(config, learning_rate=0.01).as_record()
    write_json_atomic(path, {"config": recorded, "epochs": [], "finished": False})
    code, err = call(addition_cli.main, ["--results", str(tmp_path), "run"])
    assert code == 2
    one_error_line(err, str(path), "learning_rate 0.01 there, 0.001 now")
    assert not lock_path(path).exists()


def test_run_conflict_lists_every_setting_that_differs(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_json_atomic(path, {"config": {"a": 1, "b": [1, 2], "c": "x"}})
    with pytest.raises(RunConflict) as caught:
        RunRecord(path, {"a": 2, "b": [1, 2], "d": True}).start("test")
    message = str(caught.value)
    assert 'a 1 there, 2 now; c "x" there, unset now; d unset there, true now' in message
    assert "b " not in message and "\n" not in message
    assert not lock_path(path).exists()


# --- unreadable records ---------------------------------------------------------------------


def truncate(path: Path, record: dict) -> None:
    """Write the first half of ``record``'s JSON to ``path`` (a run killed mid-copy)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=1)
    path.write_text(text[: len(text) // 2])


@pytest.mark.parametrize("content", ["", '{"config": {"a": 1', "[1, 2]", "\xff\xfe"])
def test_load_record_names_an_unreadable_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(CorruptRecord) as caught:
        load_record(path)
    assert caught.value.path == path
    assert str(path) in str(caught.value) and "delete it" in str(caught.value)


def test_load_records_skips_an_unreadable_file_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json_atomic(tmp_path / "a" / "good.json", {"config": {"x": 1}})
    truncate(tmp_path / "b" / "bad.json", {"config": {"x": 2}, "epochs": [1, 2, 3]})
    records = load_records(tmp_path)
    load_records(tmp_path)  # warned once per file
    assert [Path(r["path"]).name for r in records] == ["good.json"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: skipped ")
    assert str(tmp_path / "b" / "bad.json") in err


def _ffattention_record(results: Path) -> Path:
    config = ffattention.RunConfig("table1", "addition", 100, "attention", 1e-3)
    path = ffattention.record_path(config, results)
    truncate(path, {"config": asdict(config), "epochs": [], "finished": False})
    return path


def _addition_record(results: Path) -> Path:
    config = addition.RunConfig("gated-pretrained")
    path = addition.record_path(config, results)
    truncate(path, {"config": config.as_record(), "epochs": [], "finished": False})
    return path


def _lm_record(results: Path) -> Path:
    config = lm.make_config(lm.resolve_corpus(None, None, None), "smoke")
    path = lm.record_path(config, results)
    truncate(path, {"config": config.as_dict(), "epochs": [], "finished": False})
    return path


RUNS = [
    pytest.param(ffattention_cli.main, _ffattention_record, ["run"], id="ffattention run"),
    pytest.param(addition_cli.main, _addition_record, ["run"], id="addition run"),
    pytest.param(lm_cli.main, _lm_record, ["--preset", "smoke", "--verbose", "0"], id="lm train"),
]


@pytest.mark.parametrize("main, make, argv", RUNS)
def test_run_on_a_truncated_record_names_the_file(
    main: Callable[[list[str]], int],
    make: Callable[[Path], Path],
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(lm.DATA_ENV, raising=False)
    path = make(tmp_path)
    before = path.read_bytes()
    results = ["--results", str(tmp_path)]
    code, err = call(main, [*results, *argv] if main is not lm_cli.main else [*argv, *results])
    assert code == 2
    one_error_line(err, str(path), "not a readable record", "delete it")
    assert path.read_bytes() == before and not lock_path(path).exists()


REPORTS = [
    pytest.param(ffattention_cli.main, _ffattention_record, ["report"], id="ffattention report"),
    pytest.param(addition_cli.main, _addition_record, ["report"], id="addition report"),
    pytest.param(lm_cli.main, _lm_record, ["report"], id="lm report"),
]


@pytest.mark.parametrize("main, make, argv", REPORTS)
def test_report_skips_a_truncated_record_with_a_warning(
    main: Callable[[list[str]], int],
    make: Callable[[Path], Path],
    argv: list[str],
    tmp_path: Path,
) -> None:
    path = make(tmp_path / "results")
    outputs = ["--results", str(tmp_path / "results"), "--figures", str(tmp_path / "figures")]
    code, err = call(main, [*outputs, *argv] if main is not lm_cli.main else [*argv, *outputs])
    assert code == 0, err
    warnings = [line for line in err.splitlines() if str(path) in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: skipped"), err
    assert "Traceback" not in err


def test_thesis_repro_report_skips_a_truncated_record(tmp_path: Path) -> None:
    results = tmp_path / "results"
    bad = [_ffattention_record(results), _addition_record(results)]
    argv = ["report", "--results", str(results), "--figures", str(tmp_path / "figures")]
    code, err = call(top.main, [*argv, "--report", str(tmp_path / "R.md"), "--no-readme"])
    assert code == 0, err
    for path in bad:
        assert sum(str(path) in line for line in err.splitlines()) == 1, err
    assert (tmp_path / "R.md").exists()


# --- records that used to crash the reports ---------------------------------------------------


def test_ffattention_table_leaves_out_runs_without_an_epoch() -> None:
    """A record with no finished epoch (once: ``--max-epochs 0``) is named, not rendered."""
    config = ffattention.RunConfig("table1", "addition", 100, "attention", 1e-3, max_epochs=1)
    empty = {"config": asdict(config), "epochs": [], "summary": ffattention.summarize([])}
    variable = {**empty, "config": asdict(replace(config, experiment="variable"))}
    records = [{**r, "path": f"/r/{n}.json"} for n, r in (("a", empty), ("b", variable))]
    text = ffattention.render_table(records)
    assert "no epoch finished yet: a, b" in text


def test_addition_generalisation_figure_takes_runs_with_other_lengths(tmp_path: Path) -> None:
    """Two runs of one model scored at different ``--eval-lengths``."""
    records = [
        {"config": {"model": "lstm", "steps": 100}, "generalisation": {"20": 0.1, "40": 0.2}},
        {"config": {"model": "lstm", "steps": 100}, "generalisation": {"500": 0.15}},
    ]
    path = addition.render_generalisation_figure(records, tmp_path / "g.pdf")
    assert path is not None and path.exists()


@pytest.mark.parametrize("package", ["ffattention", "addition"])
@pytest.mark.parametrize("command", ["run", "grid", "report"])
def test_shared_options_go_before_or_after_the_subcommand(package: str, command: str) -> None:
    """``--results``/``--figures``/``--verbose`` work on either side of the subcommand (as the
    LM's command line takes them); after it wins over before it."""
    parser = {"ffattention": ffattention_cli, "addition": addition_cli}[package].build_parser()
    after = parser.parse_args([command, "--results", "A", "--figures", "F", "--verbose", "2"])
    before = parser.parse_args(["--results", "A", "--figures", "F", "--verbose", "2", command])
    both = parser.parse_args(["--results", "B", command, "--results", "A"])
    unset = parser.parse_args([command])
    for args in (after, before):
        assert (args.results, args.figures, args.verbose) == (Path("A"), Path("F"), 2)
    assert both.results == Path("A")
    assert unset.results is None and unset.verbose == 1 and unset.figures == Path("figures")


@pytest.mark.parametrize(
    "variable,value",
    [
        ("THESIS_REPRO_STEPS_PER_EXECUTION", "0"),
        ("THESIS_REPRO_DATA_WORKERS", "many"),
        ("THESIS_REPRO_CHECKPOINT_SECONDS", "-5"),
        ("THESIS_REPRO_FF_CHUNK_SIZE", "1.5"),
    ],
)
@pytest.mark.parametrize(
    "main,argv",
    [
        (lm_cli.main, ["--preset", "smoke"]),
        (ffattention_cli.main, ["run"]),
        (addition_cli.main, ["run"]),
        (top.main, ["report"]),
    ],
)
def test_unusable_environment_settings_end_like_bad_arguments(
    monkeypatch, capsys, tmp_path, variable, value, main, argv
) -> None:
    """A bad value in one of ``settings``' environment variables stops every command line
    before it starts work: one ``error:`` line naming the variable, exit status 2, no files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {variable} must be") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
