"""The thesis's custom Keras layers: feed-forward attention pooling and the attention-gated LSTM.

- ``AttentionPooling``: Raffel & Ellis (2015) eq. 1; thesis 2.1.2 and 2.2.2.
- ``MeanPooling``: Raffel & Ellis eq. 2, the unweighted baseline.
- ``PrefixAttentionPooling``: attention over a language model's prefix, optionally aware of each
  word's distance (thesis 4.2).
- ``ChunkedFeedForwardPooling``: ``h_t = lrelu(W x_t + b)`` fused with attention or mean pooling,
  computed in chunks so that memory does not grow with T.
- ``scaled_sigmoid``: the gate non-linearity of thesis ch. 3, ``1.2*sigmoid(x) - 0.1``.
- ``AttentionGatedLSTMCell`` / ``AttentionGatedLSTM``: the LSTM of thesis 2.1.2 whose input gate
  receives an external attention energy e_t.
- ``sequence_mask``, ``masked_softmax``, ``LengthMask``: which steps of a padded batch count.
- ``leaky_relu`` (slope 0.01) and ``normal_fan_in``: the papers' non-linearity and initialisation.
- ``sparse_nll``: the language models' loss, -log p(next word), from logits.

Where they live: ``pooling`` (attention, mean and prefix pooling), ``fused_pooling`` (the chunked
layer and its TensorFlow/JAX kernels), ``gated_lstm`` (scaled sigmoid, gated LSTM), ``masking``
(masks, masked softmax), ``activations`` (leaky ReLU, initialiser), ``losses`` (``sparse_nll``);
``_common`` holds helpers the modules share. Import from ``thesis_repro.layers`` itself.

All layers are registered under the Keras package name ``thesis_repro`` (``PACKAGE``) so that
models using them save to and load from ``.keras`` files.
"""

from thesis_repro.layers._common import PACKAGE
from thesis_repro.layers.activations import LEAKY_SLOPE, leaky_relu, normal_fan_in
from thesis_repro.layers.fused_pooling import ChunkedFeedForwardPooling
from thesis_repro.layers.gated_lstm import (
    SCALED_SIGMOID_SCALE,
    SCALED_SIGMOID_SHIFT,
    AttentionGatedLSTM,
    AttentionGatedLSTMCell,
    scaled_sigmoid,
)
from thesis_repro.layers.losses import sparse_nll
from thesis_repro.layers.masking import LengthMask, masked_softmax, sequence_mask
from thesis_repro.layers.pooling import (
    POSITION_AWARE,
    AttentionPooling,
    MeanPooling,
    PrefixAttentionPooling,
)

__all__ = [
    "LEAKY_SLOPE",
    "PACKAGE",
    "POSITION_AWARE",
    "SCALED_SIGMOID_SCALE",
    "SCALED_SIGMOID_SHIFT",
    "AttentionGatedLSTM",
    "AttentionGatedLSTMCell",
    "AttentionPooling",
    "ChunkedFeedForwardPooling",
    "LengthMask",
    "MeanPooling",
    "PrefixAttentionPooling",
    "leaky_relu",
    "masked_softmax",
    "normal_fan_in",
    "scaled_sigmoid",
    "sequence_mask",
    "sparse_nll",
]
