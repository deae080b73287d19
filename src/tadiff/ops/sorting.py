"""Scans, sorting and selection: ``cumsum cumprod sort argsort topk kthvalue median``, and the
integer-valued ``unique searchsorted bucketize bincount histc``.

The selections are differentiable through ``gather``: the values are the input's elements at the
computed indices, so their gradient goes back to exactly those elements (ties: to the element
picked). Sorting is stable; NaN sorts as the largest value, as in torch. ``cumprod``'s gradient is
exact also where the input has zeros.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([3.0, 1.0, 2.0], requires_grad=True)
    >>> values, indices = td.sort(x)
    >>> (values * td.tensor([1.0, 10.0, 100.0])).sum().backward()
    >>> indices, x.grad
    (tensor([1, 2, 0]), tensor([100.,   1.,  10.]))
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import Tensor, _make, _state, as_tensor, norm_dim, record
from tadiff.ops.indexing import gather
from tadiff.ops.shape import squeeze

__all__ = [
    "argsort", "bincount", "bucketize", "cumprod", "cumsum", "histc", "kthvalue", "median",
    "searchsorted", "sort", "topk", "unique",
]  # fmt: skip


class ValuesIndices(NamedTuple):
    """``(values, indices)`` as torch's ``return_types``: unpack it or use the attributes."""

    values: Tensor
    indices: Tensor


# ---- scans ------------------------------------------------------------------------------------


