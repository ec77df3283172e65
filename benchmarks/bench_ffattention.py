"""Speed and memory of one Raffel & Ellis training step (batch 100, D = 100, Adam).

    python benchmarks/bench_ffattention.py [--t0 1000 10000] [--steps 10]
    KERAS_BACKEND=jax python benchmarks/bench_ffattention.py --configs reference+xla chunked+xla \
        --chunk-sizes 64 256 1024 --dtype-policy mixed_bfloat16      # a GPU's chunk size sweep

Measures ms per training step and the process's peak resident memory for

- ``reference``: the straightforward Keras model (Dense "h" + ``AttentionPooling``), eager graph
  without XLA — what a user would write first;
- ``reference+xla``: the same model compiled with XLA (``jit_compile=True``);
- ``chunked+xla``: ``raffel_model(chunked=True)``: h and the pooling fused in chunks of 64
  steps with a recomputing gradient (``layers.ChunkedFeedForwardPooling``), XLA-compiled — what
  ``python -m thesis_repro.ffattention`` uses on a CPU from a padded length of 2000 on
  (``ffattention.config.CHUNKED_FROM_LENGTH``).

``--chunk-sizes`` runs ``chunked+xla`` once per chunk size (64 is the layer's default: small
enough to stay in a CPU's cache, perhaps too small to fill a GPU); ``--dtype-policy`` builds
every model under that Keras policy (``training.dtype_policy``). Each configuration runs in its
own process so that peak memory is its own. Sequences have
lengths in [T0, 1.1 T0] (padded to 1.1 T0), as in the experiment. The epoch time is 1000 steps.

Last, the host's side: milliseconds per training batch generated on the host
(``training.FreshBatches``, the experiment's own generator) with one thread and with
``--workers`` look-ahead threads (8 on an accelerator: ``settings.data_workers``). A step
faster than the host's batch leaves the device waiting for it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CONFIGS = {
    "reference": dict(chunked=False, jit=False),
    "reference+xla": dict(chunked=False, jit=True),
    "chunked+xla": dict(chunked=True, jit=True),
}


def measure(name: str, t0: int, steps: int, chunk: int = 64, policy: str = "float32") -> dict:
    """One configuration, in this process: ms/step and peak RSS."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np

    from thesis_repro import tasks
    from thesis_repro.ffattention.model import raffel_model
    from thesis_repro.records import compute_device
    from thesis_repro.training import dtype_policy

    config = CONFIGS[name]
    low, high = tasks.raffel_length_range(t0)
    batch = tasks.raffel_addition(np.random.default_rng(0), 100, low, high)
    inputs = {"x": batch.x, "lengths": batch.lengths}
    with dtype_policy(policy):
        model = raffel_model(seed=0, chunked=config["chunked"], chunk_size=chunk)
    model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=config["jit"])
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(3):  # compile and warm up
        model.train_on_batch(inputs, batch.y)
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(inputs, batch.y)
    ms = 1000 * (time.perf_counter() - start) / steps
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        **compute_device(),
        "device_peak_mb": device_peak_mb(),
        "config": name + (f"(chunk {chunk})" if config["chunked"] and chunk != 64 else ""),
        "dtype_policy": policy,
        "t0": t0,
        "padded_T": int(batch.x.shape[1]),
        "ms_per_step": ms,
        "epoch_minutes": ms * 1000 / 60000,
        "peak_rss_mb": peak / 1024,
        "rss_growth_during_training_mb": (peak - rss_before) / 1024,
        "input_mb": batch.x.nbytes / 2**20,
    }


def host_batch_ms(t0: int, workers: int, batches: int = 24) -> float:
    """Milliseconds per training batch of the T0 addition run served by ``FreshBatches`` with
    ``workers`` look-ahead threads (the first batch, which starts the threads, is not timed)."""
    from thesis_repro.ffattention.config import RunConfig
    from thesis_repro.ffattention.train import train_batch_fn
    from thesis_repro.training import FreshBatches

    config = RunConfig("table1", "addition", t0, "attention", 1e-3)
    data = FreshBatches(train_batch_fn(config), seed=0, steps=batches + 1, workers=workers)
    try:
        data[0]
        start = time.perf_counter()
        for index in range(1, batches + 1):
            data[index]
        return 1000 * (time.perf_counter() - start) / batches
    finally:
        data.close()


def device_peak_mb() -> float | None:
    """Peak accelerator memory in use by this process (JAX on a GPU; None elsewhere)."""
    import keras

    if keras.backend.backend() != "jax":
        return None
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return None if peak is None else peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--t0", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per configuration")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--chunk-sizes", type=int, nargs="+", default=[64])
    parser.add_argument(
        "--dtype-policy", default="float32", choices=("float32", "mixed_bfloat16", "mixed_float16")
    )
    parser.add_argument(
        "--workers", type=int, default=8, help="look-ahead threads timed for the host's batches"
    )
    parser.add_argument("--one", nargs=3, metavar=("CONFIG", "T0", "CHUNK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        name, t0, chunk = args.one[0], int(args.one[1]), int(args.one[2])
        print(json.dumps(measure(name, t0, args.steps, chunk, args.dtype_policy)))
        return
    rows = []
    runs = [
        (name, chunk)
        for name in args.configs
        for chunk in (args.chunk_sizes if CONFIGS[name]["chunked"] else [64])
    ]
    for t0 in args.t0:
        for name, chunk in runs:
            command = [sys.executable, __file__, "--one", name, str(t0), str(chunk)]
            command += ["--steps", str(args.steps), "--dtype-policy", args.dtype_policy]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            if len(rows) == 1:
                print(f"backend {r['backend']}, device {r['device']}, dtype {r['dtype_policy']}")
            device = (
                "" if r["device_peak_mb"] is None else f"  device peak {r['device_peak_mb']:.0f} MB"
            )
            print(
                f"T0={t0:>6} {r['config']:<26} {r['ms_per_step']:8.1f} ms/step{device}  "
                f"epoch {r['epoch_minutes']:5.2f} min  peak RSS {r['peak_rss_mb']:7.0f} MB  "
                f"(+{r['rss_growth_during_training_mb']:.0f} MB in training; input "
                f"{r['input_mb']:.1f} MB)",
                flush=True,
            )
    print(f"\nspeed-up over {rows[0]['config']} (same run):")
    for t0 in args.t0:
        same = [r for r in rows if r["t0"] == t0]
        base = same[0]
        for r in same[1:]:
            print(f"  T0={t0}: {r['config']}: x{base['ms_per_step'] / r['ms_per_step']:.2f}")
    print("\nhost: ms per training batch generated (training.FreshBatches) vs the steps above:")
    for t0 in args.t0:
        one, many = host_batch_ms(t0, 1), host_batch_ms(t0, args.workers)
        fastest = min(r["ms_per_step"] for r in rows if r["t0"] == t0)
        print(
            f"  T0={t0}: 1 thread {one:.1f} ms, {args.workers} threads {many:.1f} ms; fastest "
            f"step {fastest:.1f} ms"
        )
    print(f"load average during the run: {os.getloadavg()}")


if __name__ == "__main__":
    main()
