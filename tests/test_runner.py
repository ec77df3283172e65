"""One process per run (lock files) and ``grid --jobs N`` (thesis_repro.runner)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from thesis_repro.cli import write_whole_lines
from thesis_repro.ffattention import cli as ffattention_cli
from thesis_repro.lm import cli as lm_cli
from thesis_repro.records import RunFailed, RunRecord
from thesis_repro.run_lock import RunBusy, claim, lock_path, release
from thesis_repro.runner import walk_grid, without_jobs
from thesis_repro.settings import DATA_ENV

ROOT = Path(__file__).resolve().parents[1]


def test_a_run_held_by_a_live_process_is_busy_and_a_dead_ones_lock_is_taken_over(tmp_path):
    record = tmp_path / "run.json"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock_path(record).write_text(f"{socket.gethostname()} {holder.pid}")
        with pytest.raises(RunBusy, match=f"process {holder.pid}"):
            RunRecord(record, {"a": 1}).start()
        assert not record.exists(), "a busy run is not touched"
    finally:
        holder.kill()
        holder.wait()
    # The holder is gone (as after kill -9): its lock is stale and is taken over.
    opened = RunRecord(record, {"a": 1}).start()
    assert lock_path(record).read_text() == f"{socket.gethostname()} {os.getpid()}"
    claim(record)  # re-entrant within the process
    opened.finish(score=1.0)
    assert not lock_path(record).exists(), "finishing releases the lock"


def test_a_lock_of_another_host_is_never_taken_over(tmp_path):
    record = tmp_path / "run.json"
    lock_path(record).write_text("some-other-host 1")
    with pytest.raises(RunBusy, match="some-other-host"):
        claim(record)
    release(record)  # not ours: left alone
    assert lock_path(record).exists()


def test_walk_grid_leaves_busy_runs_and_goes_on_after_a_failed_one(capsys):
    def run_one(name: str) -> dict:
        if name == "busy":
            raise RunBusy("busy.json is being run by process 1 on elsewhere")
        if name == "bad":
            raise RunFailed("bad failed: loss became nan at update 3", {"config": name})
        return {"config": name}

    records = walk_grid(["a", "busy", "bad", "b"], run_one, str)
    assert [r["config"] for r in records] == ["a", "bad", "b"]
    out = capsys.readouterr().out
    assert "=== 4/4 b" in out and "[busy] busy.json" in out and "[failed] bad failed" in out


def test_without_jobs_removes_both_spellings():
    argv = ["grid", "--jobs", "4", "--preset", "smoke", "--jobs=2", "--seeds", "0"]
    assert without_jobs(argv) == ["grid", "--preset", "smoke", "--seeds", "0"]


def test_lm_grid_with_two_jobs_trains_every_run_once(tmp_path):
    results = tmp_path / "results"
    command = [
        sys.executable, "-m", "thesis_repro.lm", "grid", "--table", "ptb", "--preset", "smoke",
        "--corpus-name", "synthetic", "--results", str(results), "--figures",
        str(tmp_path / "figures"), "--verbose", "2", "--jobs", "2",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(results.rglob("*.json"))]
    assert len(records) == 4  # 2 models x 2 seeds of the smoke preset
    for record in records:
        assert record["finished"] and len(record["epochs"]) == record["config"]["epochs"]
        assert "--jobs 2" in record["command"], "records keep the command the user typed"
    started = [line for line in done.stdout.splitlines() if line.startswith("[run]")]
    assert len(started) == 4, "each run is trained by exactly one worker"
    assert not list(results.rglob("*.lock")), "every lock is released"
    assert "### PTB" in done.stdout, "the parent renders the report once, at the end"


class WriteLog(io.RawIOBase):
    """An unbuffered file that keeps each write it gets."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.writes.append(bytes(data))
        return len(data)


