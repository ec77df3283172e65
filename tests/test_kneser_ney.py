"""Tests of the Kneser-Ney baseline (``thesis_repro.lm.kneser_ney``): probabilities and perplexities
computed by hand on a tiny corpus (Chen & Goodman 1998, interpolated modified Kneser-Ney), the
discount estimates, sum-to-one, a brute-force reference on random text, the conventions shared
with the neural models (windows, scored positions), the records and the command line's errors.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from thesis_repro import lm
from thesis_repro.files import write_json_atomic
from thesis_repro.lm import cli as lm_cli
from thesis_repro.lm import kneser_ney as kn
from thesis_repro.lm.kneser_ney import PAD

ROOT = Path(__file__).resolve().parents[1]
A, B, C, D = 0, 1, 2, 3  # word ids of the tiny corpus; D never occurs in training
TRAIN = np.array([A, B, A, C, A, B])
FIXED = (0.5, 1.0, 1.5)  # D1, D2, D3+ for every order: the hand computations use these


def fixed(order: int) -> list[tuple[float, float, float]]:
    return [FIXED] * order


# ----------------------------------------------------------------------------------------------
# By hand. Training text "a b a c a b", V = 4 (a, b, c, d), D1 = 0.5, D2 = 1, D3+ = 1.5.
#
# Unigram adjusted counts (distinct words before; the first "a" has none and keeps its count):
#   a: {b, c} + 1 = 3,  b: {a} = 1,  c: {a} = 1,  d: 0;  total 5;
#   gamma_1 = (D3+ + D1 + D1) / 5 = 2.5 / 5 = 0.5, uniform 1/4:
#   p1(a) = (3 - 1.5)/5 + 0.5/4 = 0.425,  p1(b) = p1(c) = (1 - 0.5)/5 + 0.125 = 0.225,
#   p1(d) = 0.125.
# Bigram (top order: raw counts) a b: 2, a c: 1, b a: 1, c a: 1:
#   context a: total 3, gamma = (D2 + D1)/3 = 0.5:
#     p(b|a) = (2 - 1)/3 + 0.5 p1(b) = 1/3 + 0.1125,  p(c|a) = (1 - 0.5)/3 + 0.1125,
#     p(a|a) = 0.5 p1(a) = 0.2125,  p(d|a) = 0.0625
#   context b (total 1, gamma 0.5): p(a|b) = 0.5 + 0.5 * 0.425 = 0.7125, p(d|b) = 0.0625
#   context c: p(a|c) = 0.7125;  context d never seen: p(w|d) = p1(w)
# ----------------------------------------------------------------------------------------------

P1 = {A: 0.425, B: 0.225, C: 0.225, D: 0.125}
P2_A = {A: 0.2125, B: 1 / 3 + 0.1125, C: 1 / 6 + 0.1125, D: 0.0625}


def test_unigram_and_bigram_probabilities_by_hand() -> None:
    model = kn.fit(TRAIN, 2, 4, discounts=fixed(2))
    assert model.probabilities([]) == pytest.approx([P1[w] for w in (A, B, C, D)], abs=1e-12)
    assert model.probabilities([A]) == pytest.approx([P2_A[w] for w in (A, B, C, D)], abs=1e-12)
    assert model.probabilities([B])[A] == pytest.approx(0.7125, abs=1e-12)
    assert model.probabilities([D]) == pytest.approx([P1[w] for w in (A, B, C, D)], abs=1e-12)


def test_bigram_perplexity_by_hand() -> None:
    """Test text "c a b d a", targets 1..4: p(a|c) p(b|a) p(d|b) p(a|d)."""
    model = kn.fit(TRAIN, 2, 4, discounts=fixed(2))
    test = np.array([C, A, B, D, A])
    windows = kn.ngram_windows(test, np.arange(1, 5), 2)
    by_hand = (0.7125 * (1 / 3 + 0.1125) * 0.0625 * 0.425) ** (-1 / 4)
    assert kn.perplexity(model, windows) == pytest.approx(by_hand, rel=1e-12)


def test_trigram_perplexity_by_hand() -> None:
    """Order 3 on the same text. Bigram counts become continuation counts: a b: {c} plus the
    text's first "a b" (no word before it) = 2; b a, a c, c a: 1 each (so p2 is the bigram model
    above). Trigrams (raw) a b a, b a c, a c a, c a b: 1 each, so every seen trigram context has
    total 1 and gamma = D1 = 0.5. Test "b a c a b", targets 2..4:
    p(c|b a) = 0.5 + 0.5 p2(c|a), p(a|a c) = 0.5 + 0.5 p2(a|c), p(b|c a) = 0.5 + 0.5 p2(b|a)."""
    model = kn.fit(TRAIN, 3, 4, discounts=fixed(3))
    p_c = 0.5 + 0.5 * (1 / 6 + 0.1125)
    p_a = 0.5 + 0.5 * 0.7125
    p_b = 0.5 + 0.5 * (1 / 3 + 0.1125)
    test = np.array([B, A, C, A, B])
    windows = kn.ngram_windows(test, np.arange(2, 5), 3)
    assert np.exp(model.log_probs(windows)) == pytest.approx([p_c, p_a, p_b], abs=1e-12)
    assert kn.perplexity(model, windows) == pytest.approx((p_c * p_a * p_b) ** (-1 / 3))
    # an unseen trigram context (d a) backs off to the bigram's whole distribution
    assert model.probabilities([D, A]) == pytest.approx([P2_A[w] for w in (A, B, C, D)])


def test_sentence_bounded_stream_and_start_of_sentence_by_hand() -> None:
    """Standard conventions: "a b <eos> a <eos>" (eos = 2, V = 3, <s> = 3) becomes
    PAD <s> a b <eos> PAD <s> a <eos>. Bigrams (raw): <s> a: 2, a b, b <eos>, a <eos>: 1.
    Unigrams (<s> gets none): a {<s>} = 1, b {a} = 1, <eos> {a, b} = 2; total 4, gamma 0.5,
    uniform 1/3: p1(a) = 0.5/4 + 0.5/3. p(a|<s>) = (2 - 1)/2 + 0.5 p1(a)."""
    tokens = np.array([0, 1, 2, 0, 2])
    stream, positions = kn.sentence_bounded(tokens, eos=2, bos=3)
    assert stream.tolist() == [PAD, 3, 0, 1, 2, PAD, 3, 0, 2]
    assert stream[positions].tolist() == tokens.tolist()
    model = kn.fit(stream, 2, 3, context_only=1, discounts=fixed(2))
    p1_a = 0.5 / 4 + 0.5 / 3
    assert model.probabilities([]) == pytest.approx([p1_a, p1_a, 1 / 4 + 0.5 / 3])
    assert model.probabilities([3])[0] == pytest.approx(0.5 + 0.5 * p1_a)
    # across the boundary nothing is seen: "<eos> a" is not a training bigram
    assert model.probabilities([2]) == pytest.approx(model.probabilities([]))


def test_discounts_from_count_of_counts_by_hand() -> None:
    """n1..n4 = 4, 2, 2, 1: Y = 4/8 = 0.5, D1 = 1 - 2 * 0.5 * 2/4 = 0.5,
    D2 = 2 - 3 * 0.5 * 2/2 = 0.5, D3+ = 3 - 4 * 0.5 * 1/2 = 2."""
    counts = np.array([1, 1, 1, 1, 2, 2, 3, 3, 4, 7])
    assert kn.estimate_discounts(counts) == pytest.approx((0.5, 0.5, 2.0))
    assert kn.estimate_discounts(np.array([1, 1, 2, 3])) is None  # n4 = 0: cannot estimate


def test_fallback_discounts_are_used_and_reported() -> None:
    model = kn.fit(TRAIN, 2, 4)  # far too small for count-of-counts
    assert model.fallback_orders == [1, 2]
    assert model.discounts.tolist() == [list(kn.FALLBACK_DISCOUNTS)] * 2


# ----------------------------------------------------------------------------------------------
# Invariants and an independent brute-force reference
# ----------------------------------------------------------------------------------------------


def zipf_text(rng: np.random.Generator, vocab: int, length: int) -> np.ndarray:
    p = 1.0 / np.arange(1, vocab + 1)
    return rng.choice(vocab, size=length, p=p / p.sum())


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_probabilities_sum_to_one(order: int, rng: np.random.Generator) -> None:
    vocab = 20
    text = zipf_text(rng, vocab, 20000)
    model = kn.fit(text, order, vocab)
    assert order == 1 or order not in model.fallback_orders  # estimated discounts in use
    contexts = [[], [0], [19], [1, 2, 3, 4], list(text[100:104]), [PAD, 5, 6, 7]]
    for context in contexts:
        probs = model.probabilities(context)
        assert probs.min() > 0
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)


def brute_force(text: list[int], order: int, vocab: int, discounts: np.ndarray):
    """Interpolated modified KN straight from the definitions, with dictionaries."""
    raw: dict[tuple, int] = defaultdict(int)
    before: dict[tuple, set] = defaultdict(set)
    no_left: dict[tuple, int] = defaultdict(int)
    for k in range(1, order + 1):
        for t in range(k - 1, len(text)):
            gram = tuple(text[t - k + 1 : t + 1])
            raw[gram] += 1
            if t - k >= 0:
                before[gram].add(text[t - k])
            else:
                no_left[gram] += 1
    counts = {g: c if len(g) == order else len(before[g]) + no_left[g] for g, c in raw.items()}

    def discount(k: int, a: int) -> float:
        return 0.0 if a == 0 else float(discounts[k - 1][min(a, 3) - 1])

    def prob(word: int, context: tuple) -> float:
        k = len(context) + 1
        lower = 1.0 / vocab if k == 1 else prob(word, context[1:])
        a = [counts.get((*context, v), 0) for v in range(vocab)]
        total = sum(a)
        if total == 0:
            return lower
        gamma = sum(discount(k, c) for c in a) / total
        return (a[word] - discount(k, a[word])) / total + gamma * lower

    return prob, counts


@pytest.mark.parametrize("order", [2, 3, 4])
def test_matches_brute_force_reference(order: int, rng: np.random.Generator) -> None:
    vocab = 12
    train, test = zipf_text(rng, vocab, 3000), rng.integers(vocab, size=150)
    model = kn.fit(train, order, vocab)
    prob, counts = brute_force(train.tolist(), order, vocab, model.discounts)
    for k in range(2, order + 1):  # the discounts come from these adjusted counts
        estimate = kn.estimate_discounts(np.array([c for g, c in counts.items() if len(g) == k]))
        if estimate is None:
            assert k in model.fallback_orders
            estimate = kn.FALLBACK_DISCOUNTS
        assert model.discounts[k - 1] == pytest.approx(estimate)
    windows = kn.ngram_windows(test, np.arange(order - 1, len(test)), order)
    expected = [prob(int(w[-1]), tuple(int(v) for v in w[:-1])) for w in windows]
    assert np.exp(model.log_probs(windows)) == pytest.approx(expected, abs=1e-13)


def test_a_wrong_discount_changes_the_probabilities() -> None:
    """The hand computations would notice a model that ignored the discounts."""
    one = kn.fit(TRAIN, 2, 4, discounts=fixed(2)).probabilities([A])
    other = kn.fit(TRAIN, 2, 4, discounts=[FIXED, (0.6, 1.0, 1.5)]).probabilities([A])
    assert not np.allclose(one, other)


# ----------------------------------------------------------------------------------------------
# Conventions shared with the neural models
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [3, 5])
def test_windows_and_scored_positions_are_the_neural_models(order: int) -> None:
    from thesis_repro.lm.batches import window_inputs

    tokens = np.arange(40, dtype=np.int32) % 7
    targets = lm.scored_targets(len(tokens))
    windows = kn.ngram_windows(tokens, targets, order)
    neural = window_inputs(tokens, targets, order)["window"]
    assert np.array_equal(windows[:, :-1], neural)
    assert np.array_equal(windows[:, -1], tokens[targets])
    assert len(windows) == len(tokens) - lm.FIRST_TARGET


def test_record_of_a_synthetic_corpus(tmp_path: Path) -> None:
    """Running windows from position 9, the same counts of targets as the neural models; a
    second call finds the finished record; the sentence-bounded score is absent without
    ``<eos>`` (the synthetic corpus has none)."""
    source = lm.CorpusSource(lm.SYNTHETIC, None)
    config = lm.make_config(source, "smoke", table="3.1")
    corpus = lm.load_lm_corpus(source, config, progress=False)
    record = kn.run_baseline(corpus, config, 3, tmp_path, progress=False)
    path = tmp_path / "kneser-ney" / "synthetic" / "kn3-max6000-min1.json"
    assert json.loads(path.read_text())["summary"] == record["summary"]
    summary = record["summary"]
    for part in ("valid", "test"):
        assert summary[f"{part}_scored"] == len(getattr(corpus, part)) - lm.FIRST_TARGET
        assert 1 < summary[f"{part}_perplexity"] < corpus.vocab_size
    assert "sentence_bounded" not in summary
    assert record["config"]["model"] == "KN3" and record["finished"]
    again = kn.run_baseline(corpus, config, 3, tmp_path, progress=False)
    assert again["started"] == record["started"]


def test_sentence_bounded_scores_every_token(tmp_path: Path) -> None:
    text = tmp_path / "tiny.txt"
    rng = np.random.default_rng(3)
    lines = [" ".join(f"w{int(i)}" for i in zipf_text(rng, 40, 8)) for _ in range(800)]
    text.write_text("\n".join(lines) + "\n")
    source = lm.resolve_corpus(text)
    config = lm.make_config(source, "smoke", table="3.1", max_words=8000, min_count=1)
    corpus = lm.load_lm_corpus(source, config, progress=False)
    summary = kn.score_corpus(corpus, 3, lm.FIRST_TARGET)
    standard = summary["sentence_bounded"]
    assert standard["test_scored"] == len(corpus.test)  # every word and every <eos>
    assert summary["test_scored"] == len(corpus.test) - lm.FIRST_TARGET
    assert math.isfinite(standard["test_perplexity"])


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def exit_status(args: list[str]) -> int:
    """``main``'s exit status, whether it returns it or argparse exits."""
    try:
        return lm_cli.main(["kneser-ney", *args])
    except SystemExit as stop:
        return int(stop.code or 0)


