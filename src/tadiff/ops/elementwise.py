"""Element-wise ops: arithmetic with NumPy broadcasting, math functions, comparisons.

Every function takes Tensors (Python scalars and arrays are accepted where an operand may be a
constant) and returns a Tensor; the gradient formulas are in ``tadiff.ops.derivatives``. The
arithmetic operators are the hot path of the engine: they look at ``type(...)`` once, call NumPy
once, and create a node only when grad mode is on and an operand requires grad.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, -2.0], requires_grad=True)
    >>> y = td.exp(x) * 2 + x.relu()
    >>> y.grad_fn
    <AddBackward0 object at ...>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff._array import broadcast_apply
from tadiff._quiet import Quiet
from tadiff.autograd.factories import _default_dtype
from tadiff.errors import DTypeError, InputError
from tadiff.ops import derivatives as d
from tadiff.ops._common import (
    INPUTS,
    Tensor,
    _make,
    _state,
    as_tensor,
    not_broadcastable,
    record,
    scalar_array,
)
from tadiff.ops._dual import NOT_BROADCAST, sign_array
from tadiff.ops._erf import erf_array, erfc_array
from tadiff.ops.fast_loops import FAST_LOOP_MIN_SIZE, exp_array, relu_array

_ndarray = np.ndarray
_PY_SCALARS = (int, float)


def _operand(x: Any, other: Tensor) -> Any:
    """The second operand of a binary op: a Tensor, or a Python scalar kept as is."""
    if isinstance(x, Tensor):
        return x
    if type(x) in _PY_SCALARS or isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, np.generic) and x.ndim == 0 and x.dtype.kind in "biuf":
        return x.item()  # NumPy scalars would promote float32 to float64 (NEP 50)
    return as_tensor(x, other)


# 0-d operands of these dtypes are added, subtracted, multiplied and negated as Python floats:
# the same IEEE operation (for float32 too: a float32 sum or product computed in double and
# rounded back is the correctly rounded float32 result, as 53 >= 2 * 24 + 2), at half of
# NumPy's cost for a 0-d array, whose result NumPy returns as a scalar to be wrapped again
# (Python's ``sum`` over a tensor's elements, a loss accumulated step by step)
_FLOAT_0D = frozenset({np.dtype(np.float64), np.dtype(np.float32)})
_array = np.array


def _fix_dtype(out: np.ndarray, x: Tensor) -> np.ndarray:
    # integer inputs give float64 from NumPy's math functions; torch gives its default dtype
    if out.dtype.kind == "f" and x.data.dtype.kind in "biu":
        return out.astype(_default_dtype[0])
    return out


# ---- arithmetic -----------------------------------------------------------------------------


def add(a: Any, b: Any) -> Tensor:
    """``a + b`` with broadcasting.

    Args:
        a, b: Tensors or numbers; shapes must broadcast.

    Returns:
        Tensor of the broadcast shape.
    """
    if not isinstance(a, Tensor):
        return add(b, a) if isinstance(b, Tensor) else add(as_tensor(a), b)
    if type(b) is not Tensor:
        b = _operand(b, a)
        if not isinstance(b, Tensor):  # a Python scalar: no edge, no promotion
            out = a.data + b
            if a._rg and _state.enabled:
                return record(d.AddBackward0, out, (a, None), (), NOT_BROADCAST)
            return _make(out)
    x, y = a.data, b.data
    if (shape := x.shape) == y.shape:
        if shape or (dtype := x.dtype) is not y.dtype or dtype not in _FLOAT_0D:
            out = x + y
        else:
            out = _array(float(x) + float(y), dtype)
        shapes = NOT_BROADCAST
    else:
        try:
            out = broadcast_apply(np.add, x, y)
        except ValueError:
            raise not_broadcastable("add", a, b) from None
        shapes = (x.shape, y.shape)
    if (a._rg or b._rg) and _state.enabled:
        return record(d.AddBackward0, out, (a, b), (), shapes)
    return _make(out)


def sub(a: Any, b: Any) -> Tensor:
    """``a - b`` with broadcasting."""
    if not isinstance(a, Tensor):
        return rsub(b, a) if isinstance(b, Tensor) else sub(as_tensor(a), b)
    if type(b) is not Tensor:
        b = _operand(b, a)
        if not isinstance(b, Tensor):
            out = a.data - b
            if a._rg and _state.enabled:
                return record(d.SubBackward0, out, (a, None), (), NOT_BROADCAST)
            return _make(out)
    x, y = a.data, b.data
    if (shape := x.shape) == y.shape:
        if shape or (dtype := x.dtype) is not y.dtype or dtype not in _FLOAT_0D:
            out = x - y
        else:
            out = _array(float(x) - float(y), dtype)
        shapes = NOT_BROADCAST
    else:
        try:
            out = broadcast_apply(np.subtract, x, y)
        except ValueError:
            raise not_broadcastable("sub", a, b) from None
        shapes = (x.shape, y.shape)
    if (a._rg or b._rg) and _state.enabled:
        return record(d.SubBackward0, out, (a, b), (), shapes)
    return _make(out)


def rsub(a: Tensor, b: Any) -> Tensor:
    """``b - a`` for a constant ``b`` (``2 - x``)."""
    b = _operand(b, a)
    if isinstance(b, Tensor):
        return sub(b, a)
    out = b - a.data
    if a._rg and _state.enabled:
        return record(d.RsubBackward1, out, (a,))
    return _make(out)


def mul(a: Any, b: Any) -> Tensor:
    """``a * b`` with broadcasting."""
    if not isinstance(a, Tensor):
        return mul(b, a) if isinstance(b, Tensor) else mul(as_tensor(a), b)
    if type(b) is not Tensor:
        b = _operand(b, a)
        if not isinstance(b, Tensor):
            out = a.data * b
            if a._rg and _state.enabled:
                return record(d.MulScalarBackward0, out, (a, None), (), (b,))
            return _make(out)
    x, y = a.data, b.data
    if (shape := x.shape) != y.shape:
        try:
            out = broadcast_apply(np.multiply, x, y)
        except ValueError:
            raise not_broadcastable("mul", a, b) from None
    elif shape or (dtype := x.dtype) is not y.dtype or dtype not in _FLOAT_0D:
        out = x * y
    else:
        out = _array(float(x) * float(y), dtype)
    if (a._rg or b._rg) and _state.enabled:
        return record(d.MulBackward0, out, (a, b), INPUTS)
    return _make(out)


def div(a: Any, b: Any) -> Tensor:
    """``a / b`` (true division) with broadcasting."""
    if not isinstance(a, Tensor):
        return rdiv(b, a) if isinstance(b, Tensor) else div(as_tensor(a), b)
    if type(b) is not Tensor:
        b = _operand(b, a)
        if not isinstance(b, Tensor):
            out = _fix_dtype(a.data / b, a)
            if a._rg and _state.enabled:
                return record(d.DivScalarBackward0, out, (a, None), (), (b,))
            return _make(out)
    try:
        x, y = a.data, b.data
        out = _fix_dtype(x / y if x.shape == y.shape else broadcast_apply(np.divide, x, y), a)
    except ValueError:
        raise not_broadcastable("div", a, b) from None
    if (a._rg or b._rg) and _state.enabled:
        return record(d.DivBackward0, out, (a, b), INPUTS)
    return _make(out)


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a constant ``b``."""
    b = _operand(b, a)
    if isinstance(b, Tensor):
        return div(b, a)
    out = _fix_dtype(b / a.data, a)
    if a._rg and _state.enabled:
        return record(d.RdivBackward0, out, (None, a), (a,), (b,))
    return _make(out)


