"""Runs whose loss becomes NaN or infinite: stopped at that update, recorded as failed, an
``error:`` line and a non-zero exit status, never retrained, left out of every table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from thesis_repro import addition, ffattention, lm
from thesis_repro.addition import cli as addition_cli
from thesis_repro.ffattention import cli as ffattention_cli
from thesis_repro.lm import cli as lm_cli
from thesis_repro.lm import report as lm_report
from thesis_repro.records import RunFailed, RunRecord, load_record
from thesis_repro.report import write_report
from thesis_repro.run_lock import lock_path
from thesis_repro.training import (
    EpochCheckpoint,
    FailOnNonFiniteLoss,
    checkpoint_path,
    checkpoint_record_path,
    partial_checkpoint_path,
    raise_if_failed,
    unfinished_checkpoints,
)

ROOT = Path(__file__).resolve().parents[1]
REASON = re.compile(r"^loss became (nan|inf|-inf) at update (\d+)$")


def assert_failed(record: dict) -> int:
    """The record is failed with a reason naming the update it gives as ``step``; that step."""
    assert record["finished"] is False and not record["summary"]
    failed = record["failed"]
    match = REASON.match(failed["reason"])
    assert match, failed
    assert failed["step"] == int(match.group(2)) >= 1
    return failed["step"]


def one_error_line(err: str, *words: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


# --- the shared mechanism -------------------------------------------------------------------


class CountUpdates(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.updates = 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.updates += 1


@pytest.mark.parametrize("bad, word", [(np.nan, "nan"), (np.inf, "inf")])
def test_the_update_with_a_non_finite_loss_fails_the_run(tmp_path: Path, bad: float, word: str):
    """Targets of update 7 (epoch 2, batch 3 of 4) are NaN or inf: update 7 is recorded, the
    first epoch stays logged and checkpointed, nothing after it, and training stops there."""
    record = RunRecord(tmp_path / "run.json", {"what": "toy"}).start()
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    def batches():
        for update in range(1, 1000):
            rng = np.random.default_rng(update)
            y = np.full((8, 1), bad if update == 7 else 0.5, "float32")
            yield rng.normal(size=(8, 3)).astype("float32"), y

    counter = CountUpdates()
    model.fit(
        batches(),
        steps_per_epoch=4,
        epochs=5,
        callbacks=[
            FailOnNonFiniteLoss(record, 4),
            EpochCheckpoint(record, evaluate=lambda m: {}, keep_checkpoints=True),
            counter,
        ],
        verbose=0,
    )
    assert record.failed == {"reason": f"loss became {word} at update 7", "step": 7}
    assert counter.updates == 7, "training stops at the bad update"
    assert record.completed_epochs() == 1 and checkpoint_path(record, 1).exists()
    assert not checkpoint_path(record, 2).exists()
    assert not lock_path(record.path).exists(), "a failed run is released"
    saved = load_record(record.path)
    assert saved["failed"] == record.failed and saved["finished"] is False

    with pytest.raises(RunFailed, match=r"failed: loss became (nan|inf) at update 7 ") as info:
        raise_if_failed(record)
    assert info.value.record["path"] == str(record.path)
    assert not checkpoint_path(record, 1).exists(), "a failed run's checkpoints are deleted"

    # Starting it again says it failed before, and how to retry; it is never retrained.
    again = RunRecord(record.path, {"what": "toy"})
    with pytest.raises(RunFailed, match=r"failed before: .*delete that record"):
        again.start()
    assert not lock_path(record.path).exists()
    record.path.unlink()
    assert not RunRecord(record.path, {"what": "toy"}).start().failed


# --- each experiment: a real diverging run ----------------------------------------------------

FF_RUN = ["run", "--t0", "50", "--lr", "1e6", "--max-epochs", "2", "--steps-per-epoch", "20"]
FF_RUN += ["--test-size", "100"]


def test_ffattention_diverging_run_fails_and_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results, figures = tmp_path / "results", tmp_path / "figures"
    common = ["--results", str(results), "--figures", str(figures), "--verbose", "0"]
    assert ffattention_cli.main([*common, *FF_RUN]) == 1
    name = "custom-addition-T50-attention-lr1e+06-seed0"
    one_error_line(capsys.readouterr().err, name, "failed: loss became", "delete")
    path = results / "ffattention" / "table1" / f"{name}.json"
    record = json.loads(path.read_text())
    step = assert_failed(record)
    assert len(record["epochs"]) == (step - 1) // 20, "only the epochs before the bad update"
    assert not list(results.rglob("*.keras")) and not list(results.rglob("*.lock"))

    # A rerun says it failed before and trains nothing.
    stamp = path.stat().st_mtime_ns
    assert ffattention_cli.main([*common, *FF_RUN]) == 1
    one_error_line(capsys.readouterr().err, "failed before", str(path))
    assert path.stat().st_mtime_ns == stamp

    table = ffattention.report(results, figures)
    reason = record["failed"]["reason"]
    assert f"1 failed run left out of these tables and the figure: {name} ({reason})" in table
    assert "| addition, attention | – / 1 |" in table, "the failed run is no result"
    text = write_report(results, figures, tmp_path / "REPORT.md", None)
    assert f"1 failed run left out of every table and figure: {name} ({reason})." in text
    assert "| ffattention | 1 | 0 |" in text


def test_ffattention_grid_goes_on_after_a_failed_run(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    preset = ffattention.Preset(
        description="one diverging and one sane learning rate",
        tasks=("addition",),
        t0s=(50,),
        learning_rates={50: (1e6, 1e-2)},
        epoch_caps={50: 1},
        steps_per_epoch=2,
        test_size=10,
    )
    monkeypatch.setitem(ffattention.PRESETS, "diverge", preset)
    args = ["--results", str(tmp_path), "--figures", str(tmp_path), "--verbose", "0"]
    code = ffattention_cli.main([*args, "grid", "--preset", "diverge", "--only", "table1"])
    captured = capsys.readouterr()
    records = {
        p.stem: json.loads(p.read_text()) for p in (tmp_path / "ffattention").rglob("*.json")
    }
    failed = sorted(name for name, record in records.items() if record.get("failed"))
    assert "diverge-addition-T50-attention-lr1e+06-seed0" in failed and len(records) == 4
    assert code == 1
    one_error_line(captured.err, f"{len(failed)} of 4 runs failed", *failed)
    assert captured.out.count("[failed]") == len(failed)
    for name, record in records.items():
        if name in failed:
            assert_failed(record)
            assert record["config"]["learning_rate"] == 1e6
        else:
            assert record["finished"]
    table = (tmp_path / "ffattention" / "table.md").read_text()
    assert f"{len(failed)} failed run{'s' if len(failed) > 1 else ''} left out" in table
    assert "(lr 1e+06)" not in table, "a failed run is never the best learning rate"


def test_addition_diverging_run_fails_and_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results, figures = tmp_path / "results", tmp_path / "figures"
    args = ["--results", str(results), "--figures", str(figures), "--verbose", "0", "run"]
    args += ["--model", "lstm", "--lr", "1e30", "--steps", "40", "--steps-per-epoch", "10"]
    args += ["--min-length", "20", "--max-length", "25", "--eval-lengths", "20", "40"]
    args += ["--eval-size", "20", "--no-jit"]
    assert addition_cli.main(args) == 1
    name = "lstm-T20-25-40steps-seed0"
    one_error_line(capsys.readouterr().err, name, "failed: loss became")
    path = results / "addition" / "lstm" / f"{name}.json"
    record = json.loads(path.read_text())
    step = assert_failed(record)
    assert len(record["epochs"]) == (step - 1) // 10
    assert "generalisation" not in record and not list(results.rglob("*.keras"))

    assert addition_cli.main(args) == 1
    one_error_line(capsys.readouterr().err, "failed before")

    table = addition.report(results, figures)
    reason = record["failed"]["reason"]
    assert f"1 failed run left out of these tables and the figures: {name} ({reason})" in table
    assert "learning starts" in table and f"| {name} |" not in table, "no row for it"


def test_lm_diverging_run_fails_and_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(lm.VARIANTS, "diverge", lm.Variant(eps0=1e30, decay=0.0))
    monkeypatch.setenv("THESIS_REPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(lm.DATA_ENV, raising=False)
    results, figures = tmp_path / "results", tmp_path / "figures"
    args = ["--preset", "smoke", "--variant", "diverge", "--epochs", "1"]
    args += ["--results", str(results), "--verbose", "0"]
    assert lm_cli.main(args) == 1
    one_error_line(capsys.readouterr().err, "5gram-diverge", "failed: loss became")
    [path] = (results / "lm" / "synthetic" / "runs").glob("*.json")
    record = json.loads(path.read_text())
    assert_failed(record)
    assert not list(results.rglob("*.keras"))

    assert lm_cli.main(args) == 1
    one_error_line(capsys.readouterr().err, "failed before")

    text = lm_report.report(results, figures)
    note = f"1 failed run left out of this table and its figure: {path.stem} ("
    assert note + record["failed"]["reason"] + ")" in text
    assert "test perplexity (ours)" not in text, "no table of results from a failed run"
    assert not list(figures.glob("*.pdf"))


def test_failed_run_exit_status_in_a_process(tmp_path: Path) -> None:
    """``python -m thesis_repro.ffattention run --lr 1e6``: status 1, one ``error:`` line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "thesis_repro.ffattention", "--results", str(tmp_path), *FF_RUN],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "failed: loss became" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_unfinished_checkpoints_are_those_of_runs_without_a_result(tmp_path: Path):
    """What a GPU slice brings back to resume elsewhere: the checkpoints (epoch or mid-epoch)
    of runs whose record is neither finished nor failed, smallest first; none of finished or
    failed runs, of runs without a record or with a corrupt one, and no other files."""
    folder = tmp_path / "results" / "grid"
    records = {name: RunRecord(folder / f"{name}.json", {"run": name}).start() for name in
               ("running", "paused", "finished", "failed")}  # fmt: skip
    for record in records.values():
        record.save()  # an unfinished run's record as its first epoch leaves it
    records["finished"].finish()
    records["failed"].fail("loss became nan at update 3", 3)
    written = {}
    for size, (name, path) in enumerate(
        [(name, checkpoint_path(record, 2)) for name, record in records.items()]
        + [("paused-partial", partial_checkpoint_path(records["paused"]))],
        start=1,
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (100 - size))  # later ones smaller
        written[name] = path
    for path, owner in written.items():
        assert checkpoint_record_path(owner) == folder / f"{path.removesuffix('-partial')}.json"
    orphan = folder / "checkpoints" / "gone-epoch1.keras"
    (folder / "corrupt.json").write_text("{")
    for path in (orphan, folder / "checkpoints" / "corrupt-epoch1.keras"):
        path.write_bytes(b"x")
    stray = folder / "checkpoints" / "notes.keras"
    stray.write_bytes(b"x")
    assert checkpoint_record_path(stray) is None
    assert checkpoint_record_path(folder / "running.json") is None
    assert unfinished_checkpoints(tmp_path / "results") == [
        written["paused-partial"],
        written["paused"],
        written["running"],
    ]
