"""In-place ops (``add_ sub_ mul_ div_ pow_ clamp_ zero_ fill_ copy_``, ``x[key] = v``, ``+=``).

An in-place op writes into the tensor's existing memory and bumps its version counter, so any
node that saved the old value refuses to run (PyTorch's "modified by an inplace operation"
error) instead of computing a wrong gradient.

When the op is recorded, the tensor is *rebased*: its ``grad_fn`` becomes the node of the
equivalent out-of-place op, applied to a snapshot of the old value that carries the old
``grad_fn``. Two cases PyTorch supports are refused with an error instead (tadiff has no
``CopySlices``): a recorded in-place op on a leaf that requires grad (as in torch), and a
recorded in-place op on a tensor that shares memory with a view.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x * 1
    >>> y.mul_(3)
    tensor([3., 6.], grad_fn=<MulBackward0>)
    >>> y.sum().backward(); x.grad
    tensor([3., 3.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.errors import AutogradError, DTypeError
from tadiff.ops import elementwise as ew
from tadiff.ops._common import Tensor, _make, _state
from tadiff.ops.indexing import index_put


def _apply_inplace(t: Tensor, op: Callable[..., Tensor], *args: Any, name: str) -> Tensor:
    recording = _state.enabled and (t._rg or any(isinstance(a, Tensor) and a._rg for a in args))
    if recording:
        if t.grad_fn is None and t._rg:
            raise AutogradError(
                f"a leaf Variable that requires grad is being used in an in-place operation "
                f"({name}); wrap it in td.no_grad() or use the out-of-place op"
            )
        if t._is_view_related:
            raise AutogradError(
                f"{name} on a tensor that shares memory with a view, while recording the graph, "
                "is not supported by tadiff (no CopySlices); use the out-of-place op"
            )
        old = _make(t.data.copy(), t.grad_fn, t._output_nr)
        old._rg = t._rg
        result = op(old, *args)
    else:
        result = op(t, *args)
    try:
        np.copyto(t.data, result.data, casting="same_kind")
    except TypeError:
        raise DTypeError(
            f"{name}: result type {result.data.dtype} can't be cast to the desired output type "
            f"{t.data.dtype}"
        ) from None
    except ValueError as exc:
        raise AutogradError(f"{name}: cannot write into this tensor's memory: {exc}") from None
    if recording:
        t.grad_fn = result.grad_fn
        t._output_nr = result._output_nr
        t._rg = result._rg
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    vc[0] += 1
    return t


def add_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    """``t += alpha * other`` in place."""
    if alpha != 1:
        other = ew.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return _apply_inplace(t, ew.add, other, name="add_")


def sub_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    """``t -= alpha * other`` in place."""
    if alpha != 1:
        other = ew.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return _apply_inplace(t, ew.sub, other, name="sub_")


def mul_(t: Tensor, other: Any) -> Tensor:
    """``t *= other`` in place."""
    return _apply_inplace(t, ew.mul, other, name="mul_")


def div_(t: Tensor, other: Any) -> Tensor:
    """``t /= other`` in place."""
    return _apply_inplace(t, ew.div, other, name="div_")


def pow_(t: Tensor, other: Any) -> Tensor:
    """``t **= other`` in place."""
    return _apply_inplace(t, ew.pow, other, name="pow_")


def clamp_(t: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Clamp in place."""
    return _apply_inplace(t, ew.clamp, min, max, name="clamp_")


def setitem(t: Tensor, key: Any, value: Any) -> None:
    """``t[key] = value`` in place (recorded as ``index_put``)."""
    _apply_inplace(t, index_put, key, value, name="__setitem__")


def fill_(t: Tensor, value: Any) -> Tensor:
    """Fill with ``value`` (a number or a one-element Tensor) in place."""
    return _apply_inplace(t, index_put, Ellipsis, value, name="fill_")


def zero_(t: Tensor) -> Tensor:
    """Fill with zeros in place."""
    return _apply_inplace(t, index_put, Ellipsis, 0, name="zero_")


def copy_(t: Tensor, src: Any) -> Tensor:
    """Copy ``src`` (broadcast to ``t``'s shape, cast to its dtype) into ``t`` in place."""
    src = src if isinstance(src, Tensor) else _make(np.asarray(src))
    if src.data.dtype != t.data.dtype:
        src = src.to(t.data.dtype)
    return _apply_inplace(t, index_put, Ellipsis, src, name="copy_")