def pow(a: Any, b: Any) -> Tensor:
    """``a ** b``; ``b`` may be a number (PowBackward0) or a Tensor (PowBackward1)."""
    if not isinstance(a, Tensor):
        return rpow(b, a) if isinstance(b, Tensor) else pow(as_tensor(a), b)
    b = _operand(b, a)
    try:
        out = a.data**b if not isinstance(b, Tensor) else _tensor_power(a.data, b.data)
    except ValueError as exc:
        if isinstance(b, Tensor) and np.shape(a.data) != np.shape(b.data):
            raise not_broadcastable("pow", a, b) from None
        raise InputError(f"pow: {exc}") from None  # an integer to a negative integer power
    if isinstance(b, Tensor):
        if (a._rg or b._rg) and _state.enabled:
            return record(d.PowBackward1, out, (a, b), INPUTS, save_result=True)
        return _make(out)
    if a._rg and _state.enabled:
        return record(d.PowBackward0, out, (a,), INPUTS, (b,))
    return _make(out)


def _tensor_power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y`` for a Tensor exponent, with C's ``pow`` at every element as torch computes it.

    NumPy takes a shortcut for an exponent of ``0.5`` that is a scalar, 0-d or broadcast
    along the loop: ``sqrt``, where ``(-inf) ** 0.5`` is NaN and ``(-0.0) ** 0.5`` is
    ``-0.0``. torch does that for a Python number only (tadiff too); a tensor exponent gets
    ``pow`` (``+inf``, ``+0.0``). The other shortcuts (0, 1, 2, -1) agree with ``pow``.
    """
    if y.size == 1 and y.dtype.kind == "f" and y.reshape(()) == 0.5:
        shape = np.broadcast_shapes(x.shape, y.shape)
        loop = shape or (1,)  # 0-d operands would be scalars again
        base, exponent = np.broadcast_to(x, loop), np.full(loop, y.reshape(()), y.dtype)
        return np.power(base, exponent).reshape(shape)
    return x**y


def rpow(a: Tensor, b: Any) -> Tensor:
    """``b ** a`` for a constant base ``b``."""
    b = _operand(b, a)
    if isinstance(b, Tensor):
        return pow(b, a)
    out = _fix_dtype(scalar_array(b, a.data.dtype) ** a.data, a)
    if a._rg and _state.enabled:
        return record(d.PowBackward2, out, (None, a), (), (float(b),), save_result=True)
    return _make(out)


def neg(x: Tensor) -> Tensor:
    """``-x``."""
    data = x.data
    if data.shape or (dtype := data.dtype) not in _FLOAT_0D:
        out = -data
    else:  # 0-d: a Python float, as add's (the sign flipped, NaN's too, as NumPy's)
        out = _array(-float(data), dtype)
    if x._rg and _state.enabled:
        return record(d.NegBackward0, out, (x,))
    return _make(out)


# ---- unary math -----------------------------------------------------------------------------


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray], node: type, saves: str) -> Any:
    save_input = saves == "input"
    save_result = saves == "result"

    def op(x: Any) -> Tensor:
        if not isinstance(x, Tensor):
            x = as_tensor(x, name=f"{name}() argument")
        out = fn(x.data)
        if out.dtype is not x.data.dtype:
            out = _fix_dtype(out, x)
        if x._rg and _state.enabled:
            saved = (x,) if save_input else ()
            return record(node, out, (x,), saved, (), save_result)
        return _make(out)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"Element-wise ``{name}`` (gradient node ``{node.__name__}``).\n\n"
        "Example:\n    >>> import tadiff as td\n"
        f"    >>> td.{name}(td.tensor([0.5])).shape\n    (1,)\n"
    )
    return op


_OVERFLOW_QUIET = Quiet(over="ignore")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + e^-x), torch's formula, in place on one buffer (4x faster than splitting by
    # sign); exp overflows only where the result is below the smallest normal number: it is 0
    # there, as in torch, and the warning is not the user's business
    # (the dtype keyword only where needed, and 1.0 rather than 1: NumPy's conversions of both
    # cost a third of a small call)
    # (ufuncs called with positional out: the keyword costs a conversion on every call)
    out = np.negative(x) if x.dtype.kind == "f" else np.negative(x, dtype=np.float64)
    if type(out) is not np.ndarray:  # a 0-d input gives a NumPy scalar
        out = np.asarray(out)
    if out.size < FAST_LOOP_MIN_SIZE:  # NumPy's exp: exp_array would only pass it on
        _OVERFLOW_QUIET.in_place(np.exp, out)
    else:
        _OVERFLOW_QUIET(exp_array, out, out)
    # a 0-d one of out's dtype: a Python 1.0 costs NumPy a conversion (a third of the add)
    one = _ONES.get(out.dtype)
    np.add(out, 1.0 if one is None else one, out)
    return np.reciprocal(out, out)


_ONES = {np.dtype(t): np.ones((), t) for t in (np.float16, np.float32, np.float64)}


exp = _unary("exp", exp_array, d.ExpBackward0, "result")
log = _unary("log", np.log, d.LogBackward0, "input")
log1p = _unary("log1p", np.log1p, d.Log1PBackward0, "input")
expm1 = _unary("expm1", np.expm1, d.Expm1Backward0, "result")
sin = _unary("sin", np.sin, d.SinBackward0, "input")
cos = _unary("cos", np.cos, d.CosBackward0, "input")
tan = _unary("tan", np.tan, d.TanBackward0, "result")
tanh = _unary("tanh", np.tanh, d.TanhBackward0, "result")
erf = _unary("erf", erf_array, d.ErfBackward0, "input")
erfc = _unary("erfc", erfc_array, d.ErfcBackward0, "input")
sigmoid = _unary("sigmoid", _sigmoid, d.SigmoidBackward0, "result")


def _relu(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` as torch computes it: NaN stays NaN and ``-0.0`` stays ``-0.0``. Floats go
    through :func:`~tadiff.ops.fast_loops.relu_array` (a compiled loop, or NumPy's clip ufunc:
    faster than ``maximum`` with a scalar 0 on activations, a recorded ReLU of 32 x 8 x 16 x 16
    float32 values 32 against 91 µs; float64 52 against 62)."""
    if x.dtype.kind == "f":
        return relu_array(x)
    return np.maximum(x, 0)


