"""Reductions over dims (``sum mean var std prod max min amax amin logsumexp norm``) and the
normalizations ``softmax``/``log_softmax``.

Every reduction takes torch's ``dim=``/``keepdim=`` and also NumPy's ``axis=``/``keepdims=``;
``dim`` may be an int, a tuple of ints or None (all dims). Gradients are broadcast back over the
reduced dims (``F.unreduce`` in ``tadiff.ops.derivatives``).

Example:
    >>> import tadiff as td
    >>> x = td.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> x.sum(dim=1)
    tensor([3., 7.], grad_fn=<SumBackward1>)
    >>> x.sum()
    tensor(10., grad_fn=<SumBackward0>)
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple
from typing import Any

import numpy as np

from tadiff._quiet import Quiet
from tadiff._sums import fast_sum
from tadiff.errors import InputError
from tadiff.ops import derivatives as d
from tadiff.ops._common import (
    INPUTS,
    Tensor,
    _make,
    _state,
    as_tensor,
    norm_dim,
    norm_dims,
    pick_axis,
    record,
)
from tadiff.ops.fast_loops import exp_array

#: What ``max(dim)``/``min(dim)`` return, like torch's ``torch.return_types.max``.
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def _dims_keep(
    x: Tensor, dim: Any, keepdim: Any, axis: Any, keepdims: Any
) -> tuple[tuple[int, ...] | None, bool]:
    dims = norm_dims(pick_axis(dim, axis), x.data.ndim)
    keep = bool(keepdims) if keepdims is not None else bool(keepdim)
    return dims, keep


def _count(shape: tuple[int, ...], dims: tuple[int, ...] | None) -> int:
    if dims is None:
        return math.prod(shape)
    return math.prod(shape[i] for i in dims)


def _reduce_out(out: Any, x: Tensor) -> np.ndarray:
    out = np.asarray(out)
    return out if out.dtype == x.data.dtype or x.data.dtype.kind not in "f" else out.astype(x.dtype)


def sum(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """Sum over ``dim`` (all dims when None).

    Args:
        x: input Tensor.
        dim: int, tuple of ints or None.
        keepdim: keep reduced dims with size 1.

    Returns:
        Tensor with the reduced dims removed (or of size 1 when ``keepdim``).

    Example:
        >>> import tadiff as td
        >>> td.sum(td.ones(2, 3), dim=0)
        tensor([2., 2., 2.])
    """
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    out = _reduce_out(fast_sum(x.data, dims, keep), x)  # BLAS for leading/short trailing dims
    if out.dtype.kind == "u":
        out = out.astype(np.int64)  # torch sums every integer dtype, unsigned too, into int64
    if x._rg and _state.enabled:
        node = d.SumBackward0 if dim is None and axis is None else d.SumBackward1
        return record(node, out, (x,), (), (x.data.shape, dims, keep))
    return _make(out)


def mean(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """Mean over ``dim`` (all dims when None); same arguments as :func:`sum`."""
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    if x.data.size and x.data.dtype.kind == "f":
        out = _reduce_out(fast_sum(x.data, dims, keep) / _count(x.data.shape, dims), x)
    elif x.data.size:
        out = _reduce_out(x.data.mean(axis=dims, keepdims=keep), x)
    else:  # NaN (0 / 0) where torch gives NaN, without NumPy's "Mean of empty slice" warning
        with np.errstate(invalid="ignore"):
            out = _reduce_out(x.data.sum(axis=dims, keepdims=keep) / 0.0, x)
    if x._rg and _state.enabled:
        n = _count(x.data.shape, dims)
        node = d.MeanBackward0 if dim is None and axis is None else d.MeanBackward1
        return record(node, out, (x,), (), (x.data.shape, dims, keep, n))
    return _make(out)


def _correction(correction: Any, unbiased: Any, ddof: Any) -> float:
    if ddof is not None:
        return float(ddof)
    if correction is not None:
        return float(correction)
    return 1.0 if unbiased is None or unbiased else 0.0


def _variance_data(x: Tensor, dims: Any, keep: bool, c: float, n: int, what: str) -> np.ndarray:
    """Σ (x − mean)² / max(0, n − c), torch's value: inf, or NaN (0/0) for a constant or empty
    input, when no degrees of freedom remain — with torch's warning, not NumPy's."""
    if n - c <= 0:
        warnings.warn(
            f"{what}(): degrees of freedom is <= 0. Correction should be strictly less than the "
            "reduction factor (input numel divided by output numel).",
            UserWarning,
            stacklevel=3,
        )
    return _QUIET_DIVISION(_centered_squares, x.data, dims, keep, n, n - c if n > c else 0.0)


def _centered_squares(data: np.ndarray, dims: Any, keep: bool, n: int, by: float) -> np.ndarray:
    centered = data - fast_sum(data, dims, True) / n
    return fast_sum(centered * centered, dims, keep) / by


# 0 / 0 and inf - inf give torch's NaN; NumPy's warnings about them are not the user's business
_QUIET_DIVISION = Quiet(divide="ignore", invalid="ignore")
_QUIET_LOG = Quiet(divide="ignore")  # log(0) = -inf, as in torch


def var(
    x: Tensor,
    dim: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
    unbiased: Any = None,
    axis: Any = None,
    keepdims: Any = None,
    ddof: Any = None,
) -> Tensor:
    """Variance over ``dim`` with Bessel's ``correction`` (default 1, like torch; NumPy's ``ddof``
    is accepted too).

    Example:
        >>> import tadiff as td
        >>> td.var(td.tensor([1.0, 2.0, 3.0])).item()
        1.0
    """
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    c = _correction(correction, unbiased, ddof)
    n = _count(x.data.shape, dims)
    out = _reduce_out(_variance_data(x, dims, keep, c, n, "var"), x)
    if x._rg and _state.enabled:
        return record(d.VarBackward0, out, (x,), INPUTS, (dims, keep, c, n))
    return _make(out)


def std(
    x: Tensor,
    dim: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
    unbiased: Any = None,
    axis: Any = None,
    keepdims: Any = None,
    ddof: Any = None,
) -> Tensor:
    """Standard deviation: the square root of :func:`var` (same arguments)."""
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    c = _correction(correction, unbiased, ddof)
    n = _count(x.data.shape, dims)
    out = _reduce_out(np.sqrt(_variance_data(x, dims, keep, c, n, "std")), x)
    if x._rg and _state.enabled:
        return record(d.StdBackward0, out, (x,), INPUTS, (dims, keep, c, n), save_result=True)
    return _make(out)


def prod(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """Product over ``dim``; the gradient is exact where elements are zero (it uses the product
    of the other elements, not ``result / x``)."""
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    out = _reduce_out(x.data.prod(axis=dims, keepdims=keep), x)
    if x._rg and _state.enabled:
        node = d.ProdBackward0 if dim is None and axis is None else d.ProdBackward1
        return record(node, out, (x,), INPUTS, (dims, keep))
    return _make(out)


def _extreme(x: Tensor, dims: Any, keep: bool, fn: Any, node: type, what: str) -> Tensor:
    if x.data.size == 0 and (dims is None or any(x.data.shape[i] == 0 for i in dims)):
        raise InputError(
            f"{what}(): expected a non-empty reduction over dims {dims} of a tensor of shape "
            f"{x.data.shape}; the reduction has no identity"
        )
    out = _reduce_out(fn(x.data, axis=dims, keepdims=keep), x)
    if x._rg and _state.enabled:
        return record(node, out, (x,), INPUTS, (dims, keep), save_result=True)
    return _make(out)


def amax(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """Maximum over ``dim``; tied maxima share the gradient equally."""
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    return _extreme(x, dims, keep, np.maximum.reduce, d.AmaxBackward0, "amax")


def amin(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """Minimum over ``dim``; tied minima share the gradient equally."""
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    return _extreme(x, dims, keep, np.minimum.reduce, d.AminBackward0, "amin")


def _arg_extreme(x: Tensor, dim: Any, keepdim: bool, largest: bool) -> ValuesIndices:
    axis = norm_dim(dim, x.data.ndim)
    if x.data.ndim and x.data.shape[axis] == 0:
        raise InputError(f"{'max' if largest else 'min'}(): dim {dim} of shape {x.shape} is empty")
    data = x.data if x.data.ndim else x.data.reshape(1)
    idx = (np.argmax if largest else np.argmin)(data, axis=axis, keepdims=True)
    values = np.take_along_axis(data, idx, axis=axis)
    if x.data.ndim == 0:
        values, idx = values.reshape(()), idx.reshape(())
    elif not keepdim:
        values, idx = values.squeeze(axis), idx.squeeze(axis)
    indices = _make(np.asarray(idx, np.int64) if not keepdim else idx.astype(np.int64))
    if x._rg and _state.enabled:
        node = d.MaxBackward0 if largest else d.MinBackward0
        keep_idx = idx if keepdim or x.data.ndim == 0 else np.expand_dims(idx, axis)
        if x.data.ndim == 0:
            return ValuesIndices(x.clone(), indices)
        vals = record(node, values, (x,), (), (x.data.shape, axis, keepdim, keep_idx))
        return ValuesIndices(vals, indices)
    return ValuesIndices(_make(values), indices)


def max(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
    """``max(x)``: the largest element (ties share the gradient); ``max(x, dim)``: a
    ``(values, indices)`` pair, the gradient going to the returned index; ``max(a, b)`` with a
    Tensor ``b``: element-wise :func:`maximum`.

    Example:
        >>> import tadiff as td
        >>> td.max(td.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1).indices
        tensor([1, 0])
    """
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    if isinstance(dim, Tensor):
        from tadiff.ops.elementwise import maximum

        return maximum(x, dim)
    if dim is None:
        return _extreme(x, None, False, np.maximum.reduce, d.MaxBackward1, "max")
    return _arg_extreme(x, dim, keepdim, True)


def min(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
    """Like :func:`max`, for the smallest elements."""
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    if isinstance(dim, Tensor):
        from tadiff.ops.elementwise import minimum

        return minimum(x, dim)
    if dim is None:
        return _extreme(x, None, False, np.minimum.reduce, d.MinBackward1, "min")
    return _arg_extreme(x, dim, keepdim, False)


def argmax(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Index of the largest element (of the flattened tensor when ``dim`` is None): int64, not
    differentiable."""
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    if dim is None:
        return _make(np.asarray(np.argmax(x.data), np.int64))
    axis_ = norm_dim(dim, x.data.ndim)
    return _make(np.argmax(x.data, axis=axis_, keepdims=keepdim).astype(np.int64))