def test_every_line_of_a_worker_reaches_the_shared_pipe_in_one_write(monkeypatch):
    # CI, 2026-12-06: with PYTHONUNBUFFERED=1 a --jobs worker's print wrote the text and the
    # newline of its [run] line apart, and the other worker's [eval] line landed in between.
    files = {}
    for name in ("stdout", "stderr"):
        files[name] = WriteLog()  # what PYTHONUNBUFFERED=1 makes of sys.stdout, sys.stderr
        monkeypatch.setattr(sys, name, io.TextIOWrapper(files[name], write_through=True))
    write_whole_lines()
    write_whole_lines()  # idempotent: the streams are wrapped once
    print("[run] a -> a.json")
    print("two\nlines", "and more")
    print("error: bad", file=sys.stderr)
    sys.stdout.write("50%")  # a progress bar: shown at its flush, not held for a newline
    sys.stdout.flush()
    sys.stdout.write("\r100%\nepoch 1")
    print(": done", flush=True)
    assert files["stdout"].writes == [
        b"[run] a -> a.json\n", b"two\n", b"lines and more\n", b"50%", b"\r100%\n",
        b"epoch 1: done\n",
    ]  # fmt: skip
    assert files["stderr"].writes == [b"error: bad\n"]
    assert sys.stdout.writable() and not sys.stdout.isatty(), "the rest is the stream's"


def test_leftovers_of_a_killed_process_are_removed_and_only_those(tmp_path):
    from thesis_repro.files import temporary_name
    from thesis_repro.training import checkpoint_path, remove_leftovers

    record = RunRecord(tmp_path / "run.json", {"a": 1}).start()
    record.save()
    kept = checkpoint_path(record, 1)
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"a real checkpoint")
    other = kept.with_name(".other-run-epoch1.99.tmp.keras")  # another run's: not ours to touch
    leftovers = [
        temporary_name(kept.with_name("run-epoch2.keras")),
        temporary_name(kept.with_name("run.keras")),  # the final model's
        temporary_name(record.path),
    ]
    for path in [other, *leftovers]:
        path.write_bytes(b"")
    assert sorted(remove_leftovers(record)) == sorted(leftovers)
    assert kept.exists() and other.exists() and record.path.exists()
    assert not any(path.exists() for path in leftovers)


