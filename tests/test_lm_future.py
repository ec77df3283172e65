"""Tests of the thesis 4.2 future work on the language model (``thesis_repro.lm``,
``thesis_repro.lm.model``, ``thesis_repro.lm.examples``): variable prefix lengths
and their masks, "sentence" prefixes, random prefix lengths in training, the position-aware
attention against NumPy, configs that keep earlier records valid, the smoke grids of both
future tables end to end, exact re-scoring, ``evaluate`` and the attention figure.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest

from thesis_repro import lm
from thesis_repro.files import write_json_atomic
from thesis_repro.lm import cli as lm_cli
from thesis_repro.lm import report as lm_report
from thesis_repro.lm.batches import PAD_ID, TrainBatches, sentence_starts, window_inputs
from thesis_repro.lm.examples import (
    EXAMPLES_FOLDER,
    draw_attention_examples,
    draw_example,
    encode_sentence,
    example_record,
    most_attended,
    pick_sentences,
    render_examples,
    summarise_examples,
    weight_by_distance,
)
from thesis_repro.lm.model import (
    PrefixAttentionPooling,
    attention_lm,
    bengio_lm,
    model_shape,
    position_awareness,
    prefix_attention,
)

V, S, H = 40, 6, 7


# ----------------------------------------------------------------------------------------------
# NumPy reference of thesis 2.2.2 with the distance-aware attention of thesis 4.2
# ----------------------------------------------------------------------------------------------


def random_weights(rng: np.random.Generator, order: int, prefix: int, aware: str) -> dict:
    """Weights in the thesis's orientation (W x), with the distance parameters of ``aware``."""
    w = {
        "E": rng.normal(0, 0.7, (V, S)),
        "W_wh": rng.normal(0, 0.7, (S, S)),
        "b_wh": rng.normal(0, 0.2, S),
        "W_hc": rng.normal(0, 0.9, (1, S)),
        "b_hc": rng.normal(0, 0.2, 1),
        "W_mh": rng.normal(0, 0.5, (H, order * S)),
        "b_mh": rng.normal(0, 0.2, H),
        "W_hl": rng.normal(0, 0.5, (V, H)),
        "b_hl": rng.normal(0, 0.2, V),
    }
    if aware == "bias":
        w["beta"] = rng.normal(0, 1.5, prefix)
    if aware == "embedding":
        w["P"] = rng.normal(0, 0.7, (prefix, S))
    return w


def set_weights(model: keras.Model, w: dict) -> None:
    model.get_layer("E").set_weights([w["E"]])
    model.get_layer("W_wh").set_weights([w["W_wh"].T, w["b_wh"]])
    extra = [w[k] for k in ("beta", "P") if k in w]
    model.get_layer("attention").set_weights([w["W_hc"].T, w["b_hc"], *extra])
    model.get_layer("W_mh").set_weights([w["W_mh"].T, w["b_mh"]])
    model.get_layer("W_hl").set_weights([w["W_hl"].T, w["b_hl"]])


def reference(tokens: np.ndarray, t: int, order: int, width: int, w: dict) -> tuple:
    """Logits for the word at t and the attention weights (nearest first), given ``width``
    prefix words: ``e_j = tanh(W_hc h_j + b) + beta_min(j, p-1)`` (bias) or
    ``h_j + P_min(j, p-1)`` in place of h_j (embedding)."""
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    nearest = t - order
    positions = [nearest - j for j in range(width) if nearest - j >= 0]
    h = np.array([relu(w["W_wh"] @ w["E"][tokens[i]] + w["b_wh"]) for i in positions])
    h = h.reshape(len(positions), S)
    clip = [min(j, len(w.get("beta", w.get("P", [0]))) - 1) for j in range(len(positions))]
    if "P" in w:
        h = h + w["P"][clip]
    e = np.tanh(h @ w["W_hc"][0] + w["b_hc"][0])
    if "beta" in w:
        e = e + w["beta"][clip]
    alpha = np.exp(e - e.max(initial=0)) / np.exp(e - e.max(initial=0)).sum()
    c = (alpha[:, None] * h).sum(axis=0)  # no prefix word: c = 0
    m = np.concatenate([c, *[w["E"][tokens[j]] for j in range(t - order + 1, t)]])
    return w["W_hl"] @ relu(w["W_mh"] @ m + w["b_mh"]) + w["b_hl"], alpha


# ----------------------------------------------------------------------------------------------
# Variable prefix lengths (prefix-length generalisation)
# ----------------------------------------------------------------------------------------------