def cumsum(x: Any, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative sum along ``dim``; the gradient is the reversed cumulative sum of ``g``.

    Example:
        >>> import tadiff as td
        >>> td.cumsum(td.tensor([1.0, 2.0, 3.0]), 0)
        tensor([1., 3., 6.])
    """
    x = as_tensor(x, name="cumsum() input")
    if dtype is not None:
        x = x.to(dtype)
    ax = norm_dim(dim, max(x.ndim, 1))
    out = np.cumsum(x.data, axis=ax) if x.ndim else x.data.copy()
    if x._rg and _state.enabled:
        return record(d.CumsumBackward0, out, (x,), (), (ax if x.ndim else None,))
    return _make(out)


def cumprod(x: Any, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative product along ``dim``, with an exact gradient where ``x`` has zeros.

    Example:
        >>> import tadiff as td
        >>> td.cumprod(td.tensor([2.0, 3.0, 0.5]), 0)
        tensor([2., 6., 3.])
    """
    x = as_tensor(x, name="cumprod() input")
    if dtype is not None:
        x = x.to(dtype)
    ax = norm_dim(dim, x.ndim)
    out = np.cumprod(x.data, axis=ax) if x.ndim else x.data.copy()
    if x._rg and _state.enabled:
        return record(d.CumprodBackward0, out, (x,), (x,), (ax,), save_result=True)
    return _make(out)


# ---- sorting and selection --------------------------------------------------------------------


def _order(data: np.ndarray, ax: int, descending: bool) -> np.ndarray:
    """Stable sort order along ``ax``; NaN counts as the largest value."""
    if not descending:
        return np.argsort(data, axis=ax, kind="stable")
    keys = -data
    if data.dtype.kind == "f":
        keys = np.where(np.isnan(data), -np.inf, keys)  # NaN first when descending
    elif data.dtype.kind == "b":
        keys = ~data
    return np.argsort(keys, axis=ax, kind="stable")


def _select(x: Tensor, index: np.ndarray, ax: int) -> ValuesIndices:
    """The elements of ``x`` at ``index`` along ``ax`` (differentiable) and the indices."""
    values = gather(x, ax, index) if x.ndim else x * 1
    return ValuesIndices(values, _make(index.astype(np.int64, copy=False)))


def sort(x: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """Sort along ``dim``: ``(values, indices)``, ``values = x.gather(dim, indices)``.

    Always stable (``stable`` is accepted for torch's signature).
    """
    x = as_tensor(x, name="sort() input")
    if x.ndim == 0:
        return _select(x, np.zeros((), np.int64), 0)
    ax = norm_dim(dim, x.ndim)
    return _select(x, _order(x.data, ax, descending), ax)


def argsort(x: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort ``x`` along ``dim`` (int64, no gradient)."""
    return sort(x, dim, descending, stable).indices


def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, sorted.

    Raises:
        InputError: when ``k`` is not in ``[0, size of dim]``.
    """
    x = as_tensor(x, name="topk() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    n = x.shape[ax] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
        raise InputError(f"topk: k ({k!r}) must be an int in [0, {n}] (the size of dim {dim})")
    if x.ndim == 0:
        return sort(x)
    order = _order(x.data, ax, descending=largest)
    return _select(x, np.take(order, np.arange(int(k)), axis=ax), ax)


def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The ``k``-th smallest element (``k`` from 1) along ``dim`` and its index."""
    x = as_tensor(x, name="kthvalue() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    n = x.shape[ax] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise InputError(f"kthvalue: k ({k!r}) must be an int in [1, {n}] (the size of dim {dim})")
    if x.ndim == 0:
        return sort(x)
    order = _order(x.data, ax, descending=False)
    picked = _select(x, np.take(order, [int(k) - 1], axis=ax), ax)
    if keepdim:
        return picked
    return ValuesIndices(squeeze(picked.values, ax), squeeze(picked.indices, ax))


def median(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median (torch's: for an even count, the smaller of the two middle values).

    Without ``dim``: a 0-d Tensor over all elements. With ``dim``: ``(values, indices)``.
    """
    x = as_tensor(x, name="median() input")
    if dim is None:
        if x.data.size == 0:
            return _make(np.array(np.nan, x.dtype))
        flat = x.reshape(-1)
        return kthvalue(flat, (flat.shape[0] + 1) // 2).values
    ax = norm_dim(dim, max(x.ndim, 1))
    n = x.shape[ax] if x.ndim else 1
    return kthvalue(x, (n + 1) // 2, ax if x.ndim else 0, keepdim)


# ---- integer-valued (no gradient) -------------------------------------------------------------


def unique(
    x: Any,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """The distinct elements (sorted), optionally with the inverse map and the counts.

    Returns a Tensor, or a tuple ``(values, inverse?, counts?)`` as torch does.
    """
    x = as_tensor(x, name="unique() input")
    axis = None if dim is None else norm_dim(dim, x.ndim)
    values, inverse, counts = np.unique(x.data, return_inverse=True, return_counts=True, axis=axis)
    out = [_make(values)]
    if return_inverse:
        shape = x.shape if axis is None else (x.shape[axis],)
        out.append(_make(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(_make(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def searchsorted(
    sorted_sequence: Any, values: Any, *, right: bool = False, side: str | None = None
) -> Tensor:
    """Insertion indices of ``values`` into ``sorted_sequence`` (1-D, or N-D: row by row)."""
    seq = as_tensor(sorted_sequence, name="searchsorted() sorted_sequence").data
    v = values.data if isinstance(values, Tensor) else np.asarray(values)
    if side is not None:
        if side not in ("left", "right"):
            raise InputError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        right = side == "right"
    how = "right" if right else "left"
    if seq.ndim <= 1:
        return _make(np.searchsorted(seq, v, side=how).astype(np.int64))
    if seq.shape[:-1] != v.shape[:-1]:
        raise ShapeError(
            f"searchsorted: the leading dims of sorted_sequence {seq.shape} and values "
            f"{v.shape} must match"
        )
    rows = seq.reshape(-1, seq.shape[-1])
    vals = v.reshape(-1, v.shape[-1])
    out = np.stack([np.searchsorted(r, q, side=how) for r, q in zip(rows, vals, strict=True)])
    return _make(out.reshape(v.shape).astype(np.int64))


def bucketize(x: Any, boundaries: Any, *, right: bool = False) -> Tensor:
    """The bucket of each element of ``x`` given the sorted 1-D ``boundaries`` (torch's rule:
    ``right=False`` gives ``boundaries[i-1] < x <= boundaries[i]``)."""
    b = as_tensor(boundaries, name="bucketize() boundaries").data
    if b.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {b.shape}")
    v = x.data if isinstance(x, Tensor) else np.asarray(x)
    return _make(np.searchsorted(b, v, side="right" if right else "left").astype(np.int64))


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Tensor:
    """Counts (or summed ``weights``) of each value of the non-negative 1-D int ``x``."""
    v = as_tensor(x, name="bincount() input").data
    if v.ndim != 1 or v.dtype.kind not in "iu":
        raise DTypeError(f"bincount: input must be a 1-D integer tensor, got {v.dtype} {v.shape}")
    if v.size and v.min() < 0:
        raise InputError("bincount: input must be non-negative")
    w = None if weights is None else as_tensor(weights, name="bincount() weights").data
    out = np.bincount(v, weights=w, minlength=int(minlength))
    return _make(out if w is not None else out.astype(np.int64))


def histc(x: Any, bins: int = 100, min: float = 0.0, max: float = 0.0) -> Tensor:
    """Histogram of ``x`` with ``bins`` equal bins over ``[min, max]`` (both 0: the data's
    range); elements outside are ignored. Returns ``x``'s float dtype."""
    x = as_tensor(x, name="histc() input")
    lo, hi = float(min), float(max)
    if lo == hi == 0.0 and x.data.size:
        lo, hi = float(x.data.min()), float(x.data.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise InputError(f"histc: max ({max}) must be larger than min ({min})")
    counts, _ = np.histogram(x.data, bins=int(bins), range=(lo, hi))
    return _make(counts.astype(x.dtype if x.dtype.kind == "f" else np.float32))
