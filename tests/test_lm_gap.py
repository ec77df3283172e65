"""The gap study of issue 18: sentence-bounded windows against a loop over the definition, cased
corpora, the factors' runs and their paired table."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from thesis_repro import lm
from thesis_repro.lm.batches import PAD_ID, TrainBatches, sentence_starts, window_inputs
from thesis_repro.lm.config import GAP_FACTORS, THESIS_GAP, gap_factor, gap_overrides
from thesis_repro.lm.gap import gaps, render_gap_figure, render_gap_table
from thesis_repro.records import load_records

EOS = 3


def bounded_reference(tokens: np.ndarray, t: int, order: int, prefix: int) -> tuple[list, list]:
    """Window, prefix and prefix length of target ``t`` when nothing before its sentence is
    read: the sentence starts after the last ``EOS`` before ``t`` (that ``EOS`` and earlier
    window positions read as ``EOS``, like ``<s>``; earlier prefix positions are padding)."""
    last_eos = max((k for k in range(t) if tokens[k] == EOS), default=None)
    window = []
    for k in range(t - order + 1, t):
        window.append(EOS if last_eos is not None and k < last_eos else tokens[k])
    words = []
    for j in range(prefix):
        k = t - order - j
        inside = k >= 0 and (last_eos is None or k >= last_eos)
        words.append(tokens[k] if inside else PAD_ID)
    return window, words


@pytest.mark.parametrize("order,prefix", [(2, 0), (5, 0), (5, 5), (3, 8)])
def test_bounded_windows_match_the_definition(order: int, prefix: int) -> None:
    rng = np.random.default_rng(order * 10 + prefix)
    tokens = rng.integers(4, 12, 120).astype(np.int32)
    tokens[rng.choice(np.arange(5, 120), 14, replace=False)] = EOS
    targets = np.arange(order - 1 + prefix, 120)
    x = window_inputs(
        tokens, targets, order, prefix, bound=sentence_starts(tokens, EOS), boundary=EOS
    )
    for row, t in enumerate(targets):
        window, words = bounded_reference(tokens, t, order, prefix)
        assert x["window"][row].tolist() == window, t
        if prefix:
            last_eos = max((k for k in range(t) if tokens[k] == EOS), default=-1)
            real = [t - order - j >= max(last_eos, 0) for j in range(prefix)]
            assert x["prefix"][row].tolist() == words, t
            assert x["prefix_length"][row] == sum(real), t
    running = window_inputs(tokens, targets, order, prefix)
    inside = np.array([EOS not in tokens[t - order - prefix + 1 : t] for t in targets])
    assert inside.any() and (~inside).any()
    np.testing.assert_array_equal(x["window"][inside], running["window"][inside])


def test_train_batches_pass_the_bound_on() -> None:
    tokens = np.array([5, 6, EOS, 7, 8, 9, EOS, 10, 11, 4, 5, 6], np.int32)
    bound = sentence_starts(tokens, EOS)
    batches = TrainBatches(tokens, np.arange(4, 12), 3, 2, 8, 0, 0, 1, bound=bound, boundary=EOS)
    x, y = batches[0]
    order = batches.permutation(0)
    targets = np.arange(4, 12)[order]
    expected = window_inputs(tokens, targets, 3, 2, bound=bound, boundary=EOS)
    np.testing.assert_array_equal(x["window"], expected["window"])
    np.testing.assert_array_equal(x["prefix_length"], expected["prefix_length"])
    assert y.tolist() == tokens[targets].tolist()


def test_gap_runs_are_the_factors_and_reuse_tables_3_1_and_3_2() -> None:
    source = lm.CorpusSource("eltec-pol", Path("x.txt"))
    runs = lm.table_runs("gap", source, "cpu")
    assert len(runs) == len(lm.PRESETS["cpu"].seeds) * len(GAP_FACTORS) * 2
    assert set(lm.table_runs("3.1", source, "cpu")) >= {r for r in runs if r.table == "3.1"}
    assert set(lm.table_runs("3.2", source, "cpu")) >= {r for r in runs if r.table == "3.2"}
    found = {gap_factor(asdict(r)).name for r in runs}
    assert found == {f.name for f in GAP_FACTORS}
    by_name = {gap_factor(asdict(r)).name: r for r in runs}
    assert by_name["cased"].lowercase is False and by_name["bounded"].bounded is True
    assert by_name["vocab"].min_count == 2 and by_name["epochs"].epochs == 12
    assert by_name["momentum"].variant == "momentum"
    assert len({lm.record_path(r, Path("/r")) for r in runs}) == len(runs), "one record each"
    names = {factor: run.name for factor, run in by_name.items()}
    for factor, part in [("cased", "-cased-"), ("bounded", "-bounded-"), ("vocab", "-min2-")]:
        assert part in names[factor], names  # the name says what the run changed
    assert names["epochs"].startswith("cpu-5gram+5-thesis-ep12-seed"), names
    other = lm.make_config(source, "cpu", "3.1", 10, 0)
    assert gap_factor(asdict(other)) is None, "the 10-gram is no gap-study run"


def test_unset_command_line_options_keep_the_factors_settings() -> None:
    """The CLI passes unset options as None: they must not undo a factor's own settings (a bug
    caught in the first cpu runs: the vocab factor trained at the preset's min_count)."""
    source = lm.CorpusSource("eltec-pol", Path("x.txt"))
    unset = {"epochs": None, "min_count": None, "batch_size": None, "dtype_policy": None}
    runs = lm.table_runs("gap", source, "cpu", (0,), **unset)
    assert runs == lm.table_runs("gap", source, "cpu", (0,))
    assert {gap_factor(asdict(r)).name for r in runs} == {f.name for f in GAP_FACTORS}
    with pytest.raises(lm.LMError, match="--epochs"):
        lm.table_runs("gap", source, "cpu", (0,), epochs=3)


