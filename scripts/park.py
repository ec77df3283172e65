"""Stage every unfinished run that can resume, its record and its checkpoints, for a commit.

A session ends abruptly, and the next may start on a fresh machine with only what was committed:
checkpoints are git-ignored, so an unfinished run's checkpoint is lost and the run starts over
(issue 15: four multiplication runs at T0 = 5000 lost 76-79 epochs that way). Run this before a
session ends (it may run while the grid trains on), then commit; the next session's ``grid``
resumes each parked run from its newest committed checkpoint (``training.resume``)::

    python scripts/park.py            # results/; or: python scripts/park.py RESULTS
    git commit -m "Park the unfinished runs"

``--commit`` commits what it staged itself (the subject names each run and its epoch), and
``--every MINUTES`` parks and commits again every MINUTES until stopped, so that a session cut
off while a run trains loses at most that many minutes of it (a session once lost 19 epochs of
a variable-length run that way: the record's newer epochs came back, the git-ignored checkpoint
did not)::

    nohup python scripts/park.py --every 10 --render > /tmp/park.log 2>&1 &

Every park commit changes a committed record, so the committed report no longer matches the
records, and CI's ``tests/test_report_identical.py`` fails on a session cut off after it (one
such submission failed CI). ``--render`` therefore renders the report after each park commit
from the committed records, in a git worktree of that commit (the running record here may be
newer), and commits what rendering changed (``render_committed``); it skips that while a file
rendering would change has uncommitted edits here.

A Raffel & Ellis checkpoint is ~0.2 MB; checkpoints over ``--max-mib`` (an LM `paper` one:
25-60 MB) are not staged, and their runs resume only on the machine that holds them.
Checkpoints committed by an earlier park that are gone from the tree (the run went on, or
finished and deleted them), or whose run has finished or failed since (here, or on a device
whose record came back), are removed and staged as deleted; a committed record whose run has
finished or failed here since is staged too (its result must survive the session, its
checkpoints need not). A record whose run is writing it while it is staged is staged again
until the record and its checkpoints agree (a checkpoint is saved before the record logs it, so
a staged record never names a checkpoint that was not staged with it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from thesis_repro.records import CorruptRecord, load_record, settled
from thesis_repro.training import CHECKPOINT_NAME, checkpoint_record_path, unfinished_checkpoints

#: The report, rendered from the records of the folder it runs in (``python -m thesis_repro``).
RENDER_REPORT = (sys.executable, "-m", "thesis_repro", "report")


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def checkpoints_of(record_path: Path) -> list[Path]:
    """Every checkpoint file of the run of ``record_path`` (epochs and mid-epoch)."""
    folder = record_path.parent / "checkpoints"
    return sorted(
        p
        for p in folder.glob(f"{record_path.stem}-*.keras")
        if (m := CHECKPOINT_NAME.fullmatch(p.name)) and m["stem"] == record_path.stem
    )


class StillWriting(Exception):
    """A run wrote its record or a checkpoint each time it was staged (``stage_run``)."""


def stage_run(record_path: Path, attempts: int = 30, wait: float = 2.0) -> list[Path]:
    """``git add -f`` the record and its checkpoints, again until no write came in between
    (the record unchanged, no checkpoint newer than it); the files staged."""
    for _ in range(attempts):
        before = record_path.read_bytes()
        files = [record_path, *checkpoints_of(record_path)]
        _git("add", "-f", "--", *map(str, files))
        stamp = record_path.stat().st_mtime
        current = record_path.read_bytes() == before
        if current and all(p.stat().st_mtime <= stamp for p in files[1:] if p.exists()):
            return files
        time.sleep(wait)
    raise StillWriting(f"{record_path}: its run keeps writing it; stop the run and park again")


def park(results: Path, max_mib: float) -> list[Path]:
    """Stage the resumable unfinished runs under ``results`` (checkpoints up to ``max_mib``
    each), the deletion of committed checkpoints gone from the tree or whose run has settled,
    and committed records whose run has settled since; the files staged."""
    staged: list[Path] = []
    records = {checkpoint_record_path(p) for p in unfinished_checkpoints(results)}
    for record_path in sorted(r for r in records if r is not None):
        size = max(p.stat().st_size for p in checkpoints_of(record_path)) / 2**20
        if size > max_mib:
            print(f"not parked (a {size:.0f} MiB checkpoint): {record_path}", file=sys.stderr)
            continue
        staged += stage_run(record_path)
    pattern = f"{results}/**/checkpoints/*.keras"
    gone = _git("ls-files", "--deleted", "--", pattern).split()
    if gone:
        _git("add", "-u", "--", *gone)
    settled_elsewhere = [  # parked, then finished here or on a device: no longer needed
        p
        for p in _git("ls-files", "--", pattern).split()
        if p not in gone and _settled_or_missing(checkpoint_record_path(Path(p)))
    ]
    if settled_elsewhere:
        _git("rm", "-q", "-f", "--", *settled_elsewhere)
    finished = [  # committed unfinished by an earlier park, settled here since: its result
        p
        for p in _git("ls-files", "--modified", "--", f"{results}/**/*.json").split()
        if Path(p).exists() and _settled(Path(p))
    ]
    if finished:
        _git("add", "--", *finished)
    return staged + [Path(p) for p in gone + settled_elsewhere + finished]


def _settled_or_missing(record_path: Path | None) -> bool:
    return record_path is None or not record_path.exists() or _settled(record_path)


def _settled(record_path: Path) -> bool:
    try:
        return settled(load_record(record_path))
    except CorruptRecord:
        return False


def commit_parked(staged: list[Path]) -> str | None:
    """Commit the index ``park`` staged; the commit's subject, or None when nothing changed."""
    if not _git("diff", "--cached", "--name-only"):
        return None
    runs = []
    for path in sorted(p for p in staged if p.suffix == ".json" and p.exists()):
        record = load_record(path)
        done = " (finished)" if settled(record) else ""
        runs.append(f"{path.stem} at epoch {len(record.get('epochs', []))}{done}")
    subject = f"Park {', '.join(runs)}" if runs else "Park: parked checkpoints no longer needed"
    _git("commit", "-q", "-m", f"{subject} (scripts/park.py)")
    return subject


