"""The language models' inputs (thesis 2.2): windows and nearest-first prefixes built from a token
array (``window_inputs``), the scored positions of a part (``scored_targets``), and the
``keras.utils.PyDataset`` feeders ``TrainBatches`` (shuffled, reproducible per epoch) and
``ScoreBatches`` (in order). See ``model.py`` for the input layout."""

from __future__ import annotations

import keras
import numpy as np

from thesis_repro.lm.config import FIRST_TARGET

PAD_ID = 0


def window_inputs(
    tokens: np.ndarray,
    targets: np.ndarray,
    order: int,
    prefix: int = 0,
    starts: np.ndarray | None = None,
    bound: np.ndarray | None = None,
    boundary: int = PAD_ID,
) -> dict[str, np.ndarray]:
    """Model inputs for predicting ``tokens[t]`` for every ``t`` in ``targets`` (vectorised).

    ``window``: ``tokens[t-n+1 .. t-1]``; with ``prefix > 0`` also ``prefix``:
    ``tokens[t-n], tokens[t-n-1], ..., tokens[t-n-p+1]`` (nearest first), positions before 0
    padded with ``PAD_ID``, and ``prefix_length``: how many of them are real. A target ``t`` may
    equal ``len(tokens)`` (the word after the text), since only its context is read.

    ``starts`` (thesis 4.2, "sentence" prefixes): per token position ``k``, the first position
    a prefix ending at ``k`` may reach (``sentence_starts``); words before it are padding too,
    so the prefix is the history back to that point, at most ``prefix`` words.

    ``bound`` (sentence-bounded windows, issue 18): ``sentence_starts`` of ``tokens``; nothing
    before the sentence of the target is read. Window positions before the last ``boundary``
    token (``<eos>``) preceding ``t`` are filled with ``boundary`` itself, as an n-gram model
    pads a sentence's start with ``<s>``; prefix positions before it are padding. Without
    ``bound`` windows and prefixes run across sentence boundaries (the default, as the thesis
    does not say otherwise).
    """
    targets = np.asarray(targets, dtype=np.int64)
    if order < 2:
        raise ValueError(f"order must be at least 2, got {order}.")
    if targets.size and (targets.min() < order - 1 or targets.max() > len(tokens)):
        raise ValueError(
            f"targets must lie in [{order - 1}, {len(tokens)}] so that the {order - 1}-word "
            f"window exists, got [{targets.min()}, {targets.max()}]."
        )
    positions = targets[:, None] + np.arange(1 - order, 0)
    window = tokens[positions]
    sentence = np.asarray(bound)[targets - 1] if bound is not None else None
    if sentence is not None:
        window = np.where(positions < sentence[:, None], boundary, window)
    inputs = {"window": window.astype(np.int32, copy=False)}
    if prefix > 0:
        back = targets[:, None] - order - np.arange(prefix)
        real = back >= 0
        if starts is not None:
            first = np.asarray(starts)[np.maximum(targets - order, 0)]
            real &= back >= first[:, None]
        if sentence is not None:
            real &= back >= sentence[:, None]
        inputs["prefix"] = np.where(real, tokens[np.maximum(back, 0)], PAD_ID).astype(np.int32)
        inputs["prefix_length"] = real.sum(axis=1).astype(np.int32)
    return inputs


def sentence_starts(tokens: np.ndarray, boundary: int | None) -> np.ndarray:
    """Per position ``k``: the position of the last ``boundary`` token (``<eos>``) at or before
    ``k``, or 0 if there is none (thesis 4.2: the prefix "back to the previous ``<eos>``",
    boundary token included, so it is never empty). ``boundary=None``: all zeros."""
    positions = np.arange(len(tokens), dtype=np.int64)
    if boundary is None:
        return np.zeros(len(tokens), np.int64)
    marks = np.where(np.asarray(tokens) == boundary, positions, 0)
    return np.maximum.accumulate(marks) if len(marks) else marks


