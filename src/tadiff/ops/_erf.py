"""Vectorized ``erf`` and ``erfc`` for NumPy arrays (NumPy has neither ufunc).

Two polynomial approximations, fitted once (on first use) by Chebyshev interpolation of the
standard library's ``math.erf``/``math.erfc`` and evaluated by Horner's rule:

* ``|z| < 1``: ``erf(z) = z * P(2 z² - 1)``, accurate relative to ``erf`` itself near 0;
* ``|z| >= 1``: ``erfc(|z|) = exp(-z²) / |z| * Q(2/|z| - 1)``, accurate relative to the tiny
  ``erfc`` of the tail (``Q`` tends to ``1/sqrt(pi)``; for ``|z| > 20`` its samples come from
  the asymptotic series), and ``erf = ±(1 - erfc)`` there.

float64 uses degrees 14 and 26 (relative error below 1e-13 against ``math.erf``/``math.erfc``
over normal-range results, measured on a dense grid in the tests; the far tail is limited by the
rounding of ``z²`` inside ``exp``); float32 evaluates ``P`` at degree 7 in float32 and the tail
in float64 at degree 14, then rounds. About 2x (float64) to 3x (float32) faster than calling
``math.erf`` per element, and differentiable (``td.erf``, ``td.erfc``).

Example:
    >>> import numpy as np
    >>> [round(float(v), 12) for v in erf_array(np.array([0.5, -3.0]))]
    [0.520499877813, -0.999977909503]
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numpy.polynomial import chebyshev

__all__ = ["erf_array", "erfc_array"]

_SPLIT = 1.0  # where the two approximations meet


def _tail_scale(a: float) -> float:
    """``a * exp(a²) * erfc(a)``: from math.erfc, or the asymptotic series where that underflows."""
    if a <= 20.0:
        return math.erfc(a) * a * math.exp(a * a)
    half_inverse_square = 0.5 / (a * a)
    total, term, n = 0.0, 1.0, 0
    while abs(term) > 1e-18:  # terms shrink fast here: (2n-1)!! / (2a²)^n with a > 20
        total += term
        n += 1
        term *= -(2 * n - 1) * half_inverse_square
    return total / math.sqrt(math.pi)


@cache
def _coefficients(degree_inner: int, degree_tail: int) -> tuple[np.ndarray, np.ndarray]:
    """Power-series coefficients (lowest first) of ``P`` and ``Q`` (see the module docstring)."""

    def inner(u: np.ndarray) -> np.ndarray:
        z = np.sqrt((u + 1.0) / 2.0)
        return np.array([math.erf(v) / v if v > 0 else 2.0 / math.sqrt(math.pi) for v in z])

    def tail(w: np.ndarray) -> np.ndarray:
        inverse = (w + 1.0) / 2.0  # 1/|z| in (0, 1]
        return np.array(
            [_tail_scale(1.0 / v) if v > 0 else 1.0 / math.sqrt(math.pi) for v in inverse]
        )

    p = chebyshev.cheb2poly(chebyshev.chebinterpolate(inner, degree_inner))
    q = chebyshev.cheb2poly(chebyshev.chebinterpolate(tail, degree_tail))
    return p, q


def _horner(u: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    out = np.full(u.shape, coefficients[-1], u.dtype)
    for c in coefficients[-2::-1]:
        out *= u
        out += c
    return out


def _parts(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(inner mask, erf on the inner part, tail mask, erfc(|z|) on the tail)``."""
    single = z.dtype == np.float32
    p, q = _coefficients(7, 14) if single else _coefficients(14, 26)
    a = np.abs(z)
    inner = a < _SPLIT
    zi = z[inner]
    erf_inner = zi * _horner(zi * zi * zi.dtype.type(2.0) - zi.dtype.type(1.0), p.astype(zi.dtype))
    tail = ~inner
    at = a[tail].astype(np.float64)  # the tail in float64: exp(-z²) needs z² exactly rounded
    with np.errstate(under="ignore"):
        erfc_tail = np.exp(-at * at) / at * _horner(2.0 / at - 1.0, q)
    return inner, erf_inner, tail, erfc_tail


def _as_float(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z)
    if z.dtype not in (np.float32, np.float64):
        z = z.astype(np.float64 if z.dtype.itemsize > 4 or z.dtype.kind in "iub" else np.float32)
    return z


def erf_array(z: np.ndarray) -> np.ndarray:
    """``erf`` element-wise (float32 stays float32; other dtypes compute in float64).

    Args:
        z: any shape.

    Returns:
        An array of ``z``'s shape; NaN where ``z`` is NaN, ``±1`` at ``±inf``.
    """
    z = _as_float(z)
    out = np.empty(z.shape, z.dtype)
    inner, erf_inner, tail, erfc_tail = _parts(z)
    out[inner] = erf_inner
    out[tail] = np.copysign(1.0 - erfc_tail, z[tail])  # NaN stays NaN through the tail formula
    return out


def erfc_array(z: np.ndarray) -> np.ndarray:
    """``1 - erf`` element-wise, accurate (relative) in the right tail where ``erf`` is 1.

    Args:
        z: any shape.

    Returns:
        An array of ``z``'s shape; NaN where ``z`` is NaN, 0 at ``inf``, 2 at ``-inf``.
    """
    z = _as_float(z)
    out = np.empty(z.shape, z.dtype)
    inner, erf_inner, tail, erfc_tail = _parts(z)
    out[inner] = 1.0 - erf_inner
    out[tail] = np.where(z[tail] > 0, erfc_tail, 2.0 - erfc_tail)
    return out