def render_committed(command: Sequence[str] = RENDER_REPORT) -> str | None:
    """Run ``command`` (the report, niced) in a worktree of HEAD and commit here the files it
    changed or added there, so that the committed report is rendered from the committed
    records; the commit's subject, or None when nothing changed, rendering failed or a file it
    changed has uncommitted edits here (they are left alone)."""
    root = Path(_git("rev-parse", "--show-toplevel").strip())
    _git("worktree", "prune")  # one left by a round killed while rendering
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "render"
        _git("worktree", "add", "-q", "--detach", str(tree), "HEAD")
        try:
            result = subprocess.run(
                command, cwd=tree, capture_output=True, text=True, preexec_fn=lambda: os.nice(19)
            )
            if result.returncode:
                print(f"render failed:\n{result.stderr[-2000:]}", file=sys.stderr, flush=True)
                return None
            entries = _git("status", "--porcelain", "-z", "--untracked-files=all", cwd=tree)
            changed = [entry[3:] for entry in entries.split("\0") if entry]
            if not changed:
                return None
            if dirty := _git("status", "--porcelain", "--", *changed, cwd=root):
                print(f"not rendered (uncommitted edits here):\n{dirty}", file=sys.stderr)
                return None
            for name in changed:
                if (tree / name).exists():
                    (root / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(tree / name, root / name)
                else:
                    (root / name).unlink(missing_ok=True)
        finally:
            _git("worktree", "remove", "--force", str(tree))
    _git("add", "-A", "--", *changed, cwd=root)
    subject = "Report rendered from the parked records (scripts/park.py --render)"
    _git("commit", "-q", "-m", subject, cwd=root)
    return subject


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", type=Path, default=Path("results"))
    parser.add_argument(
        "--max-mib", type=float, default=2.0, help="largest checkpoint to stage (default 2)"
    )
    parser.add_argument(
        "--commit", action="store_true", help="commit what was staged (the index must be clean)"
    )
    parser.add_argument(
        "--every",
        type=float,
        metavar="MINUTES",
        help="park and commit again every MINUTES until stopped (implies --commit)",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="after each park commit, render the report from the committed records and commit "
        "it (the committed report then matches them; implies --commit)",
    )
    args = parser.parse_args()
    if not args.results.is_dir():
        parser.error(f"{args.results} is not a folder")
    if args.every is not None and args.every <= 0:
        parser.error("--every takes a positive number of minutes")
    commit = args.commit or args.every is not None or args.render
    if commit and _git("diff", "--cached", "--name-only"):
        parser.error("the index already holds staged changes; commit or unstage them first")
    while True:
        if commit and _git("diff", "--cached", "--name-only"):  # someone else's, staged since
            print("skipped: the index holds staged changes", file=sys.stderr, flush=True)
        else:
            try:
                staged = park(args.results, args.max_mib)
            except StillWriting as error:
                if args.every is None:
                    raise SystemExit(str(error)) from None
                _git("reset", "-q")  # the index was clean: drop this round's staging
                print(f"skipped this round: {error}", file=sys.stderr, flush=True)
                staged = []
            for path in staged:
                print(f"staged: {path}" if path.exists() else f"staged deleted: {path}")
            if commit and (subject := commit_parked(staged)):
                print(f"committed: {subject}", flush=True)
                if args.render and (rendered := render_committed()):
                    print(f"committed: {rendered}", flush=True)
        if args.every is None:
            return
        time.sleep(args.every * 60)


if __name__ == "__main__":
    main()