class TrainBatches(keras.utils.PyDataset):
    """Shuffled minibatches for epochs ``first_epoch .. epochs - 1`` as one Keras dataset.

    Batch ``k`` of epoch ``e`` takes the targets at ``permutation(e)[k*B:(k+1)*B]``, the
    permutation seeded by ``(seed, e)``: it depends only on (seed, e, k), so a resumed run sees
    exactly the batches it would have seen. Only full batches are used (``len // B`` per
    epoch). Windows are cut from the int32 token array by fancy indexing (``window_inputs``).
    Pass ``shuffle=False`` to ``fit``: Keras would otherwise shuffle the batch indices across
    all the epochs this dataset spans. ``first_step``: start inside ``first_epoch`` (a run
    resumed from a mid-epoch checkpoint).

    ``min_prefix > 0`` (thesis 4.2): each batch uses its own prefix length, uniform in
    ``min_prefix .. prefix`` and seeded by (seed, epoch, step) like the permutation; the batch
    is still ``prefix`` wide, the words beyond its length padded and masked. ``bound`` and
    ``boundary``: sentence-bounded windows (``window_inputs``).
    """

    def __init__(
        self,
        tokens: np.ndarray,
        targets: np.ndarray,
        order: int,
        prefix: int,
        batch_size: int,
        seed: int,
        first_epoch: int,
        epochs: int,
        min_prefix: int = 0,
        first_step: int = 0,
        bound: np.ndarray | None = None,
        boundary: int = PAD_ID,
    ) -> None:
        super().__init__()
        if min_prefix and not 1 <= min_prefix <= prefix:
            raise ValueError(f"min_prefix must lie in [1, prefix={prefix}], got {min_prefix}.")
        self.tokens, self.targets = tokens, np.asarray(targets, dtype=np.int64)
        self.order, self.prefix, self.batch_size = order, prefix, batch_size
        self.seed, self.first_epoch, self.epochs = seed, first_epoch, epochs
        self.min_prefix = min_prefix
        self.bound, self.boundary = bound, boundary
        self.steps_per_epoch = max(1, len(self.targets) // batch_size)
        if not 0 <= first_step < self.steps_per_epoch:
            raise ValueError(
                f"first_step must lie in [0, {self.steps_per_epoch}), got {first_step}."
            )
        self.first_step = first_step  # batches of first_epoch already trained (mid-epoch resume)
        self._cached: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.steps_per_epoch * max(0, self.epochs - self.first_epoch) - self.first_step

    def permutation(self, epoch: int) -> np.ndarray:
        """The order in which epoch ``epoch`` visits the targets (indices into ``targets``)."""
        cached = self._cached
        if cached is None or cached[0] != epoch:
            rng = np.random.default_rng([int(self.seed), 9973, int(epoch)])
            cached = (epoch, rng.permutation(len(self.targets)))
            self._cached = cached
        return cached[1]

    def batch_targets(self, index: int) -> np.ndarray:
        """Target positions of batch ``index`` (counted from batch ``first_step`` of
        ``first_epoch``)."""
        epoch, step = divmod(int(index) + self.first_step, self.steps_per_epoch)
        order = self.permutation(self.first_epoch + epoch)
        return self.targets[order[step * self.batch_size : (step + 1) * self.batch_size]]

    def batch_prefix(self, index: int) -> int:
        """Prefix length of batch ``index``: ``prefix``, or drawn in ``min_prefix .. prefix``."""
        if not self.min_prefix:
            return self.prefix
        epoch, step = divmod(int(index) + self.first_step, self.steps_per_epoch)
        rng = np.random.default_rng([int(self.seed), 7877, self.first_epoch + epoch, step])
        return int(rng.integers(self.min_prefix, self.prefix + 1))

    def __getitem__(self, index: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        chosen = self.batch_targets(index)
        x = window_inputs(
            self.tokens, chosen, self.order, self.prefix, bound=self.bound, boundary=self.boundary
        )
        if self.min_prefix:
            length = self.batch_prefix(index)
            x["prefix"][:, length:] = PAD_ID
            x["prefix_length"] = np.minimum(x["prefix_length"], length)
        return x, self.tokens[chosen]


class ScoreBatches(keras.utils.PyDataset):
    """All ``targets`` in order, for scoring; the last batch is padded with sample weight 0
    (every batch has one shape, so XLA compiles once). ``starts``, ``bound``, ``boundary``: see
    ``window_inputs``."""

    def __init__(
        self,
        tokens: np.ndarray,
        targets: np.ndarray,
        order: int,
        prefix: int,
        batch_size: int,
        starts: np.ndarray | None = None,
        bound: np.ndarray | None = None,
        boundary: int = PAD_ID,
    ) -> None:
        super().__init__()
        if len(targets) == 0:
            raise ValueError("no targets to score.")
        self.tokens, self.targets = tokens, np.asarray(targets, dtype=np.int64)
        self.order, self.prefix, self.batch_size = order, prefix, batch_size
        self.starts, self.bound, self.boundary = starts, bound, boundary

    def __len__(self) -> int:
        return -(-len(self.targets) // self.batch_size)

    def __getitem__(self, index: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        chosen = self.targets[index * self.batch_size : (index + 1) * self.batch_size]
        weight = np.ones(self.batch_size, np.float32)
        if len(chosen) < self.batch_size:
            weight[len(chosen) :] = 0.0
            chosen = np.concatenate([chosen, np.full(self.batch_size - len(chosen), chosen[-1])])
        x = window_inputs(
            self.tokens, chosen, self.order, self.prefix, self.starts, self.bound, self.boundary
        )
        return x, self.tokens[chosen], weight


def scored_targets(part_length: int, first_target: int = FIRST_TARGET) -> np.ndarray:
    """Positions whose word every model predicts: ``first_target .. part_length - 1``."""
    return np.arange(first_target, part_length, dtype=np.int64)