@pytest.mark.parametrize(
    "args",
    [
        ["--order", "0"],
        ["--order", "3", "11"],
        ["--order", "three"],
        ["--table", "9.9"],
        ["--preset", "huge"],
        ["--corpus", "/no/such/corpus.txt"],
    ],
)
def test_cli_errors_one_line_no_files(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_status([*args, "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow  # a fresh process imports Keras: ~10 s on a loaded 2-core machine
def test_cli_error_in_a_process() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "thesis_repro.lm", "kneser-ney", "--order", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error")]
    assert errors == [bad.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith("error: argument --order: must be at least 1, got 0")


# ----------------------------------------------------------------------------------------------
# Table rows
# ----------------------------------------------------------------------------------------------


def kn_record(order: int, test: float, **config: object) -> dict:
    settings = {"corpus": "ptb", "max_words": 2_000_000, "min_count": 1}
    settings |= {"tokenizer": "whitespace", "first_target": 9, **config}
    return {
        "config": {**settings, "order": order, "model": f"KN{order}"},
        "command": "python -m thesis_repro.lm kneser-ney --table ptb --preset cpu",
        "finished": True,
        "summary": {
            "test_perplexity": test,
            "valid_perplexity": test + 6,
            "sentence_bounded": {"test_perplexity": test + 0.1},
        },
    }


def test_table_rows_match_the_corpus_settings_and_stay_out_of_the_pairs() -> None:
    neural = {"corpus": "ptb", "max_words": 2_000_000, "min_count": 1, "tokenizer": "whitespace"}
    neural |= {"first_target": 9, "order": 5, "prefix": 0, "seed": 0, "preset": "paper"}
    records = [kn_record(5, 141.07), kn_record(3, 148.38), kn_record(5, 90.0, max_words=6000)]
    found = kn.matching(neural, records)
    assert [b["config"]["order"] for b in found] == [3, 5]  # by order; other sizes left out
    rows = kn.table_rows(found, base_mean=200.0)
    kn5 = "| KN5 (count-based) | 141.07 | 1 (no seeds) | 147.07 | 0.705 | – | – | – | – |"
    assert rows[1] == kn5
    assert all(row.count("|") == 10 for row in rows)  # the nine columns of the LM tables
    note = kn.table_note(found)
    assert "KN3 148.48, KN5 141.17 (Mikolov 2012, Table 4.1: KN3 148.3, KN5 141.2)" in note
    assert "feed-forward NNLM 140.2 / 141.8, RNNLM 124.7" in note
    assert note.endswith("`python -m thesis_repro.lm kneser-ney --table ptb --preset cpu`")
    assert kn.table_note([]) == ""


def test_report_puts_kn_rows_into_the_table_of_the_same_corpus_settings(tmp_path: Path) -> None:
    """``lm_report.report``: the KN records of the corpus join the table whose runs were
    prepared alike (here the smoke preset), and only that one."""
    from thesis_repro.lm import report as lm_report

    results = tmp_path / "results"
    source = lm.CorpusSource(lm.SYNTHETIC, None)
    for preset in ("smoke", "cpu"):
        config = lm.make_config(source, preset, table="3.1")
        record = {
            "config": config.as_dict(),
            "command": f"python -m thesis_repro.lm grid --table 3.1 --preset {preset}",
            "finished": True,
            "epochs": [{"epoch": 1, "valid_perplexity": 80.0}],
            "summary": {"test_perplexity": 70.0, "final_valid_perplexity": 80.0},
        }
        write_json_atomic(results / "lm" / "synthetic" / "3.1" / f"{config.name}.json", record)
    config = lm.make_config(source, "smoke", table="3.1")
    corpus = lm.load_lm_corpus(source, config, progress=False)
    kn3 = kn.run_baseline(corpus, config, 3, results, progress=False)["summary"]
    text = lm_report.report(results, tmp_path / "figures")
    sections = text.split("### ")
    smoke = next(part for part in sections if "preset `smoke`" in part)
    cpu = next(part for part in sections if "preset `cpu`" in part)
    row = f"| KN3 (count-based) | {kn3['test_perplexity']:.2f} | 1 (no seeds) |"
    assert row in smoke and "KN3" not in cpu
    assert (results / "lm" / "synthetic" / "3.1" / "table.md").read_text() == text


def test_cli_corrupt_record_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(lm.DATA_ENV, raising=False)  # the synthetic corpus
    record = tmp_path / "kneser-ney" / "synthetic" / "kn3-max6000-min1.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"config": {"corpus": "synth')  # truncated
    args = ["--preset", "smoke", "--order", "3", "--results", str(tmp_path), "--quiet"]
    assert exit_status(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "kn3-max6000-min1.json" in err[0]
