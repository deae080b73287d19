"""Vectorized special functions for NumPy arrays that NumPy lacks: ``erfcx``, the inverses of
``erf``/``erfc`` and of the normal CDF, ``log_ndtr``, and the modified Bessel functions
``i0 i0e i1 i1e``.

* ``erfcx(x) = exp(x²) erfc(x)`` reuses the tail fit of :mod:`tadiff.ops._erf` (which computes
  ``erfc(x) = exp(-x²)/x · Q(2/x - 1)`` for ``x ≥ 1``), so ``erfcx`` there is ``Q(2/x - 1)/x``
  with no overflow or underflow; below 1 it is ``exp(x²) erfc(x)`` directly.
* ``erfinv``/``erfcinv``/``ndtri`` start from Giles's single-precision approximation
  ("Approximating the erfinv function", GPU Computing Gems, 2011) and take three Halley steps on
  ``erf(x) = y`` (or on ``erfc(x) = q`` in the tails, where ``1 - y`` would lose the digits):
  float64 to the accuracy of ``erf`` itself.
* ``i0 i1`` (and their exponentially scaled forms) sum their power series below
  ``|x| = 25`` — all terms positive, so no cancellation — and Hankel's asymptotic series above,
  where its terms fall below float64's resolution before they start to grow.

Every function computes in float64 and returns the input's floating dtype (float32 stays
float32; integers give float64 here, the ops cast to the default dtype).

Example:
    >>> import numpy as np
    >>> [round(float(v), 10) for v in erfinv_array(np.array([0.5, -0.999]))]
    [0.4769362762, -2.3267537655]
"""

from __future__ import annotations

import math

import numpy as np

from tadiff.ops._erf import _coefficients, _horner, erf_array, erfc_array

__all__ = [
    "erfcinv_array", "erfcx_array", "erfinv_array", "i0_array", "i0e_array", "i1_array",
    "i1e_array", "log_ndtr_array", "ndtri_array",
]  # fmt: skip

_SQRT_PI = math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)


def _float64(x: np.ndarray) -> tuple[np.ndarray, np.dtype]:
    """``x`` in float64, and the dtype to return (the input's floating dtype, else float64)."""
    x = np.asarray(x)
    out = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    return x.astype(np.float64, copy=False), out


def erfcx_array(x: np.ndarray) -> np.ndarray:
    """The scaled complementary error function ``exp(x²) erfc(x)``, element-wise.

    Finite for every ``x`` up to ``-26.6`` (below, ``2 exp(x²)`` overflows to inf); tends to
    ``1/(x sqrt(pi))`` as ``x → inf`` without underflow.
    """
    x, dtype = _float64(x)
    out = np.empty(x.shape)
    tail = x >= 1.0
    xt = x[tail]
    _, q = _coefficients(14, 26)
    out[tail] = _horner(2.0 / xt - 1.0, q) / xt
    xs = x[~tail]
    with np.errstate(over="ignore"):
        out[~tail] = np.exp(xs * xs) * erfc_array(xs)
    return out.astype(dtype, copy=False)


def _giles(w: np.ndarray) -> np.ndarray:
    """Giles's approximation of ``erfinv(y) / y`` from ``w = -log((1 - y)(1 + y))``."""
    central = w < 5.0
    u = np.where(central, w - 2.5, np.sqrt(np.maximum(w, 5.0)) - 3.0)
    a = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
         -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)  # fmt: skip
    b = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)  # fmt: skip
    p = np.where(central, a[0], b[0])
    for ca, cb in zip(a[1:], b[1:], strict=True):
        p = np.where(central, ca, cb) + p * u
    return p


