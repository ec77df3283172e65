"""Thesis addition experiment (2.1, 3.1): models against the equations, runner, outputs."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import reference as ref
from thesis_repro import addition, tasks
from thesis_repro.addition import cli as addition_cli
from thesis_repro.addition.model import (
    attention_gated_lstm_model,
    thesis_lstm_model,
    thesis_reinitialize,
)
from thesis_repro.ffattention.model import raffel_model
from thesis_repro.records import command_line
from thesis_repro.runner import run_grid
from thesis_repro.settings import COMMAND_ENV

ATOL = 1e-5


def leaky(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.01 * x)


def weights(model, name: str) -> list[np.ndarray]:
    return [np.asarray(w.numpy(), np.float64) for w in model.get_layer(name).weights]


def randomize_biases(model, rng: np.random.Generator) -> None:
    """Non-zero biases (they start at zero), so that every term of the equations is checked."""
    for weight in model.weights:
        if weight.path.endswith("bias"):
            weight.assign(rng.normal(0.0, 0.5, size=weight.shape).astype("float32"))


def readout(model, h_final: np.ndarray) -> float:
    """``y = LReLU(W_out h_final + b_out)``, thesis 2.1.1."""
    w_out, b_out = weights(model, "y")
    return float(leaky(h_final @ w_out + b_out)[0])


@pytest.fixture
def batch(rng) -> tasks.Batch:
    return tasks.thesis_addition(rng, 3, 9, 14)  # padded to 14; lengths differ


def test_lstm_model_computes_thesis_2_1_1(rng, batch):
    model = thesis_lstm_model(units=5, seed=1)
    randomize_biases(model, rng)
    out = np.asarray(model({"x": batch.x, "lengths": batch.lengths}))
    kernel, recurrent, bias = weights(model, "lstm")
    for row, length in enumerate(batch.lengths):
        states = ref.gated_lstm(batch.x[row], np.zeros(14), kernel, recurrent, bias, length=length)
        assert out[row] == pytest.approx(readout(model, states[-1]), abs=ATOL)


def test_gated_model_is_the_raffel_energies_into_the_input_gate(rng, batch):
    """Pretrained reading: the Raffel network's own h and e_t, fed to thesis 2.1.2's LSTM."""
    attention = thesis_reinitialize(raffel_model(hidden=6, seed=2), seed=2)
    randomize_biases(attention, rng)
    model = attention_gated_lstm_model(attention, units=5, hidden=6, seed=3)
    randomize_biases(model.get_layer("lstm"), rng)
    out = np.asarray(model({"x": batch.x, "lengths": batch.lengths}))
    w_h, b_h = weights(attention, "h")
    w_e, b_e = weights(attention, "attention")
    kernel, recurrent, bias = weights(model, "lstm")
    for row, length in enumerate(batch.lengths):
        x = batch.x[row, :length]
        _, _, e = ref.attention_pool(leaky(x @ w_h + b_h), w_e, float(b_e[0]))
        states = ref.gated_lstm(x, e, kernel, recurrent, bias)
        assert out[row] == pytest.approx(readout(model, states[-1]), abs=ATOL)
    # Frozen attention network: only the LSTM (3) and the readout (2) train.
    assert len(model.trainable_weights) == 5
    assert len(attention_gated_lstm_model(None, units=5, hidden=6).trainable_weights) == 9


def test_padding_does_not_change_predictions(rng):
    batch = tasks.thesis_addition(rng, 4, 10, 16, pad_to=30)
    for model in (thesis_lstm_model(units=4, seed=0), attention_gated_lstm_model(None, units=4)):
        padded = np.asarray(model({"x": batch.x, "lengths": batch.lengths}))
        for row, length in enumerate(batch.lengths):
            alone = model(
                {"x": batch.x[row : row + 1, :length], "lengths": batch.lengths[row : row + 1]}
            )
            np.testing.assert_allclose(padded[row], np.asarray(alone)[0], atol=ATOL)


def test_initialisation_is_normal_with_std_one_over_sqrt_output_dim():
    """Thesis 3.1: N(0, 1/sqrt(output_dim)); the LSTM's output_dim is per gate (64)."""
    lstm = thesis_lstm_model(seed=0)
    gated = attention_gated_lstm_model(None, seed=0)
    raffel = thesis_reinitialize(raffel_model(seed=0), seed=0)
    expected = {  # (layer, weight index): (std, relative tolerance ~ 4 standard errors)
        (lstm, "lstm", 0): (1 / 8, 0.15),  # 2 x 256 values
        (lstm, "lstm", 1): (1 / 8, 0.05),  # 64 x 256
        (lstm, "y", 0): (1.0, 0.35),  # 64 x 1
        (gated, "lstm", 0): (1 / 8, 0.15),
        (gated, "lstm", 1): (1 / 8, 0.05),
        (gated, "h", 0): (1 / 10, 0.2),  # 2 x 100
        (gated, "attention", 0): (1.0, 0.3),  # 100 x 1
        (raffel, "s", 0): (1 / 10, 0.03),  # 100 x 100
        (raffel, "y", 0): (1.0, 0.3),
    }
    for (model, name, index), (std, tolerance) in expected.items():
        values = weights(model, name)[index]
        assert values.std() == pytest.approx(std, rel=tolerance), (model.name, name)
        assert abs(values.mean()) < 4 * std / np.sqrt(values.size)
    for model in (lstm, gated, raffel):
        for weight in model.weights:
            if weight.path.endswith("bias"):
                assert np.all(weight.numpy() == 0), weight.path
    assert not np.allclose(weights(lstm, "lstm")[1], weights(thesis_lstm_model(seed=1), "lstm")[1])


