"""More element-wise functions: inverse trigonometric and hyperbolic, other log bases, rounding,
``atan2``, ``logaddexp``, remainders, and composites (``lerp``, ``masked_fill``, ...).

Same conventions as :mod:`tadiff.ops.elementwise`, whose helpers they use; the gradient
formulas are in :mod:`tadiff.ops.derivatives`. Rounding functions have gradient 0 everywhere
(torch's convention), ``nan_to_num`` passes the gradient only where the input was finite.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([0.5, -0.25], requires_grad=True)
    >>> td.atan2(x, td.tensor(1.0)).sum().backward()
    >>> x.grad
    tensor([0.8   , 0.9412])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import (
    INPUTS,
    Tensor,
    _make,
    _state,
    as_tensor,
    broadcasts_to,
    not_broadcastable,
    record,
)
from tadiff.ops._gamma import digamma_array, lgamma_array, polygamma_array
from tadiff.ops.elementwise import (
    _clamp_as,
    _fix_dtype,
    _pair,
    _unary,
    add,
    clamp_tensors,
    div,
    mul,
    pow,
    sub,
    where,
)

__all__ = [
    "acos",
    "acosh",
    "addcdiv",
    "addcmul",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ceil",
    "clamp_max",
    "clamp_min",
    "cosh",
    "digamma",
    "exp2",
    "floor",
    "fmod",
    "frac",
    "lerp",
    "lgamma",
    "log2",
    "log10",
    "logaddexp",
    "masked_fill",
    "nan_to_num",
    "polygamma",
    "reciprocal",
    "remainder",
    "round",
    "rsqrt",
    "sinh",
    "square",
    "trunc",
]  # fmt: skip

asin = _unary("asin", np.arcsin, d.AsinBackward0, "input")
acos = _unary("acos", np.arccos, d.AcosBackward0, "input")
atan = _unary("atan", np.arctan, d.AtanBackward0, "input")
sinh = _unary("sinh", np.sinh, d.SinhBackward0, "input")
cosh = _unary("cosh", np.cosh, d.CoshBackward0, "input")
asinh = _unary("asinh", np.arcsinh, d.AsinhBackward0, "input")
acosh = _unary("acosh", np.arccosh, d.AcoshBackward0, "input")
atanh = _unary("atanh", np.arctanh, d.AtanhBackward0, "input")
log2 = _unary("log2", np.log2, d.Log2Backward0, "input")
log10 = _unary("log10", np.log10, d.Log10Backward0, "input")
exp2 = _unary("exp2", np.exp2, d.Exp2Backward0, "result")
reciprocal = _unary("reciprocal", np.reciprocal, d.ReciprocalBackward0, "result")
rsqrt = _unary("rsqrt", lambda x: 1 / np.sqrt(x), d.RsqrtBackward0, "result")
floor = _unary("floor", np.floor, d.FloorBackward0, "none")
ceil = _unary("ceil", np.ceil, d.CeilBackward0, "none")
trunc = _unary("trunc", np.trunc, d.TruncBackward0, "none")
frac = _unary("frac", lambda x: x - np.trunc(x), d.FracBackward0, "none")
lgamma = _unary("lgamma", lgamma_array, d.LgammaBackward0, "input")
digamma = _unary("digamma", digamma_array, d.DigammaBackward0, "input")


def polygamma(n: int, x: Any) -> Tensor:
    """The ``n``-th derivative of ``digamma`` (``n = 0``: digamma itself), differentiable.

    Example:
        >>> import tadiff as td
        >>> td.polygamma(1, td.tensor([1.0], dtype=td.float64))  # π²/6
        tensor([1.6449], dtype=float64)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"polygamma: n must be a non-negative int, got {n!r}")
    x = as_tensor(x, name="polygamma() argument")
    out = _fix_dtype(polygamma_array(int(n), x.data), x)
    if x._rg and _state.enabled:
        return record(d.PolygammaBackward0, out, (x,), INPUTS, (int(n),))
    return _make(out)


def round(x: Any, decimals: int = 0) -> Tensor:
    """Round half to even (as torch and NumPy do) to ``decimals`` places; gradient 0.

    Example:
        >>> import tadiff as td
        >>> td.round(td.tensor([0.5, 1.5, 2.675]), decimals=0)
        tensor([0., 2., 3.])
    """
    x = as_tensor(x, name="round() argument")
    out = _fix_dtype(np.round(x.data, int(decimals)), x)
    if x._rg and _state.enabled:
        return record(d.RoundBackward0, out, (x,))
    return _make(out)


def square(x: Any) -> Tensor:
    """``x * x`` (recorded as ``pow(x, 2)``, like torch)."""
    return pow(as_tensor(x, name="square() argument"), 2)