def argmin(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Index of the smallest element; see :func:`argmax`."""
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    if dim is None:
        return _make(np.asarray(np.argmin(x.data), np.int64))
    axis_ = norm_dim(dim, x.data.ndim)
    return _make(np.argmin(x.data, axis=axis_, keepdims=keepdim).astype(np.int64))


def logsumexp(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None
) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, computed without overflow (max subtracted first)."""
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    if x.data.size == 0:
        m = np.zeros(np.sum(x.data, axis=dims, keepdims=True).shape, x.data.dtype)
    else:
        m = np.amax(x.data, axis=dims, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
    s = _QUIET_LOG(np.log, fast_sum(exp_array(x.data - m), dims, True)) + m
    out = _reduce_out(s if keep else s.reshape(np.sum(x.data, axis=dims).shape), x)
    if x._rg and _state.enabled:
        return record(d.LogsumexpBackward0, out, (x,), INPUTS, (dims, keep), save_result=True)
    return _make(out)


def norm(
    x: Tensor,
    p: Any = 2,
    dim: Any = None,
    keepdim: bool = False,
    *,
    axis: Any = None,
    keepdims: Any = None,
) -> Tensor:
    """Vector p-norm over ``dim`` (all elements when None), like ``torch.linalg.vector_norm``.

    ``p=2`` (or ``"fro"``) is a primitive whose gradient is defined as 0 at the zero vector;
    other orders (``1``, ``inf``, ``-inf``, any positive float) are composed from primitives.

    Example:
        >>> import tadiff as td
        >>> td.norm(td.tensor([3.0, 4.0])).item()
        5.0
    """
    x = as_tensor(x)
    dims, keep = _dims_keep(x, dim, keepdim, axis, keepdims)
    if p in (2, 2.0, "fro"):
        out = _reduce_out(np.sqrt(fast_sum(x.data * x.data, dims, keep)), x)
        if x._rg and _state.enabled:
            node = d.LinalgVectorNormBackward0
            return record(node, out, (x,), INPUTS, (dims, keep), save_result=True)
        return _make(out)
    from tadiff.ops.elementwise import abs as abs_

    a = abs_(x)
    if p == np.inf:
        return amax(a, dims, keep)
    if p == -np.inf:
        return amin(a, dims, keep)
    if p == 1:
        return sum(a, dims, keep)
    if isinstance(p, (int, float)) and p > 0:
        return sum(a**p, dims, keep) ** (1.0 / p)
    raise InputError(f"norm: unsupported order p={p!r}; expected 2, 'fro', 1, inf, -inf or p > 0")


def softmax(x: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (required), computed stably.

    Example:
        >>> import tadiff as td
        >>> td.softmax(td.tensor([0.0, 0.0]), dim=0)
        tensor([0.5, 0.5])
    """
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    if dim is None:
        raise InputError("softmax: pass the dim to normalize over (dim=...)")
    axis_ = norm_dim(dim, x.data.ndim)
    if x.data.ndim == 0:
        out = np.ones((), x.data.dtype)
    else:
        out = x.data - x.data.max(axis=axis_, keepdims=True) if x.data.size else x.data.copy()
        if x.data.size:  # in place on the one temporary: softmax runs on every attention step
            exp_array(out, out=out)
            out /= fast_sum(out, (axis_,), True)
    if x._rg and _state.enabled:
        return record(d.SoftmaxBackward0, out, (x,), (), (axis_,), save_result=True)
    return _make(out)


def log_softmax(x: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """``x - logsumexp(x, dim, keepdim=True)`` along ``dim`` (required), computed stably."""
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    if dim is None:
        raise InputError("log_softmax: pass the dim to normalize over (dim=...)")
    axis_ = norm_dim(dim, x.data.ndim)
    if x.data.ndim == 0:
        out = np.zeros((), x.data.dtype)
    elif x.data.size == 0:
        out = x.data.copy()
    else:
        shifted = x.data - x.data.max(axis=axis_, keepdims=True)
        out = shifted - np.log(fast_sum(exp_array(shifted), (axis_,), True))
    if x._rg and _state.enabled:
        return record(d.LogSoftmaxBackward0, out, (x,), (), (axis_,), save_result=True)
    return _make(out)


def nansum(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Sum treating NaN as zero (NaN entries get gradient 0)."""
    from tadiff.ops.elementwise import where

    x = as_tensor(x)
    return sum(where(np.isnan(x.data), 0.0, x), dim, keepdim)


def nanmean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Mean over the non-NaN entries (NaN where all are NaN, as torch)."""
    x = as_tensor(x)
    count = (~np.isnan(x.data)).sum(axis=norm_dims(dim, x.data.ndim), keepdims=keepdim)
    return nansum(x, dim, keepdim) / count.astype(x.data.dtype)


def aminmax(x: Tensor, *, dim: int | None = None, keepdim: bool = False) -> Any:
    """``(min, max)`` over ``dim`` (all elements when None), as torch's named pair."""
    return _MinMax(amin(x, dim, keepdim), amax(x, dim, keepdim))


_MinMax = namedtuple("aminmax", ["min", "max"])
