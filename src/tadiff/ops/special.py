"""Special functions with torch's names and gradient formulas: ``erfinv erfcx ndtr ndtri
log_ndtr i0 i0e i1 i1e sinc entr logit xlogy xlog1py multigammaln``.

The kernels are in :mod:`tadiff.ops._special` (NumPy only), the gradient formulas in the VJP
table (:mod:`tadiff.ops.derivatives`), written with differentiable ops so that every function
here has derivatives of every order. ``tadiff.special`` gathers them with the rest of
``torch.special`` (``expit``, ``gammaln``, ``psi``, ...).

Example:
    >>> import tadiff as td
    >>> x = td.tensor([0.25, 0.5], dtype=td.float64, requires_grad=True)
    >>> td.special.ndtri(x).sum().backward()
    >>> x.grad   # sqrt(2 pi) exp(ndtri(x)^2 / 2)
    tensor([3.1469, 2.5066], dtype=float64)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.autograd.factories import _default_dtype
from tadiff.errors import InputError
from tadiff.ops import derivatives as d
from tadiff.ops._common import INPUTS, Tensor, _make, _state, as_tensor, not_broadcastable, record
from tadiff.ops._erf import erfc_array
from tadiff.ops._special import (
    erfcx_array,
    erfinv_array,
    i0_array,
    i0e_array,
    i1_array,
    i1e_array,
    log_ndtr_array,
    ndtri_array,
)
from tadiff.ops.elementwise import _fix_dtype, _pair
from tadiff.ops.pointwise import lgamma

__all__ = [
    "entr", "erfcx", "erfinv", "i0", "i0e", "i1", "i1e", "log_ndtr", "logit", "multigammaln",
    "ndtr", "ndtri", "sinc", "xlog1py", "xlogy",
]  # fmt: skip

_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def _quiet(kernel: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """The kernel with NumPy's floating-point warnings off: these functions return torch's
    inf/NaN at their edges by design."""

    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return kernel(x)

    return run


def _special_unary(
    name: str, kernel: Callable[[np.ndarray], np.ndarray], node: type, saves: tuple[str, ...]
) -> Callable[[Any], Tensor]:
    """An element-wise function recorded as ``node``, saving the input and/or the result; the
    kernel computes in float64, the result takes the input's floating dtype (integers: the
    default dtype)."""
    quiet = _quiet(kernel)

    def op(x: Any) -> Tensor:
        x = as_tensor(x, name=f"{name}() argument")
        # computed in float64, then rounded: float32 gets correctly rounded results
        out = np.asarray(quiet(x.data.astype(np.float64, copy=False)))
        # float inputs keep their dtype, integers take the default dtype (as torch); values
        # beyond float32's range round to inf, as float32 arithmetic would give
        with np.errstate(over="ignore"):
            out = out.astype(x.data.dtype if x.data.dtype.kind == "f" else _default_dtype[0])
        if x._rg and _state.enabled:
            saved = (x,) if "input" in saves else ()
            return record(node, out, (x,), saved, (), "result" in saves)
        return _make(out)

    op.__name__ = op.__qualname__ = name
    return op


def _sinc(x: np.ndarray) -> np.ndarray:
    px = np.pi * x
    return np.where(x == 0, 1.0, np.sin(px) / np.where(x == 0, 1.0, px))


def _entr(x: np.ndarray) -> np.ndarray:
    edges = np.where(x == 0, 0.0, np.where(np.isnan(x), np.nan, -np.inf))
    return np.where(x > 0, -x * np.log(np.where(x > 0, x, 1.0)), edges)


def _ndtr(x: np.ndarray) -> np.ndarray:
    return 0.5 * erfc_array(-x * _INV_SQRT2)


erfinv = _special_unary("erfinv", erfinv_array, d.ErfinvBackward0, ("result",))
erfinv.__doc__ = """The inverse of ``erf`` on ``[-1, 1]`` (``±inf`` at ``±1``, NaN outside).

Gradient ``sqrt(pi)/2 · exp(erfinv(x)²)``.

Example:
    >>> import tadiff as td
    >>> td.special.erfinv(td.tensor([0.0, 0.5], dtype=td.float64))
    tensor([0.    , 0.4769], dtype=float64)
