"""Sums over axes of float arrays by BLAS products with a vector of ones.

NumPy reduces short rows with a fixed cost per row, and adds leading-axis rows one after the
other; a matrix-vector product with ones does either at memory speed, with the same rounding
class (see each function). The eager engine's reductions and gradients (a bias gradient sums a
``(N, C, H, W)`` gradient to ``(C,)``) and the index compiler's single-array reductions use these.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

__all__ = [
    "BLAS_ROWS_FROM",
    "BLAS_TRAILING_MAX",
    "fast_sum",
    "keepdim_shape",
    "sum_leading",
    "sum_outer",
    "sum_trailing",
]


def keepdim_shape(shape: tuple[int, ...], dims: tuple[int, ...] | None) -> tuple[int, ...]:
    """``shape`` with the reduced ``dims`` (all when None) set to 1."""
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else n for i, n in enumerate(shape))


# Rows from which a short trailing block is summed by BLAS even in a small array. NumPy's
# reduction costs about 20 ns per row beyond its fixed cost, which BLAS's product with ones
# matches; the checks on the way to BLAS cost about 1.7 us, which some 64 rows repay (180 rows
# of 2: NumPy 4.7 us and 33 800 instructions, BLAS 1.6 us and 10 800).
BLAS_ROWS_FROM = 64


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    """A cached read-only vector of ones (making one costs more than the product it serves)."""
    ones = np.ones(n, dtype)
    ones.flags.writeable = False
    return ones


def sum_leading(a: Any, k: int) -> np.ndarray | None:
    """The sum over the first ``k`` axes of a float array, or None if not such (or a
    non-contiguous array whose trailing block is longer than one element).

    NumPy adds leading-axis rows one after the other (no pairwise summation there either), so a
    BLAS vector-matrix product with ones gives the same accuracy several times faster for the
    small arrays an eager engine sees (bias gradients, ``sum(dim=0)``). A sum of every element
    (the gradient of a scalar factor) is NumPy's pairwise sum: there the product would be the
    less accurate one.

    Example:
        >>> sum_leading(np.ones((4, 3)), 1).tolist(), sum_leading(np.ones(4), 1).tolist()
        ([4.0, 4.0, 4.0], 4.0)
    """
    if k <= 0 or type(a) is not np.ndarray or a.dtype.kind != "f" or a.size == 0:
        return None
    rest = a.shape[k:]
    block = math.prod(rest)
    if block == 1:
        # everything: NumPy's pairwise sum, more accurate than the product (a sequential sum)
        # and about half its cost on the small vectors of an eager program
        return np.add.reduce(a, None, keepdims=True).reshape(rest)
    if not a.flags.c_contiguous:
        return None
    return (_ones(a.size // block, a.dtype) @ a.reshape(-1, block)).reshape(rest)


# Longest trailing block summed by BLAS: 3-10x NumPy's speed on short rows, 2-4x on rows of
# 196-256 (a 14 x 14 or 16 x 16 image's bias gradient), measured one thread, float32 and float64.
BLAS_TRAILING_MAX = 256


def sum_trailing(a: Any, k: int) -> np.ndarray | None:
    """The sum over the last ``k`` axes of a C-contiguous float array whose trailing block has at
    most 256 elements, as a BLAS product with ones; None otherwise.

    NumPy reduces each short row with per-row overhead (``(20000, 8).sum(-1)`` costs 30x the
    additions, 256 rows of 256 twice the product's time); the matrix-vector product runs at
    memory speed. Rows this short keep the rounding at NumPy's pairwise level: BLAS adds at
    most 256 terms, in several interleaved partial sums (measured on 20 000 rows of 256
    standard normals, float32 and float64: worst error 0.4-0.5 eps of the sum of magnitudes,
    NumPy's 0.3).
    """
    if k <= 0 or type(a) is not np.ndarray or a.dtype.kind != "f" or not a.flags.c_contiguous:
        return None
    shape = a.shape
    block = shape[-1] if k == 1 else math.prod(shape[-k:])
    size = a.size
    if size == 0 or not 1 < block <= BLAS_TRAILING_MAX or size == block:
        return None
    if k == 1 and len(shape) == 2:  # rows already: no reshapes (each costs a tenth of the sum)
        return a @ _ones(block, a.dtype)
    return (a.reshape(-1, block) @ _ones(block, a.dtype)).reshape(shape[:-k])


def fast_sum(a: np.ndarray, dims: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """``a.sum(axis=dims, keepdims=keepdims)`` (``dims`` sorted and distinct, or None for
    all), by BLAS where the reduced axes lead (:func:`sum_leading`), are a short trailing block
    (:func:`sum_trailing`) or both (:func:`sum_outer`).

    Example:
        >>> fast_sum(np.ones((2, 3, 4)), (0, 2), False).tolist()
        [8.0, 8.0, 8.0]
    """
    out = None
    if dims:
        k = len(dims)
        # leading axes (0, ..., k-1) or trailing ones (ndim-k, ..., ndim-1): dims is sorted and
        # distinct, so its ends tell (no tuple of a range to compare with on every call)
        if dims[-1] == k - 1:
            out = sum_leading(a, k)
        elif dims[0] == a.ndim - k:
            out = sum_trailing(a, k)
        elif dims[0] == 0 and dims[-1] == a.ndim - 1:
            out = sum_outer(a, dims)
    if out is None:  # the ufunc itself: ndarray.sum adds a Python-level wrapper around it
        return np.add.reduce(a, axis=dims, keepdims=keepdims)
    return out.reshape(keepdim_shape(a.shape, dims)) if keepdims else out


def sum_outer(g: Any, axes: tuple[int, ...]) -> np.ndarray | None:
    """The sum over ``axes`` when they are a trailing block of at most 256 elements of a
    C-contiguous float array, possibly after a leading block (a convolution's bias gradient:
    ``(N, C, H, W)`` to ``(C,)``; a broadcast factor's gradient: ``(H, W, 3)`` to
    ``(H, W, 1)``); None otherwise. BLAS sums the rows of the trailing block
    (:func:`sum_trailing`), then the leading block (:func:`sum_leading`): half the
    instructions of NumPy's reduction over axes ``(0, 2, 3)`` at once, and a tenth of its
    reduction over a last axis of 3. Longer rows stay with NumPy (its pairwise sum per row,
    then the rest, costs more than its one reduction).

    Example:
        >>> sum_outer(np.ones((2, 3, 4)), (0, 2)).tolist()
        [8.0, 8.0, 8.0]
        >>> sum_outer(np.ones((256, 3)), (1,)).shape
        (256,)
    """
    lead, ndim = 0, len(g.shape)
    while lead < len(axes) and axes[lead] == lead:
        lead += 1
    trail = len(axes) - lead
    if not trail or axes[-1] != ndim - 1 or axes[lead] != ndim - trail:
        return None  # the trailing axes are consecutive: sorted, distinct, ending at the last
    block = math.prod(g.shape[ndim - trail :])
    if block > BLAS_TRAILING_MAX:
        return None
    if not lead and g.size < BLAS_ROWS_FROM * block:
        return None  # a few short rows alone: NumPy's per-row cost is below the checks here
    sums = sum_trailing(g, trail)
    if not lead:
        return sums
    return None if sums is None else sum_leading(sums, lead)