def _record(factor: str, order: int, prefix: int, seed: int, ppl: float) -> dict:
    source = lm.CorpusSource("eltec-pol", Path("x.txt"))
    scale = lm.PRESETS["cpu"]
    spec = next(f for f in GAP_FACTORS if f.name == factor)
    config = lm.make_config(
        source, "cpu", spec.table, order, prefix, spec.variant, seed, **gap_overrides(spec, scale)
    )
    return {
        "config": asdict(config),
        "command": "test",
        "finished": True,
        "epochs": [],
        "summary": {"test_perplexity": ppl},
        "corpus": {"vocab_size": 7251, "unk_rate_train": 0.18},
        "path": f"/r/{config.name}.json",
    }


def test_gap_table_pairs_by_seed() -> None:
    records = [
        _record("ours", 5, 0, 0, 200.0), _record("ours", 5, 5, 0, 198.0),
        _record("ours", 5, 0, 1, 100.0), _record("ours", 5, 5, 1, 97.0),
        _record("ours", 5, 0, 2, 150.0),  # its 5-gram + 5 is missing: not paired
        _record("cased", 5, 0, 0, 300.0), _record("cased", 5, 5, 0, 240.0),
    ]  # fmt: skip
    records[-1]["config"]["table"] = records[-2]["config"]["table"] = "gap"
    assert gaps({0: {(5, 0): 200.0, (5, 5): 150.0}}) == {0: 0.25}
    text = render_gap_table(records)
    ours = next(line for line in text.splitlines() if line.startswith("| ours"))
    # gaps 1 % and 3 %: mean 2.0, sample std 1.4
    assert "| 2.0 ± 1.4 % | – | 2 / 5 of 5 |" in ours and "150.0 ± 50.0" in ours
    cased = next(line for line in text.splitlines() if line.startswith("| cased"))
    assert "| 20.0 % | 19.00 pp (1) | 1 / 2 of 2 |" in cased  # seed 0: 20 % against ours' 1 %
    assert "| 2.0 ± 1.4 % | – |" in ours
    assert f"{100 * THESIS_GAP:.1f} %" in text and "| bounded" in text


def test_gap_figure_and_smoke_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smoke = replace(lm.PRESETS["smoke"], epochs=1, seeds=(0,), max_words=2000, min_count=5)
    monkeypatch.setitem(lm.PRESETS, "smoke", smoke)
    synthetic = lm.resolve_corpus(None, None, None)
    records = lm.run_grid("gap", synthetic, "smoke", tmp_path, verbose=0)
    assert len(records) == len(GAP_FACTORS) * 2 and all(r["finished"] for r in records)
    text = lm.report.report(tmp_path, tmp_path / "figures")
    assert "Why the thesis's gap is larger" in text
    assert (tmp_path / "figures" / "lm_gap_synthetic_smoke.pdf").stat().st_size > 1000
    saved = load_records(tmp_path / "lm")
    assert render_gap_figure(saved, "cpu", tmp_path / "none.pdf") is None


def test_cased_corpus_keeps_the_case(tmp_path: Path) -> None:
    text = tmp_path / "c.txt"
    text.write_text("Ala ma kota . ala ma psa .\n" * 200)
    source = lm.resolve_corpus(text)
    lower = lm.make_config(source, "smoke", min_count=1)
    cased = lm.make_config(source, "smoke", min_count=1, lowercase=False)
    assert "ala" in lm.load_lm_corpus(source, lower, progress=False).vocab
    vocab = lm.load_lm_corpus(source, cased, progress=False).vocab
    assert "Ala" in vocab and "ala" in vocab