def _halley(x: np.ndarray, residual: np.ndarray, sign: float) -> np.ndarray:
    """One Halley step for ``erf(x) = y`` (``sign = 1``, residual ``erf(x) - y``) or
    ``erfc(x) = q`` (``sign = -1``, residual ``erfc(x) - q``): both have ``f'' = -2x f'``."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        newton = residual / (sign * (2.0 / _SQRT_PI) * np.exp(-x * x))
        step = newton / (1.0 + x * newton)
    return np.where(np.isfinite(step), x - step, x)


def _tail_guess(q: np.ndarray) -> np.ndarray:
    """``erfcinv(q)`` for small ``q`` from ``erfc(x) ≈ exp(-x²) (1 - 1/(2x²)) / (x sqrt(pi))``,
    solved for ``x²`` by a few fixed-point steps (Giles's fit is made for float32's range and
    is far off below ``q ≈ 1e-8``)."""
    log_q = -np.log(q)
    x = np.sqrt(log_q)
    for _ in range(4):
        x = np.sqrt(np.maximum(log_q - np.log(x * _SQRT_PI) + np.log1p(-0.5 / (x * x)), 1.0))
    return x


def _erfc_inverse_small(q: np.ndarray) -> np.ndarray:
    """``x ≥ 0`` with ``erfc(x) = q`` for ``q`` in ``(0, 1]``, accurate relative to ``q``."""
    far = q < 1e-6
    x = np.empty(q.shape)
    x[far] = _tail_guess(q[far])
    near = q[~far]
    x[~far] = (1.0 - near) * _giles(-np.log(near * (2.0 - near)))
    for _ in range(3):
        x = _halley(x, erfc_array(x) - q, -1.0)
    return x


def _erf_inverse_central(y: np.ndarray) -> np.ndarray:
    """``x`` with ``erf(x) = y`` for ``|y| ≤ 1/2``, accurate relative to small ``y``."""
    x = y * _giles(-np.log((1.0 - y) * (1.0 + y)))
    for _ in range(3):
        x = _halley(x, erf_array(x) - y, 1.0)
    return x


def erfinv_array(y: np.ndarray) -> np.ndarray:
    """The inverse error function: ``x`` with ``erf(x) = y`` for ``y`` in ``[-1, 1]``
    (``±inf`` at ``±1``, NaN outside)."""
    y, dtype = _float64(y)
    out = np.full(y.shape, np.nan)
    a = np.abs(y)
    central = a <= 0.5
    out[central] = _erf_inverse_central(y[central])
    tail = (a > 0.5) & (a < 1.0)
    out[tail] = np.copysign(_erfc_inverse_small(1.0 - a[tail]), y[tail])
    out[a == 1.0] = np.copysign(np.inf, y[a == 1.0])
    return out.astype(dtype, copy=False)


def erfcinv_array(q: np.ndarray) -> np.ndarray:
    """The inverse complementary error function: ``x`` with ``erfc(x) = q`` for ``q`` in
    ``[0, 2]`` (``inf`` at 0, ``-inf`` at 2, NaN outside), accurate relative to small ``q``."""
    q, dtype = _float64(q)
    out = np.full(q.shape, np.nan)
    central = np.abs(1.0 - q) <= 0.5  # 1 - q is exact here: invert erf, accurate near x = 0
    out[central] = _erf_inverse_central(1.0 - q[central])
    low = (q > 0.0) & (q < 0.5)
    out[low] = _erfc_inverse_small(q[low])
    high = (q > 1.5) & (q < 2.0)
    out[high] = -_erfc_inverse_small(2.0 - q[high])
    out[q == 0.0] = np.inf
    out[q == 2.0] = -np.inf
    return out.astype(dtype, copy=False)


def ndtri_array(p: np.ndarray) -> np.ndarray:
    """The standard normal quantile (inverse of ``ndtr``), accurate relative to small ``p`` and
    to small ``1 - p``: ``-sqrt(2) erfcinv(2p)`` below 1/2, ``sqrt(2) erfcinv(2(1 - p))`` above
    (``1 - p`` is exact there)."""
    p, dtype = _float64(p)
    lower = p < 0.5
    q = np.where(lower, 2.0 * p, 2.0 * (1.0 - p))
    x = _SQRT2 * erfcinv_array(q)
    return np.where(lower, -x, x).astype(dtype, copy=False)


def log_ndtr_array(x: np.ndarray) -> np.ndarray:
    """``log(ndtr(x))`` without underflow for very negative ``x`` (``erfcx`` carries the
    Gaussian factor out of the logarithm) and without rounding to 0 for large ``x``
    (``log1p`` of the small upper tail)."""
    x, dtype = _float64(x)
    out = np.empty(x.shape)
    negative = x < 0.0
    xn = x[negative]
    out[negative] = np.log(0.5 * erfcx_array(-xn / _SQRT2)) - 0.5 * xn * xn
    xp = x[~negative]
    out[~negative] = np.log1p(-0.5 * erfc_array(xp / _SQRT2))
    return out.astype(dtype, copy=False)


# ---- modified Bessel functions of the first kind, orders 0 and 1 ---------------------------

_ASYMPTOTIC_FROM = 25.0  # Hankel's series reaches float64's resolution from here on


def _bessel_series(x: np.ndarray, order: int) -> np.ndarray:
    """``I_order(x)`` by its power series ``(x/2)^order Σ (x²/4)^k / (k! (k + order)!)``."""
    quarter = 0.25 * x * x
    term = np.ones_like(x) if order == 0 else 0.5 * x
    total = term.copy()
    for k in range(1, 200):
        term = term * quarter / (k * (k + order))
        total += term
        if not np.any(np.abs(term) > 1e-17 * np.abs(total)):
            break
    return total


def _bessel_scaled_asymptotic(a: np.ndarray, order: int) -> np.ndarray:
    """``exp(-a) I_order(a)`` for ``a ≥ 25`` by Hankel's series
    ``(2 pi a)^(-1/2) Σ_k (-1)^k c_k / a^k``, ``c_k = Π_{j≤k} (4 order² - (2j-1)²) / (k! 8^k)``."""
    mu = 4.0 * order * order
    term = np.ones_like(a)
    total = term.copy()
    for k in range(1, 60):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * a)
        total += term
        if not np.any(np.abs(term) > 1e-17 * np.abs(total)):
            break
    return total / np.sqrt(2.0 * np.pi * a)


def _bessel(x: np.ndarray, order: int, scaled: bool) -> np.ndarray:
    x, dtype = _float64(x)
    a = np.abs(x)
    out = np.empty(x.shape)
    small = a < _ASYMPTOTIC_FROM  # NaN goes to the large branch and stays NaN
    series = _bessel_series(x[small], order)
    out[small] = series * np.exp(-a[small]) if scaled else series
    big = ~small
    scaled_big = _bessel_scaled_asymptotic(a[big], order)
    if order == 1:
        scaled_big = np.copysign(scaled_big, x[big])  # I_1 is odd
    if scaled:
        out[big] = scaled_big
    else:
        with np.errstate(over="ignore"):
            out[big] = scaled_big * np.exp(a[big])
    out[np.isinf(x)] = (0.0 if scaled else np.inf) * (np.sign(x[np.isinf(x)]) if order else 1.0)
    return out.astype(dtype, copy=False)


def i0_array(x: np.ndarray) -> np.ndarray:
    """The modified Bessel function of the first kind of order 0 (even)."""
    return _bessel(x, 0, False)


def i0e_array(x: np.ndarray) -> np.ndarray:
    """``exp(-|x|) i0(x)``: finite for every finite ``x``."""
    return _bessel(x, 0, True)


def i1_array(x: np.ndarray) -> np.ndarray:
    """The modified Bessel function of the first kind of order 1 (odd)."""
    return _bessel(x, 1, False)


def i1e_array(x: np.ndarray) -> np.ndarray:
    """``exp(-|x|) i1(x)``: finite for every finite ``x``."""
    return _bessel(x, 1, True)
