"""One JSON record per run: written atomically after every epoch, read back for tables and figures.

A record is a dict with ``config`` (what was run), ``command`` (how), ``epochs`` (one entry per
finished epoch, keyed by its index), ``summary`` (filled when the run finishes), ``finished``,
``versions`` and ``hardware``. A finished record means the run is never repeated; an unfinished
one is continued from its checkpoint. Continued on another machine or device, the record keeps
where its earlier epochs ran in ``earlier_machines`` (``hardware``, ``versions`` and ``epochs``,
the epochs done before the move), and the tables' "Ran on" lines count every machine.

A run whose training loss becomes NaN or infinite (``training.FailOnNonFiniteLoss``) is **failed**:
its record keeps ``"finished": false`` and gains ``"failed": {"reason": "loss became nan at update
137", "step": 137}`` (``step``: the 1-based index of the update whose loss was not finite, counted
over the whole run), and the run raises :class:`RunFailed`. A failed record is final: it is never
continued, and starting it again raises :class:`RunFailed` saying it failed before; delete the
record to run it again. Tables and figures leave failed runs out and name them
(:func:`split_failed`, :func:`failed_note`); a record without ``failed`` has not failed.

A record that cannot be read (truncated, edited by hand) raises :class:`CorruptRecord`, whose
one-line message names the file and says to delete it; :func:`load_records` (what tables and
reports read) skips such a file with a one-line warning on stderr instead. A run whose record
holds another config raises :class:`RunConflict`, naming the record and the settings that differ.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

from thesis_repro.files import write_json_atomic
from thesis_repro.run_lock import claim, release
from thesis_repro.settings import COMMAND_ENV


class _HardwareRequired(TypedDict):
    machine: str
    processor: str
    cpus: int
    system: str
    backend: str
    device: str


# Optional keys in a total=False subclass (NotRequired needs Python 3.11; we support 3.10).
class Hardware(_HardwareRequired, total=False):
    """Where a run ran (:func:`hardware`): the machine, then the Keras backend, the device and
    the run's dtype policy; ``distribution`` and ``devices`` when it ran data-parallel."""

    dtype_policy: str  # every Keras run has it (not the NumPy Kneser-Ney records)
    matmul_precision: str  # on an accelerator: the backend's float32 matmul setting
    distribution: str
    devices: int
    inferred: str  # set by scripts/migrate_records.py: how the above were filled


class Failure(TypedDict):
    """Why and where a run failed (its loss became NaN or infinite at update ``step``)."""

    reason: str
    step: int


class _RecordRequired(TypedDict):
    config: dict[str, Any]
    command: str
    epochs: list[dict[str, Any]]
    summary: dict[str, Any]
    finished: bool
    started: str
    wall_seconds: float
    versions: dict[str, str]
    hardware: Hardware


class Record(_RecordRequired, total=False):
    """One run's JSON record: written only by :class:`RunRecord`, read only by
    :func:`load_record` / :func:`load_records` (which add ``path``).

    ``config`` is the experiment's ``RunConfig`` as a dict; ``epochs`` one entry per finished
    epoch (``epoch``, 1-based, plus the experiment's scores); ``summary`` the experiment's
    ``summarize`` of them, filled when the run finishes. The rest is experiment-specific:
    ``corpus`` and ``jit_compile`` (lm, Kneser-Ney), ``implementation`` and
    ``earlier_implementations`` (ffattention), ``pretrain`` (addition), ``eval_seconds``
    (scoring after training), ``partial`` (a mid-epoch checkpoint's position,
    ``training.MidEpochCheckpoint``).
    """

    ended: str
    earlier_machines: list[dict[str, Any]]  # RunRecord.start: a run resumed on another machine
    failed: Failure
    path: str
    corpus: dict[str, Any]
    jit_compile: bool
    implementation: str
    earlier_implementations: list[dict[str, Any]]  # ffattention: resumed in another one
    pretrain: dict[str, Any]
    eval_seconds: float
    partial: dict[str, Any]


def run_seconds(record: Record) -> float:
    """Wall time of a run: its training epochs plus pretraining and evaluation where recorded."""
    seconds = float(record.get("wall_seconds", 0.0)) + float(record.get("eval_seconds", 0.0))
    return seconds + float(record.get("pretrain", {}).get("seconds", 0.0))


