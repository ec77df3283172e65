"""Tests for thesis_repro.tasks: every convention of SPEC section 2 checked on generated samples."""

from __future__ import annotations

import numpy as np
import pytest

from thesis_repro import tasks
from thesis_repro.tasks import (
    ACCURACY_TOLERANCE,
    BASELINE_MSE_THESIS_ADDITION,
    N_FEATURES,
    ORDERLESS_MAX_ACCURACY,
    TASKS,
    TEMPORAL_ORDER_CLASSES,
    TEMPORAL_ORDER_ORDERLESS_CLASSES,
    TEMPORAL_ORDER_SYMBOLS,
    Batch,
    accuracy,
    make_batch,
    orderless_accuracy_ceiling,
    orderless_loss_floor,
    raffel_addition,
    raffel_length_range,
    raffel_multiplication,
    temporal_order,
    temporal_order_orderless_labels,
    thesis_addition,
)

SEEDS = (0, 1, 2)
RAFFEL = {"addition": raffel_addition, "multiplication": raffel_multiplication}


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def check_padding(batch: Batch) -> None:
    """Mask matches lengths and every channel is zero beyond each length."""
    n, t = batch.x.shape[:2]
    assert batch.mask.shape == (n, t)
    assert batch.mask.dtype == np.bool_
    np.testing.assert_array_equal(batch.mask.sum(axis=1), batch.lengths)
    np.testing.assert_array_equal(batch.mask, np.arange(t)[None, :] < batch.lengths[:, None])
    assert not np.any(batch.x[~batch.mask])


# ------------------------------------------------------------------------------------ general


def test_task_registry() -> None:
    assert set(TASKS) == {"thesis_addition", "addition", "multiplication", "temporal_order"}
    assert TASKS["addition"] is raffel_addition
    assert TASKS["multiplication"] is raffel_multiplication
    assert TASKS["thesis_addition"] is thesis_addition
    assert TASKS["temporal_order"] is temporal_order
    assert BASELINE_MSE_THESIS_ADDITION == pytest.approx(1 / 6)
    assert ACCURACY_TOLERANCE == 0.04
    assert TEMPORAL_ORDER_CLASSES == ("XX", "XY", "YX", "YY")


@pytest.mark.parametrize("name", sorted(TASKS))
@pytest.mark.parametrize("seed", SEEDS)
def test_shapes_dtypes_padding(name: str, seed: int) -> None:
    batch = make_batch(name, rng(seed), 500, 30, 40)
    assert batch.x.shape == (500, 40, N_FEATURES[name])
    assert batch.x.dtype == np.float32
    assert batch.lengths.shape == (500,)
    assert batch.lengths.dtype == np.int32
    assert batch.y.shape == (500,)
    assert batch.y.dtype == (np.int32 if name == "temporal_order" else np.float32)
    check_padding(batch)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_lengths_uniform_inclusive(name: str) -> None:
    batch = make_batch(name, rng(3), 3000, 30, 34)
    assert set(batch.lengths.tolist()) == set(range(30, 35))
    counts = np.bincount(batch.lengths - 30, minlength=5)
    assert np.all(np.abs(counts / 3000 - 0.2) < 0.04)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_pad_to(name: str) -> None:
    batch = make_batch(name, rng(4), 200, 30, 34, pad_to=50)
    assert batch.x.shape == (200, 50, N_FEATURES[name])
    assert batch.lengths.min() >= 30
    assert batch.lengths.max() <= 34
    check_padding(batch)
    assert not np.any(batch.x[:, 34:])


@pytest.mark.parametrize("name", sorted(TASKS))
def test_determinism(name: str) -> None:
    a = make_batch(name, rng(7), 100, 30, 40)
    b = make_batch(name, rng(7), 100, 30, 40)
    c = make_batch(name, rng(8), 100, 30, 40)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.lengths, b.lengths)
    assert not np.array_equal(a.x, c.x)
    assert not np.array_equal(a.y, c.y)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_make_batch_matches_direct_call(name: str) -> None:
    a = make_batch(name, rng(5), 50, 30, 40, pad_to=45)
    b = TASKS[name](rng(5), 50, min_length=30, max_length=40, pad_to=45)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)


