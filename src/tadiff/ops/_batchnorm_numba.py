"""Batch normalization's per-channel passes as fused loops, compiled with Numba.

Imported only through :mod:`tadiff.ops.batchnorm_passes` when Numba is installed. Every loop
reads rows ``(N, C, L)`` (a C-contiguous view of ``(N, C, *spatial)``) and visits channel
``c`` as ``N`` contiguous runs of ``L`` values. Sums accumulate in float64 whatever the input
dtype, so float32 statistics of a large batch keep float64's accuracy.

NumPy needs a pass over the batch for each term of these formulas, and NumPy's loops broadcast
a per-channel value along a row at about 2.5x the cost of a same-shape operation; one compiled
loop computes each formula in one pass. ``fastmath`` allows reassociation and contraction only
(so the sums vectorize), never assumptions about infinities or NaN.
"""

from __future__ import annotations

import numba
import numpy as np

_FAST = {"reassoc", "contract"}
_jit = numba.njit(cache=True, fastmath=_FAST, error_model="numpy", nogil=True)


@_jit
def mean_and_variance(rows, mean, variance):
    """Per channel of ``rows (N, C, L)``: the mean and the biased variance (two passes over
    the channel, the second around the mean), into float64 ``mean`` and ``variance (C,)``."""
    n_rows, channels, length = rows.shape
    count = n_rows * length
    for c in range(channels):
        total = 0.0
        for n in range(n_rows):
            for i in range(length):
                total += np.float64(rows[n, c, i])
        m = total / count
        squares = 0.0
        for n in range(n_rows):
            for i in range(length):
                d = np.float64(rows[n, c, i]) - m
                squares += d * d
        mean[c] = m
        variance[c] = squares / count


@_jit
def shift_and_scale(rows, mean, scale, shift, out):
    """``out = (rows - mean) * scale + shift`` per channel; ``mean``, ``scale``, ``shift`` of
    the rows' dtype, shape ``(C,)``."""
    n_rows, channels, length = rows.shape
    for n in range(n_rows):
        for c in range(channels):
            m, s, t = mean[c], scale[c], shift[c]
            for i in range(length):
                out[n, c, i] = (rows[n, c, i] - m) * s + t


@_jit
def gradient_sums(grad, rows, mean, sum_grad, dot):
    """Per channel: ``sum(grad)`` and ``sum(grad * (rows - mean))`` into float64 ``(C,)``
    arrays; ``mean`` of the rows' dtype."""
    n_rows, channels, length = rows.shape
    for c in range(channels):
        m = np.float64(mean[c])
        total = 0.0
        weighted = 0.0
        for n in range(n_rows):
            for i in range(length):
                g = np.float64(grad[n, c, i])
                total += g
                weighted += g * (np.float64(rows[n, c, i]) - m)
        sum_grad[c] = total
        dot[c] = weighted


@_jit
def input_gradient(grad, rows, mean, a, b, k, out):
    """``out = a * grad + b * (rows - mean) + k`` per channel; every ``(C,)`` array of the
    rows' dtype."""
    n_rows, channels, length = rows.shape
    for n in range(n_rows):
        for c in range(channels):
            m, ac, bc, kc = mean[c], a[c], b[c], k[c]
            for i in range(length):
                out[n, c, i] = ac * grad[n, c, i] + bc * (rows[n, c, i] - m) + kc
