"""Independent NumPy implementations of the papers' equations, used as test oracles.

Written straight from the equations, one sequence and one step at a time, without sharing code
with ``thesis_repro``.
"""

from __future__ import annotations

import numpy as np


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def thesis_gate(x: np.ndarray) -> np.ndarray:
    """Thesis ch. 3: sigmoid replaced by 1.2*sigmoid(x) - 0.1."""
    return 1.2 * sigmoid(x) - 0.1


def attention_pool(h: np.ndarray, w: np.ndarray, b: float, length: int | None = None):
    """Raffel & Ellis eq. 1 for one sequence h (T, D): c, alpha, e over its first length steps."""
    h = np.asarray(h, dtype=np.float64)[: length if length is not None else len(h)]
    e = np.tanh(h @ np.asarray(w, np.float64).reshape(-1) + b)
    alpha = np.exp(e - e.max())
    alpha = alpha / alpha.sum()
    c = (alpha[:, None] * h).sum(axis=0)
    return c, alpha, e


def mean_pool(h: np.ndarray, length: int | None = None) -> np.ndarray:
    """Raffel & Ellis eq. 2 for one sequence: c = (1/T) sum_t h_t."""
    h = np.asarray(h, dtype=np.float64)[: length if length is not None else len(h)]
    return h.mean(axis=0)


def gated_lstm(x, e, kernel, recurrent_kernel, bias, gate=thesis_gate, length=None):
    """Thesis 2.1.2 LSTM for one sequence x (T, F) with energies e (T,).

    Weights in Keras layout: columns in blocks (i, f, g, o). Returns all hidden states (T', U).
    """
    x = np.asarray(x, np.float64)
    e = np.asarray(e, np.float64)
    steps = len(x) if length is None else length
    units = recurrent_kernel.shape[0]

    def blocks(m):
        return [np.asarray(m, np.float64)[..., k * units : (k + 1) * units] for k in range(4)]

    W_xi, W_xf, W_xg, W_xo = blocks(kernel)
    W_hi, W_hf, W_hg, W_ho = blocks(recurrent_kernel)
    b_i, b_f, b_g, b_o = blocks(bias)
    h = np.zeros(units)
    c = np.zeros(units)
    states = []
    for t in range(steps):
        f = gate(W_hf.T @ h + W_xf.T @ x[t] + b_f)
        i = gate(W_hi.T @ h + W_xi.T @ x[t] + b_i + e[t])
        o = gate(W_ho.T @ h + W_xo.T @ x[t] + b_o)
        g = np.tanh(W_hg.T @ h + W_xg.T @ x[t] + b_g)
        c = f * c + i * g
        h = o * np.tanh(c)
        states.append(h)
    return np.array(states)