def test_prefix_input_takes_any_length(rng: np.random.Generator) -> None:
    model = attention_lm(V, 5, 5, S, H)
    shapes = {t.name.split(":")[0]: tuple(t.shape) for t in model.inputs}
    assert shapes == {"window": (None, 4), "prefix": (None, None), "prefix_length": (None,)}
    assert model_shape(model) == (5, 5) and position_awareness(model) == "none"
    tokens = rng.integers(0, V, 80).astype(np.int32)
    for width in (1, 5, 12, 60):
        x = window_inputs(tokens, np.arange(70, 80), 5, width)
        assert x["prefix"].shape == (10, width)
        assert model.predict(x, verbose=0).shape == (10, V)
    assert model_shape(bengio_lm(V, 3, S, H)) == (3, 0)


@pytest.mark.parametrize("aware", ["none", "bias", "embedding"])
def test_padded_prefix_equals_shorter_prefix(rng: np.random.Generator, aware: str) -> None:
    """A prefix padded (with any ids) beyond its length gives the shorter prefix's output."""
    model = attention_lm(V, 5, 4, S, H, position_aware=aware)
    set_weights(model, random_weights(rng, 5, 4, aware))
    tokens = rng.integers(1, V, 60).astype(np.int32)
    short = window_inputs(tokens, np.arange(30, 60), 5, 3)
    long = window_inputs(tokens, np.arange(30, 60), 5, 11)
    long["prefix"][:, 3:] = rng.integers(0, V, (30, 8))  # padding content must not matter
    long["prefix_length"][:] = 3
    np.testing.assert_allclose(
        model.predict(long, verbose=0), model.predict(short, verbose=0), rtol=1e-5, atol=1e-5
    )


