"""``tadiff.special``: the functions of ``torch.special`` that have NumPy-expressible
definitions, with torch's names, signatures, values at the edges and gradient formulas.

============================  ==================================================================
function                      definition
============================  ==================================================================
``expit(x)``                  ``1 / (1 + exp(-x))`` (``sigmoid``)
``logit(x, eps=None)``        ``log(x / (1 - x))``; ``x`` clamped to ``[eps, 1 - eps]`` first
``erf erfc erfcx``            the error function, ``1 - erf``, ``exp(x²) erfc(x)``
``erfinv(x)``                 the inverse of ``erf``
``ndtr ndtri log_ndtr``       the normal CDF, its inverse, ``log ndtr`` (stable in both tails)
``gammaln digamma psi``       ``log |Γ(x)|``, ``Γ'/Γ`` (``psi`` is ``digamma``)
``polygamma(n, x)``           the ``n``-th derivative of ``digamma``
``multigammaln(a, p)``        the multivariate ``log Γ_p(a)``
``xlogy xlog1py``             ``x log y`` and ``x log1p y``, 0 where ``x == 0``
``i0 i0e i1 i1e``             modified Bessel functions of order 0 and 1 (``e``: times
                              ``exp(-|x|)``)
``sinc entr``                 ``sin(pi x) / (pi x)``, ``-x log x``
``logsumexp softmax``         over a ``dim``, as ``tadiff.logsumexp``/``tadiff.softmax``
``log_softmax``
``log1p expm1 exp2 round``    as the functions of ``tadiff``
============================  ==================================================================

Every one is differentiable to every order (the gradient formulas are written with
differentiable ops); ``tests/ops/test_special.py`` compares values and gradients with
``torch.special``, at ordinary points and at the edges (0, ±1, ±inf, NaN).

Example:
    >>> import tadiff as td
    >>> a = td.tensor([3.0, 4.5], dtype=td.float64, requires_grad=True)
    >>> td.special.multigammaln(a, 3).sum().backward()
    >>> a.grad   # the sum of digamma(a - j/2) over j < 3
    tensor([2.0487, 3.7481], dtype=float64)
"""

from __future__ import annotations

from typing import Any

from tadiff.autograd.tensor import Tensor
from tadiff.ops.elementwise import erf, erfc, expm1, log1p, sigmoid
from tadiff.ops.pointwise import digamma, exp2, lgamma, polygamma, round
from tadiff.ops.reductions import log_softmax as _log_softmax
from tadiff.ops.reductions import logsumexp
from tadiff.ops.reductions import softmax as _softmax
from tadiff.ops.special import (
    entr,
    erfcx,
    erfinv,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    logit,
    multigammaln,
    ndtr,
    ndtri,
    sinc,
    xlog1py,
    xlogy,
)

expit = sigmoid
gammaln = lgamma
psi = digamma


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``; with ``dtype``, the input is cast first."""
    return _softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``x - logsumexp(x, dim)`` along ``dim``; with ``dtype``, the input is cast first."""
    return _log_softmax(input if dtype is None else input.to(dtype), dim)


__all__ = [
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammaln",
    "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py",
    "xlogy",
]  # fmt: skip
