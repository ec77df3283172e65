"""``python -m thesis_repro status``: every run of a preset by state, from records and locks
(thesis_repro.progress)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from thesis_repro import __main__ as cli
from thesis_repro import lm
from thesis_repro.experiment import experiment, experiments
from thesis_repro.ffattention import config as ffattention_config
from thesis_repro.progress import preset_status, render_status
from thesis_repro.run_lock import held, lock_path
from thesis_repro.settings import DATA_ENV


def _write(path: Path, **record: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": {}, **record}))


def test_held_means_a_live_process_or_another_host_has_the_lock(tmp_path):
    record = tmp_path / "run.json"
    assert not held(record)
    lock_path(record).write_text(f"{socket.gethostname()} {os.getpid()}")
    assert held(record)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock_path(record).write_text(f"{socket.gethostname()} {gone.pid}")
    assert not held(record), "a dead process's lock is stale"
    lock_path(record).write_text("some-other-host 1")
    assert held(record), "a lock of another host cannot be checked: it counts as held"


def _checkpoint(record_path: Path, epoch: int) -> Path:
    """An (empty) checkpoint file after ``epoch`` epochs, where ``training.checkpoint_path``
    puts it."""
    path = record_path.parent / "checkpoints" / f"{record_path.stem}-epoch{epoch}.keras"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


def test_every_state_is_counted_per_table_and_listed(tmp_path):
    """One run of the Raffel & Ellis `cpu` grid in each state; the rest not started."""
    ffattention = experiment("ffattention")
    configs = [c for c in ffattention.runs("cpu") if c.experiment == "table1"]
    finished, failed, running, interrupted = configs[:4]
    path = {c: ffattention.record_path(c, tmp_path) for c in configs[:4]}
    _write(path[finished], epochs=[{}, {}], finished=True, wall_seconds=30.0)
    _write(path[failed], epochs=[{}], finished=False, failed={"reason": "nan", "step": 3})
    _write(path[running], epochs=[{}], finished=False, wall_seconds=10.0)
    lock_path(path[running]).write_text(f"{socket.gethostname()} {os.getpid()}")
    _write(path[interrupted], epochs=[{}, {}, {}], finished=False, wall_seconds=20.0)
    _checkpoint(path[interrupted], 3)

    statuses = preset_status("cpu", tmp_path, [ffattention])
    states = {s.name: s.state for s in statuses}
    assert len(statuses) == len(ffattention.runs("cpu"))
    assert [states[c.name] for c in configs[:4]] == [
        "finished", "failed", "running", "interrupted",
    ]  # fmt: skip
    assert all(states[c.name] == "not started" for c in configs[4:])

    table = render_status(statuses, "cpu", list_runs=True)
    rest = len(configs) - 4
    line = next(x for x in table.splitlines() if x.strip().startswith("ffattention table1"))
    assert line.endswith(
        f"1 of {len(configs)} finished, 1 failed, 1 running, 1 interrupted, {rest} not started"
        "; 60 s recorded"
    )
    assert f"interrupted  {interrupted.name} (3 epochs)" in table
    assert f"running      {running.name} (1 epochs)" in table
    assert finished.name not in table, "a finished run is counted, not listed"
    assert "ffattention table1" in render_status(statuses, "cpu")
    assert interrupted.name not in render_status(statuses, "cpu"), "--list only"


def test_paper_status_counts_the_unmasked_runs_as_a_table_of_their_own(tmp_path):
    """`reproduce --preset paper` trains Table 1 and the temporal-order demo both masked
    (SPEC) and unmasked (Raffel's script), and `status` counts and lists both, the unmasked
    runs under their own line; the `cpu` preset has no unmasked table."""
    ffattention = experiment("ffattention")
    masked = ffattention_config.runs("paper")
    unmasked = ffattention_config.runs("paper", mask_padding=False)
    assert unmasked and all(not c.mask_padding for c in unmasked)
    assert {c.experiment for c in unmasked} == {"table1", "temporal_order"}
    assert list(ffattention.runs("paper")) == masked + unmasked
    assert list(ffattention.runs("cpu")) == ffattention_config.runs("cpu")
    running = next(c for c in unmasked if c.experiment == "table1")
    _write(ffattention.record_path(running, tmp_path), epochs=[{}] * 5, finished=False)

    table = render_status(preset_status("paper", tmp_path, [ffattention]), "paper", True)
    line = next(x for x in table.splitlines() if "table1 (unmasked)" in x)
    count = sum(c.experiment == "table1" for c in unmasked)
    assert line.split()[:6] == ["ffattention", "table1", "(unmasked)", "0", "of", str(count)]
    assert f"interrupted  {running.name} (5 epochs; no checkpoint here: starts over)" in table
    masked_line = next(x for x in table.splitlines() if x.strip().startswith("ffattention table1 "))
    assert f"0 of {sum(c.experiment == 'table1' for c in masked)} finished" in masked_line


def test_status_command_counts_every_experiment_and_names_missing_corpora(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))  # restored afterwards: --data sets it
    total = sum(len(e.runs("smoke")) for e in experiments())
    assert cli.main(["status", "--preset", "smoke", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"preset smoke: {total} runs")
    last = out.splitlines()[-1]
    assert last.split() == ["all", "0", "of", str(total), "finished,", str(total), "not",
                            "started;", "0", "s", "recorded"]  # fmt: skip
    for name in ("ffattention table1", "addition", "lm table 3.1"):
        assert f"  {name} " in out
    missing = tmp_path / "no-corpora"
    assert cli.main(["status", "--preset", "cpu", "--data", str(missing)]) == 0
    out = capsys.readouterr().out
    assert "lm " not in out and f"the corpus directory {missing} does not exist" in out
    assert not list(tmp_path.rglob("*.json")), "status writes nothing"


def test_status_refuses_an_unknown_preset(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["status", "--preset", "huge"])
    assert exit_.value.code == 2 and "invalid choice: 'huge'" in capsys.readouterr().err


def test_an_interrupted_run_says_where_a_resume_starts(tmp_path):
    """Checkpoints stay on the machine that wrote them (a fresh GPU machine, a new checkout):
    the listing says when a resume would go back to an earlier checkpoint or start over."""
    ffattention = experiment("ffattention")
    config = next(c for c in ffattention.runs("cpu") if c.experiment == "table1")
    path = ffattention.record_path(config, tmp_path)
    _write(path, epochs=[{}] * 79, finished=False, wall_seconds=20.0)

    def listed() -> str:
        table = render_status(preset_status("cpu", tmp_path, [ffattention]), "cpu", True)
        return next(x for x in table.splitlines() if config.name in x).split(config.name)[1]

    assert listed() == " (79 epochs; no checkpoint here: starts over)"
    _checkpoint(path, 76)
    _checkpoint(path, 80)  # not among the logged epochs: never resumed from
    assert listed() == " (79 epochs; resumes after 76: newest checkpoint)"
    _checkpoint(path, 79)
    assert listed() == " (79 epochs)"


def test_a_reused_run_not_scored_for_a_future_table_is_listed_as_incomplete(tmp_path):
    """A finished Table 3.1 5-gram + 5 that the future-work tables show (thesis 4.2) but that
    has no score at their eval prefixes: counted finished and incomplete, listed with the
    prefixes it lacks and how to get them (score its final model, or train it again)."""
    lm_experiment = experiment("lm")
    config = next(
        c
        for c in lm_experiment.runs("smoke")
        if (c.table, c.order, c.prefix, c.min_prefix) == ("3.1", 5, 5, 0)
    )
    path = lm_experiment.record_path(config, tmp_path)
    scored = {"5": 100.0, "10": 101.0}
    _write(path, config=config.as_dict(), epochs=[{}], finished=True,
           summary={"eval_prefix": scored})  # fmt: skip

    def listed() -> list[str]:
        table = render_status(preset_status("smoke", tmp_path, [lm_experiment]), "smoke", True)
        lines = table.splitlines()  # the gap study has a run of that name too, not started
        return [x.split(config.name)[1] for x in lines if config.name in x and "not " not in x]

    missing = [str(e) for e in lm.reusing_eval_prefixes(config) if str(e) not in scored]
    assert missing and "sentence" in missing and "2" in missing
    (line,) = listed()
    assert line.startswith(f": no score at eval prefix {' '.join(missing)} (table future-prefix")
    assert line.endswith(
        "no final model here to score it: delete the record and train it again "
        "(python -m thesis_repro.lm grid --table 3.1 --preset smoke)"
    )
    table = render_status(preset_status("smoke", tmp_path, [lm_experiment]), "smoke")
    assert "lm table 3.1" in table and "1 of" in table and "finished (1 incomplete)" in table
    lm.final_model_path(path).parent.mkdir(parents=True)
    lm.final_model_path(path).touch()
    assert listed() == [
        f": no score at eval prefix {' '.join(missing)} (table future-prefix, future-position): "
        f"python -m thesis_repro.lm evaluate --table 3.1 --eval-prefix {' '.join(missing)}"
    ]
    all_scored = {str(e): 100.0 for e in lm.reusing_eval_prefixes(config)}
    _write(path, config=config.as_dict(), epochs=[{}], finished=True,
           summary={"eval_prefix": all_scored})  # fmt: skip
    assert listed() == [], "a finished run with every score is counted, not listed"
    no_prefix = next(c for c in lm_experiment.runs("smoke") if c.table == "3.1" and not c.prefix)
    _write(lm_experiment.record_path(no_prefix, tmp_path), config=no_prefix.as_dict(), epochs=[{}],
           finished=True, summary={})  # fmt: skip
    assert "incomplete" not in render_status(
        preset_status("smoke", tmp_path, [lm_experiment]), "smoke"
    )