def library_versions() -> dict[str, str]:
    """Versions of the libraries a result depends on."""
    versions = {"python": sys.version.split()[0]}
    for name in ("numpy", "tensorflow", "jax", "keras", "matplotlib"):
        try:
            module = __import__(name)
            versions[name] = getattr(module, "__version__", "?")
        except ImportError:
            continue
    return versions


#: Vector instruction sets, widest first: the first one a CPU has is named in ``processor``.
VECTOR_ISAS = ("avx512f", "avx2", "avx", "sse4_2")


def cpu_model(cpuinfo: str) -> str | None:
    """``AMD EPYC, family 25 model 1, avx2``: the CPU's name, family and model and the widest
    vector instruction set it has (:data:`VECTOR_ISAS`), from the text of ``/proc/cpuinfo``;
    None if it names no model.

    Two hosts that differ here may round differently under the same code and seed: the math
    libraries pick their kernels by instruction set (oneDNN's cap changes a run's numbers:
    ``scripts/isa_rounding.py``).
    """
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block ends at its blank line
            continue
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name")
    if not name:
        return None
    parts = [name]
    if "cpu family" in fields and "model" in fields:
        parts.append(f"family {fields['cpu family']} model {fields['model']}")
    flags = set(fields.get("flags", "").split())
    parts += [isa for isa in VECTOR_ISAS if isa in flags][:1]
    return ", ".join(parts)


