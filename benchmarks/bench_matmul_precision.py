"""Which float32 matmul JAX runs by default on this device: TF32 or full float32?

    KERAS_BACKEND=jax python benchmarks/bench_matmul_precision.py          # on a GPU
    python benchmarks/bench_matmul_precision.py --size 512 --no-lm         # a CPU: a quick check

Records store ``jax_default_matmul_precision`` (``records.float32_matmul_precision``; unset:
``default``), and the README reads ``default`` as TF32 on NVIDIA GPUs since Ampere. The H200's
``bench_lm.py`` measured the LM update's matmuls at ~43 TFLOP/s, far below TF32 tensor-core
rates, which left that reading in doubt. This times, in one process and interleaved round by
round, the same float32 products under ``jax.default_matmul_precision`` ``default``,
``tensorfloat32`` and ``highest`` (full float32, the reference): a square ``size^3`` product
and the LM ``paper`` update's largest one (batch 1000 x H 200 x V 37,373). If ``default`` runs
at ``tensorfloat32``'s speed and well above ``highest``'s, the default is TF32; if it runs at
``highest``'s, it is not. The largest difference from the ``highest`` product (relative to its
largest element) says the same from the numbers: ~1e-3 for TF32's 10-bit mantissa, ~1e-6 for
float32. On a CPU all three are float32 (same speed, same numbers).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

PRECISIONS = ("default", "tensorfloat32", "highest")


def seconds_per_call(fn, a, b, repeats: int) -> float:
    """Seconds per call of the compiled ``fn(a, b)`` (after a warm-up call), waiting for the
    device by reading one element (a whole product's copy to the host would count)."""
    fn(a, b)[0, 0].block_until_ready()
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(a, b)
    out[0, 0].block_until_ready()
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="square product's n (4096)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--repeats", type=int, default=20, help="calls per round (20)")
    parser.add_argument(
        "--lm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also the LM update's 15-GFLOP product (default; minutes on a CPU: --no-lm)",
    )
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"jax {jax.__version__} on {device.device_kind} ({device.platform})")
    rng = np.random.default_rng(0)
    n = args.size
    shapes = {f"square {n}": (n, n, n)}
    if args.lm:
        shapes["LM h W_hl"] = (1000, 200, 37373)
    for label, (rows, inner, cols) in shapes.items():
        a = jnp.asarray(rng.standard_normal((rows, inner), np.float32))
        b = jnp.asarray(rng.standard_normal((inner, cols), np.float32))
        functions = {}
        for precision in PRECISIONS:
            with jax.default_matmul_precision(precision):
                functions[precision] = jax.jit(jnp.matmul).lower(a, b).compile()
        best = {p: float("inf") for p in PRECISIONS}
        for _ in range(args.rounds):
            for precision, fn in functions.items():
                best[precision] = min(best[precision], seconds_per_call(fn, a, b, args.repeats))
        reference = np.asarray(functions["highest"](a, b))
        scale = np.abs(reference).max()
        print(f"{label} ({rows} x {inner} x {cols}), float32 inputs:")
        for precision in PRECISIONS:
            error = np.abs(np.asarray(functions[precision](a, b)) - reference).max() / scale
            flops = 2 * rows * inner * cols / best[precision]
            print(
                f"  {precision:<14} {best[precision] * 1e3:8.3f} ms  {flops / 1e9:8.0f} GFLOP/s  "
                f"x{best['highest'] / best[precision]:5.2f} of highest  max rel. diff {error:.1e}"
            )


if __name__ == "__main__":
    main()