def test_sentence_starts_and_history_prefix() -> None:
    eos = 1
    #                 0  1  2  3  4  5  6  7  8  9 10 11
    tokens = np.array([5, 6, 1, 7, 8, 9, 1, 2, 3, 4, 5, 6], np.int32)
    assert sentence_starts(tokens, eos).tolist() == [0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 6, 6]
    assert sentence_starts(tokens, None).tolist() == [0] * 12
    x = window_inputs(tokens, np.array([7, 9, 11]), 3, 6, sentence_starts(tokens, eos))
    # back to and including the last <eos> before the window; never past the start
    assert x["prefix_length"].tolist() == [3, 1, 3]
    assert x["prefix"].tolist() == [
        [8, 7, 1, PAD_ID, PAD_ID, PAD_ID],
        [1, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
        [3, 2, 1, PAD_ID, PAD_ID, PAD_ID],
    ]
    capped = window_inputs(tokens, np.array([11]), 3, 2, sentence_starts(tokens, eos))
    assert capped["prefix_length"].tolist() == [2]
    config = lm.RunConfig("synthetic", "runs", "smoke", order=3, prefix=2, first_target=3)
    for eval_prefix, prefix, starts in ((lm.SENTENCE, 200, True), (4, 4, False)):
        want = window_inputs(
            tokens,
            lm.scored_targets(len(tokens), 3),
            3,
            prefix,
            sentence_starts(tokens, eos) if starts else None,
        )["prefix_length"].mean()
        assert lm.prefix_words(tokens, config, eval_prefix, eos) == pytest.approx(want)


def test_train_batches_with_random_prefix_length(rng: np.random.Generator) -> None:
    tokens = rng.integers(1, V, 3000).astype(np.int32)
    targets = lm.scored_targets(len(tokens))
    full = TrainBatches(tokens, targets, 5, 20, 100, seed=3, first_epoch=0, epochs=3, min_prefix=1)
    lengths = []
    for index in range(len(full)):
        x, _ = full[index]
        length = full.batch_prefix(index)
        lengths.append(length)
        assert x["prefix"].shape == (100, 20)  # padded to the longest prefix
        assert 1 <= length <= 20 and x["prefix_length"].max() <= length
        assert (x["prefix"][:, length:] == PAD_ID).all()
        fixed = window_inputs(tokens, full.batch_targets(index), 5, length)
        np.testing.assert_array_equal(x["prefix"][:, :length], fixed["prefix"])
        np.testing.assert_array_equal(x["prefix_length"], fixed["prefix_length"])
    assert len(set(lengths)) > 10  # the lengths really vary, over the whole range
    resumed = TrainBatches(tokens, targets, 5, 20, 100, 3, first_epoch=2, epochs=3, min_prefix=1)
    steps = full.steps_per_epoch
    assert [resumed.batch_prefix(k) for k in range(steps)] == lengths[2 * steps :]
    plain = TrainBatches(tokens, targets, 5, 20, 100, seed=3, first_epoch=0, epochs=1)
    assert {plain.batch_prefix(k) for k in range(len(plain))} == {20}
    with pytest.raises(ValueError, match="min_prefix"):
        TrainBatches(tokens, targets, 5, 5, 100, 3, 0, 1, min_prefix=6)


# ----------------------------------------------------------------------------------------------
# Position-aware attention
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aware", ["bias", "embedding"])
def test_position_aware_attention_matches_numpy(rng: np.random.Generator, aware: str) -> None:
    model = attention_lm(V, 5, 3, S, H, position_aware=aware)  # trained prefix p = 3
    w = random_weights(rng, 5, 3, aware)
    set_weights(model, w)
    tokens = rng.integers(0, V, 40).astype(np.int32)
    targets = np.arange(4, 41)  # the first ones have short or empty prefixes
    for width in (3, 7):  # 7: distances beyond the trained ones use the last parameter
        got = model.predict(window_inputs(tokens, targets, 5, width), verbose=0)
        want = np.array([reference(tokens, t, 5, width, w)[0] for t in targets])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    sentence = tokens[:16]
    for example in prefix_attention(model, sentence, prefix=7):
        _, alpha = reference(sentence, example.target, 5, 7, w)
        np.testing.assert_allclose(example.weights, alpha[::-1], atol=1e-5)  # oldest first


def test_distance_bias_changes_the_weights(rng: np.random.Generator) -> None:
    plain = attention_lm(V, 5, 4, S, H)
    biased = attention_lm(V, 5, 4, S, H, position_aware="bias")
    w = random_weights(rng, 5, 4, "none")
    set_weights(plain, w)
    set_weights(biased, w | {"beta": np.zeros(4)})
    sentence = rng.integers(1, V, 14).astype(np.int32)
    same = [a.weights for a in prefix_attention(biased, sentence)]
    for a, b in zip(same, [a.weights for a in prefix_attention(plain, sentence)], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)  # beta = 0: the thesis's attention
    set_weights(biased, w | {"beta": np.array([3.0, 0.0, -1.0, -3.0])})
    for example, before in zip(prefix_attention(biased, sentence), same, strict=True):
        if len(before) == 4:  # nearest word (last in reading order) now dominates
            assert example.weights[-1] > 0.8 > before[-1]
            assert not np.allclose(example.weights, before, atol=1e-3)
    # training moves the distance parameters (they get gradients)
    for aware in ("bias", "embedding"):
        model = lm.build_model(
            lm.RunConfig(
                "synthetic", "runs", "smoke", 5, 4, embedding_dim=S, hidden=H, position_aware=aware
            ),
            V,
            jit_compile=False,
        )
        tokens = rng.integers(1, V, 200).astype(np.int32)
        x, y = window_inputs(tokens, np.arange(9, 200), 5, 4), tokens[9:]
        for _ in range(3):
            model.train_on_batch(x, y)
        distance = model.get_layer("attention").weights[2].numpy()
        assert np.abs(distance).max() > 1e-6, aware


@pytest.mark.parametrize("aware", ["bias", "embedding"])  # "none": test_lm's round trip
def test_position_aware_save_load(tmp_path: Path, rng: np.random.Generator, aware: str) -> None:
    model = attention_lm(V, 5, 3, S, H, position_aware=aware)
    set_weights(model, random_weights(rng, 5, 3, aware))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.get_layer("attention"), PrefixAttentionPooling)
    assert model_shape(loaded) == (5, 3) and position_awareness(loaded) == aware
    tokens = rng.integers(0, V, 50).astype(np.int32)
    for width in (3, 9):
        x = window_inputs(tokens, np.arange(20, 50), 5, width)
        np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


# ----------------------------------------------------------------------------------------------
# Configs and records
# ----------------------------------------------------------------------------------------------