relu = _unary("relu", _relu, d.ReluBackward0, "result")
sqrt = _unary("sqrt", np.sqrt, d.SqrtBackward0, "result")
abs = _unary("abs", np.abs, d.AbsBackward0, "input")
sign = _unary("sign", sign_array, d.SignBackward0, "none")


def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Clamp to ``[min, max]`` (either bound may be None); gradient 1 inside, bounds included.

    Example:
        >>> import tadiff as td
        >>> td.clamp(td.tensor([-2.0, 0.5, 3.0]), -1, 1)
        tensor([-1. ,  0.5,  1. ])
    """
    if min is None and max is None:
        raise DTypeError("clamp: at least one of 'min' or 'max' must not be None")
    if isinstance(min, (Tensor, np.ndarray)) or isinstance(max, (Tensor, np.ndarray)):
        return clamp_tensors(x, min, max, d.ClampBackward0)
    return _clamp_as(x, min, max, d.ClampBackward1)


def clamp_tensors(x: Any, min: Any, max: Any, node: type) -> Tensor:
    """``clamp`` with Tensor bounds (broadcasting with ``x``), differentiable in all three as
    torch's ``clamp.Tensor``: ``x`` gets the gradient where ``min <= x <= max``, ``min`` where
    ``x < min`` (and ``min < max``), ``max`` where ``x > max`` (or ``max < min``: ``max`` wins
    there). The result keeps ``x``'s dtype."""
    x = as_tensor(x, name="clamp() input")
    lo = None if min is None else as_tensor(min, x, "clamp() min")
    hi = None if max is None else as_tensor(max, x, "clamp() max")
    out = x.data
    try:
        if lo is not None:
            out = np.maximum(out, lo.data)
        if hi is not None:
            out = np.minimum(out, hi.data)
    except ValueError:
        raise not_broadcastable("clamp", *(t for t in (x, lo, hi) if t is not None)) from None
    out = np.asarray(out, x.data.dtype)
    if _state.enabled and any(t is not None and t._rg for t in (x, lo, hi)):
        return record(node, out, (x, lo, hi), INPUTS)
    return _make(out)


