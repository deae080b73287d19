"""Indexing: ``x[key]`` (basic and advanced), out-of-place ``index_put`` (behind ``x[key] = v``),
``gather`` and ``scatter_add``.

Gradients of indexing scatter-*add* into zeros, so an element picked twice by an advanced index
receives both contributions. The scatter is itself a recorded op (``index_scatter``), whose own
gradient is indexing again: second derivatives work through indexing.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> x[[0, 0, 2]].sum().backward()
    >>> x.grad
    tensor([2., 0., 1.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff._array import add_at
from tadiff.errors import DTypeError, IndexingError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import Tensor, _make, _state, as_tensor, norm_dim, record
from tadiff.ops._dual import _full_index
from tadiff.ops.shape import _as_view

_ndarray = np.ndarray
_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)


def normalize_key(key: Any) -> tuple[tuple[Any, ...], bool]:
    """The key as a tuple with arrays in place of Tensors/lists; and whether it is basic."""
    parts = key if isinstance(key, tuple) else (key,)
    out = []
    basic = True
    for k in parts:
        kind = type(k)
        if kind is slice or kind is int:  # the common cases first
            out.append(k)
            continue
        if isinstance(k, Tensor):
            k = k.data
            if k.ndim == 0 and k.dtype.kind in "iu":  # torch reads a 0-d integer tensor as an
                out.append(int(k))  # int: x[t] selects a view (SelectBackward0), no copy
                continue
        elif isinstance(k, list):
            k = np.asarray(k)
        if isinstance(k, np.ndarray):
            if k.dtype.kind not in "biu":
                raise IndexingError(
                    f"tensors used as indices must be long, int or bool tensors; got {k.dtype}"
                )
            basic = False
        elif isinstance(k, bool) or not isinstance(k, _BASIC):
            raise IndexingError(f"unsupported index {k!r} of type {type(k).__name__}")
        out.append(k)
    return tuple(out), basic


def kept_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` with copies of its index and mask arrays, for a backward pass to keep: the
    caller's tensors may be written in place before it runs (torch version-checks them and
    raises; a copy gives the gradient of the forward that was computed).

    Example:
        >>> rows = np.array([0, 2])
        >>> kept = kept_key((rows, slice(None)))
        >>> rows[0] = 1
        >>> kept[0].tolist()
        [0, 2]
    """
    if len(key) == 1:  # one index or mask, the common key: no loop
        k = key[0]
        return (k.copy(),) if type(k) is np.ndarray else key
    return tuple([k.copy() if type(k) is np.ndarray else k for k in key])


def _index_error(exc: IndexError, shape: tuple[int, ...]) -> IndexingError:
    """NumPy's index error, naming the shape of the tensor indexed."""
    return IndexingError(f"{exc} (indexing a tensor of shape {shape})")


def _index(data: np.ndarray, key: tuple[Any, ...]) -> np.ndarray:
    try:
        return data[key]
    except IndexError as exc:
        raise _index_error(exc, data.shape) from None


def getitem(x: Tensor, key: Any) -> Tensor:
    """``x[key]``: ints, slices, ``None``, ``...``, integer/boolean arrays or Tensors.

    Basic indexing returns a view (shared memory, like torch); advanced indexing copies.
    """
    kind = type(key)
    if kind is Tensor or kind is _ndarray:
        array = key.data if kind is Tensor else key
        if not array.ndim and array.dtype.kind in "iu":
            key, kind = int(array), int  # x[t] of a 0-d integer t is x[int(t)], as in torch
        elif array.dtype.kind == "i" and x.data.ndim:  # (unsigned bytes index as masks)
            return _take(x, array)
    if kind is int or kind is slice:  # x[i] and x[a:b], the loops' cases: no key to normalize
        # x[i, ...]: a 0-d view like torch's (x[i] of a 1-d array would be a NumPy scalar);
        # _index(...), inlined: loops over rows pass here on every step
        try:
            data = x.data[(key, Ellipsis) if kind is int else key]
        except IndexError as exc:
            raise _index_error(exc, x.data.shape) from None
        if x._rg and _state.enabled:
            node = d.SelectOneBackward0 if kind is int else d.SliceOneBackward0
            out = record(node, data, (x,), (), (x.data.shape, key))
        else:
            out = _make(data)
        return _as_view(out, x)
    key, basic = normalize_key(key)
    select = basic and all(type(k) is int for k in key)
    # x[i, j, ...]: a 0-d view like torch's (x[i, j] would give NumPy a scalar copy)
    data = _index(x.data, (*key, Ellipsis) if select else key)
    if x._rg and _state.enabled:
        if not basic:
            node = d.IndexBackward0
            key = kept_key(key)
        elif select:
            node = d.SelectBackward0
        else:
            node = d.SliceBackward0
        out = record(node, data, (x,), (), (x.data.shape, key))
    else:
        out = _make(data)
    if basic:
        _as_view(out, x)
    return out


