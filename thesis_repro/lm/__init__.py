"""Thesis 3.2: feed-forward n-gram language models with and without an attention-compressed prefix.

    python -m thesis_repro.lm --prefix 5                      # one model (5-gram + 5-word prefix)
    python -m thesis_repro.lm grid --table 3.1 --preset cpu   # Table 3.1 / Figure 3.4, resumable
    python -m thesis_repro.lm grid --table 3.2 --preset cpu   # Table 3.2 / Figure 3.5 (momentum)
    python -m thesis_repro.lm grid --table ptb --preset cpu   # PTB: 5-gram vs 5-gram + 5
    python -m thesis_repro.lm report                          # tables and figures from records

Future work of thesis 4.2 (same corpus and preset as Table 3.1 or the PTB table, whose runs they
reuse):

    python -m thesis_repro.lm grid --table future-prefix --preset cpu    # train x eval prefix
    python -m thesis_repro.lm grid --table future-position --preset cpu  # distance-aware attention
    python -m thesis_repro.lm grid --table future-prefix-ptb --preset cpu    # the same on PTB
    python -m thesis_repro.lm grid --table future-position-ptb --preset cpu  # (reuse PTB runs)
    python -m thesis_repro.lm --prefix 5 --eval-prefix 10 20 sentence   # one run, more evals
    python -m thesis_repro.lm evaluate                 # fill in missing eval-prefix scores
    python -m thesis_repro.lm show-attention --checkpoint RUN.json [RUN2.json] --sentence "..."
    python -m thesis_repro.lm examples --preset cpu    # thesis 3.2.4 figures from finished runs
    python -m thesis_repro.lm kneser-ney --table ptb   # the Kneser-Ney rows of a table

Methods (thesis 2.2, 3.2; SPEC E4):
- Corpus (thesis 3.2.1): ``--corpus PATH``, or ``$THESIS_REPRO_DATA/<--corpus-name>`` (default
  ``eltec-pol``, the stand-in for the thesis's 7 M words of Polish Wikipedia), prepared by
  ``thesis_repro.corpus.load_corpus`` (lowercased, punctuation split off, vocabulary = words seen
  at least ``min_count`` times in train, plus ``<UNK>``; 6 : 0.5 : 0.5 split by running
  position). PTB is read as given (whitespace tokens, ``min_count`` 1). With neither option the
  run uses ``corpus.synthetic_corpus`` and says so on its first line of output.
- Models (``model.py``): the Bengio LM of order n (thesis 2.2.1) and the
  attention-prefix LM (2.2.2); S = 100, H = 200, ReLU, full softmax over V.
- Targets: every model predicts the same positions, ``t >= FIRST_TARGET = 9`` of each part (the
  10-gram and the 5-gram + 5 see 9 words back), in training and in scoring; prefix words before
  the start of a part are padded and masked.
- Training (thesis 3.2.2): SGD on minibatches of 1000, mean NLL (sparse categorical
  cross-entropy from logits) plus ``1e-5 * ||W||^2`` for W_mh and W_hl, learning rate
  ``eps0 / (1 + decay * i)`` (``training.inverse_time_schedule``); variant ``thesis``: eps0 = 0.2,
  decay = 1e-8, no momentum (Table 3.1); variant ``momentum``: eps0 = 0.15, decay = 1e-5,
  momentum 0.85 (Table 3.2). Keras's momentum is ``v = mu v - lr g; w += v``; TensorFlow 1's
  MomentumOptimizer (``v = mu v + g; w -= lr v``) is the same while lr is constant.
  Each epoch visits every training target once in a permutation seeded by (seed, epoch), in
  full batches only (at most batch - 1 targets are left out per epoch, different ones each time).
- Scores: validation perplexity ``exp(mean NLL)`` after every epoch, test perplexity at the end
  (of the last epoch's model), both over all targets of the part.
- Thesis 4.2, prefix-length generalisation: a finished attention model is scored on the test
  part again with other prefix lengths (``--eval-prefix 10 20 50``; the same weights, the prefix
  input takes any length) or with the history back to the previous ``<eos>``
  (``--eval-prefix sentence``: in eltec-pol a line is a paragraph, ~37 tokens on average, and
  under the cpu preset a test target's history averages ~44 words; at most ``HISTORY_CAP`` =
  200 words; a corpus without ``<eos>``, like the synthetic one, gives the last 200 words).
  ``--min-prefix K`` trains with a prefix length drawn uniformly in ``K..--prefix`` for every
  minibatch (padded to ``--prefix`` and masked). Scores go to
  ``summary.eval_prefix`` of the run's record (``{"10": ppl, "sentence": ppl}``), with the mean
  number of prefix words actually seen in ``summary.eval_prefix_words``.
- Thesis 4.2, position awareness: ``--position-aware bias`` adds a learned per-distance bias to
  the attention energies (the primary method), ``embedding`` a learned distance embedding to the
  prefix words' h_i (``layers.PrefixAttentionPooling`` says why).

Files: ``config.py`` (tables, presets, a run's config and record path), ``corpora.py`` (which
corpus a run reads; the runs of a table), ``batches.py`` and ``model.py`` (inputs and networks),
``train.py`` (one run), ``evaluate.py`` (perplexity, eval prefixes, loading finished runs),
``kneser_ney.py`` (count-based baselines), ``report.py`` (tables and figures from the records),
``examples.py`` (thesis 3.2.4 attention examples), ``cli.py`` (the command line).

Every run writes ``results/lm/<corpus>/<table>/<run>.json`` after each epoch and a ``.keras``
checkpoint beside it; an interrupted run (even ``kill -9``) continues from its last checkpoint
when the same command is run again, and finished runs are skipped. A finished run keeps its
final model, ``checkpoints/<run>-final.keras``, so it can be scored again later (``evaluate``,
``show-attention``); the per-epoch checkpoints are deleted. A run whose training loss becomes NaN
or infinite stops there and is recorded as failed (``training.FailOnNonFiniteLoss``: one
``error:`` line, exit status 1); the tables and figures leave it out and name it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from thesis_repro.corpus import CorpusError
from thesis_repro.experiment import Experiment, Reproduction, Step
from thesis_repro.layers import POSITION_AWARE
from thesis_repro.lm.batches import scored_targets
from thesis_repro.lm.config import (
    EVAL_PREFIXES,
    FIRST_TARGET,
    FUTURE_TABLES,
    HISTORY_CAP,
    KN_TABLES,
    LM_TABLES,
    NAME,
    PRESETS,
    SENTENCE,
    SYNTHETIC,
    TABLES,
    VARIANTS,
    FutureTable,
    LMError,
    Preset,
    Regime,
    RunConfig,
    Table,
    Variant,
    check_config,
    corpus_settings,
    final_model_path,
    model_label,
    preset_config,
    record_file_of,
    record_path,
    summarize,
    table_corpus_name,
    table_eval_prefixes,
)
from thesis_repro.lm.corpora import (
    SYNTHETIC_NOTICE,
    CorpusSource,
    load_lm_corpus,
    make_config,
    record_source,
    resolve_corpus,
    table_runs,
)
from thesis_repro.lm.evaluate import (
    eval_prefix_scores,
    evaluate_all,
    evaluate_run,
    load_run_model,
    parse_eval_prefix,
    perplexity,
    prefix_words,
    reusing_eval_prefixes,
    scored_inputs,
    target_nll,
    unscored_evals,
)
from thesis_repro.lm.examples import make_examples, show_attention
from thesis_repro.lm.kneser_ney import table_baselines
from thesis_repro.lm.model import build_model
from thesis_repro.lm.report import report as render_tables  # (lm.report stays the module)
from thesis_repro.lm.train import estimate_update_seconds, run, run_grid
from thesis_repro.settings import DATA_ENV, data_dir
from thesis_repro.training import DTYPE_POLICIES


def table_sources(preset: str, data: str | None) -> tuple[dict[str, CorpusSource], str]:
    """Corpus of each LM table under ``preset``, and a one-line note on what was left out.

    ``smoke`` uses the synthetic corpus for every table. Otherwise each table's corpus is looked
    up in ``data`` (``resolve_corpus``); tables whose corpus is missing are left out.
    """
    if preset == "smoke":
        synthetic = resolve_corpus(None, None, None)
        return {table: synthetic for table in LM_TABLES}, ""
    if not data:
        return {}, (
            f"language models skipped: no corpus directory (pass --data DIR or set {DATA_ENV}; "
            f"preset {preset} needs DIR/eltec-pol and DIR/ptb)"
        )
    if not Path(data).expanduser().is_dir():
        return {}, f"language models skipped: the corpus directory {data} does not exist"
    sources, missing = {}, []
    for table in LM_TABLES:
        try:
            sources[table] = resolve_corpus(None, table_corpus_name(table), str(data))
        except CorpusError as error:
            missing.append(f"table {table} ({error})")
    note = "language models skipped: " + "; ".join(missing) if missing else ""
    return sources, note


def runs(preset: str) -> list[RunConfig]:
    """Every run of every LM table under ``preset`` whose corpus is found (``table_sources``
    with ``$THESIS_REPRO_DATA``); runs shared by several tables are listed once."""
    sources, _ = table_sources(preset, data_dir())
    configs = [c for table, s in sources.items() for c in table_runs(table, s, preset)]
    return list(dict.fromkeys(configs))


def run_config(config: RunConfig, results_dir: Path, verbose: int = 1) -> dict[str, Any]:
    """``train.run`` of one config on its corpus (found by name in ``$THESIS_REPRO_DATA``),
    scored at its table's eval prefixes."""
    if config.corpus == SYNTHETIC:
        source = resolve_corpus(None, None, None)
    else:
        source = resolve_corpus(None, config.corpus, data_dir())
    evals = table_eval_prefixes(config.table)
    return run(config, source, results_dir, verbose, eval_prefixes=evals)


