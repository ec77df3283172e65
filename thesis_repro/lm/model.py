"""Feed-forward language models of thesis 2.2: Bengio et al.'s n-gram network and its extension
with an attention-compressed prefix.

- ``bengio_lm`` (thesis 2.2.1, Bengio et al. 2003): the n-1 words before the target are embedded
  with ``E``, concatenated into ``m``, ``h = relu(W_mh m + b_mh)``, logits ``l = W_hl h + b_hl``,
  softmax over the vocabulary.
- ``attention_lm`` (thesis 2.2.2): the p words before that window (the "prefix") are embedded
  with the same ``E``, ``h_i = relu(W_wh E(w_i) + b_wh)``, ``e_i = tanh(W_hc h_i + b_hc)``,
  ``alpha = softmax(e)``, ``c = sum_i alpha_i h_i`` (``layers.AttentionPooling``), and
  ``m = (c, E(w_{t-n+2}), ..., E(w_t))`` goes through the same head.

Layer names are the thesis's matrix names: ``E`` (embedding), ``W_wh``, ``attention`` (whose
kernel and bias are ``W_hc``, ``b_hc``), ``W_mh``, ``W_hl``. Keras stores a ``Dense`` kernel as
the transpose of the thesis's matrix (``m @ kernel == W_mh m``). Weight decay (thesis 3.2.2) is
an L2 term ``weight_decay * ||W||^2`` on the kernels of ``W_mh`` and ``W_hl`` only, added to the
loss by Keras (``keras.regularizers.L2``; the other convention, ``(weight_decay / 2) ||W||^2``,
is ``weight_decay=5e-6``). The thesis gives no initialisation for this model: Keras defaults
are used (``E`` uniform in [-0.05, 0.05], Glorot-uniform kernels, zero biases).

Inputs (``window_inputs`` builds them from a token array): ``window`` (batch, n-1) int32, the
window in reading order; for the attention model also ``prefix`` (batch, T) int32, nearest word
first (``prefix[:, 0]`` is the word just before the window, ``prefix[:, j]`` is ``j`` words
further back), and ``prefix_length`` (batch,) int32. Prefix positions before the start of the
text are padded with id 0 and masked: ``prefix_length`` counts only real words, so a padded
prefix gives exactly the output of the shorter prefix. Plain attention does not see word order,
so nearest-first ordering only serves to put the padding at the end, where ``lengths`` masks it.
``batches.TrainBatches`` (shuffled, reproducible per epoch) and ``batches.ScoreBatches`` (in
order) feed ``model.fit``/``model.evaluate`` with such inputs.

Future work of thesis 4.2, both as options of the same model:

- Prefix-length generalisation: the ``prefix`` input has a variable length T (shape
  ``(batch, None)``), so a model trained with p words is evaluated with any other number of
  prefix words, or with the whole history back to the previous ``<eos>`` (``window_inputs(...,
  starts=sentence_starts(tokens, eos_id))``), with the same weights. ``p``, the trained prefix,
  is kept in the attention layer's config (``model_shape``). ``TrainBatches(min_prefix=k)``
  trains with a prefix length drawn uniformly in ``k..p`` for every minibatch (padded to p and
  masked through ``prefix_length``).
- Position awareness: ``language_model(..., position_aware="bias"|"embedding")`` tells the
  attention which prefix word is how far back (``PrefixAttentionPooling``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from thesis_repro.layers import PrefixAttentionPooling, sparse_nll
from thesis_repro.lm.batches import window_inputs
from thesis_repro.lm.config import EMBEDDING_DIM, HIDDEN, VARIANTS, WEIGHT_DECAY, RunConfig
from thesis_repro.training import dtype_policy, inverse_time_schedule

DECAYED_LAYERS = ("W_mh", "W_hl")  # the only weights with weight decay


def _head(
    m: keras.KerasTensor, vocab_size: int, hidden: int, weight_decay: float
) -> keras.KerasTensor:
    """``h = relu(W_mh m + b_mh)``, ``l = W_hl h + b_hl`` (thesis 2.2.1); returns the logits."""
    decay = keras.regularizers.L2(weight_decay) if weight_decay else None
    w_mh, w_hl = DECAYED_LAYERS
    h = keras.layers.Dense(hidden, "relu", kernel_regularizer=decay, name=w_mh)(m)
    return keras.layers.Dense(vocab_size, kernel_regularizer=decay, name=w_hl)(h)


def bengio_lm(
    vocab_size: int,
    order: int = 5,
    embedding_dim: int = EMBEDDING_DIM,
    hidden: int = HIDDEN,
    weight_decay: float = WEIGHT_DECAY,
    name: str | None = None,
) -> keras.Model:
    """Bengio et al. feed-forward LM of order n (thesis 2.2.1); outputs logits (batch, V).

    ``m = (E(w_1), ..., E(w_{n-1}))`` concatenated in reading order, ``h = relu(W_mh m + b)``,
    ``l = W_hl h + b``; ``P(w_n = i | w_1..w_{n-1}) = softmax(l)_i``.
    """
    return language_model(vocab_size, order, 0, embedding_dim, hidden, weight_decay, name)


def attention_lm(
    vocab_size: int,
    order: int = 5,
    prefix: int = 5,
    embedding_dim: int = EMBEDDING_DIM,
    hidden: int = HIDDEN,
    weight_decay: float = WEIGHT_DECAY,
    name: str | None = None,
    position_aware: str = "none",
) -> keras.Model:
    """The attention-prefix LM of thesis 2.2.2: an n-gram window plus a p-word prefix.

    ``h_i = relu(W_wh E(w_i) + b_wh)`` over the prefix (``W_wh`` is S x S),
    ``e_i = tanh(W_hc h_i + b_hc)``, ``alpha = softmax(e)`` over the real prefix words,
    ``c = sum_i alpha_i h_i``; ``m = (c, E(w_{t-n+2}), ..., E(w_t))`` then goes through the
    head of 2.2.1, so ``W_mh`` is H x nS. The prefix input takes any length (p is the trained
    one); ``position_aware``: see ``PrefixAttentionPooling`` (thesis 4.2).
    """
    if prefix < 1:
        raise ValueError(f"prefix must be at least 1 for the attention model, got {prefix}.")
    return language_model(
        vocab_size, order, prefix, embedding_dim, hidden, weight_decay, name, position_aware
    )


def language_model(
    vocab_size: int,
    order: int = 5,
    prefix: int = 0,
    embedding_dim: int = EMBEDDING_DIM,
    hidden: int = HIDDEN,
    weight_decay: float = WEIGHT_DECAY,
    name: str | None = None,
    position_aware: str = "none",
) -> keras.Model:
    """``bengio_lm`` when ``prefix == 0``, else ``attention_lm`` (thesis 2.2.1 / 2.2.2)."""
    if order < 2:
        raise ValueError(f"order must be at least 2 (n-1 >= 1 context words), got {order}.")
    if prefix < 0:
        raise ValueError(f"prefix must be >= 0, got {prefix}.")
    if position_aware != "none" and not prefix:
        raise ValueError("position_aware needs an attention model (prefix >= 1).")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2, got {vocab_size}.")
    window = keras.Input((order - 1,), dtype="int32", name="window")
    embed = keras.layers.Embedding(vocab_size, embedding_dim, name="E")
    m = keras.layers.Reshape(((order - 1) * embedding_dim,), name="window_features")(embed(window))
    inputs = {"window": window}
    if prefix:
        words = keras.Input((None,), dtype="int32", name="prefix")  # any length (thesis 4.2)
        lengths = keras.Input((), dtype="int32", name="prefix_length")
        h = keras.layers.Dense(embedding_dim, "relu", name="W_wh")(embed(words))
        attention = PrefixAttentionPooling(
            prefix, position_aware, return_attention=True, name="attention"
        )
        c, _, _ = attention(h, lengths=lengths)
        m = keras.layers.Concatenate(name="m")([c, m])
        inputs.update(prefix=words, prefix_length=lengths)
    logits = _head(m, vocab_size, hidden, weight_decay)
    default = f"{order}gram" + (f"_prefix{prefix}" if prefix else "")
    default += f"_{position_aware}" if position_aware != "none" else ""
    return keras.Model(inputs, logits, name=name or default)


def model_shape(model: keras.Model) -> tuple[int, int]:
    """``(order, prefix)`` of a model built by ``language_model``; ``prefix`` is the trained
    prefix length (the attention layer's)."""
    shapes = {t.name.split(":")[0]: t.shape for t in model.inputs}
    order = int(shapes["window"][1]) + 1
    if "prefix" not in shapes:
        return order, 0
    return order, model.get_layer("attention").prefix


def position_awareness(model: keras.Model) -> str:
    """``"none"``, ``"bias"`` or ``"embedding"``: how the model's attention sees distance."""
    try:
        attention = model.get_layer("attention")
    except ValueError:
        return "none"
    return getattr(attention, "position_aware", "none")


@dataclass(frozen=True)
class PrefixAttention:
    """Attention over one window's prefix: ``positions`` (oldest first) and their ``weights``."""

    target: int
    positions: np.ndarray
    weights: np.ndarray


def prefix_attention(
    model: keras.Model, ids: np.ndarray, prefix: int | None = None
) -> list[PrefixAttention]:
    """Attention weights of every window's prefix in the sentence ``ids`` (thesis 3.2.4).

    For each target position ``t`` with at least one prefix word (``order <= t <= len(ids)``;
    ``t = len(ids)`` predicts the word after the sentence), returns the prefix word positions
    in reading order and their weights alpha (summing to 1). Words of a sentence shorter than
    the prefix are simply absent (masked), as at the start of a corpus part. ``prefix``: how
    many prefix words to give the model (default: its trained prefix; thesis 4.2).
    """
    order, trained = model_shape(model)
    if trained == 0:
        raise ValueError("prefix_attention needs an attention LM (a model with a prefix input).")
    prefix = prefix or trained
    ids = np.asarray(ids, dtype=np.int32)
    targets = np.arange(order, len(ids) + 1)
    if targets.size == 0:
        return []
    alpha_model = keras.Model(model.inputs, model.get_layer("attention").output[1])
    alpha = np.asarray(alpha_model.predict(window_inputs(ids, targets, order, prefix), verbose=0))
    results = []
    for t, row in zip(targets.tolist(), alpha, strict=True):
        count = min(prefix, t - order + 1)
        positions = t - order - np.arange(count)  # nearest first, as fed to the model
        results.append(PrefixAttention(t, positions[::-1].copy(), row[:count][::-1].copy()))
    return results


def build_model(config: RunConfig, vocab_size: int, jit_compile: bool = True) -> Any:
    """The compiled model of a run: thesis 2.2 network, SGD of thesis 3.2.2; its layers use
    ``config.dtype_policy`` (``layers.sparse_nll`` computes the loss in float32 whatever the
    logits' dtype; Keras wraps the optimizer in loss scaling for ``mixed_float16``)."""

    variant = VARIANTS[config.variant]
    with dtype_policy(config.dtype_policy):
        model = language_model(
            vocab_size,
            config.order,
            config.prefix,
            config.embedding_dim,
            config.hidden,
            config.weight_decay,
            position_aware=config.position_aware,
        )
    model.compile(
        optimizer=keras.optimizers.SGD(
            inverse_time_schedule(variant.eps0, variant.decay), momentum=variant.momentum
        ),
        loss=sparse_nll,
        weighted_metrics=[keras.metrics.MeanMetricWrapper(sparse_nll, name="nll")],
        jit_compile=jit_compile,
    )
    return model
