"""Speed of a training step of the thesis's 64-unit LSTM (thesis 3.1), against an arithmetic bound.

    python benchmarks/bench_lstm.py                 # default: 5 interleaved rounds of 20 steps
    python benchmarks/bench_lstm.py --rounds 3 --steps 10 --unroll

Measures milliseconds per training step (forward, backward and Adam update, through
``model.train_on_batch``) at T = 550, batch 50, 64 units, 2 input features, with the padding of
lengths 500..550 masked as in ``thesis_repro.addition``, for

- ``AttentionGatedLSTM`` (``thesis_repro.layers``; scaled-sigmoid gates, energies as an input),
- ``keras.layers.LSTM`` (Keras's default sigmoid gates), and
- ``keras.layers.LSTM`` with the scaled sigmoid (the baseline model of ``thesis_repro.addition``),

each compiled with and without ``jit_compile`` (XLA). ``--unroll`` adds ``unroll=True`` runs
without XLA (XLA compilation of 550 unrolled steps takes more than ten minutes here).
The variants run interleaved, round by round, so a background load hits them alike; the table
shows the best and the median round.

The bound: a step needs ``2*B*U*4U`` multiply-adds per time step for ``h W_h`` forward and twice
that backward (``dz W_h^T`` and ``h^T dz``), plus the small input projection; dividing those FLOPs
by this machine's measured matmul throughput gives the time no implementation can beat. Two
throughputs are measured: a large 2048^3 matmul (peak) and a chain of dependent
(50x64)@(64x256) matmuls in an XLA loop (what the recurrence can get at best).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from thesis_repro.layers import AttentionGatedLSTM, scaled_sigmoid

BATCH, STEPS, FEATURES, UNITS = 50, 550, 2, 64
MIN_LENGTH = 500


def training_flops(batch: int = BATCH, steps: int = STEPS, units: int = UNITS) -> float:
    """FLOPs of the matmuls in one training step (forward + backward), per the docstring."""
    recurrent = 2 * batch * units * 4 * units  # h_{t-1} W_h, one time step
    projection = 2 * batch * (FEATURES + 1) * 4 * units  # [x_t, e_t] W_x
    return steps * (3 * recurrent + 3 * projection)


def time_calls(fn: Callable[[], object], repeats: int) -> float:
    """Seconds per call of ``fn`` (after one warm-up call)."""
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        result = fn()
    if hasattr(result, "numpy"):
        result.numpy()
    return (time.perf_counter() - start) / repeats


def matmul_throughputs(chain: int = 3 * STEPS) -> dict[str, float]:
    """FLOP/s of a big matmul and of a chain of dependent (50x64)@(64x256) matmuls (XLA loop)."""
    n = 2048
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n))
    big = tf.function(lambda: tf.matmul(a, b))
    big_seconds = min(time_calls(big, 5) for _ in range(3))
    h0 = tf.random.normal((BATCH, UNITS))
    w = tf.random.normal((UNITS, 4 * UNITS)) * 0.1

    @tf.function(jit_compile=True)
    def small_chain() -> tf.Tensor:
        def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return i + 1, tf.matmul(h, w)[:, :UNITS]

        return tf.while_loop(lambda i, h: i < chain, body, (0, h0))[1]

    chain_seconds = min(time_calls(small_chain, 5) for _ in range(3))
    return {
        "big": 2 * n**3 / big_seconds,
        "chain": chain * 2 * BATCH * UNITS * 4 * UNITS / chain_seconds,
    }


def build(kind: str, jit: bool, unroll: bool) -> keras.Model:
    """LSTM over a masked (50, 550, 2) batch, a linear readout, MSE, Adam."""
    x = keras.Input((STEPS, FEATURES), batch_size=BATCH, name="x")
    energies = keras.Input((STEPS,), batch_size=BATCH, name="energies")
    lengths = keras.Input((), batch_size=BATCH, dtype="int32", name="lengths")
    if kind == "AttentionGatedLSTM":
        h = AttentionGatedLSTM(UNITS, unroll=unroll)([x, energies], lengths=lengths)
    else:
        gate = scaled_sigmoid if kind == "keras LSTM, scaled sigmoid" else "sigmoid"
        masked = keras.layers.Masking(0.0)(x)  # the padding is all-zero, real steps are not
        h = keras.layers.LSTM(UNITS, recurrent_activation=gate, unroll=unroll)(masked)
    model = keras.Model([x, energies, lengths], keras.layers.Dense(1)(h))
    model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=jit)
    return model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per round (20)")
    parser.add_argument(
        "--unroll",
        action="store_true",
        help="also time unroll=True without XLA (about a minute of graph building each)",
    )
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    lengths = rng.integers(MIN_LENGTH, STEPS, BATCH, endpoint=True).astype("int32")
    x = rng.random((BATCH, STEPS, FEATURES)).astype("float32")
    x *= (np.arange(STEPS)[None, :] < lengths[:, None])[..., None]
    energies = rng.uniform(-1, 1, (BATCH, STEPS)).astype("float32")
    y = rng.random(BATCH).astype("float32")
    inputs = [x, energies, lengths]

    kinds = ("AttentionGatedLSTM", "keras LSTM", "keras LSTM, scaled sigmoid")
    variants = [(kind, jit, False) for kind in kinds for jit in (False, True)]
    if args.unroll:
        variants += [(kind, False, True) for kind in kinds]
    models, compile_seconds = {}, {}
    for variant in variants:
        start = time.perf_counter()
        models[variant] = build(*variant)
        models[variant].train_on_batch(inputs, y)
        compile_seconds[variant] = time.perf_counter() - start
    times: dict[tuple, list[float]] = {variant: [] for variant in variants}
    for _ in range(args.rounds):
        for variant, model in models.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                model.train_on_batch(inputs, y)
            times[variant].append(1000 * (time.perf_counter() - start) / args.steps)

    throughput = matmul_throughputs()
    flops = training_flops()
    print(f"T = {STEPS}, batch {BATCH}, {UNITS} units; tf {tf.__version__}, keras")
    print(f"{keras.__version__}; {os.cpu_count()} CPUs; {args.rounds} rounds x {args.steps} steps")
    print()
    print("| layer | jit_compile | unroll | ms/step best | ms/step median | build+1st step s |")
    print("|---|---|---|---|---|---|")
    for variant in variants:
        kind, jit, unroll = variant
        print(
            f"| {kind} | {jit} | {unroll} | {min(times[variant]):.1f} | "
            f"{statistics.median(times[variant]):.1f} | {compile_seconds[variant]:.1f} |"
        )
    print()
    print(f"matmul FLOPs per training step: {flops / 1e9:.2f} GFLOP")
    for name, label in (("big", "2048^3 matmul"), ("chain", "chained (50x64)@(64x256), XLA")):
        rate = throughput[name]
        print(f"bound from {label}: {rate / 1e9:.0f} GFLOP/s -> {1000 * flops / rate:.1f} ms/step")


if __name__ == "__main__":
    main()