def describe(config: RunConfig) -> str:
    """One line naming a run in the grid's log."""
    return f"table {config.table}: {config.name}"


def reproduce_steps(reproduction: Reproduction) -> list[Step]:
    """The LM steps of ``reproduce``: each table's grid (thesis Tables 3.1, 3.2, PTB, then the
    future-work tables, which reuse their runs), the Kneser-Ney rows, the attention examples
    (the grids alone with ``reproduction.train_only``)."""
    preset, results_dir, log = reproduction.preset, reproduction.results_dir, reproduction.log
    sources, note = table_sources(preset, reproduction.data_dir)
    if note:
        log(note)
    if preset == "smoke":
        log(
            "smoke preset: the language models train on the built-in SYNTHETIC corpus "
            "(thesis_repro.corpus.synthetic_corpus), not on real text"
        )
    steps: list[tuple[str, Callable[[], Any]]] = []
    for table, source in sources.items():
        grid = partial(run_grid, table, source, preset, results_dir, verbose=reproduction.verbose)
        steps.append((f"lm {table} ({source.name})", grid))
    if reproduction.train_only:
        return steps
    for table, source in sources.items():  # count-based rows of Tables 3.1, 3.2 and PTB
        if table in KN_TABLES:
            baselines = partial(
                table_baselines, table, source, preset, results_dir,
                progress=bool(reproduction.verbose),
            )  # fmt: skip
            steps.append((f"Kneser-Ney {table} ({source.name})", baselines))
    if sources:
        figures = Path(reproduction.figures_dir)
        examples = partial(make_examples, results_dir, figures, preset, log=log)
        steps.append(("lm attention examples", examples))
    return steps


