"""Does masking the padding make a Raffel & Ellis model mis-scale the marked values by 1/L?

    python scripts/padding_length_bias.py [--task addition] [--t0 500] [--lr 3e-3] [--seed 0]
        [--updates 1000]

The README's explanation of why unmasked padding (Raffel's script, ``--unmasked``) learns the
addition task faster than masked pooling: with masking every step's pooling weight scales like
1/L, so a readout that does not recover the length L sees the marked values scaled by
``s = Lbar / L`` (``dL = (L - Lbar) / Lbar``, ``s = 1 - dL`` to first order). For addition
(``y = 0.5 + (X1 + X2) / 4``, linear in the marked values) it predicts ``0.5 + (y - 0.5) s``,
an error of ``0.5 dL - y dL``; for multiplication (``y = X1 X2``) a readout that multiplies
the two scaled values predicts ``y s^2``, an error of ``-2 y dL``. This trains the attention
model on the task both ways (same seed, data stream and learning rate) and, every quarter of
the updates, fits ``error = a + b0 dL + b dL y`` on the held-out test set by least squares
(``b`` = -1 with ``b0`` = 0.5: a fully length-blind addition readout; ``b`` = -2 with ``b0`` = 0:
a length-blind product; 0 and 0: none of that error), and the test accuracy once the fitted
length terms are taken out of every prediction (what knowing L would be worth). Prints a table
and writes ``results/diagnostics/padding-length-bias-<task>-T<T0>-lr<lr>-seed<seed>.json`` with
the command; about 1-2 minutes per task at T0 = 500 on 2 CPU cores. The model, its initial
weights and its batches are those of the grid's run of the same task, T0, learning rate and
seed (``train.run``), so at every 1000 updates its test accuracy is that run's after an epoch.
"""

from __future__ import annotations

import argparse
import platform
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import NamedTuple

import keras
import numpy as np

from thesis_repro import tasks
from thesis_repro.ffattention.config import TABLE1_TASKS, RunConfig
from thesis_repro.ffattention.train import compiled_model, test_set, train_batch_fn
from thesis_repro.files import write_json_atomic
from thesis_repro.training import FreshBatches, set_seed

OUT_DIR = Path("results/diagnostics")  # outside every experiment folder
CHECKS = 4  # evaluations over the run


def true_lengths(x: np.ndarray) -> np.ndarray:
    """Each sequence's length from its marker channel (the -1 on its last step), which holds
    whether or not the model was told the length."""
    last = np.array([np.flatnonzero(row == -1)[-1] for row in x[..., 1]])
    return last + 1


class LengthFit(NamedTuple):
    """``error = a + b0 dL + b dL y`` by least squares: ``b0`` (``offset``), ``b``
    (``slope``), their standard errors, and every sequence's fitted length terms
    ``b0 dL + b dL y``."""

    offset: float
    slope: float
    offset_stderr: float
    slope_stderr: float
    terms: np.ndarray


def length_terms(error: np.ndarray, y: np.ndarray, lengths: np.ndarray) -> LengthFit:
    """The least-squares :class:`LengthFit` of ``error``, ``dL = (L - mean L) / mean L``."""
    relative = (lengths - lengths.mean()) / lengths.mean()
    design = np.stack([np.ones_like(relative), relative, relative * y], axis=1)
    coef, *_ = np.linalg.lstsq(design, error, rcond=None)
    residual = error - design @ coef
    dof = max(len(error) - design.shape[1], 1)
    covariance = residual @ residual / dof * np.linalg.inv(design.T @ design)
    stderr = np.sqrt(np.diag(covariance))
    terms = design[:, 1:] @ coef[1:]
    return LengthFit(float(coef[1]), float(coef[2]), float(stderr[1]), float(stderr[2]), terms)


def out_name(config: RunConfig) -> str:
    """``padding-length-bias-<task>-T<T0>-lr<lr>-seed<seed>.json``: a probe per setting."""
    return (
        f"padding-length-bias-{config.task}-T{config.t0}-lr{config.learning_rate:g}"
        f"-seed{config.seed}.json"
    )


def train_and_probe(config: RunConfig, updates: int) -> list[dict]:
    """Train ``config``'s model for ``updates`` steps; the slope and accuracy at each check.

    One ``fit`` over batches 0 .. ``updates`` - 1, probed from a callback every ``updates //
    CHECKS`` (as the grid's run evaluates at each epoch end): separate ``fit`` calls would each
    start the dataset over at batch 0."""
    set_seed(config.seed)
    model = compiled_model(config)  # the network and optimizer train.run uses
    (test,) = test_set(config)
    lengths = true_lengths(test.x)
    per_check = updates // CHECKS
    rows: list[dict] = []

    def probe(check: int, _logs: dict | None = None) -> None:
        prediction = np.asarray(model.predict(test.inputs, batch_size=100, verbose=0)).ravel()
        error = prediction - test.y
        fit = length_terms(error, test.y, lengths)
        rows.append(
            {
                "updates": (check + 1) * per_check,
                "test_accuracy": tasks.accuracy(prediction, test.y),
                "slope": fit.slope,  # b, of dL y
                "slope_stderr": fit.slope_stderr,
                "offset_slope": fit.offset,  # b0, of dL
                "offset_slope_stderr": fit.offset_stderr,
                # the accuracy with the fitted length terms taken out of every prediction
                "accuracy_without_length_term": tasks.accuracy(prediction - fit.terms, test.y),
            }
        )
        print(
            f"{'masked' if config.mask_padding else 'unmasked':>8}  {rows[-1]['updates']:>6}  "
            f"{100 * rows[-1]['test_accuracy']:6.1f}%  b = {fit.slope:+.3f} +- "
            f"{fit.slope_stderr:.3f}, b0 = {fit.offset:+.3f} +- {fit.offset_stderr:.3f}  "
            f"{100 * rows[-1]['accuracy_without_length_term']:6.1f}%",
            flush=True,
        )

    batches = FreshBatches(train_batch_fn(config), config.seed, steps=CHECKS * per_check)
    model.fit(
        batches,
        steps_per_epoch=per_check,
        epochs=CHECKS,
        shuffle=False,  # batch k is batch k
        callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=probe)],
        verbose=0,
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=TABLE1_TASKS, default="addition")
    parser.add_argument("--t0", type=int, default=500)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.updates < CHECKS:
        parser.error(f"--updates must be at least {CHECKS}")
    masked = RunConfig("table1", args.task, args.t0, "attention", args.lr, args.seed)
    print("padding   updates  accuracy  error = a + b0 dL + b dL y   accuracy - length terms")
    results = {
        "command": "python scripts/padding_length_bias.py " + " ".join(sys.argv[1:]),
        "run_config": asdict(masked),  # not a run record: no "config"
        "updates": args.updates,
        "backend": keras.backend.backend(),
        "machine": platform.platform(),
        "masked": train_and_probe(masked, args.updates),
        "unmasked": train_and_probe(replace(masked, mask_padding=False), args.updates),
    }
    out = OUT_DIR / out_name(masked)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