def test_a_single_run_command_on_a_busy_run_says_so_in_one_line(tmp_path, capsys):
    from thesis_repro import ffattention

    config = ffattention.RunConfig("table1", "addition", 50, "attention", 1e-3, max_epochs=1)
    path = ffattention.record_path(config, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path.parent.mkdir(parents=True)
        lock_path(path).write_text(f"{socket.gethostname()} {holder.pid}")
        status = ffattention_cli.main(
            ["--results", str(tmp_path), "run", "--t0", "50", "--max-epochs", "1"]
        )
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert f"process {holder.pid}" in err and not path.exists()


def test_records_are_0644_and_a_verbose_lm_run_prints_validation_perplexity(tmp_path, capsys):
    from thesis_repro import lm

    source = lm.resolve_corpus(None, "synthetic", None)
    config = lm.make_config(source, "smoke", "runs", 5, 0, epochs=1)
    record = lm.run(config, source, tmp_path, verbose=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch 1:")]
    logged = record["epochs"][0]["valid_perplexity"]
    assert len(lines) == 1 and f"valid_perplexity {logged:.4g}" in lines[0]
    path = lm.record_path(config, tmp_path)
    assert path.stat().st_mode & 0o777 == 0o644


def test_the_bare_lm_command_uses_the_cpu_preset_and_says_what_it_will_do(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv(DATA_ENV, raising=False)  # no corpus: the synthetic one, announced
    assert lm_cli.train_parser().parse_args(["--prefix", "5"]).preset == "cpu"
    status = lm_cli.main(["--prefix", "5", "--preset", "smoke", "--results", str(tmp_path)])
    assert status == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("NOTE: no corpus given")
    run_line = next(line for line in lines if line.startswith("[run]"))
    for part in ("corpus synthetic", "preset smoke", "V = ", "2 epochs of ", "estimated"):
        assert part in run_line, run_line


def test_a_training_command_prints_no_native_library_noise(tmp_path):
    """TensorFlow's C++ start-up lines (absl, oneDNN, the CUDA probe) are held back."""
    command = [
        sys.executable, "-m", "thesis_repro.ffattention", "--results", str(tmp_path), "--figures",
        str(tmp_path), "run", "--t0", "50", "--max-epochs", "1", "--steps-per-epoch", "2",
        "--test-size", "10",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    noise = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.startswith(("I0000", "W0000", "E0000", "WARNING: All log messages"))
    ]
    assert not noise, noise


def test_single_runs_default_to_runs_and_grids_to_results():
    from thesis_repro.addition import cli as addition_cli
    from thesis_repro.cli import results_folder
    from thesis_repro.settings import RESULTS_DIR, RUNS_DIR

    assert results_folder("run", None) == RUNS_DIR and results_folder("grid", None) == RESULTS_DIR
    assert results_folder("run", Path("x")) == Path("x")
    assert lm_cli.train_parser().parse_args([]).results == RUNS_DIR
    assert lm_cli.grid_parser().parse_args([]).results == RESULTS_DIR
    for module in (ffattention_cli, addition_cli):
        assert module.build_parser().parse_args(["run"]).results is None  # resolved in main
    assert "/runs/" in (ROOT / ".gitignore").read_text().split()


def test_ctrl_c_ends_with_one_message_on_its_own_line(tmp_path):
    import signal
    import time

    from thesis_repro.cli import INTERRUPTED

    command = [
        sys.executable, "-m", "thesis_repro.ffattention", "--results", str(tmp_path), "run",
        "--t0", "50", "--max-epochs", "50", "--steps-per-epoch", "20", "--test-size", "10",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def record_path() -> Path:
        """The record, not its draft (``.<name>.<random>.tmp.json``, renamed onto it once
        written: a Ctrl-C while the first epoch's record is a draft keeps no record)."""
        return next(p for p in tmp_path.rglob("*.json") if not p.name.startswith("."))

    def epochs_logged() -> int:
        try:
            return len(json.loads(record_path().read_text())["epochs"])
        except (StopIteration, json.JSONDecodeError, KeyError):
            return 0

    deadline = time.time() + 300
    while time.time() < deadline and not epochs_logged():
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    assert err.splitlines()[-1] == INTERRUPTED and "Traceback" not in err
    record = json.loads(record_path().read_text())
    assert record["epochs"] and not record["finished"], "finished epochs are kept"


def test_a_ctrl_c_that_the_backend_swallowed_still_stops_the_training():
    """Under JAX a KeyboardInterrupt raised while JAX waits for the device can be lost
    (jax-ml/jax#18246; measured here: a run went on for 40 s after SIGINT).
    ``catch_interrupts`` remembers the request and ``StopOnInterrupt`` raises it again at the
    next batch end; without it the training runs to its end (the control)."""
    import signal

    from thesis_repro import training

    class SwallowedCtrlC(keras.callbacks.Callback):
        """Ctrl-C at the end of batch 2, its KeyboardInterrupt lost as JAX loses it."""

        def __init__(self) -> None:
            super().__init__()
            self.batches = 0

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            self.batches += 1
            if self.batches == 2:
                try:
                    signal.raise_signal(signal.SIGINT)
                except KeyboardInterrupt:
                    pass

    def fit(*callbacks: keras.callbacks.Callback) -> None:
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        x, y = np.zeros((40, 3), "float32"), np.zeros((40, 1), "float32")
        model.fit(x, y, batch_size=4, epochs=3, callbacks=list(callbacks), verbose=0)

    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        training.catch_interrupts()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, "an ignored SIGINT stays so"
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a command starts
        training.catch_interrupts()
        control = SwallowedCtrlC()
        fit(control)
        assert control.batches == 30, "the swallowed interrupt alone does not stop it"
        training._INTERRUPT_REQUESTED.clear()
        stopped = SwallowedCtrlC()
        with pytest.raises(KeyboardInterrupt):
            fit(stopped, training.StopOnInterrupt())
        assert stopped.batches == 2
    finally:
        signal.signal(signal.SIGINT, previous)
        training._INTERRUPT_REQUESTED.clear()


def test_a_run_resumed_on_another_machine_keeps_where_its_earlier_epochs_ran(tmp_path, monkeypatch):
    """Issue 15's GPU runs go on in later leases, maybe on another kind of GPU: the record's
    ``hardware`` is the last machine, ``earlier_machines`` the ones before (with the epochs done
    before each move), and the table's "Ran on" line counts both. The run's own additions to
    ``hardware`` (dtype policy) are no move."""
    from thesis_repro import records

    path = tmp_path / "run.json"
    first = RunRecord(path, {"a": 1}).start("train a")
    first.data["hardware"]["dtype_policy"] = "mixed_bfloat16"  # as a run's train.py adds
    first.log_epoch(0, {"loss": 1.0}, 1.0)
    first.log_epoch(1, {"loss": 0.5}, 1.0)
    release(path)
    same = RunRecord(path, {"a": 1}).start()
    assert "earlier_machines" not in same.data, "same machine: nothing to keep"
    release(path)  # not saved: the record on disk is still the first start's

    elsewhere = {"backend": "jax", "device": "NVIDIA H200", "dtype_policy": "float32"}
    elsewhere["matmul_precision"] = "default"
    monkeypatch.setattr(records, "compute_device", lambda: elsewhere)
    moved = RunRecord(path, {"a": 1}).start()
    assert moved.data["earlier_machines"] == [
        {"hardware": first.data["hardware"], "versions": first.data["versions"], "epochs": 2}
    ]
    assert moved.data["hardware"]["device"] == "NVIDIA H200"
    moved.log_epoch(2, {"loss": 0.25}, 1.0)
    moved.finish(score=1.0)
    saved = records.load_record(path)
    assert [m["device"] for m in records.machines_of(saved)] == ["cpu", "NVIDIA H200"]
    ran_on = records.produced_by([saved])
    assert "on cpu, dtype policy mixed_bfloat16 (1 record)" in ran_on
    assert "on NVIDIA H200, dtype policy float32, float32 matmuls: default (1 record)" in ran_on


_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9654
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512bw fma

processor\t: 1
cpu family\t: 25
model\t\t: 1
model name\t: other
flags\t\t: fpu sse4_2 avx avx2
"""


def test_records_name_the_cpu_model_and_its_widest_vector_instructions():
    """Same seed, same code, two 2-core hosts: the PTB `paper` seed 0 retrain was bit-identical,
    seed 1's was not (2026-11-29), and the hosts differ twofold in speed. Records name the CPU
    (the first processor's block of /proc/cpuinfo) so that such pairs can be told apart, and the
    "Ran on" lines group by it; records written before keep their architecture only."""
    from thesis_repro.records import cpu_model, format_hardware, machine

    assert cpu_model(_CPUINFO) == "AMD EPYC 9654, family 25 model 17, avx512f"
    assert cpu_model(_CPUINFO.replace(" avx512f avx512bw", "")) == (
        "AMD EPYC 9654, family 25 model 17, avx2"
    )
    assert cpu_model("model name\t: Apple M2\n") == "Apple M2"
    assert cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\n") is None
    assert machine()["processor"]
    run = {"machine": "x86_64", "cpus": 2, "system": "Linux-6.18", "backend": "tensorflow"}
    run |= {"device": "cpu", "dtype_policy": "float32"}
    old = format_hardware({**run, "processor": "x86_64"})
    assert old.startswith("2 CPUs (x86_64), Linux-6.18, Keras backend tensorflow")
    new = format_hardware({**run, "processor": "AMD EPYC 9654, family 25 model 17, avx512f"})
    assert new.startswith("2 CPUs (x86_64, AMD EPYC 9654, family 25 model 17, avx512f), Linux")


def test_a_resumed_run_forgets_the_epochs_it_trains_again(tmp_path, monkeypatch):
    """2026-11-26: a record of 24 epochs on an H200 (no checkpoint came with it) started over on
    an H100 and kept the H200's start time, wall time and ``earlier_machines`` entry, so its
    table said it ran partly on an H200. ``training.resume`` now keeps only the epochs it goes
    on from: their share of the wall time, the machines that ran them. A run that starts over
    takes the command that runs it now (2026-12-07: one kept the interrupted H200 grid's)."""
    from thesis_repro import records, training

    path = tmp_path / "run.json"
    first = RunRecord(path, {"a": 1}).start("train a")
    for epoch in range(4):
        first.log_epoch(epoch, {"loss": 1.0}, 10.0)
    first.data["started"] = "2026-11-25 09:00:00"
    first.data["earlier_implementations"] = [{"implementation": "layers", "epochs": 3}]
    first.save()
    release(path)
    elsewhere = {"backend": "jax", "device": "NVIDIA H100", "dtype_policy": "float32"}
    monkeypatch.setattr(records, "compute_device", lambda: elsewhere)

    def resumed(checkpoints: list[int]) -> tuple[RunRecord, int]:
        for stale in path.parent.glob("checkpoints/*"):
            stale.unlink()
        record = RunRecord(path, {"a": 1}).start("train a elsewhere")
        for epoch in checkpoints:
            training.checkpoint_path(record, epoch).parent.mkdir(exist_ok=True)
            keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)]).save(
                training.checkpoint_path(record, epoch)
            )
        _, done = training.resume(record, lambda: keras.Sequential([keras.Input((1,))]))
        release(path)
        return record, done

    record, done = resumed([1, 2])  # epochs 3 and 4 lost their checkpoints
    assert done == 2 and record.completed_epochs() == 2
    assert record.data["wall_seconds"] == pytest.approx(20.0)
    assert record.data["started"] == "2026-11-25 09:00:00"
    assert [m["epochs"] for m in record.data["earlier_machines"]] == [2]
    assert record.data["earlier_machines"][0]["hardware"]["device"] == "cpu"
    assert record.data["earlier_implementations"] == [{"implementation": "layers", "epochs": 2}]
    assert record.data["command"] == "train a", "a resumed run keeps the command that started it"

    record, done = resumed([])  # no checkpoint here: it starts over on this machine alone
    assert done == 0 and record.data["epochs"] == []
    assert record.data["wall_seconds"] == 0.0
    assert record.data["started"] != "2026-11-25 09:00:00"
    assert "earlier_machines" not in record.data
    assert "earlier_implementations" not in record.data
    assert [m["device"] for m in records.machines_of(record.data)] == ["NVIDIA H100"]
    assert record.data["command"] == "train a elsewhere", "started over: the command that ran it"


def _record_with(path: Path, epochs: int, finished: bool = False) -> Path:
    """A record of run ``{"a": 1}`` at ``path`` with ``epochs`` logged epochs."""
    record = RunRecord(path, {"a": 1}).start("train a")
    for epoch in range(epochs):
        record.log_epoch(epoch, {"loss": 1.0 / (epoch + 1)}, 1.0)
    if finished:
        record.finish(score=1.0)
    release(path)
    return path


def test_merging_two_copies_of_a_record_keeps_the_one_that_got_further(tmp_path):
    """Issue 15's GPU slices: records come back from a device call and meet the copies here (or,
    on a warm machine, the working tree sent with the next call). A finished record is never
    replaced by the same run started over, nor a longer unfinished one by a shorter one."""
    from thesis_repro.record_merge import merge_records
    from thesis_repro.records import load_record

    came_back, here = tmp_path / "came_back", tmp_path / "here"
    _record_with(here / "lm/finished.json", 25, finished=True)
    _record_with(came_back / "lm/finished.json", 6)  # the same run, restarted elsewhere
    _record_with(here / "ff/behind.json", 3)
    _record_with(came_back / "ff/behind.json", 7)
    _record_with(came_back / "ff/new.json", 1)
    (here / "ff/corrupt.json").write_text('{"config": ')
    _record_with(came_back / "ff/corrupt.json", 2)

    copied = merge_records(came_back, here)

    assert sorted(p.relative_to(here).as_posix() for p in copied) == [
        "ff/behind.json",
        "ff/corrupt.json",
        "ff/new.json",
    ]
    assert load_record(here / "lm/finished.json")["finished"]
    assert len(load_record(here / "lm/finished.json")["epochs"]) == 25
    assert len(load_record(here / "ff/behind.json")["epochs"]) == 7
    assert merge_records(came_back, here) == [], "merged already: nothing further to copy"


def test_a_warm_machine_restores_its_own_attempt_over_another_one_sent_to_it(tmp_path):
    """On a warm machine (``gpu_slice.sh run``), the checkpoints are those of its own last
    call's records: a record sent of another attempt of the run (24 epochs, its checkpoint
    nowhere) must not go on from this attempt's epoch-20 checkpoint, so this machine's copy
    is restored although it is behind; a copy of the same attempt further along is kept."""
    from thesis_repro.record_merge import merge_records
    from thesis_repro.records import load_record

    kept, sent = tmp_path / "kept", tmp_path / "sent"
    _record_with(kept / "lm/restarted.json", 20)
    _record_with(kept / "lm/same.json", 3)
    stale = json.loads(_record_with(sent / "lm/restarted.json", 24).read_text())
    stale["started"] = "2026-11-26 13:45:04"
    (sent / "lm/restarted.json").write_text(json.dumps(stale))
    further = json.loads((kept / "lm/same.json").read_text())
    further["epochs"].append({"epoch": 4, "loss": 0.2})
    (sent / "lm/same.json").write_text(json.dumps(further))

    assert merge_records(kept, sent) == [], "by progress alone, the sent copies stay"
    copied = merge_records(kept, sent, checkpoints_of_source=True)
    assert copied == [sent / "lm/restarted.json"]
    assert len(load_record(sent / "lm/restarted.json")["epochs"]) == 20
    assert len(load_record(sent / "lm/same.json")["epochs"]) == 4


def test_gpu_slice_unpack_stages_finished_records_and_keeps_copies_that_got_further(tmp_path):
    """``scripts/gpu_slice.sh unpack TAR`` in a repository: a record that came back finished is
    staged; one that came back behind the copy here leaves that copy alone, and says so louder
    where the device started the run over (another ``started``: its checkpoints are of another
    attempt); an unfinished one is unpacked and left untracked, or, where park.py committed an
    earlier copy, said to be tracked."""
    import tarfile

    came_back = tmp_path / "device"
    _record_with(came_back / "results/done.json", 2, finished=True)
    _record_with(came_back / "results/restarted.json", 1)
    _record_with(came_back / "results/going.json", 4)
    _record_with(came_back / "results/behind.json", 2)
    _record_with(came_back / "results/parked.json", 5)
    archive = tmp_path / "records.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(came_back / "results", arcname="results")
    repo = tmp_path / "repo"
    earlier = json.loads(_record_with(repo / "results/restarted.json", 24).read_text())
    earlier["started"] = "2026-11-26 13:45:04"  # an attempt before the device's
    (repo / "results/restarted.json").write_text(json.dumps(earlier))
    same = json.loads((came_back / "results/behind.json").read_text())
    same["epochs"].append({"epoch": 3, "loss": 0.3})  # the same attempt, further along here
    (repo / "results").joinpath("behind.json").write_text(json.dumps(same))
    _record_with(repo / "results/parked.json", 3)  # committed unfinished by scripts/park.py
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "add", "results/parked.json"], cwd=repo, check=True)
    script = Path(__file__).resolve().parents[1] / "scripts/gpu_slice.sh"
    result = subprocess.run(
        ["bash", str(script), "unpack", str(archive)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "done: results/done.json" in result.stdout
    said = {line.rsplit(" ", 1)[-1]: line for line in result.stdout.splitlines()}
    assert "further along than the one that came back" in said["results/behind.json"]
    assert "but the call started its run over" in said["results/restarted.json"]
    assert "unfinished (left untracked, resumes next call): results/going.json" in result.stdout
    assert "unfinished (tracked: parked earlier; park again" in said["results/parked.json"]
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True, text=True
    ).stdout.split()
    assert staged == ["results/done.json", "results/parked.json"]
    kept = json.loads((repo / "results/restarted.json").read_text())
    assert len(kept["epochs"]) == 24