def test_default_max_length() -> None:
    # Raffel tasks: None -> ceil(1.1 * min_length); thesis/temporal order: None -> min_length.
    for name in ("addition", "multiplication"):
        batch = make_batch(name, rng(1), 2000, 50)
        assert batch.x.shape[1] == 55
        assert set(batch.lengths.tolist()) == set(range(50, 56))
    for name in ("thesis_addition", "temporal_order"):
        batch = make_batch(name, rng(1), 100, 60)
        assert batch.x.shape[1] == 60
        assert np.all(batch.lengths == 60)
    assert np.all(thesis_addition(rng(1), 10, 40, None).lengths == 40)
    # thesis_addition's own defaults: lengths 500..550 (thesis 3.1).
    batch = thesis_addition(rng(1), 300)
    assert batch.x.shape[1] == 550
    assert batch.lengths.min() >= 500
    assert batch.lengths.max() <= 550
    assert batch.lengths.min() < 510
    assert batch.lengths.max() > 540
    # temporal_order default: fixed length 100.
    assert np.all(temporal_order(rng(1), 5).lengths == 100)


def test_raffel_length_range() -> None:
    assert raffel_length_range(50) == (50, 55)
    assert raffel_length_range(100) == (100, 110)
    assert raffel_length_range(500) == (500, 550)
    assert raffel_length_range(1000) == (1000, 1100)
    assert raffel_length_range(10000) == (10000, 11000)
    assert raffel_length_range(51) == (51, 57)  # ceil(56.1)
    assert raffel_length_range(11) == (11, 13)  # ceil(12.1)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("name", sorted(TASKS))
def test_value_errors(name: str) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        make_batch(name, rng(), 0, 30)
    with pytest.raises(ValueError, match="min_length"):
        make_batch(name, rng(), 4, 1)
    with pytest.raises(ValueError, match="max_length"):
        make_batch(name, rng(), 4, 30, 29)
    with pytest.raises(ValueError, match="pad_to"):
        make_batch(name, rng(), 4, 30, 40, pad_to=39)
    with pytest.raises(TypeError, match="Generator"):
        make_batch(name, 0, 4, 30)  # type: ignore[arg-type]
    # Boundary values are accepted.
    make_batch(name, rng(), 1, 30, 30, pad_to=30)


def test_task_specific_min_lengths() -> None:
    thesis_addition(rng(), 10, 2, 2)
    with pytest.raises(ValueError, match="min_length"):
        thesis_addition(rng(), 10, 1, 2)
    raffel_addition(rng(), 10, 11)
    with pytest.raises(ValueError, match="min_length"):
        raffel_addition(rng(), 10, 10)
    with pytest.raises(ValueError, match="min_length"):
        raffel_multiplication(rng(), 10, 10, 20)
    temporal_order(rng(), 10, 10)
    with pytest.raises(ValueError, match="min_length"):
        temporal_order(rng(), 10, 9, 20)


def test_unknown_task_lists_valid_names() -> None:
    with pytest.raises(ValueError) as info:
        make_batch("adding", rng(), 4, 30)
    message = str(info.value)
    for name in TASKS:
        assert name in message


# ----------------------------------------------------------------------- thesis addition (2.1)