def test_input_gates_replay_the_layer(rng, batch):
    """``input_gates`` returns i_t of thesis 2.1.2 (checked against the NumPy reference)."""
    model = attention_gated_lstm_model(None, units=4, hidden=6, seed=5)
    randomize_biases(model, rng)
    gates, energies = addition.input_gates(model, batch)
    kernel, recurrent, bias = weights(model, "lstm")
    row, length = 0, batch.lengths[0]
    x, e = batch.x[row, :length], energies[row, :length]
    states = ref.gated_lstm(x, e, kernel, recurrent, bias)
    h_prev = np.vstack([np.zeros(4), states[:-1]])
    expected = ref.thesis_gate(
        h_prev @ recurrent[:, :4] + x @ kernel[:, :4] + bias[:4] + e[:, None]
    )
    np.testing.assert_allclose(gates[row, :length], expected, atol=ATOL)
    lstm_gates, none = addition.input_gates(thesis_lstm_model(units=4, seed=0), batch)
    assert none is None and lstm_gates.shape == (3, 14, 4)
    stats = addition.gate_statistics(model, batch)
    assert set(stats) == {*addition.GATE_KEYS}


def test_learning_start_is_first_epoch_below_threshold():
    epochs = [{"epoch": i + 1, "train_loss": v} for i, v in enumerate([0.17, 0.16, 0.09, 0.2])]
    assert addition.first_step_below(epochs, 100) == 300
    assert addition.first_step_below(epochs[:2], 100) is None
    assert addition.LEARNING_THRESHOLD < tasks.BASELINE_MSE_THESIS_ADDITION


def test_learned_for_good_ignores_passing_dips():
    losses = [0.17, 0.08, 0.17, 0.09, 0.05, 0.01]  # a dip at epoch 2, for good from epoch 4
    epochs = [{"epoch": i + 1, "train_loss": v} for i, v in enumerate(losses)]
    assert addition.first_step_below(epochs, 100) == 200
    assert addition.first_step_staying_below(epochs, 100) == 400
    assert addition.first_step_staying_below(epochs[:3], 100) is None
    assert addition.first_step_staying_below(epochs[:2], 100) == 200  # (so far)


def test_run_config_validates_and_reads_back_from_json():
    config = addition.RunConfig("gated-joint", steps=300)
    assert json.loads(json.dumps(config.as_record())) == config.as_record()
    assert config.epochs == 3 and "gated-joint" in config.name
    with pytest.raises(ValueError, match="multiple"):
        addition.RunConfig("lstm", steps=150)
    with pytest.raises(ValueError, match="model"):
        addition.RunConfig("gru")
    cpu = addition.preset_runs(addition.PRESETS["cpu"])
    assert {c.model for c in cpu} == set(addition.MODELS) and len(cpu) >= 9


def test_forget_bias_runs_are_named_apart_and_keep_old_records_valid():
    plain = addition.RunConfig("lstm", steps=300)
    forget = addition.RunConfig("lstm", steps=300, unit_forget_bias=True)
    assert "unit_forget_bias" not in plain.as_record(), "records made before the option match"
    assert forget.as_record()["unit_forget_bias"] is True
    assert forget.name == plain.name.replace("lstm-", "lstm-forgetbias1-", 1)
    for config in (forget, dataclasses.replace(forget, model="gated-joint")):
        bias = addition.build_model(config).get_layer("lstm").weights[-1].numpy()
        np.testing.assert_array_equal(bias, np.repeat([0.0, 1.0, 0.0, 0.0], config.units))
    bias = addition.build_model(plain).get_layer("lstm").weights[-1].numpy()
    assert not bias.any(), "thesis 3.1: all biases start at zero"
    assert {c.unit_forget_bias for c in addition.preset_runs(addition.PRESETS["cpu"])} == {False}
    assert all(
        c.unit_forget_bias for c in addition.preset_runs(addition.PRESETS["cpu-forget-bias"])
    )