"""
erfcx = _special_unary("erfcx", erfcx_array, d.SpecialErfcxBackward0, ("input", "result"))
erfcx.__doc__ = """The scaled complementary error function ``exp(x²) · erfc(x)``, computed
without overflow for large ``x`` (it tends to ``1 / (x sqrt(pi))``)."""
ndtr = _special_unary("ndtr", _ndtr, d.SpecialNdtrBackward0, ("input",))
ndtr.__doc__ = """The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2``, accurate relative to its
small lower tail. Gradient: the normal density."""
ndtri = _special_unary("ndtri", ndtri_array, d.SpecialNdtriBackward0, ("result",))
ndtri.__doc__ = """The standard normal quantile, the inverse of ``ndtr`` on ``[0, 1]``
(``±inf`` at 1 and 0), accurate relative to small ``p`` and to small ``1 - p``."""
log_ndtr = _special_unary("log_ndtr", log_ndtr_array, d.SpecialLogNdtrBackward0, ("input",))
log_ndtr.__doc__ = """``log(ndtr(x))``, finite for very negative ``x`` (about ``-x²/2``) and not
rounded to 0 for large ``x``."""
i0 = _special_unary("i0", i0_array, d.I0Backward0, ("input",))
i0.__doc__ = """The modified Bessel function of the first kind of order 0. Gradient ``i1``."""
i0e = _special_unary("i0e", i0e_array, d.SpecialI0EBackward0, ("input", "result"))
i0e.__doc__ = """``exp(-|x|) · i0(x)``, finite for every finite ``x``."""
i1 = _special_unary("i1", i1_array, d.SpecialI1Backward0, ("input", "result"))
i1.__doc__ = """The modified Bessel function of the first kind of order 1. Gradient
``i0(x) - i1(x)/x`` (1/2 at 0)."""
i1e = _special_unary("i1e", i1e_array, d.SpecialI1EBackward0, ("input", "result"))
i1e.__doc__ = """``exp(-|x|) · i1(x)``, finite for every finite ``x``."""
sinc = _special_unary("sinc", _sinc, d.SincBackward0, ("input",))
sinc.__doc__ = """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there)."""
entr = _special_unary("entr", _entr, d.SpecialEntrBackward0, ("input",))
entr.__doc__ = """The entropy term ``-x log x`` (0 at 0, ``-inf`` for negative ``x``)."""


def logit(x: Any, eps: float | None = None) -> Tensor:
    """``log(x / (1 - x))``, the inverse of ``sigmoid``; with ``eps``, ``x`` is first clamped to
    ``[eps, 1 - eps]`` (gradient 0 where clamped), without it the result is NaN outside
    ``[0, 1]`` (gradient NaN there), as in torch.

    Example:
        >>> import tadiff as td
        >>> td.special.logit(td.tensor([0.25, 0.5]))
        tensor([-1.0986,  0.    ])
    """
    x = as_tensor(x, name="logit() argument")
    z = x.data if eps is None else np.clip(x.data, eps, 1 - eps)
    with np.errstate(all="ignore"):
        out = _fix_dtype(np.asarray(np.log(z / (1 - z))), x)
    if x._rg and _state.enabled:
        return record(d.LogitBackward0, out, (x,), INPUTS, (None if eps is None else float(eps),))
    return _make(out)


def _xlog(name: str, log: Callable[[np.ndarray], np.ndarray], node: type) -> Callable[..., Tensor]:
    def op(x: Any, y: Any) -> Tensor:
        a, b = _pair(x, y, f"{name}() argument")
        try:
            with np.errstate(all="ignore"):
                out = np.asarray(
                    np.where((a.data == 0) & ~np.isnan(b.data), 0.0, a.data * log(b.data))
                )
        except ValueError:
            raise not_broadcastable(name, a, b) from None
        out = out.astype(np.result_type(a.data, b.data), copy=False)
        out = _fix_dtype(out, a if a.data.dtype.kind not in "biu" else b)
        if (a._rg or b._rg) and _state.enabled:
            return record(node, out, (a, b), INPUTS)
        return _make(out)

    op.__name__ = op.__qualname__ = name
    return op


xlogy = _xlog("xlogy", np.log, d.XlogyBackward0)
xlogy.__doc__ = """``x · log(y)``, 0 where ``x == 0`` (unless ``y`` is NaN), with broadcasting.

Example:
    >>> import tadiff as td
    >>> td.special.xlogy(td.tensor([0.0, 2.0]), td.tensor([0.0, 3.0]))
    tensor([0.    , 2.1972])
"""
xlog1py = _xlog("xlog1py", np.log1p, d.SpecialXlog1PyBackward0)
xlog1py.__doc__ = """``x · log1p(y)``, 0 where ``x == 0`` (unless ``y`` is NaN)."""


def multigammaln(a: Any, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension ``p``:
    ``p(p-1)/4 · log(pi) + Σ_{j<p} lgamma(a - j/2)``, element-wise.

    Args:
        a: every element must exceed ``(p - 1) / 2``.
        p: a positive int.

    Raises:
        InputError: ``p < 1`` or an element of ``a`` at or below ``(p - 1) / 2`` (a
            RuntimeError, as in torch).

    Example:
        >>> import tadiff as td
        >>> round(float(td.special.multigammaln(td.tensor(2.5, dtype=td.float64), 3)), 6)
        1.880995
    """
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise InputError(f"multigammaln: p has to be greater than or equal to 1, got {p!r}")
    a = as_tensor(a, name="multigammaln() argument")
    if a.data.size and not np.all(a.data > (p - 1) / 2):
        raise InputError(f"multigammaln: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    if a.data.dtype.kind != "f":
        a = a.to(_default_dtype[0])
    offsets = _make(np.arange(p, dtype=a.data.dtype) * -0.5)
    terms = lgamma(a.unsqueeze(-1) + offsets)
    return terms.sum(-1) + p * (p - 1) / 4 * math.log(math.pi)