def test_configs_are_stored_whole_and_name_their_records(tmp_path: Path) -> None:
    source = lm.CorpusSource("eltec-pol", Path("x.txt"))
    for table in ("3.1", "3.2", "ptb"):
        for config in lm.table_runs(table, source, "cpu"):
            assert config.as_dict() == asdict(config)
            assert lm.RunConfig(**config.as_dict()) == config
            assert lm.record_path(config, tmp_path).name == f"{config.name}.json"
            assert "pos" not in config.name and "-20" not in config.name
    config = lm.make_config(source, "cpu", "3.1", 5, 5, seed=1)
    assert lm.record_path(config, tmp_path).name == "cpu-5gram+5-thesis-seed1.json"
    # overrides of the preset's scale get a hash of the config in the name
    longer = lm.make_config(source, "cpu", "3.1", 5, 5, epochs=9)
    assert lm.record_path(longer, tmp_path) != lm.record_path(config, tmp_path)
    # the future-work configs carry their options, and reuse Table 3.1's runs
    runs = lm.table_runs("future-prefix", source, "cpu")
    assert {c.table for c in runs} == {"3.1", "future-prefix"}
    assert set(lm.table_runs("3.1", source, "cpu")) <= set(runs)
    random = lm.make_config(source, "cpu", "future-position", 5, 20, min_prefix=1,
                            position_aware="bias")  # fmt: skip
    assert random.as_dict()["min_prefix"] == 1 and random.as_dict()["position_aware"] == "bias"
    assert random.name == "cpu-5gram+1-20-posbias-thesis-seed0"
    assert random.model == "5-gram + 1..20, distance bias"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--prefix", "5", "--min-prefix", "5"], "--min-prefix must lie in 1..4"),
        (["--position-aware", "bias"], "needs an attention model"),
        (["--prefix", "5", "--eval-prefix", "para"], "--eval-prefix takes"),
        (["--prefix", "5", "--eval-prefix", "0"], "at least 1 word"),
    ],
)
def test_cli_errors_of_future_options(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = lm_cli.main([*args, "--preset", "smoke", "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_cli_help_lists_future_options(capsys: pytest.CaptureFixture) -> None:
    for argv, flags in (
        (["--help"], ("--eval-prefix", "--min-prefix", "--position-aware", "show-attention")),
        (["grid", "--help"], ("future-prefix", "future-position", "--eval-prefix")),
        (["evaluate", "--help"], ("--eval-prefix", "--table", "--results")),
        (["show-attention", "--help"], ("--checkpoint", "--sentence", "--out", "--prefix")),
    ):
        with pytest.raises(SystemExit):
            lm_cli.main(argv)
        out = capsys.readouterr().out
        for flag in flags:
            assert flag in out, flag


# ----------------------------------------------------------------------------------------------
# Smoke grids of both future tables, end to end (one seed; the slow test runs the presets)
# ----------------------------------------------------------------------------------------------


EVALS = (2, 5, 20, lm.SENTENCE)
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _breakdown_script() -> Any:
    """``scripts/prefix_length_breakdown.py`` as a module."""
    spec = importlib.util.spec_from_file_location(
        "breakdown", SCRIPTS / "prefix_length_breakdown.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def future_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both future tables' smoke grids into one results folder, prefix table first; for speed
    seed 0, 1 epoch and 4 of the 6 eval prefixes (the slow test runs the smoke preset)."""
    root = tmp_path_factory.mktemp("future")
    source = lm.resolve_corpus(None)
    for table in ("future-prefix", "future-position"):
        lm.run_grid(table, source, "smoke", root / "results", seeds=(0,), verbose=0,
                    eval_prefixes=EVALS, epochs=1)  # fmt: skip
    lm_report.report(root / "results", root / "figures")
    return root


def _path(root: Path, table: str, model: str) -> Path:
    """The record of ``model`` (``5gram+5``, ...) under ``table`` (names say the epochs and end
    in a config hash, as the fixture overrides the epochs)."""
    folder = root / "results" / "lm" / "synthetic" / table
    (path,) = folder.glob(f"smoke-{model}-thesis-ep*-seed0-????????.json")
    return path


def _summary(root: Path, table: str, model: str) -> dict:
    return json.loads(_path(root, table, model).read_text())["summary"]


def test_future_grids_end_to_end(future_results: Path) -> None:
    folder = future_results / "results" / "lm" / "synthetic"
    models = {
        table: sorted(
            re.fullmatch(r"smoke-(.+)-thesis-ep\d+-seed0-[0-9a-f]{8}\.json", p.name)[1]
            for p in (folder / table).glob("*.json")
        )
        for table in ("3.1", "future-prefix", "future-position")
    }
    assert models == {  # the Table 3.1 models are Table 3.1's runs, trained once
        "3.1": ["10gram", "5gram", "5gram+2", "5gram+5"],
        "future-prefix": ["5gram+1-20", "5gram+20"],
        "future-position": ["5gram+1-20-posbias", "5gram+1-20-posemb", "5gram+5-posbias",
                            "5gram+5-posemb"],
    }  # fmt: skip
    columns = [str(e) for e in EVALS]
    for table, names in models.items():
        for model in names:
            path = _path(future_results, table, model)
            record = json.loads(path.read_text())
            assert record["finished"] and lm.final_model_path(path).exists()
            if record["config"]["prefix"]:
                assert list(record["summary"]["eval_prefix"]) == columns
                assert record["summary"]["eval_prefix_words"]["2"] == 2.0
            else:
                assert "eval_prefix" not in record["summary"]
    bias = _summary(future_results, "future-position", "5gram+1-20-posbias")["distance_bias"]
    assert len(bias) == 20
    text = (folder / "future-prefix" / "table.md").read_text()
    assert "prefix-length generalisation" in text and "| 5-gram + 1..20 | 1 |" in text
    assert "| 10-gram | 1 |" in text and "eval sentence" in text and "| – |" in text  # 10, 50
    # the same model minus itself at the trained prefix: exactly 0 there, "–" where unscored
    row = re.search(
        r"^\| 5-gram \+ 1\.\.20 \| 1 \| ([^|]+)\| ([^|]+)\| – \| 0\.00 \| – \|", text, re.M
    )
    assert row and "trained prefix (negative" in text
    summary = _summary(future_results, "future-prefix", "5gram+1-20")
    difference = summary["eval_prefix"]["2"] - summary["test_perplexity"]
    assert row[1].strip() == f"{difference:.2f}"
    text = (folder / "future-position" / "table.md").read_text()
    assert "| 5-gram + 5, distance bias | 1 |" in text and "paired by seed" in text
    assert "Learned distance bias" in text
    for table in ("future-prefix", "future-position"):
        (figure,) = (future_results / "figures").glob(f"lm_{table}_synthetic_smoke_*.pdf")
        assert figure.stat().st_size > 1000


def test_trained_prefix_reproduces_the_test_perplexity_exactly(future_results: Path) -> None:
    for table, model, trained in (
        ("3.1", "5gram+2", "2"),
        ("3.1", "5gram+5", "5"),
        ("future-prefix", "5gram+1-20", "20"),
        ("future-position", "5gram+5-posbias", "5"),
        ("future-position", "5gram+1-20-posemb", "20"),
    ):
        summary = _summary(future_results, table, model)
        assert summary["eval_prefix"][trained] == summary["test_perplexity"]  # exactly
        assert summary["eval_prefix"]["sentence"] != summary["test_perplexity"]


def test_per_target_nll_averages_to_perplexity_and_breaks_it_down_by_prefix_length() -> None:
    """``lm.target_nll`` over ``lm.scored_inputs`` (NumPy log-softmax of predicted logits)
    against ``lm.perplexity`` (``model.evaluate``) for the same untrained position-aware model,
    and the breakdown script's rows against both."""
    eos, vocab = 1, 40
    rng = np.random.default_rng(0)
    tokens = rng.integers(2, vocab, 600).astype(np.int32)
    tokens[rng.choice(600, 60, replace=False)] = eos
    config = lm.RunConfig(
        "synthetic", "runs", "smoke", 4, 3, embedding_dim=8, hidden=16, position_aware="bias"
    )
    model = lm.build_model(config, vocab, jit_compile=False)
    model.get_layer("attention").distance_bias.assign([0.5, 0.0, -0.5])  # not uniform
    scores = {}
    for eval_prefix in (None, 2, lm.SENTENCE):
        targets, inputs = lm.scored_inputs(tokens, config, eval_prefix, eos)
        nll = lm.target_nll(model, inputs, tokens[targets], batch_size=70)
        assert len(nll) == len(targets) and np.all(nll > 0)
        scores[eval_prefix] = lm.perplexity(model, tokens, config, 70, eval_prefix, eos)
        assert np.exp(nll.mean()) == pytest.approx(scores[eval_prefix], rel=1e-5)

    table = _breakdown_script().breakdown_table(model, tokens, config, eos, [2], (1, 2, 5))
    header, _, *rows = table.strip().splitlines()
    assert header.split(" | ")[2:5] == ["sentence", "sentence without <eos>", "2 words"]
    cells = {row.split(" | ")[0].strip("| "): row.split(" | ") for row in rows}
    assert list(cells) == ["1", "2-4", "5+", "all"]
    assert sum(float(cells[k][1]) for k in ("1", "2-4", "5+")) == pytest.approx(1, abs=2e-3)
    assert cells["all"][1] == "1.000"
    for column, eval_prefix in ((2, lm.SENTENCE), (4, 2), (5, None)):
        assert float(cells["all"][column]) == pytest.approx(scores[eval_prefix], abs=0.006)
    assert cells["1"][2] == cells["1"][3]  # the <eos> alone is kept: nothing else to score with
    assert cells["1"][-1] == "1.000 (1.000) |"  # one word takes all the attention


def test_without_farthest_eos_masks_only_an_eos_that_is_not_alone() -> None:
    breakdown = _breakdown_script()
    eos = 3
    inputs = {
        "window": np.zeros((3, 2), np.int32),
        "prefix": np.array([[5, 6, eos], [eos, 0, 0], [5, 6, 7]], np.int32),
        "prefix_length": np.array([3, 1, 3], np.int32),
    }
    out = breakdown.without_farthest_eos(inputs, eos)
    assert out["prefix"].tolist() == [[5, 6, PAD_ID], [eos, 0, 0], [5, 6, 7]]
    assert out["prefix_length"].tolist() == [2, 1, 3]
    assert inputs["prefix"][0, 2] == eos  # the input is left as it was


def test_the_trained_prefix_cell_needs_no_eval_scores(future_results: Path) -> None:
    """A reused run that was never scored at other prefixes (the PTB `paper` runs, whose final
    models are gone) still fills its trained-prefix cell: that score is its test perplexity."""
    plain = json.loads(_path(future_results, "3.1", "5gram+5").read_text())
    del plain["summary"]["eval_prefix"], plain["summary"]["eval_prefix_words"]
    mixed = json.loads(_path(future_results, "future-prefix", "5gram+1-20").read_text())
    text = lm_report.render_future_table("future-prefix", [plain, mixed])
    test = f"{plain['summary']['test_perplexity']:.2f}"
    assert f"| 5-gram + 5 | 1 | {test} | – | **{test}** | – | – | – | – |" in text
    assert "| 5-gram + 5 | 1 | – | 0.00 | – | – | – | – |" in text  # the paired differences


def test_a_paired_column_scored_for_fewer_seeds_than_its_row_says_how_many(
    future_results: Path,
) -> None:
    """The context table's row counts the seeds with a test perplexity; a column that only
    some of them were scored at (reused `paper` runs retrained one by one) names its count."""
    scored = json.loads(_path(future_results, "3.1", "5gram+5").read_text())
    unscored = json.loads(json.dumps(scored))
    del unscored["summary"]["eval_prefix"], unscored["summary"]["eval_prefix_words"]
    unscored["config"]["seed"] = scored["config"]["seed"] + 1
    mixed = json.loads(_path(future_results, "future-prefix", "5gram+1-20").read_text())
    text = lm_report.render_future_table("future-prefix", [scored, unscored, mixed])
    context = text.split("minus the same model (same seed)")[1]
    row = next(line for line in context.splitlines() if line.startswith("| 5-gram + 5 | 2 |"))
    summary = scored["summary"]
    sentence = summary["eval_prefix"]["sentence"] - summary["test_perplexity"]
    assert f"| {sentence:.2f} (1 seed) |" in row
    assert "| 0.00 ± 0.00 |" in row  # the trained prefix: both seeds


def test_evaluate_fills_in_missing_scores_from_the_final_model(future_results: Path) -> None:
    path = _path(future_results, "3.1", "5gram+5")
    record = json.loads(path.read_text())
    before = dict(record["summary"]["eval_prefix"])
    for key in ("5", "sentence"):
        del record["summary"]["eval_prefix"][key]
    write_json_atomic(path, record)
    code = lm_cli.main(["evaluate", "--results", str(future_results / "results"), "--table", "3.1",
                    "--eval-prefix", "5", "sentence", "7", "--figures",
                    str(future_results / "figures"), "--verbose", "0"])  # fmt: skip
    assert code == 0
    after = json.loads(path.read_text())["summary"]
    assert after["eval_prefix"]["5"] == after["test_perplexity"]  # reloaded: still exact
    assert after["eval_prefix"]["sentence"] == before["sentence"]  # the same model and inputs
    assert list(after["eval_prefix"]) == ["2", "5", "7", "20", "sentence"]
    # a finished run asked again for scores it has is left alone
    stamp = path.stat().st_mtime_ns
    lm.evaluate_run(path, None, ["5", "7"], verbose=0)
    assert path.stat().st_mtime_ns == stamp


def test_reusing_eval_prefixes_are_those_of_every_future_table_showing_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prefix_table = replace(lm.FUTURE_TABLES["future-prefix"], eval_prefixes=(2, 7))
    monkeypatch.setitem(lm.FUTURE_TABLES, "future-prefix", prefix_table)
    source = lm.resolve_corpus(None)

    def evals(table: str, prefix: int, variant: str = "thesis", **overrides: object) -> tuple:
        config = lm.make_config(source, "smoke", table, 5, prefix, variant, **overrides)
        return lm.reusing_eval_prefixes(config)

    every = lm.EVAL_PREFIXES
    assert evals("3.1", 5) == (2, 7, *every[1:])  # future-prefix's, then future-position's
    assert evals("3.1", 2) == (2, 7)  # future-prefix only
    assert evals("future-prefix", 20, min_prefix=1) == (2, 7, *every[1:])  # its own, both
    assert evals("future-prefix", 20) == (2, 7)
    assert evals("ptb", 5, "momentum") == every  # the PTB future tables
    assert evals("3.1", 0) == ()  # no prefix to vary
    assert evals("3.1", 5, "momentum") == ()  # another variant: no future table shows it
    assert evals("3.1", 3) == ()  # 5-gram + 3 is in no future table
    assert evals("runs", 5) == ()  # a single run of `train`


def test_a_run_a_future_table_reuses_is_scored_when_its_training_ends(tmp_path: Path) -> None:
    """No final model is needed later (a fresh machine has none): the Table 3.1 5-gram + 2,
    trained without eval prefixes, ends scored at future-prefix's."""
    source = lm.resolve_corpus(None)
    config = lm.make_config(source, "smoke", "3.1", 5, 2, epochs=1)
    summary = lm.run(config, source, tmp_path, verbose=0)["summary"]
    assert list(summary["eval_prefix"]) == [str(e) for e in lm.EVAL_PREFIXES]
    assert summary["eval_prefix"]["2"] == summary["test_perplexity"]  # the trained prefix
    plain = lm.make_config(source, "smoke", "3.1", 5, 0, epochs=1)
    assert "eval_prefix" not in lm.run(plain, source, tmp_path, verbose=0)["summary"]


def test_show_attention_writes_the_figure(
    future_results: Path, capsys: pytest.CaptureFixture
) -> None:
    out = future_results / "attention.pdf"
    sentence = "topic3 w01 w02 w05 w00 the noun3_04 verb3_2 w01 w03 w00 the noun3_11 ."
    plain = _path(future_results, "3.1", "5gram+5")  # a record: its final model is used
    aware = lm.final_model_path(_path(future_results, "future-position", "5gram+5-posbias"))
    code = lm_cli.main(["show-attention", "--checkpoint", str(plain), str(aware),
                    "--sentence", sentence, "--out", str(out)])  # fmt: skip
    assert code == 0 and out.stat().st_size > 1000
    assert f"wrote {out}" in capsys.readouterr().out
    plain = str(_path(future_results, "3.1", "5gram"))
    code = lm_cli.main(["show-attention", "--checkpoint", plain, "--sentence", sentence,
                        "--out", str(out)])  # fmt: skip
    assert code == 2 and "attention needs --prefix" in capsys.readouterr().err


def test_draw_attention_examples_with_a_word_list(tmp_path: Path, rng: np.random.Generator) -> None:
    vocab = ["<UNK>", *(f"w{i}" for i in range(1, V))]
    words, ids, known = encode_sentence(vocab, "w3 w5 nowy w7 w9 w11 w2 w1")
    assert words[2] == "nowy" and ids.tolist() == [3, 5, 0, 7, 9, 11, 2, 1]
    assert known.tolist()[:3] == [True, True, False]
    models = [attention_lm(V, 3, 4, S, H), attention_lm(V, 3, 4, S, H, position_aware="bias")]
    set_weights(models[1], random_weights(rng, 3, 4, "bias"))
    path = draw_attention_examples(models, vocab, "w3 w5 nowy w7 w9 w11 w2 w1", tmp_path / "a.pdf",
                                   titles=["plain", "distance bias"])  # fmt: skip
    assert path.stat().st_size > 1000
    with pytest.raises(ValueError, match="too few"):
        draw_attention_examples(models[0], vocab, "w1 w2", tmp_path / "b.pdf")
    with pytest.raises(ValueError, match="titles"):
        draw_attention_examples(models, vocab, "w1 w2 w3 w4", tmp_path / "c.pdf", titles=["x"])


def test_example_record_holds_the_attention_of_every_window(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """Thesis 3.2.4 records: one window per target from n to the word after the sentence,
    its prefix words in reading order with the NumPy reference's weights; a record read back
    from JSON draws the same figure and ``render_examples`` redraws it without a model."""
    vocab = ["<UNK>", *(f"w{i}" for i in range(1, V))]
    sentence = "w3 w5 nowy w7 w9 w11 w2 w1 w4 w6"
    w = random_weights(rng, 3, 4, "bias")
    model = attention_lm(V, 3, 4, S, H, position_aware="bias")
    set_weights(model, w)
    record = example_record(model, vocab, sentence, ["distance bias"])
    words, ids, known = encode_sentence(vocab, sentence)
    assert record["words"] == words and record["known"] == known.tolist()
    (panel,) = record["panels"]
    assert panel["title"] == "distance bias" and panel["order"] == 3
    assert [win["target"] for win in panel["windows"]] == list(range(3, len(words) + 1))
    for window in panel["windows"]:
        t = window["target"]
        _, alpha = reference(ids, t, 3, 4, w)  # nearest first
        assert window["positions"] == list(range(max(0, t - 3 - 3), t - 3 + 1))
        np.testing.assert_allclose(window["weights"], alpha[::-1], atol=2e-6)
    folder = tmp_path / "results" / "lm" / "attention_examples"
    write_json_atomic(folder / "demo_1.json", record)
    again = json.loads((folder / "demo_1.json").read_text())
    assert again == record
    assert draw_example(again, tmp_path / "a.pdf").stat().st_size > 1000
    (drawn,) = render_examples(tmp_path / "results", tmp_path / "figures")
    assert drawn == tmp_path / "figures" / "attention_demo_1.pdf" and drawn.stat().st_size > 1000


def test_pick_sentences_takes_the_first_sentences_without_unknown_words() -> None:
    from thesis_repro.corpus import Corpus

    vocab = ["<UNK>", "<eos>", ".", "a", "b", "c"]
    #         a b .   a <UNK> b .  c c c <eos>  a b c a .
    test = np.array([3, 4, 2, 3, 0, 4, 2, 5, 5, 5, 1, 3, 4, 5, 3, 2])
    corpus = Corpus(test[:0], test[:0], test, vocab, "demo")
    assert pick_sentences(corpus, 3, min_words=3, max_words=5) == ["a b .", "c c c", "a b c a ."]
    assert pick_sentences(corpus, 1, min_words=4, max_words=5) == ["a b c a ."]


@pytest.mark.slow
def test_future_grids_full_smoke_preset(tmp_path: Path) -> None:
    """Both tables with the smoke preset's instances: mean ± std in every cell."""
    source = lm.resolve_corpus(None)
    for table in ("future-prefix", "future-position"):
        records = lm.run_grid(table, source, "smoke", tmp_path, verbose=0)
        assert all(r["finished"] for r in records)
    text = lm_report.report(tmp_path, tmp_path / "figures")
    assert "| 5-gram + 20 | 2 |" in text and "| 5-gram + 1..20, distance bias | 2 |" in text
    assert " ± " in text.split("| 5-gram + 1..20 | 2 |")[1].splitlines()[0]


def test_most_attended_counts_the_top_word_of_full_windows(tmp_path: Path) -> None:
    record = {
        "words": ["a", "b", "c", "d"],
        "panels": [
            {
                "title": "m",
                "windows": [
                    {"target": 1, "positions": [0], "weights": [1.0]},  # not a full prefix
                    {"target": 2, "positions": [0, 1], "weights": [0.7, 0.3]},
                    {"target": 3, "positions": [1, 2], "weights": [0.4, 0.6]},
                    {"target": 4, "positions": [2, 3], "weights": [0.8, 0.2]},
                ],
            }
        ],
    }
    assert most_attended(record) == [
        ("c", 2, pytest.approx(0.7)),
        ("a", 1, pytest.approx(0.7)),
    ]
    folder = tmp_path / EXAMPLES_FOLDER
    folder.mkdir(parents=True)
    (folder / "x_1.json").write_text(json.dumps(record))
    text = summarise_examples(tmp_path)
    # nearest first: mean of (0.3, 0.7), (0.6, 0.4), (0.2, 0.8)
    assert weight_by_distance(record) == pytest.approx([1.1 / 3, 1.9 / 3])
    assert "| x_1 | m | 3 | c (2×, 0.70), a (1×, 0.70) | 0.37, 0.63 | 0.50 |" in text


def test_attention_figures_carry_their_key(monkeypatch, tmp_path: Path) -> None:
    """Every attention figure explains its marks: opacity, |, → and italics."""
    from thesis_repro.lm import examples as attention_examples

    drawn = []
    monkeypatch.setattr(attention_examples, "save_figure", lambda fig, path: drawn.append(fig))
    record = {
        "words": ["a", "b", "c", "d"],
        "known": [True, True, False, True],
        "panels": [
            {
                "title": "t",
                "order": 2,
                "windows": [{"target": 3, "positions": [0, 1], "weights": [0.3, 0.7]}],
            }
        ],
    }
    attention_examples.draw_example(record, tmp_path / "k.pdf")
    text = " ".join(t.get_text() for t in drawn[0].texts)
    for mark in ("opacity", "|", "→", "italics"):
        assert mark in text.split("Key:")[1]
