"""Two copies of one run's record, from two machines: which got further, and merging a folder
of records into another so that the further copy wins (issue 15's GPU slices,
``scripts/gpu_slice.sh``).

A record comes back from a lent GPU machine and meets the copy here; on a warm machine, the
records of its last call meet the working tree sent with the next one. Copying blindly would
let a run started over (its checkpoints left behind) replace a finished record.
"""

from __future__ import annotations

import os
from pathlib import Path

from thesis_repro.records import CorruptRecord, Record, load_record, settled, warn_corrupt


def progress(record: Record | None) -> tuple[int, int, int]:
    """How far a run has got, to choose between two copies of its record: a result (finished
    or failed) beats none, then more logged epochs, then more updates of a mid-epoch checkpoint
    (``partial``); no record at all is behind every record."""
    if record is None:
        return (-1, -1, -1)
    partial = record.get("partial") or {}
    return (int(settled(record)), len(record.get("epochs", [])), int(partial.get("steps", 0)))


def merge_records(
    source: str | os.PathLike, target: str | os.PathLike, checkpoints_of_source: bool = False
) -> list[Path]:
    """Copy each record under ``source`` to the same relative path under ``target`` where the
    copy there is missing or behind it (:func:`progress`); the paths copied (under ``target``).

    Two copies of one run's record meet when a lent GPU machine's results come back (or a warm
    machine's own results meet the working tree sent with the next call): the copy that got
    further wins, so a finished record is never replaced by the same run started over.
    ``checkpoints_of_source``: the checkpoints here are those of ``source``'s runs (a warm
    machine restoring its own records), so an unfinished copy under ``target`` of another
    attempt of the run (another ``started``) loses even when further along: resumed here, it
    would go on from the other attempt's weights (2026-11-26: a record of 24 epochs without
    its checkpoint, sent again, met the epoch-20 checkpoint of the run started over here)."""
    source, target = Path(source), Path(target)
    copied = []
    for path in sorted(source.rglob("*.json")):
        destination = target / path.relative_to(source)
        try:
            there = load_record(path)
        except CorruptRecord as error:
            warn_corrupt(error)
            continue
        try:
            here = load_record(destination)
        except CorruptRecord:
            here = None  # unreadable: any readable copy is better
        other_attempt = (
            checkpoints_of_source
            and here is not None
            and there is not None
            and not settled(here)
            and here.get("started") != there.get("started")
        )
        if other_attempt or progress(there) > progress(here):
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(path.read_bytes())
            copied.append(destination)
    return copied
