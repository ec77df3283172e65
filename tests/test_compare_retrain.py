"""``scripts/compare_retrain.py``: a retrained record against its first training in git."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_retrain.py"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _record(valid: list[float], test: float, seconds: float) -> str:
    epochs = [
        {"epoch": i + 1, "valid_perplexity": v, "train_seconds": seconds}
        for i, v in enumerate(valid)
    ]
    summary = {"test_perplexity": test, "ms_per_step": seconds}
    return json.dumps({"epochs": epochs, "summary": summary, "hardware": {"processor": "cpu"}})


def _compare(repo: Path, record: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(record.relative_to(repo))],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def test_compare_retrain_finds_the_first_differing_epoch_and_ignores_timings(tmp_path: Path):
    """Uncommitted retrain: against HEAD; committed: against the commit before it. Timings
    differ in every retrain and must not make it 'not bit-identical'."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    record = repo / "results" / "run.json"
    record.parent.mkdir(parents=True)
    record.write_text(_record([400.0, 300.0, 200.0], 150.0, seconds=1.0))
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first training")

    record.write_text(_record([400.0, 300.0, 200.0], 150.0, seconds=2.0))
    same = _compare(repo, record)
    assert "valid_perplexity: identical over 3 epochs" in same
    assert same.rstrip().endswith("\nbit-identical")

    record.write_text(_record([400.0, 300.0], 150.0, seconds=2.0))
    unfinished = _compare(repo, record)
    assert "epochs: 3 first, 2 retrained; the first 2 compared" in unfinished
    assert unfinished.rstrip().endswith("\nidentical in the 2 epochs both have")

    record.write_text(_record([400.0, 300.0, 202.0], 151.5, seconds=2.0))
    _git(repo, "commit", "-qam", "retrained")
    other = _compare(repo, record)
    assert "valid_perplexity: differs from epoch 3 on (200 first, 202 retrained)" in other
    assert "largest relative difference 0.01" in other
    assert "test_perplexity: 150 first, 151.5 retrained (relative difference 0.01)" in other
    assert other.rstrip().endswith("not bit-identical")