def processor() -> str:
    """The CPU (:func:`cpu_model` of ``/proc/cpuinfo``); elsewhere ``platform.processor()`` or,
    failing that, the architecture."""
    try:
        model = cpu_model(Path("/proc/cpuinfo").read_text())
    except OSError:
        model = None
    return model or platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The machine: architecture, processor, CPUs, system."""
    return {
        "machine": platform.machine(),
        "processor": processor(),
        "cpus": os.cpu_count(),
        "system": platform.platform(),
    }


def hardware() -> Hardware:
    """What machine produced a result, and on what: Keras backend, device, dtype policy."""
    return {**machine(), **compute_device()}  # type: ignore[typeddict-item]


def compute_device() -> dict[str, str]:
    """The Keras backend, the device it computes on (``cpu`` or the accelerator's name), the
    global dtype policy and, on an accelerator, the float32 matmul setting
    (:func:`float32_matmul_precision`)."""
    import keras

    backend = keras.backend.backend()
    device = "cpu"
    try:
        if backend == "jax":
            import jax

            first = jax.devices()[0]
            device = "cpu" if first.platform == "cpu" else str(first.device_kind)
        elif backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                details = tf.config.experimental.get_device_details(gpus[0])
                device = str(details.get("device_name", gpus[0].name))
        elif backend == "torch":
            import torch

            if torch.cuda.is_available():
                device = torch.cuda.get_device_name(0)
    except Exception as error:  # never lose a run over a device query
        device = f"unknown ({type(error).__name__})"
    found = {"backend": backend, "device": device, "dtype_policy": keras.config.dtype_policy().name}
    if device != "cpu":
        found["matmul_precision"] = float32_matmul_precision(backend)
    return found


def float32_matmul_precision(backend: str) -> str:
    """How the backend multiplies float32 matrices on an accelerator, as it is set: for JAX
    ``jax_default_matmul_precision`` (``default``: TF32 on NVIDIA GPUs since Ampere, JAX's
    "Matmul precision" page), for TensorFlow ``tf32`` or ``float32`` (TensorFloat-32 execution,
    on by default), for PyTorch ``torch.get_float32_matmul_precision()`` (``highest``: float32).
    A CPU computes float32 matmuls in float32 whatever the setting."""
    try:
        if backend == "jax":
            import jax

            return str(jax.config.jax_default_matmul_precision or "default")
        if backend == "tensorflow":
            import tensorflow as tf

            tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
            return "tf32" if tf32 else "float32"
        if backend == "torch":
            import torch

            return torch.get_float32_matmul_precision()
    except Exception as error:  # never lose a run over a settings query
        return f"unknown ({type(error).__name__})"
    return "unknown"


def command_line() -> str:
    """The command that is running, as a user would type it (a ``--jobs`` worker: the user's)."""
    if os.environ.get(COMMAND_ENV):
        return os.environ[COMMAND_ENV]
    argv = list(sys.argv)
    if argv and "ipykernel" in argv[0]:
        return "a Jupyter notebook (see notebooks/)"
    if argv and argv[0].endswith(".py") and "thesis_repro" in argv[0]:
        argv = ["python", "-m", _module_name(Path(argv[0])), *argv[1:]]
    return " ".join(argv)


def _module_name(script: Path) -> str:
    """``.../thesis_repro/addition/__main__.py`` -> ``thesis_repro.addition`` (what ``python -m``
    was given); ``.../thesis_repro/__main__.py`` -> ``thesis_repro``."""
    parts = script.with_suffix("").parts
    if "thesis_repro" in parts:  # the package's folder: its subpackages and module follow
        parts = parts[len(parts) - parts[::-1].index("thesis_repro") :]
    else:
        parts = parts[-1:]
    if parts and parts[-1] == "__main__":
        parts = parts[:-1]
    return ".".join(("thesis_repro", *parts))


class RunFailed(RuntimeError):
    """A run whose loss became NaN or infinite, now or before; ``record``: its record (with
    ``path``, as ``load_records`` gives it)."""

    def __init__(self, message: str, record: Record) -> None:
        super().__init__(message)
        self.record = record


class RunRecord:
    """The JSON record of one run at ``path``; ``start`` creates or reopens it."""

    def __init__(self, path: str | os.PathLike, config: dict[str, Any]) -> None:
        self.path = Path(path)
        self.config = config
        self.data: Record = {}  # type: ignore[typeddict-item]  (filled by start)

    @property
    def finished(self) -> bool:
        return bool(self.data.get("finished"))

    @property
    def failed(self) -> Failure | None:
        """``{"reason": ..., "step": ...}`` of a failed run, else None."""
        return self.data.get("failed") or None

    def start(self, command: str | None = None) -> RunRecord:
        """Claim the run (:func:`claim`: raises ``RunBusy`` while another process trains it)
        and open its record, keeping the epochs of an interrupted run with the same config. A
        run that failed before raises :class:`RunFailed` (never retrained); a record with
        another config, :class:`RunConflict`; an unreadable one, :class:`CorruptRecord`."""
        claim(self.path)
        self.command = command or command_line()  # what opened the record
        try:
            existing = load_record(self.path)
        except CorruptRecord:
            release(self.path)
            raise
        if existing is not None and existing.get("config") != self.config:
            release(self.path)
            raise RunConflict(self.path, existing.get("config"), self.config)
        if existing is not None and existing.get("failed"):
            release(self.path)
            self.data = existing
            raise RunFailed(self.failure_message(before=True), self.with_path())
        self.data = existing or {
            "config": self.config,
            "command": self.command,
            "epochs": [],
            "summary": {},
            "finished": False,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "wall_seconds": 0.0,
        }
        now = hardware()
        if existing is not None and _where(existing.get("hardware", {})) != _where(now):
            # resumed on another machine or device (a GPU run of issue 15 goes on in a later
            # lease): keep where its earlier epochs ran
            self.data.setdefault("earlier_machines", []).append(
                {
                    "hardware": existing["hardware"],
                    "versions": existing.get("versions", {}),
                    "epochs": self.completed_epochs(),
                }
            )
        self.data["versions"] = library_versions()
        self.data["hardware"] = now
        return self

    def skip(self, verbose: int = 1) -> Record:
        """The data of a finished run, its lock released at once: there is nothing to train,
        and a grid's other workers must not see it as busy (2026-11-26: a worker held every
        finished run it skipped until it exited, and the next worker logged them as "being
        run")."""
        release(self.path)
        if verbose:
            print(f"[skip] {self.path.stem}: finished ({self.path})", flush=True)
        return self.data

    def completed_epochs(self) -> int:
        return len(self.data.get("epochs", []))

    def keep_epochs(self, done: int) -> None:
        """Keep the first ``done`` logged epochs, those a resumed run goes on from
        (``training.resume``), and forget the rest: their share of ``wall_seconds`` (pro rata),
        and the machines (``earlier_machines``) and implementations (``earlier_implementations``,
        ffattention) that ran only dropped epochs. ``done`` = 0: the run starts over, so
        ``started``, ``wall_seconds``, those lists and ``command`` start over too (it ran on
        this machine alone, by the command running it now; 2026-12-07: one kept the H200's)."""
        logged = self.completed_epochs()
        if done >= logged:
            return
        self.data["epochs"] = self.data["epochs"][:done]
        if done == 0:
            now = time.strftime("%Y-%m-%d %H:%M:%S")
            self.data.update(started=now, wall_seconds=0.0, command=self.command)
        else:
            self.data["wall_seconds"] = float(self.data.get("wall_seconds", 0.0)) * done / logged
        for key in ("earlier_machines", "earlier_implementations"):
            earlier = [
                {**entry, "epochs": min(entry["epochs"], done)}
                for entry in self.data.pop(key, [])
                if min(entry["epochs"], done) > 0
            ]
            if earlier:
                self.data[key] = earlier

    def log_epoch(self, epoch: int, values: dict[str, Any], seconds: float) -> None:
        """Store epoch ``epoch`` (0-based; re-logging an epoch replaces it and drops later ones)."""
        epochs = self.data["epochs"][:epoch]
        epochs.append({"epoch": epoch + 1, **values})
        self.data["epochs"] = epochs
        self.data["wall_seconds"] = float(self.data.get("wall_seconds", 0.0)) + seconds
        self.save()

    def finish(self, **summary: Any) -> None:
        self.data["summary"] = summary
        self.data["finished"] = True
        self.data["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
        self.save()
        release(self.path)

    def fail(self, reason: str, step: int) -> None:
        """Record the run as failed at update ``step`` (1-based) and release it."""
        self.data["failed"] = {"reason": reason, "step": int(step)}
        self.data["finished"] = False
        self.data["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
        self.save()
        release(self.path)

    def failure_message(self, before: bool = False) -> str:
        """One line: which run failed, why, and how to run it again."""
        failed = self.failed or {}
        when = "failed before" if before else "failed"
        return (
            f"{self.path.stem} {when}: {failed.get('reason', '?')} (recorded in {self.path}; "
            "delete that record to run it again)"
        )

    def with_path(self) -> Record:
        """The record's data with its ``path``, as ``load_records`` returns it."""
        return {**self.data, "path": str(self.path)}

    def save(self) -> None:
        write_json_atomic(self.path, self.data)


class CorruptRecord(ValueError):
    """A record file that is not a JSON object (truncated, half-copied, edited by hand)."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(
            f"{self.path} is not a readable record ({problem}); delete it to run that run again"
        )


class RunConflict(ValueError):
    """A run whose record already holds another config (different settings, same name)."""

    def __init__(self, path: str | os.PathLike, recorded: Any, wanted: Mapping[str, Any]) -> None:
        self.path = Path(path)
        recorded = recorded if isinstance(recorded, Mapping) else {}
        differ = [
            f"{key} {_short(recorded.get(key))} there, {_short(wanted.get(key))} now"
            for key in sorted({*recorded, *wanted}, key=str)
            if recorded.get(key) != wanted.get(key)
        ]
        super().__init__(
            f"{self.path} holds this run with other settings ({'; '.join(differ)}): rerun with "
            "the recorded settings, delete that record (and its checkpoints) to start afresh, "
            "or pass another --results folder"
        )


def _short(value: Any) -> str:
    """A config value for a one-line message (absent values read ``unset``)."""
    text = "unset" if value is None else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def load_record(path: str | os.PathLike) -> Record | None:
    """The record at ``path``, or None if there is none.

    Raises :class:`CorruptRecord` (naming the file) when it is not a JSON object.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptRecord(path, "not UTF-8 text") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise CorruptRecord(path, f"truncated or corrupt JSON: {error.msg}, {where}") from None
    if not isinstance(record, dict):
        raise CorruptRecord(path, f"a JSON {type(record).__name__}, not an object")
    return cast(Record, record)


def settled(record: Record) -> bool:
    """Whether a run has its result: finished, or failed (``RunFailed``); else it resumes."""
    return bool(record.get("finished") or record.get("failed"))


_warned: set[Path] = set()


def warn_corrupt(error: CorruptRecord) -> None:
    """One line on stderr (once per file and process): a report skips an unreadable record."""
    if error.path in _warned:
        return
    _warned.add(error.path)
    print(
        f"warning: skipped {error.path}: not a readable record ({error.problem}); delete it "
        "and rerun that run to replace it",
        file=sys.stderr,
        flush=True,
    )


def load_records(directory: str | os.PathLike) -> list[Record]:
    """Every record under ``directory`` (recursively), sorted by file name; an unreadable file
    is skipped with a warning (:func:`warn_corrupt`)."""
    directory = Path(directory)
    records = []
    for path in sorted(directory.rglob("*.json")):
        try:
            record = load_record(path)
        except CorruptRecord as error:
            warn_corrupt(error)
            continue
        if record is not None and "config" in record:
            record["path"] = str(path)
            records.append(record)
    return records


def split_failed(
    records: Iterable[Record],
) -> tuple[list[Record], list[Record]]:
    """``records`` split into those that did not fail and those that failed."""
    kept: list[Record] = []
    failed: list[Record] = []
    for record in records:
        (failed if record.get("failed") else kept).append(record)
    return kept, failed


def run_name(record: Record) -> str:
    """A record's run name: its file name without ``.json`` (``load_records`` sets ``path``)."""
    return Path(record.get("path", "?")).stem


def _named(failed: list[Record]) -> str:
    """``NAME (REASON); NAME (REASON)`` of failed records."""
    return "; ".join(f"{run_name(r)} ({r['failed'].get('reason', '?')})" for r in failed)


def failed_note(failed: list[Record], where: str = "") -> str:
    """``1 failed run left out<where>: NAME (REASON)`` for rendered tables; "" for none."""
    if not failed:
        return ""
    plural = "" if len(failed) == 1 else "s"
    return f"{len(failed)} failed run{plural} left out{where}: {_named(failed)}"


def grid_failures(records: list[Record]) -> str:
    """The one-line error of a grid whose runs include failed ones ("" if none failed)."""
    failed = split_failed(records)[1]
    if not failed:
        return ""
    return (
        f"{len(failed)} of {len(records)} runs failed: {_named(failed)} (the tables leave them "
        "out; delete a failed run's record to run it again)"
    )


#: The keys of ``hardware()`` that say where a run ran (a run adds its dtype policy and
#: distribution after ``RunRecord.start``; those are the run's, not the machine's).
WHERE_KEYS = ("machine", "cpus", "system", "backend", "device", "matmul_precision")


def _where(machine: Mapping[str, Any]) -> dict[str, Any]:
    return {key: machine.get(key) for key in WHERE_KEYS}


def machines_of(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every machine a record's epochs ran on: the ``earlier_machines`` of a run resumed
    elsewhere, then its last (``hardware``)."""
    earlier = [m["hardware"] for m in record.get("earlier_machines", [])]
    return earlier + ([record["hardware"]] if "hardware" in record else [])


def format_hardware(machine: Mapping[str, Any]) -> str:
    """CPUs (their model where the record names one: records before 2026-11-29 give only the
    architecture) and system, then the Keras backend, device and dtype policy
    (``records.hardware``), and the float32 matmul setting where a record has one (an
    accelerator's)."""
    precision = machine.get("matmul_precision")
    cpu = machine.get("processor") or machine["machine"]
    if cpu != machine["machine"]:
        cpu = f"{machine['machine']}, {cpu}"
    return (
        f"{machine['cpus']} CPUs ({cpu}), {machine['system']}, Keras backend "
        f"{machine['backend']} on {machine['device']}, dtype policy "
        f"{machine.get('dtype_policy', 'none (NumPy)')}"
        + (f", float32 matmuls: {precision}" if precision else "")
    )


def counted(texts: list[str]) -> str:
    """``text (n records)``, most frequent first, joined by ``; ``."""
    return "; ".join(
        f"{text} ({n} record{'s' if n > 1 else ''})" for text, n in Counter(texts).most_common()
    )


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 360 else f"{seconds:.0f} s"


def produced_by(records: list[Record], limit: int = 3) -> str:
    """The Markdown line under every rendered table: the commands that produced ``records``,
    where they ran (machine, Keras backend, device, dtype policy) and their summed wall time."""
    commands = sorted({r.get("command", "?") for r in records})
    more = f" (and {len(commands) - limit} more)" if len(commands) > limit else ""
    line = "Produced by: " + "; ".join(f"`{c}`" for c in commands[:limit]) + more
    machines = counted([format_hardware(m) for r in records for m in machines_of(r)])
    seconds = sum(run_seconds(r) for r in records)
    return f"{line}. Ran on: {machines}; wall time {hours(seconds)} summed over the runs."