def _clamp_as(x: Tensor, min: float | None, max: float | None, node: type) -> Tensor:
    """:func:`clamp` recorded as ``node`` (``clamp_min``/``clamp_max`` have torch's names)."""
    if x.data.dtype.kind == "f":
        # both bounds given (an open one infinite): NumPy's clip ufunc keeps -0.0 as torch does,
        # where a single bound goes through maximum/minimum, which make it +0.0
        min = -np.inf if min is None else min
        max = np.inf if max is None else max
    out = np.clip(x.data, min, max)
    if out.dtype != x.data.dtype:
        out = out.astype(x.data.dtype)
    if x._rg and _state.enabled:
        lo = -np.inf if min is None else min
        hi = np.inf if max is None else max
        return record(node, out, (x,), INPUTS, (lo, hi))
    return _make(out)


def _pair(a: Any, b: Any, name: str) -> tuple[Tensor, Tensor]:
    if isinstance(a, Tensor):
        return a, as_tensor(b, a, name)
    b = as_tensor(b, None, name)
    return as_tensor(a, b, name), b


def maximum(a: Any, b: Any) -> Tensor:
    """Element-wise maximum with broadcasting; ties send half the gradient to each side."""
    a, b = _pair(a, b, "maximum() argument")
    try:
        out = np.maximum(a.data, b.data)
    except ValueError:
        raise not_broadcastable("maximum", a, b) from None
    if (a._rg or b._rg) and _state.enabled:
        return record(d.MaximumBackward0, out, (a, b), INPUTS)
    return _make(out)