def test_every_command_line_flag_is_explained():
    parser = addition_cli.build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "run" in a.choices).choices
    for command in (parser, *subparsers.values()):
        for action in command._actions:
            assert action.help, f"{command.prog}: {action.option_strings} has no help"


def test_records_name_the_command_as_it_was_typed(monkeypatch):
    """``python -m thesis_repro.addition`` runs ``thesis_repro/addition/__main__.py``; records and
    tables name the module, not the file."""
    script = Path(addition.__file__).with_name("__main__.py")
    monkeypatch.delenv(COMMAND_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", [str(script), "grid", "--preset", "smoke"])
    assert command_line() == "python -m thesis_repro.addition grid --preset smoke"


# --- the smoke preset, end to end ----------------------------------------------------------


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[Path, Path]:
    """Run the smoke preset once for the tests below (records, figures, table)."""
    root = tmp_path_factory.mktemp("addition")
    results, figures = root / "results", root / "figures"
    run_grid(addition.EXPERIMENT, addition.runs("smoke"), results, verbose=0)
    addition.report(results, figures, preset="smoke")
    return results, figures


def test_smoke_preset_writes_records_figures_and_table(smoke):
    results, figures = smoke
    records = sorted((results / "addition").rglob("*.json"))
    assert len(records) == len(addition.preset_runs(addition.PRESETS["smoke"])) == 3
    for path in records:
        record = json.loads(path.read_text())
        config = record["config"]
        assert (
            record["finished"]
            and len(record["epochs"]) == config["steps"] // config["steps_per_epoch"]
        )
        assert set(record["generalisation"]) == {str(n) for n in config["eval_lengths"]}
        assert "input_gate_marked" in record["gates"]
        assert ("pretrain" in record) == (config["model"] == "gated-pretrained")
        assert "tensorflow" in record["versions"]
    table = (results / "addition" / "table.md").read_text()
    assert "gated-pretrained" in table and "What the input gates do" in table
    for name in ("addition_training.pdf", "addition_generalisation.pdf"):
        assert (figures / name).stat().st_size > 1000


def test_rerun_skips_finished_runs(smoke):
    results, _ = smoke
    records = sorted((results / "addition").rglob("*.json"))
    stamps = [path.stat().st_mtime_ns for path in records]
    run_grid(addition.EXPERIMENT, addition.runs("smoke"), results, verbose=0)
    assert [path.stat().st_mtime_ns for path in records] == stamps


def test_interrupted_run_resumes_from_its_checkpoint(smoke, tmp_path):
    results, _ = smoke
    config = addition.preset_runs(addition.PRESETS["smoke"], ("lstm",))[0]
    partial = addition.run(config, tmp_path, verbose=0, stop_after_epochs=1)
    assert not partial["finished"] and len(partial["epochs"]) == 1
    partial = addition.run(config, tmp_path, verbose=0, stop_after_epochs=2)  # 2 more epochs
    assert not partial["finished"] and len(partial["epochs"]) == 3
    assert list((tmp_path / "addition" / "lstm" / "checkpoints").glob("*epoch3.keras"))
    partial_epochs = [dict(e) for e in partial["epochs"]]
    resumed = addition.run(config, tmp_path, verbose=0)
    straight = json.loads(addition.record_path(config, results).read_text())
    assert resumed["finished"] and resumed["epochs"][:3] == partial_epochs
    # Same data stream, weights and optimizer state: the resumed run retraces the straight one.
    assert len(resumed["epochs"]) == len(straight["epochs"])
    for a, b in zip(resumed["epochs"], straight["epochs"], strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
    assert resumed["generalisation"] == pytest.approx(straight["generalisation"], rel=1e-4)


def test_longer_run_continues_a_shorter_one(smoke, tmp_path):
    """A run with more steps starts from the same run's furthest checkpoint with fewer steps
    and retraces the run trained straight to the end (same data stream, constant Adam lr)."""
    results, _ = smoke
    config = addition.preset_runs(addition.PRESETS["smoke"], ("lstm",))[0]
    shorter = dataclasses.replace(config, steps=config.steps // 2)
    addition.run(shorter, tmp_path, verbose=0)
    longer = addition.run(config, tmp_path, verbose=0)
    straight = json.loads(addition.record_path(config, results).read_text())
    assert longer["continued_from"] == {"run": shorter.name, "epochs": shorter.epochs}
    assert longer["finished"] and len(longer["epochs"]) == len(straight["epochs"])
    for a, b in zip(longer["epochs"], straight["epochs"], strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
    assert longer["generalisation"] == pytest.approx(straight["generalisation"], rel=1e-4)
    other_seed = dataclasses.replace(config, seed=config.seed + 1)  # never adopts another run
    assert "continued_from" not in addition.run(
        other_seed, tmp_path, verbose=0, stop_after_epochs=1
    )