def _take(x: Tensor, rows: np.ndarray) -> Tensor:
    """``x[rows]`` for an integer array ``rows`` of any shape: ``np.take`` along the first axis
    gives the same copy as NumPy's advanced indexing at a third of its fixed cost (12k against
    34k instructions for 180 rows of a (100, 2) array), which gathers inside loops pay per step.
    """
    try:
        data = np.take(x.data, rows, axis=0)
    except IndexError as exc:
        raise _index_error(exc, x.data.shape) from None
    if x._rg and _state.enabled:
        return record(d.IndexBackward0, data, (x,), (), (x.data.shape, (rows.copy(),)))
    return _make(data)


def index_scatter(g: Tensor, key: Any, shape: tuple[int, ...]) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at ``key`` (duplicates accumulate): the adjoint of
    ``x[key]``, recorded so that indexing has second derivatives."""
    key, _ = normalize_key(key)
    g = as_tensor(g)
    out = np.zeros(shape, g.data.dtype)
    add_at(out, key, g.data)
    if g._rg and _state.enabled:
        return record(d.IndexScatterBackward0, out, (g,), (), (key,))
    return _make(out)


def index_put(x: Tensor, key: Any, value: Any) -> Tensor:
    """A copy of ``x`` with ``value`` written at ``key`` (what ``x[key] = value`` records).

    With repeated advanced indices the last write wins, as in NumPy, and the gradient of
    ``value`` at the repeats is not meaningful (torch leaves this undefined too).
    """
    key, _ = normalize_key(key)
    v = as_tensor(value, x, "assigned value")
    data = x.data.copy()
    write(data, key, v)
    if (x._rg or v._rg) and _state.enabled:
        return record(d.IndexPutBackward0, data, (x, v), (), (kept_key(key), v.data.shape))
    return _make(data)


def write(data: np.ndarray, key: tuple[Any, ...], value: Tensor | float) -> None:
    """``data[key] = value`` (a normalized key; a Tensor or a Python number), with the shape
    errors named."""
    array = value.data if isinstance(value, Tensor) else value
    try:
        data[key] = array
    except (IndexError, ValueError) as exc:
        raise IndexingError(
            f"cannot assign a value of shape {np.shape(array)} to index {key!r} of a tensor of "
            f"shape {data.shape}: {exc}"
        ) from None


def _check_index(x: np.ndarray, dim: int, index: Any, what: str) -> np.ndarray:
    idx = index.data if isinstance(index, Tensor) else np.asarray(index)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{what}(): Expected dtype int64 for index, got {idx.dtype}")
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"{what}(): Index tensor must have the same number of dimensions as input tensor "
            f"({idx.ndim} vs {x.ndim})"
        )
    for i, (n, m) in enumerate(zip(idx.shape, x.shape, strict=False)):
        if i != dim and n > m:
            raise ShapeError(
                f"{what}(): Size does not match at dimension {i}: index has {n}, input has {m}"
            )
    if idx.size and (idx.min() < -x.shape[dim] or idx.max() >= x.shape[dim]):
        raise IndexingError(
            f"{what}(): index {int(idx.max() if idx.max() >= x.shape[dim] else idx.min())} is out "
            f"of bounds for dimension {dim} with size {x.shape[dim]}"
        )
    return idx


def gather(x: Tensor, dim: int, index: Any) -> Tensor:
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` for ``dim=0`` (torch's ``gather``).

    Args:
        x: input Tensor.
        dim: the dim to gather along.
        index: integer Tensor/array with ``x``'s number of dims.

    Example:
        >>> import tadiff as td
        >>> td.gather(td.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, td.tensor([[1], [0]]))
        tensor([[2.],
                [3.]])
    """
    x = as_tensor(x)
    ax = norm_dim(dim, x.data.ndim)
    idx = _check_index(x.data, ax, index, "gather")
    data = x.data[_full_index(idx, ax)]
    if x._rg and _state.enabled:
        return record(d.GatherBackward0, data, (x,), (), (ax, idx.copy(), x.data.shape))
    return _make(data)


def scatter_add(x: Tensor, dim: int, index: Any, src: Any) -> Tensor:
    """A copy of ``x`` with ``src`` added at ``index`` along ``dim`` (torch's ``scatter_add``);
    the adjoint of :func:`gather`."""
    x = as_tensor(x)
    src = as_tensor(src, x, "src")
    ax = norm_dim(dim, x.data.ndim)
    idx = _check_index(x.data, ax, index, "scatter_add")
    if src.data.shape != idx.shape:
        src_view = np.broadcast_to(src.data, idx.shape) if src.data.ndim == 0 else None
        if src_view is None:
            raise ShapeError(
                f"scatter_add(): src shape {src.data.shape} != index shape {idx.shape}"
            )
    data = x.data.astype(np.result_type(x.data, src.data), copy=True)
    add_at(data, _full_index(idx, ax), src.data)
    if (x._rg or src._rg) and _state.enabled:
        return record(d.ScatterAddBackward0, data, (x, src), (), (ax, idx.copy()))
    return _make(data)
