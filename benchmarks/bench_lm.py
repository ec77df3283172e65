"""Training speed of the thesis language models (thesis 2.2, 3.2.2) against this machine's matmuls.

    python benchmarks/bench_lm.py                       # V = 7,251 (the cpu preset), 5 rounds
    python benchmarks/bench_lm.py --vocab 10000 --rounds 3 --steps 10
    KERAS_BACKEND=jax python benchmarks/bench_lm.py --vocab 37373 --words 7000000 \
        --dtype-policy mixed_bfloat16                   # the paper preset's shapes

For the 5-gram and the 5-gram + 5 model, built and compiled exactly as ``python -m
thesis_repro.lm`` trains them (``lm.build_model``: SGD, batch 1000, weight decay, full softmax),
measures

- ms per update and training words per second through ``model.train_on_batch`` on one fixed
  minibatch (compute only), with and without ``jit_compile`` (XLA; the presets use XLA);
- words per second of ``model.fit`` over ``TrainBatches`` (batches cut from a token array, as in
  training: includes the input pipeline; XLA only, best round), with as many updates per
  compiled call as training uses on this device (``settings.steps_per_execution``: 1 on a CPU,
  16 on an accelerator), timed from the end of the first call to the end of the last, so
  that fit's setup (0.1-0.5 s, once per run in training) does not count, and the time the
  host takes to cut one minibatch (``TrainBatches[i]``: what the device would wait for if the
  pipeline did not overlap; issue 14 asked whether it starves a GPU);
- the share of the machine's matmul throughput the update reaches: the same run times an
  XLA-compiled function that does only the update's matrix multiplications, on the same shapes
  (forward ``m W_mh``, ``h W_hl`` and, for the attention model, ``E(prefix) W_wh``; backward the
  input and weight gradient of each), and divides that time by the update's time (best rounds of
  both). 100% would mean the update costs no more than its matmuls. A 2048^3 matmul gives the
  machine's peak for comparison.

Last, the floor a single run cannot go below on any device: Keras's own time per update in
``fit`` (its loop, callbacks, the batch built on the host), measured on a model so small (V = 50,
batch 8) that its compute is negligible, with our training callbacks (which make Keras read
the loss after every call) and 1 or 16 updates per compiled call (``steps_per_execution``, the
default on an accelerator: ``settings.steps_per_execution``).

The variants and the matmul-only function run interleaved, round by round, so a background
load (or this virtual machine's varying speed) hits them alike; the table shows the best and the
median round.
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
from keras import ops

from thesis_repro.lm import RunConfig, build_model
from thesis_repro.lm.batches import TrainBatches, window_inputs
from thesis_repro.records import compute_device
from thesis_repro.settings import steps_per_execution
from thesis_repro.training import set_steps_per_execution

BATCH, EMBEDDING, HIDDEN, ORDER = 1000, 100, 200, 5
MODELS = {"5-gram": 0, "5-gram + 5": 5}  # label -> prefix


def time_calls(fn: Callable[[], object], repeats: int) -> float:
    """Seconds per call of ``fn`` (after one warm-up call)."""
    result = fn()
    start = time.perf_counter()
    for _ in range(repeats):
        result = fn()
    for r in result if isinstance(result, (list, tuple)) else [result]:
        # Wait for the device by reading one element: copying a whole product to the host
        # (64 MB for a 4096^2 one) was counted in the time before (most likely the ~11 ms per
        # call of the H200 'peak' in benchmarks/results/gpu_measure_h200.txt).
        ops.convert_to_numpy(r[(0,) * len(r.shape)])
    return (time.perf_counter() - start) / repeats


def compiled(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` compiled by the backend's XLA route (``jax.jit`` or ``tf.function``)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(fn)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    return fn


def matmul_shapes(prefix: int, vocab: int) -> list[tuple[int, int, int]]:
    """(rows, inner, cols) of every matmul of one update (forward, then the two gradients)."""
    width = (ORDER - 1) * EMBEDDING + (EMBEDDING if prefix else 0)  # m = (c, E(window))
    forward = [(BATCH, width, HIDDEN), (BATCH, HIDDEN, vocab)]
    if prefix:
        forward.insert(0, (BATCH * prefix, EMBEDDING, EMBEDDING))
    shapes = []
    for rows, inner, cols in forward:
        shapes += [(rows, inner, cols), (rows, cols, inner), (inner, rows, cols)]
    return shapes


def matmul_function(shapes: list[tuple[int, int, int]], dtype: str) -> Callable[[], list]:
    """One XLA function doing all ``shapes``' matmuls (independent, like an update's)."""
    rng = np.random.default_rng(0)
    pairs = [
        (
            ops.convert_to_tensor(rng.standard_normal((r, k), np.float32), dtype),
            ops.convert_to_tensor(rng.standard_normal((k, c), np.float32), dtype),
        )
        for r, k, c in shapes
    ]
    products = compiled(lambda pairs: [ops.sum(ops.matmul(a, b)) for a, b in pairs])
    return lambda: products(pairs)  # arguments, not constants: nothing folds at compile time


def peak_flops(dtype: str) -> float:
    """FLOP/s of a 2048^3 (4096^3 on an accelerator) matmul in ``dtype``."""
    n = 2048 if device_name() == "cpu" else 4096
    rng = np.random.default_rng(0)
    a, b = (ops.convert_to_tensor(rng.standard_normal((n, n), np.float32), dtype) for _ in "ab")
    product = compiled(lambda a, b: ops.matmul(a, b))
    big = lambda: product(a, b)  # noqa: E731
    return 2 * n**3 / min(time_calls(big, 5) for _ in range(3))


def device_name() -> str:
    from thesis_repro.records import compute_device

    return compute_device()["device"]


def synthetic_tokens(vocab: int, words: int = 200_000) -> np.ndarray:
    """Zipf-like token ids (frequent words have small ids, as in a real corpus)."""
    rng = np.random.default_rng(0)
    return np.minimum(rng.zipf(1.2, words) - 1, vocab - 1).astype(np.int32)


def model_for(prefix: int, vocab: int, jit: bool) -> keras.Model:
    """The compiled model ``python -m thesis_repro.lm --prefix {prefix}`` trains."""
    config = RunConfig(corpus="bench", table="runs", preset="cpu", order=ORDER, prefix=prefix)
    return build_model(config, vocab, jit)


class _UpdateClock(keras.callbacks.Callback):
    """Times ``fit``'s updates from the end of its first compiled call to the end of its last,
    so that fit's setup does not count. Reading the loss makes each call finish before its time
    is taken (as training's callbacks do). Keras calls ``on_train_batch_end`` once per call,
    with the index of the call's last update (``steps_per_execution`` k: every k-th)."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[tuple[int, float]] = []

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        float((logs or {}).get("loss", 0.0))
        self.ends.append((batch, time.perf_counter()))

    def seconds_per_update(self) -> float:
        (first, start), (last, end) = self.ends[0], self.ends[-1]
        return (end - start) / (last - first)


def fit_overhead_ms(updates_per_call: int, updates: int = 960, rounds: int = 3) -> float:
    """Milliseconds per update of ``fit`` on a model with negligible compute (V = 50, batch 8):
    Keras's loop, the callbacks and the host's batches (best of ``rounds``; from the end of the
    first compiled call to the end of the last: fit's setup, once per run in training, does not
    count)."""
    vocab, batch = 50, 8
    tokens = np.random.default_rng(0).integers(0, vocab, 20_000).astype(np.int32)
    targets = np.arange(ORDER + 5, len(tokens))
    config = RunConfig(
        corpus="bench", table="runs", preset="cpu", order=ORDER, prefix=5, batch_size=batch
    )
    keras.utils.set_random_seed(0)
    model = build_model(config, vocab, True)
    set_steps_per_execution(model, updates, updates_per_call)
    best = float("inf")
    for index in range(rounds + 1):  # the first round compiles
        data = TrainBatches(tokens, targets, ORDER, 5, batch, seed=index, first_epoch=0, epochs=1)
        clock = _UpdateClock()  # reads the loss after every call, as training's callbacks do
        model.fit(data, steps_per_epoch=updates, verbose=0, shuffle=False, callbacks=[clock])
        if index:
            best = min(best, clock.seconds_per_update())
    return 1000 * best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--vocab", type=int, default=7251, help="V (default 7251, cpu preset)")
    parser.add_argument(
        "--words",
        type=int,
        default=200_000,
        help="length of the synthetic token array the batches are cut from (default 200,000; "
        "the paper preset's corpus has 7,000,000: random windows from it miss the caches)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--steps", type=int, default=10, help="updates per round (default 10)")
    parser.add_argument(
        "--fit-steps",
        type=int,
        default=20,
        help="at least this many updates per round timed in fit, in whole compiled calls "
        "after a first untimed one (default 20)",
    )
    parser.add_argument(
        "--dtype-policy",
        default="float32",
        help="Keras dtype policy of the models, e.g. mixed_bfloat16 (default float32); the "
        "matmul references then run in the policy's compute dtype",
    )
    args = parser.parse_args(argv)
    keras.config.set_dtype_policy(args.dtype_policy)
    compute_dtype = keras.config.dtype_policy().compute_dtype

    if args.words < BATCH + ORDER + 5:
        parser.error(f"--words must be at least {BATCH + ORDER + 5} (one batch of targets)")
    tokens = synthetic_tokens(args.vocab, args.words)
    targets = np.arange(ORDER + 5, len(tokens))
    variants = [(label, jit) for label in MODELS for jit in (False, True)]
    models, inputs = {}, {}
    for label, jit in variants:
        prefix = MODELS[label]
        keras.utils.set_random_seed(0)
        models[label, jit] = model_for(prefix, args.vocab, jit)
        chosen = targets[:BATCH]
        inputs[label] = (window_inputs(tokens, chosen, ORDER, prefix), tokens[chosen])
        models[label, jit].train_on_batch(*inputs[label])  # build, compile
    batches = {
        label: TrainBatches(tokens, targets, ORDER, prefix, BATCH, seed=0, first_epoch=0, epochs=1)
        for label, prefix in MODELS.items()
    }
    # fit as training runs it: the updates per compiled call this device gets (settings), on
    # models of its own (train_on_batch above takes one update per call)
    most = steps_per_execution(compute_device()["device"])
    calls = max(2, -(-args.fit_steps // most) + 1)
    fit_steps = most * calls
    if any(len(b) < fit_steps for b in batches.values()):
        parser.error(f"--words too small for {fit_steps} updates of fit")
    fit_models, per_call = {}, 1
    for label, prefix in MODELS.items():  # build, compile, warm up fit's compiled function
        keras.utils.set_random_seed(0)
        fit_models[label] = model_for(prefix, args.vocab, True)
        per_call = set_steps_per_execution(fit_models[label], fit_steps, most)
        fit_models[label].fit(batches[label], steps_per_epoch=fit_steps, verbose=0, shuffle=False)
    matmuls = {
        label: matmul_function(matmul_shapes(MODELS[label], args.vocab), compute_dtype)
        for label in MODELS
    }
    times: dict[tuple[str, bool], list[float]] = {variant: [] for variant in variants}
    fit_times: dict[str, list[float]] = {label: [] for label in MODELS}
    matmul_times: dict[str, list[float]] = {label: [] for label in MODELS}
    input_times: dict[str, list[float]] = {label: [] for label in MODELS}
    for _ in range(args.rounds):
        for label, data in batches.items():  # the host's share: one minibatch cut from tokens
            start = time.perf_counter()
            for index in range(args.steps):
                data[index]
            input_times[label].append((time.perf_counter() - start) / args.steps)
        for label, matmul in matmuls.items():
            matmul_times[label].append(time_calls(matmul, args.steps))
        for (label, jit), model in models.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                model.train_on_batch(*inputs[label])
            times[label, jit].append((time.perf_counter() - start) / args.steps)
            if jit:  # per update, from the first call's end to the last's: no setup
                clock = _UpdateClock()
                fit_models[label].fit(
                    batches[label],
                    steps_per_epoch=fit_steps,
                    verbose=0,
                    shuffle=False,
                    callbacks=[clock],
                )
                fit_times[label].append(clock.seconds_per_update())

    peak = peak_flops(compute_dtype)
    print(
        f"V = {args.vocab:,}, batch {BATCH}, S = {EMBEDDING}, H = {HIDDEN}; keras "
        f"{keras.__version__}, backend {keras.backend.backend()}, device {device_name()}, "
        f"dtype policy {args.dtype_policy}; {os.cpu_count()} CPUs; {args.words:,} words; "
        f"{args.rounds} rounds x "
        f"{args.steps} updates; fit: {fit_steps} updates, {per_call} per compiled call"
    )
    print(f"peak: square matmul in {compute_dtype} {peak / 1e9:.0f} GFLOP/s")
    print()
    print(
        "| model | XLA | ms/update best | median | words/s (best) | fit words/s | "
        "matmuls alone ms | share of matmul throughput | batch built on the host ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, jit in variants:
        shapes = matmul_shapes(MODELS[label], args.vocab)
        alone = min(matmul_times[label])
        flops = sum(2 * r * k * c for r, k, c in shapes)
        best, median = min(times[label, jit]), statistics.median(times[label, jit])
        fit = f"{BATCH / min(fit_times[label]):,.0f}" if jit else "-"
        print(
            f"| {label} | {jit} | {1000 * best:.1f} | {1000 * median:.1f} | "
            f"{BATCH / best:,.0f} | {fit} | {1000 * alone:.1f} ({flops / alone / 1e9:.0f} "
            f"GFLOP/s) | {100 * alone / best:.0f}% | {1000 * min(input_times[label]):.2f} |"
        )
    print()
    print("Keras's own time per update in fit (V = 50, batch 8: negligible compute):")
    for per_call in (1, 16):
        print(f"- {per_call} update(s) per compiled call: {fit_overhead_ms(per_call):.3f} ms")


if __name__ == "__main__":
    main()
