"""Malik (2016) 3.1: the addition problem, LSTM against the attention-gated LSTM.

    python -m thesis_repro.addition grid --preset cpu      # every run of a preset, resumable
    python -m thesis_repro.addition run --model gated-pretrained --seed 0 --steps 15000
    python -m thesis_repro.addition report --preset cpu    # table + figures from the records

Methods (thesis 2.1, 3.1; SPEC E3):
- Task: ``tasks.thesis_addition``: pairs (value in [0, 1], marker), two markers (one per half),
  target = sum of the two marked values; lengths uniform in 500..550, zero-padded to 550 and the
  padding masked. Predicting the mean gives MSE 1/6 (the baseline of every figure).
- Models (``model.py``): ``lstm``, one 64-unit LSTM layer and ``y = LReLU(W_out h_final +
  b_out)`` (2.1.1); ``gated-*``, the same with the energies e_t of a Raffel attention network
  (D = 100) added to the input gate (2.1.2). Gates use the scaled
  sigmoid ``1.2 sigmoid(x) - 0.1`` (ch. 3). Weights N(0, 1/sqrt(output_dim)), biases zero (3.1).
  The thesis says only that the attention network "was trained"; two readings:
  ``gated-pretrained`` (default reading of SPEC E3) trains the full Raffel network on the same
  task first (``pretrain_steps`` Adam steps, batch 50), then freezes it and feeds its energies;
  ``gated-joint`` trains the energy network end to end through the LSTM's loss.
- Protocol: Adam (lr 1e-3), MSE, minibatches of 50 fresh sequences, 15000 steps (``paper``).
  An "epoch" is 100 steps: its record entry ``train_loss`` is the mean training MSE over those
  steps, and a checkpoint is written after it, so a killed run resumes from there.
- After training: generalisation MSE at lengths 500, 1000, 2000, ..., 6000 on 1000 fresh
  sequences each (the same seeded sets for every run; thesis Fig 3.3), and what the input gates
  do: mean input-gate value at the marked steps and at the other steps (``gate_statistics``).
- Outputs (``report``): ``figures/addition_training.pdf`` (thesis Figs 3.1, 3.2: every run's
  training curve, one panel per model, shared log y axis), ``figures/addition_generalisation.pdf``
  (Fig 3.3) and ``results/addition/table.md``.

"Learning starts" (thesis 3.1.1: about step 2000 with attention, 8000 without) is measured as the
first step at which the 100-step mean training MSE falls below ``LEARNING_THRESHOLD`` = 0.1.
Why 0.1: a model that ignores the marked values sits at 1/6 = 0.167 (the 100-step mean of an
unlearned model fluctuates by about 0.003, so 0.1 is no accident), and a model that has picked up
one of the two marked values reaches 1/12 = 0.083 (the other value's variance); 0.1 lies between
the two, so crossing it means the network has begun to carry a marked value to the end. Runs
can dip below it and climb back (one value carried for a while), so the table also gives the
step from which the training MSE stays below 0.1 to the end ("for good").

Files: ``config.py`` (presets, the thesis's numbers, "learning starts"), ``model.py`` (the
LSTM and the attention-gated LSTM), ``train.py`` (one run: pretraining, training, the
generalisation test and the gate analysis), ``report.py`` (tables and figures from the records),
``cli.py`` (the command line).

Every run writes ``results/addition/<model>/<run>.json`` after each epoch; the last checkpoint
is kept beside it (``checkpoints/``, git-ignored) for further analysis. A run whose training (or
pretraining) loss becomes NaN or infinite stops there and is recorded as failed
(``training.FailOnNonFiniteLoss``; ``run`` exits with one ``error:`` line); the tables and
figures leave it out and name it.
"""

from __future__ import annotations

from thesis_repro.addition.config import (
    GATE_KEYS,
    LEARNING_THRESHOLD,
    MODELS,
    NAME,
    PRESETS,
    Preset,
    RunConfig,
    first_step_below,
    first_step_staying_below,
    preset_runs,
    runs,
    summarize,
)
from thesis_repro.addition.report import (
    render_generalisation_figure,
    render_table,
    render_training_figure,
    report,
    report_parts,
)
from thesis_repro.addition.train import (
    build_model,
    gate_statistics,
    generalisation,
    input_gates,
    record_path,
    run,
)
from thesis_repro.experiment import Experiment


def describe(config: RunConfig) -> str:
    """One line naming a run in the grid's log."""
    return config.name


EXPERIMENT = Experiment(
    name=NAME,
    title="Malik (2016) 3.1: addition problem, LSTM vs attention-gated LSTM",
    package="thesis_repro.addition",
    presets=PRESETS,
    runs=runs,
    run=run,
    record_path=record_path,
    describe=describe,
    report=report,
)

__all__ = [
    "EXPERIMENT",
    "GATE_KEYS",
    "LEARNING_THRESHOLD",
    "MODELS",
    "PRESETS",
    "Preset",
    "RunConfig",
    "build_model",
    "first_step_below",
    "first_step_staying_below",
    "gate_statistics",
    "generalisation",
    "input_gates",
    "preset_runs",
    "record_path",
    "render_generalisation_figure",
    "render_table",
    "render_training_figure",
    "report",
    "report_parts",
    "run",
    "runs",
    "summarize",
]
