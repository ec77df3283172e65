"""Raffel & Ellis (2015): feed-forward attention on long-memory tasks.

    python -m thesis_repro.ffattention grid --preset cpu      # every run of a preset, resumable
    python -m thesis_repro.ffattention run --task addition --t0 1000 --pooling attention --lr 3e-3
    python -m thesis_repro.ffattention report                 # table + figure from the records

Methods (Raffel & Ellis 2.1-2.4; SPEC E1, E2):
- Task: Hochreiter/Raffel addition or multiplication, lengths uniform in [T0, 1.1 T0]
  (``thesis_repro.tasks``); a prediction is correct when |error| < 0.04.
- Model: ``model.raffel_model`` (D = 100, leaky ReLU, attention or mean pooling
  over each sequence's true length: the padding is masked). From T0 = 2000 on, the same function
  is computed by the fused chunked implementation (``chunked=True``; the record says which).
  ``--unmasked`` (``RunConfig.mask_padding=False``) follows Raffel's published script instead:
  every batch is padded to int(ceil(1.1 T0)) steps and the padded steps enter the pooling; such
  runs are named ``...-unmasked-seed<s>`` and get a table of their own. ``python -m
  thesis_repro reproduce --preset paper`` trains both (``config.reproduced_runs``).
- Protocol: Adam (0.9, 0.999), squared error, minibatches of 100 fresh sequences, an epoch is
  1000 updates, a fixed held-out test set of 1000 sequences scored after every epoch, stop at
  100% test accuracy or at the epoch cap. Table 1 reports the best learning rate per cell
  (per seed, then the median over seeds); in a ``grid`` a run also stops once another learning
  rate of its cell and seed got to 100% in as many epochs (``config.rivals``; ``--no-prune``).
- Variable length (Raffel 2.3): one model trained on lengths from 50 to 10000, at each of the
  preset's learning rates (the `paper` preset: Table 1's four, as Raffel's published
  ``variable_length_experiments.py``; the best per seed is reported, as in Table 1). Each
  minibatch draws one T0 in [50, 10000/1.1] and its sequences have lengths in [T0, 1.1 T0],
  zero-padded to a multiple of 512 steps with the padding masked (Raffel's script gives all
  sequences of a minibatch one length, uniform in [50, 10000], and needs no padding; masked
  pooling of a padded sequence equals that of the unpadded one, so only the length spread
  within a batch differs). The test set holds 10 sequences at each of 100 values of T0 spread
  evenly over the same range (his: 10 at each of 100 lengths from 50 to 10000).
- Temporal order (Raffel 2.4): a 4-way classifier (XX, XY, YX, YY) with the same network; it can
  separate XX from YY but not XY from YX, since pooling over time discards order.

Files: ``config.py`` (presets, the paper's numbers), ``model.py``, ``train.py`` (one run),
``report.py`` (table and figure from the records; ``cells.py``, which runs a cell reports,
and ``plateau.py``, the epochs from 95% to 100%), ``cli.py`` (the command line).

Every run writes ``results/ffattention/<experiment>/<run>.json`` after each epoch. A run whose
training loss becomes NaN or infinite stops there and is recorded as failed
(``training.FailOnNonFiniteLoss``; ``run`` exits with one ``error:`` line); the tables and the
figure leave it out and name it.
"""

from __future__ import annotations

from thesis_repro.experiment import Experiment
from thesis_repro.ffattention.config import (
    NAME,
    PRESETS,
    Preset,
    RunConfig,
    preset_runs,
    reproduced_runs,
    runs,
    summarize,
)
from thesis_repro.ffattention.report import (
    render_figure,
    render_table,
    render_variable_figure,
    report,
    table_key,
    tables_of,
)
from thesis_repro.ffattention.train import evaluate, record_path, run, test_set


def describe(config: RunConfig) -> str:
    """One line naming a run in the grid's log: ``table1: <name>``, ``table1 (unmasked):
    <name>`` (``status`` counts the part before the colon as a table of its own)."""
    padding = "" if config.mask_padding else " (unmasked)"
    return f"{config.experiment}{padding}: {config.name}"


EXPERIMENT = Experiment(
    name=NAME,
    title="Raffel & Ellis (2015): feed-forward attention on long-memory tasks",
    package="thesis_repro.ffattention",
    presets=PRESETS,
    runs=reproduced_runs,
    run=run,
    record_path=record_path,
    describe=describe,
    report=report,
)

__all__ = [
    "EXPERIMENT",
    "PRESETS",
    "Preset",
    "RunConfig",
    "evaluate",
    "preset_runs",
    "record_path",
    "render_figure",
    "render_table",
    "render_variable_figure",
    "report",
    "reproduced_runs",
    "run",
    "runs",
    "summarize",
    "table_key",
    "tables_of",
    "test_set",
]
