"""Tests of the thesis 2.2 language models (``thesis_repro.lm.model``) and the thesis 3.2
experiment (``thesis_repro.lm``): maths against NumPy, masking, targets, schedule, weight decay,
the smoke grid end to end, resume, and the command line's errors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import keras
import numpy as np
import pytest

from thesis_repro import lm
from thesis_repro.files import temporary_name
from thesis_repro.lm import cli as lm_cli
from thesis_repro.lm import report as lm_report
from thesis_repro.lm.batches import ScoreBatches, TrainBatches, window_inputs
from thesis_repro.lm.model import (
    DECAYED_LAYERS,
    attention_lm,
    bengio_lm,
    language_model,
    model_shape,
    prefix_attention,
)
from thesis_repro.records import RunRecord
from thesis_repro.settings import STEPS_PER_EXECUTION_ENV
from thesis_repro.training import checkpoint_path, inverse_time_schedule, set_steps_per_execution

ROOT = Path(__file__).resolve().parents[1]
V, S, H = 40, 6, 7  # small vocabulary, embedding and hidden sizes for the maths tests


# ----------------------------------------------------------------------------------------------
# NumPy reference of thesis 2.2.1 / 2.2.2, one target at a time (float64)
# ----------------------------------------------------------------------------------------------


def random_weights(rng: np.random.Generator, order: int, prefix: int) -> dict[str, np.ndarray]:
    """Weights in the thesis's orientation (W x, not x W)."""
    inputs = (order - 1 + (1 if prefix else 0)) * S
    w = {
        "E": rng.normal(0, 0.7, (V, S)),
        "W_mh": rng.normal(0, 0.5, (H, inputs)),
        "b_mh": rng.normal(0, 0.2, H),
        "W_hl": rng.normal(0, 0.5, (V, H)),
        "b_hl": rng.normal(0, 0.2, V),
    }
    if prefix:
        w |= {
            "W_wh": rng.normal(0, 0.7, (S, S)),
            "b_wh": rng.normal(0, 0.2, S),
            "W_hc": rng.normal(0, 0.7, (1, S)),
            "b_hc": rng.normal(0, 0.2, 1),
        }
    return w


def set_weights(model: keras.Model, w: dict[str, np.ndarray]) -> None:
    """Copy thesis-orientation weights into the Keras layers (kernels are transposed)."""
    model.get_layer("E").set_weights([w["E"]])
    model.get_layer("W_mh").set_weights([w["W_mh"].T, w["b_mh"]])
    model.get_layer("W_hl").set_weights([w["W_hl"].T, w["b_hl"]])
    if "W_wh" in w:
        model.get_layer("W_wh").set_weights([w["W_wh"].T, w["b_wh"]])
        model.get_layer("attention").set_weights([w["W_hc"].T, w["b_hc"]])


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def reference_logits(tokens: np.ndarray, t: int, order: int, prefix: int, w: dict) -> np.ndarray:
    """Logits l for the word at position t (thesis 2.2.1; with a prefix, 2.2.2)."""
    window = [w["E"][tokens[j]] for j in range(t - order + 1, t)]
    if prefix:
        words = tokens[max(0, t - order - prefix + 1) : t - order + 1]  # before the window
        c = np.zeros(S)
        if len(words):
            h = np.array([relu(w["W_wh"] @ w["E"][i] + w["b_wh"]) for i in words])
            e = np.tanh(h @ w["W_hc"][0] + w["b_hc"][0])
            alpha = np.exp(e) / np.exp(e).sum()
            c = (alpha[:, None] * h).sum(axis=0)
        window = [c, *window]
    m = np.concatenate(window)
    h = relu(w["W_mh"] @ m + w["b_mh"])
    return w["W_hl"] @ h + w["b_hl"]


def tiny_config(order: int, prefix: int, **kw) -> lm.RunConfig:
    return lm.RunConfig(
        "synthetic", "runs", "smoke", order, prefix, embedding_dim=S, hidden=H, **kw
    )


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------


def test_window_inputs_positions_and_padding() -> None:
    tokens = np.arange(100, 120, dtype=np.int32)
    x = window_inputs(tokens, np.array([4, 6, 20]), order=4, prefix=3)
    assert x["window"].tolist() == [[101, 102, 103], [103, 104, 105], [117, 118, 119]]
    # nearest first; before position 0: padded with 0 and not counted
    assert x["prefix"].tolist() == [[100, 0, 0], [102, 101, 100], [116, 115, 114]]
    assert x["prefix_length"].tolist() == [1, 3, 3]
    assert set(window_inputs(tokens, np.array([3]), 4)) == {"window"}
    with pytest.raises(ValueError, match="window exists"):
        window_inputs(tokens, np.array([2]), order=4)


