"""``scripts/park.py``: an unfinished run's record and checkpoints committed, so that a fresh
clone resumes the run instead of starting it over (issue 15)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from thesis_repro.records import RunRecord
from thesis_repro.run_lock import release
from thesis_repro.training import checkpoint_path, partial_checkpoint_path, resumable_epochs

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "park.py"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _last_commit(repo: Path) -> tuple[str, set[str]]:
    """HEAD's subject and the files it changed."""
    subject = _git(repo, "log", "-1", "--format=%s").strip()
    return subject, set(_git(repo, "show", "--name-only", "--format=", "HEAD").split())


def _run(folder: Path, name: str, epochs: int, finished: bool = False) -> RunRecord:
    record = RunRecord(folder / f"{name}.json", {"run": name}).start("train")
    for epoch in range(epochs):
        path = checkpoint_path(record, epoch + 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"weights")  # saved before the record logs its epoch, as in training
        record.log_epoch(epoch, {"loss": 1.0 / (epoch + 1)}, 1.0)
    if finished:
        record.finish(score=1.0)
    release(record.path)
    return record


def test_park_commits_what_a_fresh_clone_resumes_from(tmp_path: Path):
    """Unfinished runs: record and checkpoints staged past the ``.gitignore`` (a clone resumes
    at the newest epoch); an oversized checkpoint is not; checkpoints committed by an earlier
    park and since deleted (the run went on) or whose run has finished since are staged as
    deleted."""
    repo = tmp_path / "repo"
    folder = repo / "results" / "grid"
    _git(tmp_path, "init", "-q", str(repo))
    (repo / ".gitignore").write_text("/results/**/checkpoints/\n")
    going = _run(folder, "going", 2)
    checkpoint_path(going, 1).unlink()  # training keeps only the newest
    partial = partial_checkpoint_path(going)
    partial.write_bytes(b"mid-epoch")  # saved before the record names it, as in training
    going.data["partial"] = {"epoch": 3, "steps": 5, "metrics": []}
    going.save()
    done = _run(folder, "done", 3, finished=True)
    big = _run(folder, "big", 1)
    checkpoint_path(big, 1).write_bytes(b"x" * 3 * 2**20)
    gone = folder / "checkpoints" / "going-epoch0.keras"
    gone.write_bytes(b"old")
    _git(repo, "add", "-f", str(gone.relative_to(repo)))
    _git(repo, "add", "-f", str(checkpoint_path(done, 3).relative_to(repo)))  # parked unfinished
    _git(repo, "commit", "-qm", "an earlier park")
    gone.unlink()

    result = subprocess.run(
        [sys.executable, str(SCRIPT), "results"], cwd=repo, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "not parked (a 3 MiB checkpoint): results/grid/big.json" in result.stderr
    staged = set(_git(repo, "diff", "--cached", "--name-only", "--no-renames").split())
    assert staged == {
        "results/grid/going.json",
        "results/grid/checkpoints/going-epoch2.keras",
        "results/grid/checkpoints/going-partial.keras",
        "results/grid/checkpoints/going-epoch0.keras",
        "results/grid/checkpoints/done-epoch3.keras",  # its run finished since it was parked
    }
    assert "staged deleted: results/grid/checkpoints/going-epoch0.keras" in result.stdout
    assert not checkpoint_path(done, 3).exists()

    _git(repo, "commit", "-qm", "park")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert resumable_epochs(clone / "results/grid/going.json", 2) == 2
    assert not (clone / "results/grid/big.json").exists()


def test_park_refuses_a_folder_that_is_not_there(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "nowhere"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and "nowhere is not a folder" in result.stderr


def test_park_commit_commits_what_it_staged_and_nothing_when_nothing_changed(tmp_path: Path):
    """``--commit``: one commit naming each parked run and its epoch; run again with nothing
    new, no commit; with someone else's change staged, it refuses rather than commit that."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    (repo / ".gitignore").write_text("/results/**/checkpoints/\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "commit", "-qm", "start")
    _run(repo / "results" / "grid", "going", 2)
    env = {
        **os.environ,
        **{
            f"GIT_{who}_{what}": "t"
            for who in ("AUTHOR", "COMMITTER")
            for what in ("NAME", "EMAIL")
        },
    }

    def park_commit() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(SCRIPT), "--commit"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
        )

    result = park_commit()
    assert result.returncode == 0, result.stderr
    assert _last_commit(repo) == (
        "Park going at epoch 2 (scripts/park.py)",
        {
            "results/grid/going.json",
            "results/grid/checkpoints/going-epoch1.keras",
            "results/grid/checkpoints/going-epoch2.keras",
        },
    )
    assert not _git(repo, "status", "--porcelain")

    assert park_commit().returncode == 0
    assert _git(repo, "rev-list", "--count", "HEAD").strip() == "2"

    going = RunRecord(repo / "results/grid/going.json", {"run": "going"}).start("train")
    going.log_epoch(2, {"loss": 0.3}, 1.0)  # its third epoch, then its result: settled
    going.finish(score=1.0)
    release(going.path)
    result = park_commit()
    assert result.returncode == 0, result.stderr
    assert _last_commit(repo) == (
        "Park going at epoch 3 (finished) (scripts/park.py)",
        {
            "results/grid/going.json",
            "results/grid/checkpoints/going-epoch1.keras",  # no longer needed: deleted
            "results/grid/checkpoints/going-epoch2.keras",
        },
    )
    assert not _git(repo, "ls-files", "results/grid/checkpoints")
    assert '"finished"' in _git(repo, "show", "HEAD:results/grid/going.json")

    (repo / "notes.txt").write_text("mine")
    _git(repo, "add", "notes.txt")
    result = park_commit()
    assert result.returncode == 2 and "the index already holds staged changes" in result.stderr
    assert _git(repo, "rev-list", "--count", "HEAD").strip() == "3"


def _park_module():
    spec = importlib.util.spec_from_file_location("park_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_render_committed_renders_the_committed_records_and_spares_uncommitted_edits(
    tmp_path: Path, monkeypatch
):
    """``--render``: the report is rendered in a worktree of HEAD, so it reads the parked
    (committed) record, not the newer one the run has written here since; what rendering
    changed is committed, and nothing is while a file it would change has uncommitted edits."""
    park = _park_module()
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    (repo / "REPORT.md").write_text("never rendered\n")
    record = repo / "results" / "grid" / "going.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"epochs": [1, 2]}')
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "park at epoch 2")
    record.write_text('{"epochs": [1, 2, 3]}')  # the run went on here, uncommitted
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "t")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "t@t")
    monkeypatch.chdir(repo)
    render = (
        sys.executable,
        "-c",
        "import json, pathlib; n = len(json.load(open('results/grid/going.json'))['epochs']);"
        "pathlib.Path('REPORT.md').write_text(f'{n} epochs\\n');"
        "pathlib.Path('figures').mkdir(); pathlib.Path('figures/f.pdf').write_text('pdf')",
    )

    assert park.render_committed(render) is not None
    assert _git(repo, "show", "HEAD:REPORT.md") == "2 epochs\n"
    assert _git(repo, "show", "HEAD:figures/f.pdf") == "pdf"
    assert _git(repo, "status", "--porcelain").split() == ["M", "results/grid/going.json"]
    assert _git(repo, "worktree", "list").count("\n") == 1  # its worktree is gone
    assert park.render_committed(render) is None  # nothing new to render

    _git(repo, "commit", "-qam", "park at epoch 3")
    (repo / "REPORT.md").write_text("my edit\n")
    assert park.render_committed(render) is None
    assert (repo / "REPORT.md").read_text() == "my edit\n"
    assert _git(repo, "show", "HEAD:REPORT.md") == "2 epochs\n"