EXPERIMENT = Experiment(
    name=NAME,
    title="Malik (2016) 3.2: feed-forward language models with an attention-compressed prefix",
    package="thesis_repro.lm",
    presets=PRESETS,
    runs=runs,
    run=run_config,
    record_path=record_path,
    describe=describe,
    report=render_tables,
    figure_prefixes=("lm_", "attention_"),  # attention_*: thesis 3.2.4 examples
    reproduce_steps=reproduce_steps,
    lacks=unscored_evals,  # a reused run not scored at a future table's eval prefixes
)

__all__ = [
    "DTYPE_POLICIES",
    "EVAL_PREFIXES",
    "EXPERIMENT",
    "FIRST_TARGET",
    "FUTURE_TABLES",
    "HISTORY_CAP",
    "LM_TABLES",
    "POSITION_AWARE",
    "PRESETS",
    "SENTENCE",
    "SYNTHETIC",
    "SYNTHETIC_NOTICE",
    "TABLES",
    "VARIANTS",
    "CorpusSource",
    "FutureTable",
    "LMError",
    "Preset",
    "Regime",
    "RunConfig",
    "Table",
    "Variant",
    "build_model",
    "check_config",
    "corpus_settings",
    "estimate_update_seconds",
    "eval_prefix_scores",
    "evaluate_all",
    "evaluate_run",
    "final_model_path",
    "load_lm_corpus",
    "load_run_model",
    "make_config",
    "make_examples",
    "model_label",
    "parse_eval_prefix",
    "perplexity",
    "prefix_words",
    "preset_config",
    "record_file_of",
    "record_path",
    "record_source",
    "resolve_corpus",
    "reusing_eval_prefixes",
    "run",
    "run_grid",
    "scored_inputs",
    "scored_targets",
    "show_attention",
    "summarize",
    "table_baselines",
    "table_corpus_name",
    "table_eval_prefixes",
    "table_runs",
    "table_sources",
    "target_nll",
    "unscored_evals",
]