@pytest.mark.parametrize("order", [2, 5])
def test_bengio_lm_matches_numpy(rng: np.random.Generator, order: int) -> None:
    model = bengio_lm(V, order, embedding_dim=S, hidden=H)
    w = random_weights(rng, order, 0)
    set_weights(model, w)
    tokens = rng.integers(0, V, 30).astype(np.int32)
    targets = np.arange(order - 1, 31)
    got = model.predict(window_inputs(tokens, targets, order), verbose=0)
    want = np.array([reference_logits(tokens, t, order, 0, w) for t in targets])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert model.get_layer("W_mh").kernel.shape == ((order - 1) * S, H)


@pytest.mark.parametrize("order,prefix", [(5, 2), (3, 5)])
def test_attention_lm_matches_numpy(rng: np.random.Generator, order: int, prefix: int) -> None:
    model = attention_lm(V, order, prefix, embedding_dim=S, hidden=H)
    w = random_weights(rng, order, prefix)
    set_weights(model, w)
    tokens = rng.integers(0, V, 30).astype(np.int32)
    targets = np.arange(order - 1, 31)  # the first targets have short or empty prefixes
    got = model.predict(window_inputs(tokens, targets, order, prefix), verbose=0)
    want = np.array([reference_logits(tokens, t, order, prefix, w) for t in targets])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert model.get_layer("W_mh").kernel.shape == (order * S, H)  # m = (c, n-1 embeddings)
    assert model_shape(model) == (order, prefix)
    # the prefix is embedded with the same matrix E as the window: one embedding layer
    assert [layer.name for layer in model.layers if "Embedding" in type(layer).__name__] == ["E"]


def test_padded_prefix_equals_shorter_prefix(rng: np.random.Generator) -> None:
    long, short = attention_lm(V, 5, 5, S, H), attention_lm(V, 5, 2, S, H)
    w = random_weights(rng, 5, 5)
    set_weights(long, w)
    set_weights(short, w)
    x = window_inputs(rng.integers(0, V, 50).astype(np.int32), np.arange(10, 50), 5, 5)
    x["prefix_length"][:] = 2
    x["prefix"][:, 2:] = rng.integers(0, V, (40, 3))  # padding content must not matter
    short_x = {"window": x["window"], "prefix": x["prefix"][:, :2], "prefix_length": None}
    short_x["prefix_length"] = np.full(40, 2, np.int32)
    np.testing.assert_allclose(
        long.predict(x, verbose=0), short.predict(short_x, verbose=0), rtol=1e-5, atol=1e-5
    )


def test_weight_decay_only_on_W_mh_and_W_hl(rng: np.random.Generator) -> None:
    model = attention_lm(V, 5, 2, S, H)
    regularized = sorted(
        layer.name
        for layer in model.layers
        for attr in ("kernel_regularizer", "embeddings_regularizer", "bias_regularizer")
        if getattr(layer, attr, None) is not None
    )
    assert regularized == sorted(DECAYED_LAYERS) == ["W_hl", "W_mh"]
    set_weights(model, random_weights(rng, 5, 2))
    w_mh, w_hl = (model.get_layer(n).kernel.numpy() for n in ("W_mh", "W_hl"))
    expected = 1e-5 * (np.sum(w_mh**2) + np.sum(w_hl**2))  # convention: 1e-5 * ||W||^2
    assert float(sum(model.losses)) == pytest.approx(expected, rel=1e-5)
    # the training loss is mean NLL + that term
    model = lm.build_model(tiny_config(5, 2), V, jit_compile=False)
    set_weights(model, random_weights(rng, 5, 2))
    tokens = rng.integers(0, V, 40).astype(np.int32)
    x, y = window_inputs(tokens, np.arange(9, 40), 5, 2), tokens[9:]
    scores = model.evaluate(x, y, verbose=0, return_dict=True)
    assert scores["loss"] - scores["nll"] == pytest.approx(float(sum(model.losses)), rel=1e-3)


def test_inverse_time_schedule_values_and_serialization() -> None:
    thesis, further = inverse_time_schedule(0.2, 1e-8), inverse_time_schedule(0.15, 1e-5)
    assert float(thesis(0)) == pytest.approx(0.2)
    assert float(thesis(150_000)) == pytest.approx(0.2 / (1 + 1.5e-3))
    assert float(further(100_000)) == pytest.approx(0.075)
    assert float(further(300_000)) == pytest.approx(0.15 / 4)
    again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(further))
    assert again.get_config() == further.get_config()
    model = lm.build_model(tiny_config(5, 0, variant="momentum"), V, jit_compile=False)
    assert model.optimizer.momentum == pytest.approx(0.85)
    model.optimizer.iterations.assign(100_000)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.075)


