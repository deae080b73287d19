"""Batch normalization's passes over the batch: fused compiled loops where Numba is installed.

Training-mode batch normalization of rows ``(N, C, L)`` reads the batch for its statistics,
again to normalize it, and twice in its backward (two sums, then the input gradient). With
NumPy each term of those formulas is a pass of its own (seven in the backward), and a
per-channel value broadcast along the rows costs NumPy about 2.5x a same-shape operation. With
Numba installed (``pip install tadiff[numba]``), batches of at least :data:`FUSED_MIN_SIZE`
values run each formula as one compiled loop, as torch's fused kernels do; smaller ones, other
dtypes and non-contiguous arrays keep the NumPy passes. The two paths agree to rounding (the
loops sum in float64 for float32 inputs too).

The loops compile on their first use on a machine, per dtype, into Numba's disk cache; a later
process loads them from there on its first batch normalization (under a second).

Example:
    >>> import numpy as np
    >>> from tadiff.ops.batchnorm_passes import training_forward
    >>> rows = np.arange(8.0).reshape(2, 2, 2)   # (N, C, L)
    >>> out, mean, variance, inv = training_forward(rows, None, None, eps=0.0)
    >>> mean.tolist(), variance.tolist(), out[:, 0].tolist()
    ([2.5, 4.5], [4.25, 4.25], [[-1.21..., -0.72...], [0.72..., 1.21...]])
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from tadiff.ops._dual import channel_dots, channel_sums
from tadiff.ops.fast_loops import loops_apply

__all__ = [
    "FUSED_MIN_SIZE", "fused_loops", "training_backward", "training_forward", "transform",
]  # fmt: skip

FUSED_MIN_SIZE = 1 << 14
"""Values in a batch from which its passes run as compiled loops (when Numba is installed).
The loops are faster at every size (a training step's forward and backward of 4 096 float64
values: 45 against 120 µs), but their first use in a process imports Numba and loads them (about
a second, more the first time on a machine): below this size a script would need tens of
thousands of steps to earn that back."""


def fused_loops(*rows: np.ndarray) -> ModuleType | None:
    """The compiled loops for these ``(N, C, L)`` arrays of one shape, or None where the NumPy
    passes run: Numba missing, fewer than :data:`FUSED_MIN_SIZE` values, a dtype other than
    float32 or float64, different dtypes, or an array that is not C-contiguous."""
    first = rows[0]
    if any(r.dtype != first.dtype for r in rows[1:]):
        return None
    if not loops_apply(first, *rows[1:], min_size=FUSED_MIN_SIZE):
        return None
    from tadiff.ops import _batchnorm_numba

    return _batchnorm_numba


def training_forward(
    rows: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training-mode batch normalization of ``rows (N, C, L)`` by its own statistics.

    Args:
        rows: the batch, ``(N, C, L)``, float.
        weight, bias: ``(C,)`` arrays of the rows' dtype, or None.
        eps: added to the variance.

    Returns:
        ``(out, mean, variance, inv)``: ``out = (rows - mean) * inv * weight + bias``, a new
        ``(N, C, L)`` array, and per channel the mean, the biased variance and
        ``inv = 1 / sqrt(variance + eps)``, ``(C,)`` arrays of the rows' dtype.
    """
    dtype = rows.dtype
    loops = fused_loops(rows)
    if loops is None:
        count = rows.shape[0] * rows.shape[2]
        mean = channel_sums(rows) / count
        centered = rows - mean[:, None]
        variance = channel_dots(centered, centered) / count
        inv = (1.0 / np.sqrt(variance + eps)).astype(dtype, copy=False)
        # (x - mean) * (inv * weight) + bias in place: two passes after the statistics
        scale = inv if weight is None else inv * weight
        out = np.multiply(centered, scale[:, None], out=centered)
        if bias is not None:
            out += bias[:, None]
        return out, mean, variance, inv
    channels = rows.shape[1]
    mean, variance = np.empty(channels), np.empty(channels)
    loops.mean_and_variance(rows, mean, variance)
    inv = 1.0 / np.sqrt(variance + eps)
    scale = inv if weight is None else inv * weight
    shift = np.zeros(channels, dtype) if bias is None else bias
    mean = mean.astype(dtype)
    out = np.empty_like(rows)
    loops.shift_and_scale(rows, mean, scale.astype(dtype), shift.astype(dtype), out)
    return out, mean, variance.astype(dtype), inv.astype(dtype)


def transform(
    rows: np.ndarray, mean: np.ndarray, scale: np.ndarray, shift: np.ndarray
) -> np.ndarray:
    """``(rows - mean) * scale + shift`` per channel of ``rows (N, C, L)`` (evaluation mode's
    normalization by running statistics), a new array; ``(C,)`` arrays of the rows' dtype."""
    loops = fused_loops(rows)
    if loops is None:
        # rows * scale + (shift - mean * scale): two passes
        out = np.multiply(rows, scale[:, None])
        out += (shift - mean * scale)[:, None]
        return out
    out = np.empty_like(rows)
    loops.shift_and_scale(rows, mean, scale, shift, out)
    return out


def training_backward(
    grad: np.ndarray,
    rows: np.ndarray,
    mean: np.ndarray,
    inv: np.ndarray,
    weight: np.ndarray | None,
    input_gradient: bool = True,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The gradients of :func:`training_forward` for ``grad``, the gradient of ``out``.

    Per channel, with ``a = weight * inv`` and ``n = N * L``:
    ``dx = a grad - a sum(grad) / n - a inv**2 sum(grad (x - mean)) / n (x - mean)``.

    Args:
        grad: ``(N, C, L)``, the rows' dtype.
        rows, mean, inv: the forward's input and its statistics (``(C,)``).
        weight: ``(C,)`` or None.
        input_gradient: whether to compute ``dx`` (else None is returned for it).

    Returns:
        ``(dx, sum(grad (x - mean)), sum(grad))``: ``dx`` of shape ``(N, C, L)`` or None, and
        the two ``(C,)`` sums (``inv`` times the first is the weight's gradient, the second the
        bias's).
    """
    dtype = rows.dtype
    count = rows.shape[0] * rows.shape[2]
    a = inv if weight is None else inv * weight
    loops = fused_loops(grad, rows)
    if loops is None:
        centered = rows - mean[:, None]
        total = channel_sums(grad)
        dot = channel_dots(grad, centered)
        if not input_gradient:
            return None, dot, total
        centered *= (-a * inv * inv * dot / count)[:, None]
        centered += (-a * total / count)[:, None]
        dx = np.multiply(grad, a[:, None])
        dx += centered
        return dx, dot, total
    channels = rows.shape[1]
    total, dot = np.empty(channels), np.empty(channels)
    loops.gradient_sums(grad, rows, mean, total, dot)
    dx = None
    if input_gradient:
        a64 = a.astype(np.float64)
        b = (-a64 * inv * inv * dot / count).astype(dtype)
        k = (-a64 * total / count).astype(dtype)
        dx = np.empty_like(rows)
        loops.input_gradient(grad, rows, mean, a, b, k, dx)
    return dx, dot.astype(dtype), total.astype(dtype)