@pytest.mark.parametrize("seed", SEEDS)
def test_thesis_addition_markers_and_target(seed: int) -> None:
    batch = thesis_addition(rng(seed), 500, 20, 41, pad_to=45)
    values, markers = batch.x[..., 0], batch.x[..., 1]
    real = batch.mask
    assert set(np.unique(markers).tolist()) <= {0.0, 1.0}
    assert np.all(values[real] >= 0.0)
    assert np.all(values[real] < 1.0)
    for i, length in enumerate(batch.lengths):
        marked = np.flatnonzero(markers[i])
        assert marked.size == 2
        assert 0 <= marked[0] < length // 2 <= marked[1] < length
        expected = np.float64(values[i, marked[0]]) + values[i, marked[1]]
        assert batch.y[i] == pytest.approx(expected, abs=1e-6)


def test_thesis_addition_marker_positions_cover_each_half() -> None:
    for length in (20, 21):
        batch = thesis_addition(rng(length), 2000, length, length)
        first = np.argmax(batch.x[..., 1], axis=1)
        second = length - 1 - np.argmax(batch.x[:, ::-1, 1], axis=1)
        assert set(first.tolist()) == set(range(length // 2))
        assert set(second.tolist()) == set(range(length // 2, length))


def test_thesis_addition_baseline_mse() -> None:
    batch = thesis_addition(rng(11), 20000, 10, 12)
    # Var(U1 + U2) = 1/6 for U[0, 1]; U[-1, 1] values would give 2/3, one value 1/12.
    assert np.var(batch.y) == pytest.approx(BASELINE_MSE_THESIS_ADDITION, abs=0.01)
    assert np.mean(batch.y) == pytest.approx(1.0, abs=0.01)
    assert np.mean((batch.y - 1.0) ** 2) == pytest.approx(1 / 6, abs=0.01)


# ---------------------------------------------------------- Raffel addition / multiplication


@pytest.mark.parametrize("name", sorted(RAFFEL))
@pytest.mark.parametrize("seed", SEEDS)
def test_raffel_markers(name: str, seed: int) -> None:
    batch = RAFFEL[name](rng(seed), 500, 30, 60, pad_to=64)
    markers = batch.x[..., 1]
    assert set(np.unique(markers).tolist()) <= {-1.0, 0.0, 1.0}
    for i, length in enumerate(batch.lengths):
        row = markers[i, :length]
        assert np.flatnonzero(row == -1).tolist() == [0, length - 1]
        plus = np.flatnonzero(row == 1)
        assert plus.size == 2
        assert np.count_nonzero(row) == 4
        # One +1 at N_1 in 1..9, the other at N_2 in 1..L//2-2 (before the midpoint), distinct.
        p, q = plus
        half = length // 2 - 2
        assert (1 <= p <= 9 and 1 <= q <= half) or (1 <= q <= 9 and 1 <= p <= half)


def _marked_steps(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (first, second) +1 steps of each sequence."""
    plus = batch.x[..., 1] == 1
    first = np.argmax(plus, axis=1)
    second = batch.x.shape[1] - 1 - np.argmax(plus[:, ::-1], axis=1)
    assert np.all(first < second)
    return first, second


def test_raffel_index_ranges_exact() -> None:
    # Fixed L = 40: N_1 in {1..9}, N_2 in {1..18} = range(1, int(40/2 - 1)), N_2 != N_1.
    length = 40
    batch = raffel_addition(rng(21), 20000, length, length)
    first, second = _marked_steps(batch)
    assert first.min() == 1
    assert second.max() == length // 2 - 2
    assert set(first.tolist()) == set(range(1, 10))
    assert set(second.tolist()) == set(range(2, 19))


def test_raffel_n2_uniform_excluding_n1() -> None:
    # N_1 uniform on {1..9}, N_2 uniform on {1..18} minus {N_1} (L = 40). Raffel's later variant
    # (N_2 uniform on {1..18}, then N_2 == N_1 -> N_1 + 1) makes adjacent pairs much likelier:
    # P(|N_1 - N_2| == 1) = 1/9 here versus 13/81 for that variant.
    length = 40
    expected = sum(abs(a - b) == 1 for a in range(1, 10) for b in set(range(1, 19)) - {a}) / (
        9 * 17
    )
    assert expected == pytest.approx(1 / 9)
    first, second = _marked_steps(raffel_addition(rng(22), 20000, length, length))
    assert np.mean(second - first == 1) == pytest.approx(expected, abs=0.012)
    # Unordered pair {1, 2}: (1/9)(1/17) * 2 under uniform exclusion.
    assert np.mean((first == 1) & (second == 2)) == pytest.approx(2 / 153, abs=0.004)


def test_raffel_short_sequences() -> None:
    batch = raffel_multiplication(rng(23), 3000, 11, 21)
    for i, length in enumerate(batch.lengths):
        row = batch.x[i, :length, 1]
        plus = np.flatnonzero(row == 1)
        assert plus.size == 2
        assert row[0] == -1
        assert row[length - 1] == -1
        assert plus.min() >= 1
        assert plus.min() <= 9
        assert plus.max() <= max(9, length // 2 - 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_raffel_addition_values_and_target(seed: int) -> None:
    batch = raffel_addition(rng(seed), 500, 50)
    values = batch.x[..., 0]
    real = batch.mask
    assert np.all(values[real] >= -1.0)
    assert np.all(values[real] < 1.0)
    assert values[real].min() < -0.99
    assert values[real].max() > 0.99
    first, second = _marked_steps(batch)
    rows = np.arange(500)
    x1 = values[rows, first].astype(np.float64)
    x2 = values[rows, second].astype(np.float64)
    np.testing.assert_allclose(batch.y, 0.5 + (x1 + x2) / 4.0, atol=1e-6)
    assert np.all((batch.y >= 0.0) & (batch.y <= 1.0))


@pytest.mark.parametrize("seed", SEEDS)
def test_raffel_multiplication_values_and_target(seed: int) -> None:
    batch = raffel_multiplication(rng(seed), 500, 50)
    values = batch.x[..., 0]
    real = batch.mask
    assert np.all(values[real] >= 0.0)
    assert np.all(values[real] < 1.0)
    assert values[real].max() > 0.99
    first, second = _marked_steps(batch)
    rows = np.arange(500)
    expected = values[rows, first].astype(np.float64) * values[rows, second]
    np.testing.assert_allclose(batch.y, expected, atol=1e-7)
    # E[U1 * U2] = 1/4 for independent U[0, 1].
    big = raffel_multiplication(rng(seed), 20000, 11, 12)
    assert np.mean(big.y) == pytest.approx(0.25, abs=0.01)


# ---------------------------------------------------------------------------- temporal order


@pytest.mark.parametrize("seed", SEEDS)
def test_temporal_order_sequences(seed: int) -> None:
    batch = temporal_order(rng(seed), 500, 20, 130, pad_to=140)
    assert TEMPORAL_ORDER_SYMBOLS == ("a", "b", "c", "d", "X", "Y")
    real = batch.mask
    assert np.all(batch.x.sum(axis=-1)[real] == 1.0)  # one-hot on real steps
    symbols = np.argmax(batch.x, axis=-1)
    for i, length in enumerate(batch.lengths):
        relevant = np.flatnonzero(symbols[i, :length] >= 4)
        assert relevant.size == 2
        t1, t2 = relevant
        assert length // 10 <= t1 < (2 * length) // 10
        assert length // 2 <= t2 < (6 * length) // 10
        label = 2 * (symbols[i, t1] == 5) + (symbols[i, t2] == 5)
        assert batch.y[i] == label
        names = "".join(TEMPORAL_ORDER_SYMBOLS[s] for s in (symbols[i, t1], symbols[i, t2]))
        assert TEMPORAL_ORDER_CLASSES[batch.y[i]] == names


def test_temporal_order_distributions() -> None:
    batch = temporal_order(rng(31), 4000, 100)
    symbols = np.argmax(batch.x, axis=-1)
    relevant = symbols >= 4
    t1 = np.argmax(relevant, axis=1)
    t2 = 99 - np.argmax(relevant[:, ::-1], axis=1)
    assert set(t1.tolist()) == set(range(10, 20))
    assert set(t2.tolist()) == set(range(50, 60))
    # Classes are equiprobable; distractors a-d are equiprobable.
    assert np.all(np.abs(np.bincount(batch.y, minlength=4) / 4000 - 0.25) < 0.03)
    distract = symbols[~relevant]
    assert distract.max() <= 3
    assert np.all(np.abs(np.bincount(distract, minlength=4) / distract.size - 0.25) < 0.01)


def test_orderless_helpers() -> None:
    assert TEMPORAL_ORDER_ORDERLESS_CLASSES == ("XX", "XY|YX", "YY")
    labels = np.array([0, 1, 2, 3, 1], dtype=np.int32)
    np.testing.assert_array_equal(temporal_order_orderless_labels(labels), [0, 1, 1, 2, 1])
    assert orderless_accuracy_ceiling(labels) == pytest.approx(4 / 5)
    assert orderless_accuracy_ceiling(np.array([1, 2])) == pytest.approx(0.5)
    batch = temporal_order(rng(32), 4000, 20)
    assert orderless_accuracy_ceiling(batch.y) == pytest.approx(ORDERLESS_MAX_ACCURACY, abs=0.02)
    with pytest.raises(ValueError):
        temporal_order_orderless_labels(np.array([4]))
    with pytest.raises(ValueError):
        orderless_accuracy_ceiling(np.array([0, 5]))


def test_orderless_loss_floor_is_the_best_order_blind_cross_entropy() -> None:
    """Against a brute-force search over order-blind predictors: certain on XX and YY, and one
    probability q of XY (1 - q of YX) for every mixed sequence."""
    for labels in (np.array([0, 1, 2, 3, 1]), np.array([1, 2]), np.array([0, 3, 3])):
        q = np.linspace(1e-6, 1 - 1e-6, 100001)
        n_xy, n_yx = np.sum(labels == 1), np.sum(labels == 2)
        losses = -(n_xy * np.log(q) + n_yx * np.log(1 - q)) / labels.size
        assert orderless_loss_floor(labels) == pytest.approx(losses.min(), abs=1e-6)
    assert orderless_loss_floor(np.array([1, 2])) == pytest.approx(np.log(2))
    batch = temporal_order(rng(33), 4000, 20)
    assert orderless_loss_floor(batch.y) == pytest.approx(np.log(2) / 2, abs=0.02)
    with pytest.raises(ValueError):
        orderless_loss_floor(np.array([0, 4]))


# ----------------------------------------------------------------------------------- accuracy


def test_accuracy() -> None:
    target = np.array([0.5, 0.5, 0.5, 0.5])
    pred = np.array([0.5, 0.539, 0.461, 0.541])
    assert accuracy(pred, target) == pytest.approx(0.75)
    assert accuracy(pred.reshape(-1, 1), target) == pytest.approx(0.75)
    assert accuracy(pred, target, tol=0.01) == pytest.approx(0.25)
    # Strict inequality: an error of exactly tol is wrong (0.0 and 0.5 are exact in binary).
    assert accuracy(np.array([0.0]), np.array([0.5]), tol=0.5) == 0.0
    assert accuracy(np.array([0.0]), np.array([0.25]), tol=0.5) == 1.0
    assert isinstance(accuracy(pred, target), float)
    with pytest.raises(ValueError):
        accuracy(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        accuracy(np.zeros(0), np.zeros(0))


def test_module_does_not_use_global_numpy_state() -> None:
    np.random.seed(0)  # noqa: NPY002
    before = np.random.random()  # noqa: NPY002
    np.random.seed(0)  # noqa: NPY002
    for name in TASKS:
        make_batch(name, rng(), 10, 30)
    assert np.random.random() == before  # noqa: NPY002
    assert tasks.__all__  # public API declared