def test_model_save_load_round_trip(tmp_path: Path, rng: np.random.Generator) -> None:
    model = lm.build_model(tiny_config(5, 5, variant="momentum"), V, jit_compile=False)
    tokens = rng.integers(0, V, 30).astype(np.int32)
    x = window_inputs(tokens, np.arange(9, 30), 5, 5)
    model.train_on_batch(x, tokens[9:])  # builds the optimizer state (momentum, iterations)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    config = keras.optimizers.serialize(loaded.optimizer)["config"]
    assert config["learning_rate"]["class_name"] == "InverseTimeDecay"
    assert int(loaded.optimizer.iterations) == 1
    for a, b in zip(loaded.optimizer.variables, model.optimizer.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_prefix_attention_for_a_sentence(rng: np.random.Generator) -> None:
    model = attention_lm(V, 3, 4, S, H)
    w = random_weights(rng, 3, 4)
    set_weights(model, w)
    sentence = rng.integers(0, V, 9).astype(np.int32)
    windows = prefix_attention(model, sentence)
    assert [a.target for a in windows] == list(range(3, 10))
    assert windows[0].positions.tolist() == [0]  # first window: one prefix word
    assert windows[-1].positions.tolist() == [3, 4, 5, 6]  # oldest first, before window 7, 8
    for a in windows:
        assert a.weights.sum() == pytest.approx(1.0, abs=1e-5)
    h = relu(w["E"][sentence[[3, 4, 5, 6]]] @ w["W_wh"].T + w["b_wh"])
    e = np.tanh(h @ w["W_hc"][0] + w["b_hc"][0])
    np.testing.assert_allclose(windows[-1].weights, np.exp(e) / np.exp(e).sum(), atol=1e-5)
    with pytest.raises(ValueError, match="attention LM"):
        prefix_attention(bengio_lm(V, 3, S, H), sentence)
    with pytest.raises(ValueError, match="order"):
        language_model(V, order=1)


# ----------------------------------------------------------------------------------------------
# Targets, batches, perplexity
# ----------------------------------------------------------------------------------------------


def test_every_model_scores_the_same_targets(rng: np.random.Generator) -> None:
    tokens = rng.integers(0, V, 257).astype(np.int32)
    targets = lm.scored_targets(len(tokens))
    assert targets[0] == lm.FIRST_TARGET == 9 and targets[-1] == 256
    seen = {}
    for order, prefix in lm.TABLES["3.1"].models:
        batches = ScoreBatches(tokens, targets, order, prefix, batch_size=50)
        labels, weights = [], []
        for i in range(len(batches)):
            x, y, sw = batches[i]
            assert x["window"].shape == (50, order - 1)  # one shape: the last batch is padded
            labels.append(y[sw > 0])
            weights.append(sw)
        seen[(order, prefix)] = np.concatenate(labels)
        assert np.concatenate(weights).sum() == len(targets)
        # training: the same targets in the same order for every model of a seed
        train = TrainBatches(tokens, targets, order, prefix, 50, seed=3, first_epoch=0, epochs=2)
        assert np.array_equal(
            np.sort(train.batch_targets(0)), np.sort(targets[train.permutation(0)[:50]])
        )
    for labels in seen.values():
        np.testing.assert_array_equal(labels, tokens[9:])
    batches = [TrainBatches(tokens, targets, o, p, 50, 3, 0, 2) for o, p in lm.TABLES["3.1"].models]
    for index in range(len(batches[0])):
        for other in batches[1:]:
            np.testing.assert_array_equal(
                batches[0].batch_targets(index), other.batch_targets(index)
            )


def test_train_batches_reproducible_per_epoch(rng: np.random.Generator) -> None:
    tokens = rng.integers(0, V, 1000).astype(np.int32)
    targets = lm.scored_targets(len(tokens))
    full = TrainBatches(tokens, targets, 5, 5, 100, seed=7, first_epoch=0, epochs=3)
    resumed = TrainBatches(tokens, targets, 5, 5, 100, seed=7, first_epoch=2, epochs=3)
    steps = full.steps_per_epoch
    assert steps == 9 and len(full) == 27 and len(resumed) == 9
    for k in range(steps):
        x_full, y_full = full[2 * steps + k]
        x_res, y_res = resumed[k]
        np.testing.assert_array_equal(y_full, y_res)
        np.testing.assert_array_equal(x_full["prefix"], x_res["prefix"])
    epoch0 = np.concatenate([full.batch_targets(k) for k in range(steps)])
    epoch1 = np.concatenate([full.batch_targets(steps + k) for k in range(steps)])
    assert len(set(epoch0.tolist())) == len(epoch0) == 900  # no repeats within an epoch
    assert not np.array_equal(epoch0, epoch1)  # a new shuffle each epoch
    other_seed = TrainBatches(tokens, targets, 5, 5, 100, seed=8, first_epoch=0, epochs=1)
    assert not np.array_equal(other_seed.batch_targets(0), full.batch_targets(0))


def test_perplexity_matches_numpy(rng: np.random.Generator) -> None:
    config = tiny_config(5, 5)
    model = lm.build_model(config, V, jit_compile=False)
    set_weights(model, random_weights(rng, 5, 5))
    tokens = rng.integers(0, V, 143).astype(np.int32)  # 134 targets: last batch is partial
    logits = np.array([reference_logits(tokens, t, 5, 5, _weights(model)) for t in range(9, 143)])
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    nll = -log_p[np.arange(134), tokens[9:]].mean()
    assert lm.perplexity(model, tokens, config, batch_size=50) == pytest.approx(np.exp(nll), 1e-4)


def _weights(model: keras.Model) -> dict[str, np.ndarray]:
    """Thesis-orientation weights read back from a model."""
    get = {layer.name: [v.numpy() for v in layer.weights] for layer in model.layers}
    w = {"E": get["E"][0], "W_mh": get["W_mh"][0].T, "b_mh": get["W_mh"][1]}
    w |= {"W_hl": get["W_hl"][0].T, "b_hl": get["W_hl"][1]}
    if "W_wh" in get:
        w |= {"W_wh": get["W_wh"][0].T, "b_wh": get["W_wh"][1]}
        w |= {"W_hc": get["attention"][0].T, "b_hc": get["attention"][1]}
    return w


# ----------------------------------------------------------------------------------------------
# Corpus choice
# ----------------------------------------------------------------------------------------------


def test_resolve_corpus(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "eltec-pol").mkdir(parents=True)
    (data / "eltec-pol" / "eltec-pol.txt.xz").write_bytes(b"")
    (data / "ptb").mkdir()
    source = lm.resolve_corpus(None, None, str(data))
    assert source.name == "eltec-pol" and source.path == data / "eltec-pol" / "eltec-pol.txt.xz"
    assert lm.resolve_corpus(None, "ptb", str(data)).path == data / "ptb"
    assert lm.resolve_corpus(str(data / "ptb"), "ignored", str(data)).name == "ptb"
    assert lm.resolve_corpus(None, None, None).synthetic
    assert lm.resolve_corpus(None, "synthetic", str(data)).synthetic, "the built-in one"
    with pytest.raises(lm.CorpusError, match="no corpus named 'wiki'"):
        lm.resolve_corpus(None, "wiki", str(data))
    assert lm.corpus_settings("ptb", lm.PRESETS["cpu"])["tokenizer"] == "whitespace"
    assert lm.corpus_settings("ptb", lm.PRESETS["cpu"])["min_count"] == 1
    assert lm.corpus_settings("eltec-pol", lm.PRESETS["paper"]) == {
        "tokenizer": "regex",
        "min_count": 10,
        "max_words": 7_000_000,
    }


# ----------------------------------------------------------------------------------------------
# Grid, records, report, resume
# ----------------------------------------------------------------------------------------------


def test_smoke_grid_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results, figures = tmp_path / "results", tmp_path / "figures"
    source = lm.resolve_corpus(None)
    records = lm.run_grid("3.2", source, "smoke", results, verbose=0)
    assert len(records) == 6 and all(r["finished"] for r in records)
    folder = results / "lm" / "synthetic" / "3.2"
    files = sorted(p.name for p in folder.glob("*.json"))
    assert files == sorted(
        f"smoke-{m}-momentum-seed{s}.json" for s in (0, 1) for m in ("5gram", "10gram", "5gram+5")
    )
    assert not list(folder.rglob("*-epoch*.keras"))  # checkpoints removed once finished
    # ... except each run's final model, kept for later evaluations (thesis 4.2)
    assert sorted(p.name for p in folder.rglob("*.keras")) == sorted(
        f"{Path(f).stem}-final.keras" for f in files
    )
    record = json.loads((folder / "smoke-5gram+5-momentum-seed1.json").read_text())
    assert [e["epoch"] for e in record["epochs"]] == [1, 2]
    assert record["summary"]["test_perplexity"] > 1 and record["corpus"]["vocab_size"] > 100
    assert {"train_loss", "train_nll", "valid_perplexity", "ms_per_step"} <= set(
        record["epochs"][0]
    )
    text = lm_report.report(results, figures)
    assert "| 5-gram + 5 |" in text and "411.43 ± 8.37" in text and "| 2 |" in text
    assert (folder / "table.md").read_text() == text
    assert (figures / "lm_fig3.5_synthetic_smoke.pdf").stat().st_size > 1000
    # a second grid skips every finished run
    stamps = {p: p.stat().st_mtime_ns for p in folder.glob("*.json")}
    capsys.readouterr()
    lm.run_grid("3.2", source, "smoke", results, verbose=1)
    assert capsys.readouterr().out.count("[skip]") == 6
    assert {p: p.stat().st_mtime_ns for p in folder.glob("*.json")} == stamps


class _Crash(keras.callbacks.Callback):
    """Simulates a crash right after the first epoch was checkpointed."""

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        raise RuntimeError("simulated crash")


def test_resume_after_interruption(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = lm.resolve_corpus(None)
    config = lm.make_config(source, "smoke", order=5, prefix=2, variant="momentum", seed=4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        lm.run(config, source, tmp_path / "a", verbose=0, callbacks=[_Crash()])
    path = lm.record_path(config, tmp_path / "a")
    record = json.loads(path.read_text())
    assert not record["finished"] and len(record["epochs"]) == 1
    assert checkpoint_path(RunRecord(path, {}), 1).exists()
    capsys.readouterr()
    resumed = lm.run(config, source, tmp_path / "a", verbose=1)
    assert "resuming after epoch 1" in capsys.readouterr().out
    straight = lm.run(config, source, tmp_path / "b", verbose=0)
    assert resumed["finished"] and len(resumed["epochs"]) == 2
    for a, b in zip(resumed["epochs"], straight["epochs"], strict=True):
        assert a["valid_perplexity"] == pytest.approx(b["valid_perplexity"], rel=1e-4)
    assert resumed["summary"]["test_perplexity"] == pytest.approx(
        straight["summary"]["test_perplexity"], rel=1e-4
    )


def test_same_seed_trains_bit_identically(tmp_path: Path) -> None:
    """Two straight runs of one config agree exactly, not just closely.

    On one host a seed reproduces bit for bit; across hosts it need not (the README's PTB
    retrains: seed 0 did, seed 1 did not; ``scripts/isa_rounding.py`` measures why).
    """
    source = lm.resolve_corpus(None)
    config = lm.make_config(source, "smoke", order=5, prefix=2, variant="momentum", seed=3)
    first = lm.run(config, source, tmp_path / "a", verbose=0)
    second = lm.run(config, source, tmp_path / "b", verbose=0)
    assert [e["valid_perplexity"] for e in first["epochs"]] == [
        e["valid_perplexity"] for e in second["epochs"]
    ]
    assert [e["train_loss"] for e in first["epochs"]] == [e["train_loss"] for e in second["epochs"]]
    assert first["summary"]["test_perplexity"] == second["summary"]["test_perplexity"]
    other = lm.make_config(source, "smoke", order=5, prefix=2, variant="momentum", seed=4)
    third = lm.run(other, source, tmp_path / "c", verbose=0)
    assert third["summary"]["test_perplexity"] != first["summary"]["test_perplexity"]


def test_config_overrides_get_their_own_record(tmp_path: Path) -> None:
    source = lm.resolve_corpus(None)
    base = lm.make_config(source, "smoke", prefix=5)
    longer = lm.make_config(source, "smoke", prefix=5, epochs=3)
    assert lm.record_path(base, tmp_path).name == "smoke-5gram+5-thesis-seed0.json"
    assert lm.record_path(longer, tmp_path).name.startswith("smoke-5gram+5-thesis-ep3-seed0-")
    assert lm.record_path(longer, tmp_path) != lm.record_path(base, tmp_path)


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def test_cli_synthetic_notice_on_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(lm.DATA_ENV, raising=False)
    code = lm_cli.main(
        [
            "--preset",
            "smoke",
            "--prefix",
            "5",
            "--epochs",
            "1",
            "--results",
            str(tmp_path),
            "--verbose",
            "0",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == lm.SYNTHETIC_NOTICE and "SYNTHETIC" in out[0]
    assert len(list((tmp_path / "lm" / "synthetic" / "runs").glob("*.json"))) == 1


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "empty",
        "latin2",
        "too_small",
        "vocabulary",
        "order",
        "prefix",
        "data_dir",
        "bad_int",
        "first_target",
    ],
)
def test_cli_errors_one_line_no_files(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, cache, results = tmp_path / "in", tmp_path / "cache", tmp_path / "results"
    inputs.mkdir()
    monkeypatch.setenv("THESIS_REPRO_CACHE", str(cache))
    monkeypatch.delenv(lm.DATA_ENV, raising=False)
    words = " ".join(f"w{i % 50}" for i in range(2000)).encode()
    args = {
        "missing": ["--corpus", str(inputs / "nope.txt")],
        "empty": ["--corpus", str(_write(inputs / "empty.txt", b""))],
        "latin2": [
            "--corpus",
            str(_write(inputs / "l2.txt", "zażółć gęślą\n".encode("iso-8859-2"))),
        ],
        "too_small": ["--corpus", str(_write(inputs / "small.txt", b"a b c d e f g h\n" * 20))],
        "vocabulary": ["--corpus", str(_write(inputs / "w.txt", words)), "--min-count", "10000"],
        "order": ["--order", "1"],
        "prefix": ["--prefix", "-1"],
        "data_dir": [],
        "bad_int": ["--order", "five"],
        "first_target": ["--order", "12"],
    }[case]
    if case == "data_dir":
        monkeypatch.setenv(lm.DATA_ENV, str(tmp_path / "no-such-dir"))
    try:
        code = lm_cli.main([*args, "--preset", "smoke", "--results", str(results)])
    except SystemExit as exit_:  # argparse errors
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not results.exists()
    assert not cache.exists() or not [p for p in cache.rglob("*") if p.is_file()]


def test_cli_error_exit_status_in_a_process(tmp_path: Path) -> None:
    env = {**os.environ, "THESIS_REPRO_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "thesis_repro.lm", "--corpus", str(tmp_path / "missing.txt")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: corpus path") and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_cli_help_explains_flags(capsys: pytest.CaptureFixture) -> None:
    for argv, flags in (
        (
            ["--help"],
            (
                "--order",
                "--prefix",
                "--corpus",
                "--corpus-name",
                "--preset",
                "--seed",
                "--epochs",
                "--variant",
                "--results",
                "THESIS_REPRO_DATA",
                "smoke",
            ),
        ),
        (["grid", "--help"], ("--table", "--seeds", "--preset", "--figures", "3.2", "ptb")),
        (["report", "--help"], ("--results", "--figures")),
    ):
        with pytest.raises(SystemExit) as info:
            lm_cli.main(argv)
        assert info.value.code == 0
        out = capsys.readouterr().out
        for flag in flags:
            assert flag in out, flag


@pytest.mark.slow
def test_kill_9_then_rerun_resumes(tmp_path: Path) -> None:
    """A run killed with SIGKILL mid-training continues from its last checkpoint."""
    env = {**os.environ, "THESIS_REPRO_CACHE": str(tmp_path / "cache")}
    env.pop(lm.DATA_ENV, None)
    command = [
        sys.executable,
        "-m",
        "thesis_repro.lm",
        "--preset",
        "smoke",
        "--prefix",
        "5",
        "--max-words",
        "150000",
        "--epochs",
        "3",
        "--results",
        str(tmp_path),
        "--verbose",
        "2",
    ]
    folder = tmp_path / "lm" / "synthetic" / "runs"
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        records = list(folder.glob("*.json"))
        if records and json.loads(records[0].read_text())["epochs"]:
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    path = next(folder.glob("*.json"))
    record = json.loads(path.read_text())
    assert not record["finished"] and 1 <= len(record["epochs"]) < 3
    assert path.with_name(path.name + ".lock").exists(), "the killed process's lock stays"
    # What a kill in the middle of a save leaves behind: a half-written checkpoint and record.
    leftovers = [
        temporary_name(folder / "checkpoints" / f"{path.stem}-epoch9.keras"),
        temporary_name(path),
    ]
    for leftover in leftovers:
        leftover.write_bytes(b"")
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resuming after epoch {len(record['epochs'])}" in result.stdout
    record = json.loads(path.read_text())
    assert record["finished"] and [e["epoch"] for e in record["epochs"]] == [1, 2, 3]
    assert not any(leftover.exists() for leftover in leftovers), "leftovers are cleaned"
    assert not list(tmp_path.rglob("*.lock")), "the stale lock was taken over, then released"


def test_table_pairs_each_model_with_the_n_grams_by_seed() -> None:
    """Paired columns: model minus the 5-gram (10-gram) of the same seed, over shared seeds."""
    config = lm.RunConfig(
        "c", "3.1", "cpu", epochs=1, batch_size=10, max_words=100, min_count=1
    ).as_dict()
    test = {(5, 0): [100.0, 104.0, 90.0], (10, 0): [99.0, 102.0], (5, 5): [97.0, 100.0]}
    records = [
        {
            "config": {**config, "order": order, "prefix": prefix, "seed": seed},
            "finished": True,
            "summary": {"test_perplexity": value, "final_valid_perplexity": value},
        }
        for (order, prefix), values in test.items()
        for seed, value in enumerate(values)
    ]
    rows = {
        line.split(" | ")[0][2:]: line.split(" | ")
        for line in lm_report.render_table(records).splitlines()
        if line.startswith("| ") and "gram" in line
    }
    assert rows["5-gram"][5:7] == ["–", "1.50 ± 0.71 (2 seeds)"]  # 1, 2 (seed 2: no 10-gram)
    assert rows["10-gram"][5:7] == ["-1.50 ± 0.71", "–"]
    assert rows["5-gram + 5"][5:7] == ["-3.50 ± 0.71", "-2.00 ± 0.00"]
    assert rows["5-gram + 2"][5:7] == ["–", "–"]  # no runs


@pytest.mark.parametrize("policy", ["mixed_bfloat16"])
def test_mixed_precision_smoke_run_stays_within_two_percent_of_float32(tmp_path, policy):
    """Mixed precision (bfloat16 compute, float32 weights and loss) changes rounding only: the
    same smoke run's test perplexity stays within 2% of float32's, and the run is its own
    record with the policy in its config, name and hardware entry."""
    source = lm.resolve_corpus(None, "synthetic", None)
    scores = {}
    for dtype_policy in ("float32", policy):
        config = lm.make_config(source, "smoke", "runs", 5, 5, dtype_policy=dtype_policy)
        record = lm.run(config, source, tmp_path, verbose=0)
        scores[dtype_policy] = record["summary"]["test_perplexity"]
        assert record["hardware"]["dtype_policy"] == dtype_policy
    assert config.name.endswith(f"-{policy}-seed0") and config.as_dict()["dtype_policy"] == policy
    assert abs(scores[policy] / scores["float32"] - 1) < 0.02, scores
    assert len(list((tmp_path / "lm" / "synthetic" / "runs").glob("*.json"))) == 2


@pytest.mark.slow
def test_kill_in_the_middle_of_an_epoch_then_resume_equals_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    """Mid-epoch checkpoints (every 0.2 s here, ``THESIS_REPRO_CHECKPOINT_SECONDS``): a run
    killed inside its second epoch resumes inside it and ends with the same record (epoch
    losses, validation and test perplexity) as a run never interrupted."""
    env = {**os.environ, "THESIS_REPRO_CACHE": str(tmp_path / "cache")}
    env.pop(lm.DATA_ENV, None)
    base = [sys.executable, "-m", "thesis_repro.lm", "--preset", "smoke", "--prefix", "5",
            "--max-words", "150000", "--epochs", "3", "--verbose", "0"]  # fmt: skip
    whole = subprocess.run([*base, "--results", str(tmp_path / "a")], env=env, timeout=600)
    assert whole.returncode == 0
    killed = tmp_path / "b"
    process = subprocess.Popen(
        [*base, "--results", str(killed)],
        env={**env, "THESIS_REPRO_CHECKPOINT_SECONDS": "0.2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    partial: dict = {}
    while time.time() < deadline and process.poll() is None:
        records = list(killed.rglob("*.json"))
        try:
            partial = json.loads(records[0].read_text()).get("partial") or {} if records else {}
        except json.JSONDecodeError:
            partial = {}
        if partial.get("epoch") == 2:
            break
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert partial.get("epoch") == 2 and partial["steps"] > 0, "killed inside epoch 2"
    resumed = subprocess.run(
        [*base, "--results", str(killed), "--verbose", "1"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming epoch 2 after" in resumed.stdout
    a, b = (json.loads(next((tmp_path / d).rglob("*.json")).read_text()) for d in "ab")
    assert b["finished"] and "partial" not in b
    for x, y in zip(a["epochs"], b["epochs"], strict=True):
        for key in ("train_loss", "train_nll", "valid_perplexity"):
            assert x[key] == pytest.approx(y[key], rel=1e-5), (key, x, y)
    assert a["summary"]["test_perplexity"] == pytest.approx(b["summary"]["test_perplexity"], 1e-6)
    assert not list(killed.rglob("*-partial.keras")), "the partial checkpoint is removed"


def test_steps_per_execution_divides_the_epoch() -> None:
    """``set_steps_per_execution`` takes the largest divisor of the epoch's updates not above
    the limit (Keras runs whole calls, which must not run past the epoch's end)."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    chosen = {
        (updates, most): set_steps_per_execution(model, updates, most)
        for updates, most in [(857, 16), (5999, 16), (5142, 16), (48, 16), (10, 1), (3, 16)]
    }
    assert chosen == {
        (857, 16): 1,  # prime
        (5999, 16): 7,  # 7 x 857: the paper preset's epoch
        (5142, 16): 6,
        (48, 16): 16,
        (10, 1): 1,
        (3, 16): 3,
    }
    assert model.steps_per_execution == 3


def test_steps_per_execution_trains_the_same_updates(tmp_path: Path, monkeypatch) -> None:
    """Several updates per compiled call (``$THESIS_REPRO_STEPS_PER_EXECUTION``, the default on
    an accelerator) run the same updates in the same order: the same record within float
    rounding, and the same number of updates per epoch."""
    source = lm.resolve_corpus(None, "synthetic", None)
    config = lm.make_config(source, "smoke", "runs", 5, 5)
    records = {}
    for most in ("1", "8"):
        monkeypatch.setenv(STEPS_PER_EXECUTION_ENV, most)
        records[most] = lm.run(config, source, tmp_path / most, verbose=0)
        path = lm.final_model_path(lm.record_path(config, tmp_path / most))
        model = keras.saving.load_model(path)
        train_words = records[most]["corpus"]["words"]["train"]
        per_epoch = (train_words - config.first_target) // config.batch_size
        assert int(model.optimizer.iterations.numpy()) == config.epochs * per_epoch
    one, many = records["1"], records["8"]
    assert one["steps_per_execution"] == 1 and many["steps_per_execution"] > 1
    for a, b in zip(one["epochs"], many["epochs"], strict=True):
        for key in ("train_loss", "valid_perplexity"):
            assert a[key] == pytest.approx(b[key], rel=1e-5), (key, a, b)
    assert one["summary"]["test_perplexity"] == pytest.approx(
        many["summary"]["test_perplexity"], rel=1e-5
    )


def test_table_ratio_compares_the_seeds_both_models_have() -> None:
    """2026-11-26: the `paper` 5-gram got a third seed (181.5, its lowest) before the 10-gram
    did, and the 10-gram's ratio moved from 0.954 to 0.963 though no 10-gram run changed. The
    ratio now divides means over the seeds both have, as the paired columns do."""
    source = lm.CorpusSource("eltec-pol", Path("x.txt"))

    def record(order: int, seed: int, ppl: float) -> dict:
        config = lm.make_config(source, "paper", "3.1", order, 0, seed=seed)
        return {
            "config": asdict(config),
            "command": "test",
            "finished": True,
            "epochs": [],
            "summary": {"test_perplexity": ppl, "final_valid_perplexity": ppl + 9},
            "corpus": {"vocab_size": 37373},
            "versions": {},
            "hardware": {"cpus": 2, "machine": "x86_64", "system": "Linux", "backend": "jax"}
            | {"device": "cpu"},
            "started": "2026-11-26 16:30:24",
            "wall_seconds": 1.0,
            "path": f"/r/{config.name}.json",
        }

    records = [record(5, 0, 200.0), record(5, 1, 180.0), record(5, 2, 100.0)]
    records += [record(10, 0, 190.0), record(10, 1, 170.0)]
    rows = {line.split(" | ")[0]: line for line in lm_report.render_table(records).splitlines()}
    assert f"| {(190 + 170) / (200 + 180):.3f} |" in rows["| 10-gram"]  # 0.947, not 360/480
    assert "| 1.000 |" in rows["| 5-gram"]


def test_accelerator_estimate_is_the_measured_update_time(monkeypatch) -> None:
    """The `paper` update was measured at 2.5 ms alone on an H100; the start line's estimate
    there said 7.6 h for a 10-minute run when it scaled the host's NumPy matmul instead."""
    from thesis_repro.lm import train

    monkeypatch.setattr(train, "compute_device", lambda: {"device": "NVIDIA H100"})
    config = lm.make_config(lm.CorpusSource("eltec-pol", Path("x.txt")), "paper", "3.1", 5, 0)
    assert lm.estimate_update_seconds(config, 37_373) == pytest.approx(2.5e-3, rel=0.01)