def _binary(name: str, fn: Any, node: type, number_node: type | None = None) -> Any:
    """An element-wise op of two operands; ``number_node`` (torch's other overload name) is
    recorded when ``b`` is a number."""

    def op(a: Any, b: Any) -> Tensor:
        recorded = number_node if number_node and isinstance(b, (int, float)) else node
        a, b = _pair(a, b, f"{name}() argument")
        try:
            out = _fix_dtype(np.asarray(fn(a.data, b.data)), a)
        except ValueError:
            raise not_broadcastable(name, a, b) from None
        if (a._rg or b._rg) and _state.enabled:
            return record(recorded, out, (a, b), INPUTS)
        return _make(out)

    op.__name__ = op.__qualname__ = name
    return op


atan2 = _binary("atan2", np.arctan2, d.Atan2Backward0)
atan2.__doc__ = """The angle of the point ``(b, a)``, in ``(-pi, pi]``, broadcasting.

Gradients ``b / (a² + b²)`` and ``-a / (a² + b²)``."""
logaddexp = _binary("logaddexp", np.logaddexp, d.LogaddexpBackward0)
logaddexp.__doc__ = """``log(exp(a) + exp(b))`` without overflow, broadcasting."""
remainder = _binary("remainder", np.remainder, d.RemainderBackward1, d.RemainderBackward0)
remainder.__doc__ = """Python's ``a % b`` (the sign of ``b``); gradients ``1`` and
``-floor(a / b)``."""
fmod = _binary("fmod", np.fmod, d.FmodBackward1, d.FmodBackward0)
fmod.__doc__ = """C's ``fmod`` (the sign of ``a``); gradients ``1`` and ``-trunc(a / b)``."""


def clamp_min(x: Tensor, min: Any) -> Tensor:
    """``clamp(x, min=min)`` (``min`` a number or a Tensor)."""
    if isinstance(min, (Tensor, np.ndarray)):
        return clamp_tensors(x, min, None, d.ClampMinBackward1)
    return _clamp_as(as_tensor(x), min, None, d.ClampMinBackward0)


def clamp_max(x: Tensor, max: Any) -> Tensor:
    """``clamp(x, max=max)`` (``max`` a number or a Tensor)."""
    if isinstance(max, (Tensor, np.ndarray)):
        return clamp_tensors(x, None, max, d.ClampMaxBackward1)
    return _clamp_as(as_tensor(x), None, max, d.ClampMaxBackward0)


def lerp(start: Any, end: Any, weight: Any) -> Tensor:
    """``start + weight * (end - start)``, broadcasting; differentiable in all three.

    Example:
        >>> import tadiff as td
        >>> td.lerp(td.tensor([0.0, 10.0]), td.tensor([1.0, 20.0]), 0.25)
        tensor([ 0.25, 12.5 ])
    """
    start = as_tensor(start, name="lerp() start")
    return add(start, mul(weight, sub(end, start)))


def masked_fill(x: Tensor, mask: Any, value: Any) -> Tensor:
    """``x`` with ``value`` (a number or a 0-d Tensor) where the boolean ``mask`` holds.

    Args:
        x: (...) Tensor.
        mask: boolean Tensor or array broadcastable to ``x``'s shape.
        value: fill value; a 0-d Tensor that requires grad receives the masked gradient sum.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Example:
        >>> import tadiff as td
        >>> td.tensor([1.0, 2.0, 3.0]).masked_fill(td.tensor([True, False, True]), 0.0)
        tensor([0., 2., 0.])
    """
    x = as_tensor(x, name="masked_fill() input")
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise DTypeError(
            f"masked_fill only supports boolean masks, but got mask with dtype {m.dtype}"
        )
    if not broadcasts_to(m.shape, x.shape):
        raise ShapeError(
            f"masked_fill: the mask of shape {m.shape} must broadcast to the input's shape "
            f"{x.shape}"
        )
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(
                "masked_fill only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s)"
            )
        if value.dtype != x.dtype:
            value = value.to(x.dtype)
    return where(m, value, x)


def nan_to_num(
    x: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the dtype's
    largest/smallest finite value); the gradient passes only where ``x`` was finite."""
    x = as_tensor(x, name="nan_to_num() argument")
    out = np.nan_to_num(x.data, nan=nan, posinf=posinf, neginf=neginf)
    if x._rg and _state.enabled:
        return record(d.NanToNumBackward0, out, (x,), (), (np.isfinite(x.data),))
    return _make(out)


def addcmul(x: Any, tensor1: Any, tensor2: Any, *, value: float = 1) -> Tensor:
    """``x + value * tensor1 * tensor2``, broadcasting."""
    return add(x, mul(mul(tensor1, tensor2), value))


def addcdiv(x: Any, tensor1: Any, tensor2: Any, *, value: float = 1) -> Tensor:
    """``x + value * tensor1 / tensor2``, broadcasting."""
    return add(x, mul(div(tensor1, tensor2), value))
