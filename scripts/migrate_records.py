"""Migrate the committed records once to the record format of the redesign (issue 17).

    python scripts/migrate_records.py results/   # run on 2026-11-23 (three times, as fields
                                                 # came with the gap study and FF mixed
                                                 # precision), 2026-11-24 and
                                                 # 2026-11-25; idempotent

What it changes, so that the code reads every record one way and keeps no compatibility branch:

1. Language-model run configs gain the fields added after the first runs, at the values those
   runs used: ``min_prefix`` 0, ``position_aware`` "none" (thesis 4.2 options),
   ``dtype_policy`` "float32", ``lowercase`` true and ``bounded`` false (the gap study's
   factors, issue 18; Kneser-Ney configs gain ``lowercase`` true). ``lm.RunConfig.as_dict``
   used to leave some out at their defaults; it now stores every field. A run whose record
   name carries a config hash (a config off its preset's scale) is renamed to the hash of its
   full config, with its checkpoints.
2. Records written before the Keras backend was recorded get ``hardware.backend``
   "tensorflow", ``device`` "cpu" and ``dtype_policy`` "float32", with ``hardware.inferred``
   saying so: all of them ran on this project's 2-CPU machines with TensorFlow as the only
   installed backend (their ``versions`` list no JAX) and before dtype policies were an option.
   A record whose ``versions`` list JAX, or whose machine is not a plain CPU one, is left alone.
3. Raffel & Ellis run configs gain ``dtype_policy`` "float32" (mixed precision came later).
4. Kneser-Ney records name the command as it is now spelled: ``python -m thesis_repro.lm
   kneser-ney ...`` (it was ``python -m thesis_repro.kneser_ney ...``).
5. (Run again later on 2026-11-23.) Language-model records of a config off its preset's scale
   are renamed to the name ``RunConfig.name`` now gives them, which spells the difference out
   (``cpu-5gram-thesis-seed0-9c049a48`` -> ``cpu-5gram-thesis-ep12-seed0-9c049a48``): item 1's
   rename, with the same hash.
6. (Run on 2026-11-24.) Raffel & Ellis run configs gain ``preset``, read from the grid command
   that produced them (``... grid --preset cpu``; a record of a single ``run`` gets "custom"),
   and are renamed to ``<preset>-<name>``: a ``paper`` run of a cell had the same name as its
   ``cpu`` run (epoch cap 100 against 10) and could not be written beside it.
7. (Run on 2026-11-25.) Raffel & Ellis run configs gain ``mask_padding`` true: every run
   before the option (Raffel's script's unmasked padding) masked its padding.
"""

from __future__ import annotations

import sys
from pathlib import Path

from thesis_repro.ffattention import config as ffattention_config
from thesis_repro.ffattention.train import record_path as ffattention_record_path
from thesis_repro.files import write_json_atomic
from thesis_repro.lm.config import RunConfig, record_path
from thesis_repro.records import load_record

LM_LATER_FIELDS = {
    "min_prefix": 0,
    "position_aware": "none",
    "dtype_policy": "float32",
    "lowercase": True,
    "bounded": False,
}
KN_LATER_FIELDS = {"lowercase": True}
FFATTENTION_LATER_FIELDS = {"dtype_policy": "float32", "mask_padding": True}
OLD_KN_COMMAND = "python -m thesis_repro.kneser_ney"
NEW_KN_COMMAND = "python -m thesis_repro.lm kneser-ney"
INFERRED = (
    "backend, device and dtype policy filled in by scripts/migrate_records.py: TensorFlow was "
    "the only backend installed (no JAX in versions), the machine had no GPU, and dtype "
    "policies were not yet an option"
)


def migrate_lm(path: Path, record: dict, results_dir: Path) -> Path:
    """Item 1; returns the record's (possibly new) path."""
    for field, value in LM_LATER_FIELDS.items():
        record["config"].setdefault(field, value)
    wanted = record_path(RunConfig(**record["config"]), results_dir)
    if wanted.name == path.name:
        return path
    for checkpoint in (path.parent / "checkpoints").glob(f"{path.stem}-*.keras"):
        checkpoint.rename(checkpoint.with_name(checkpoint.name.replace(path.stem, wanted.stem)))
    path.rename(wanted)
    print(f"renamed {path} -> {wanted.name}")
    return wanted


def migrate_ffattention(path: Path, record: dict, results_dir: Path) -> Path:
    """Item 6; returns the record's (possibly new) path."""
    if "preset" not in record["config"]:
        words = record.get("command", "").split()
        preset = words[words.index("--preset") + 1] if "--preset" in words else None
        record["config"]["preset"] = preset or ffattention_config.CUSTOM
    config = ffattention_config.RunConfig(**record["config"])
    wanted = ffattention_record_path(config, results_dir)
    if wanted.name == path.name:
        return path
    path.rename(wanted)
    print(f"renamed {path} -> {wanted.name}")
    return wanted


def migrate_hardware(record: dict) -> None:
    """Item 2."""
    hardware = record.setdefault("hardware", {})
    if "backend" in hardware or "jax" in record.get("versions", {"jax": "?"}):
        return
    if "gpu" in str(hardware.get("system", "")).lower():
        return
    hardware.update(backend="tensorflow", device="cpu", dtype_policy="float32", inferred=INFERRED)


def main(results_dir: Path) -> int:
    changed = 0
    for path in sorted(results_dir.rglob("*.json")):
        record = load_record(path)
        if record is None or "config" not in record:
            continue
        before = repr(record)
        if path.relative_to(results_dir).parts[0] == "lm":
            path = migrate_lm(path, record, results_dir)
        later = {"kneser-ney": KN_LATER_FIELDS, "ffattention": FFATTENTION_LATER_FIELDS}
        for field, value in later.get(path.relative_to(results_dir).parts[0], {}).items():
            record["config"].setdefault(field, value)
        if path.relative_to(results_dir).parts[0] == "ffattention":
            path = migrate_ffattention(path, record, results_dir)
        migrate_hardware(record)
        command = record.get("command", "")
        if command.startswith(OLD_KN_COMMAND + " ") or command == OLD_KN_COMMAND:
            record["command"] = NEW_KN_COMMAND + command[len(OLD_KN_COMMAND) :]
        if repr(record) != before:
            write_json_atomic(path, record)
            changed += 1
    print(f"migrated {changed} records under {results_dir}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "results")))