def minimum(a: Any, b: Any) -> Tensor:
    """Element-wise minimum with broadcasting; ties send half the gradient to each side."""
    a, b = _pair(a, b, "minimum() argument")
    try:
        out = np.minimum(a.data, b.data)
    except ValueError:
        raise not_broadcastable("minimum", a, b) from None
    if (a._rg or b._rg) and _state.enabled:
        return record(d.MinimumBackward0, out, (a, b), INPUTS)
    return _make(out)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``condition`` holds, else ``b`` (all broadcast together).

    Args:
        condition: boolean Tensor or array (not differentiated).
        a, b: Tensors or numbers.

    Example:
        >>> import tadiff as td
        >>> td.where(td.tensor([True, False]), 1.0, td.tensor([5.0, 6.0]))
        tensor([1., 6.])
    """
    cond = condition.data if isinstance(condition, Tensor) else np.asarray(condition)
    if cond.dtype != np.bool_:
        raise DTypeError(f"where expected condition to be a boolean tensor, got {cond.dtype}")
    a, b = _pair(a, b, "where() argument")
    try:
        out = np.where(cond, a.data, b.data)
    except ValueError:
        raise not_broadcastable("where", cond, a, b) from None
    if (a._rg or b._rg) and _state.enabled:
        # a copy of the condition: the caller's may be written in place before the backward
        return record(d.WhereBackward0, out, (a, b), (), (cond.copy(), a.data.shape, b.data.shape))
    return _make(out)


# ---- comparisons (not differentiable: boolean results) -------------------------------------


def _compare(fn: Callable[[Any, Any], np.ndarray], name: str) -> Any:
    def op(a: Any, b: Any) -> Tensor:
        a = as_tensor(a, b if isinstance(b, Tensor) else None, name)
        bd = b.data if isinstance(b, Tensor) else _operand(b, a)
        bd = bd.data if isinstance(bd, Tensor) else bd
        try:
            return _make(np.asarray(fn(a.data, bd)))
        except ValueError:
            raise not_broadcastable(name, a, bd) from None

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Element-wise ``{name}`` comparison: a boolean Tensor outside the graph."
    return op


eq = _compare(np.equal, "eq")
ne = _compare(np.not_equal, "ne")
lt = _compare(np.less, "lt")
le = _compare(np.less_equal, "le")
gt = _compare(np.greater, "gt")
ge = _compare(np.greater_equal, "ge")


def logical_not(x: Tensor) -> Tensor:
    """Element-wise logical not (boolean result)."""
    return _make(np.logical_not(as_tensor(x).data))
