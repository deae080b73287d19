"""Indexed writes with torch's names: ``scatter`` (overwrite), ``index_add``, ``index_fill``,
``index_copy``, ``masked_select``.

Each is out of place; ``index_add`` is a primitive, the others compositions of
``index_put``/``scatter_add``/indexing. The gradients: the overwritten entries of the input get
no gradient, the written values get the gradient at their destinations (summed where
``index_add`` adds several into one).

Example:
    >>> import tadiff as td
    >>> td.index_add(td.zeros(3), 0, td.tensor([0, 0, 2]), td.tensor([1.0, 2.0, 5.0]))
    tensor([3., 0., 5.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff._array import add_at, out_of_range
from tadiff.errors import AutogradError, DTypeError, IndexingError, InputError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import Tensor, _make, _state, as_tensor, norm_dim, record
from tadiff.ops._dual import _full_index
from tadiff.ops.indexing import getitem, index_put, scatter_add
from tadiff.ops.inplace import adopt, inplace_of, reattach_views, refuse_leaf
from tadiff.ops.shape import broadcast_to

__all__ = ["index_add", "index_add_", "index_copy", "index_fill", "masked_select", "scatter"]


def _index_1d(index: Any, what: str) -> np.ndarray:
    idx = index.data if isinstance(index, Tensor) else np.asarray(index)
    if idx.dtype.kind not in "iu" or idx.ndim > 1:
        raise DTypeError(
            f"{what}: index must be a 0-D or 1-D integer tensor, got {idx.dtype} {idx.shape}"
        )
    return idx if idx.ndim == 1 else idx.reshape(-1)


def scatter(
    x: Any, dim: int, index: Any, src: Any = None, *, value: Any = None, reduce: str | None = None
) -> Tensor:
    """A copy of ``x`` with ``out[index[i][j]][j] = src[i][j]`` (for ``dim=0``); ``value`` (a
    number) instead of ``src`` writes a constant. With repeated indices the last write wins
    (torch leaves that undefined). ``reduce='add'`` is ``scatter_add``."""
    x = as_tensor(x, name="scatter() input")
    ax = norm_dim(dim, x.ndim)
    idx = index.data if isinstance(index, Tensor) else np.asarray(index)
    if idx.dtype.kind not in "iu" or idx.ndim != x.ndim:
        raise DTypeError(
            f"scatter(): index must be an integer tensor with {x.ndim} dims, got {idx.dtype} "
            f"with {idx.ndim}"
        )
    if (src is None) == (value is None):
        raise InputError("scatter(): give exactly one of src and value")
    if src is None:
        src = value
    src = as_tensor(src, x, "scatter() src")
    if src.ndim:
        if src.ndim != idx.ndim or any(s < i for s, i in zip(src.shape, idx.shape, strict=True)):
            raise ShapeError(
                f"scatter(): src of shape {src.shape} must be at least the index's shape "
                f"{idx.shape} in every dim"
            )
        src = getitem(src, tuple(slice(0, n) for n in idx.shape))  # torch uses that corner
    if reduce == "add":
        return scatter_add(x, ax, idx, broadcast_to(src, idx.shape))
    if reduce is not None:
        raise InputError(f"scatter(): reduce must be None or 'add', got {reduce!r}")
    if idx.size and (idx.min() < -x.shape[ax] or idx.max() >= x.shape[ax]):
        raise InputError(f"scatter(): index out of bounds for dim {dim} with size {x.shape[ax]}")
    return index_put(x, _full_index(idx, ax), broadcast_to(src, idx.shape))


def _source(x: Tensor, ax: int, idx: np.ndarray, source: Any, what: str) -> Tensor:
    """``source`` checked to have ``x``'s shape with ``len(idx)`` along ``ax``."""
    if type(source) is not Tensor:
        source = as_tensor(source, x, f"{what}() source")
    shape = x.data.shape
    expected = (*shape[:ax], len(idx), *shape[ax + 1 :])
    if source.data.shape != expected:
        raise ShapeError(f"{what}(): source must have shape {expected}, got {source.shape}")
    return source


def _along(ax: int, idx: np.ndarray) -> tuple[Any, ...]:
    return (idx,) if ax == 0 else (slice(None),) * ax + (idx,)


def index_add(x: Any, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Tensor:
    """``x`` with ``alpha * source`` added at ``index`` along ``dim`` (repeated indices add).

    One node, ``IndexAddBackward0``: ``x`` gets the gradient itself, ``source`` the gradient's
    slices at ``index`` (times ``alpha``).

    Raises:
        IndexingError: an index outside ``[0, size)`` (an IndexError, as torch's).
    """
    x = as_tensor(x, name="index_add() input")
    ax, idx, source, src = _index_add_operands(x, dim, index, source, alpha)
    data = x.data.astype(np.result_type(x.data, source.data), copy=True)
    add_at(data, _along(ax, idx) if x.ndim else idx, src)
    if (x._rg or source._rg) and _state.enabled:
        return record(d.IndexAddBackward0, data, (x, source), (), (ax, idx.copy(), alpha))
    return _make(data)


def index_add_(x: Tensor, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Tensor:
    """:func:`index_add` in place: the sum goes straight into ``x``'s memory, without the
    out-of-place copy (a simulation step that scatters forces with it pays for the scatter and,
    when recording, one node). Views and mixed dtypes take the general in-place path."""
    enabled = _state.enabled
    # a view under grad mode takes the general path too: it refuses views of leaves that
    # require grad and views made under no_grad, as torch does
    if (
        not isinstance(source, Tensor)
        or source.data.dtype != x.data.dtype
        or (enabled and x._base is not None)
    ):
        return _index_add_recorded(x, dim, index, source, alpha=alpha)
    recorded = enabled and (x._rg or source._rg)
    if recorded:
        refuse_leaf(x, "index_add_")
    ax, idx, source, src = _index_add_operands(x, dim, index, source, alpha)
    data = x.data
    if not data.flags.writeable:
        raise AutogradError("index_add_: cannot write into this tensor's memory: it is read-only")
    add_at(data, _along(ax, idx) if data.ndim else idx, src)
    if recorded:
        # x's edge is still its value before the write (the backward reads no value of x, so
        # nothing is copied); x then becomes the node's output
        adopt(x, record(d.IndexAddBackward0, data, (x, source), (), (ax, idx.copy(), alpha)))
        if x._meta is not None and x._meta.views:
            reattach_views(x)
    vc = x._vc
    if vc is None:
        vc = x._vc = [0]
    vc[0] += 1
    return x


_index_add_recorded = inplace_of(index_add, "index_add_")


def _index_add_operands(
    x: Tensor, dim: int, index: Any, source: Any, alpha: float
) -> tuple[int, np.ndarray, Tensor, np.ndarray]:
    """``index_add``'s checked operands: the axis, the 1-d index, ``source`` as a Tensor and
    the array to add (``alpha * source``)."""
    ndim = x.data.ndim
    ax = norm_dim(dim, ndim or 1)
    idx = _index_1d(index, "index_add")
    source = _source(x, ax, idx, source, "index_add")
    if out_of_range(idx, x.data.shape[ax] if ndim else 1):
        raise IndexingError(
            f"index_add(): index out of range in self (indices {idx.min()}..{idx.max()} along "
            f"dim {dim} of size {x.shape[ax] if x.ndim else 1})"
        )
    src = source.data if alpha == 1 else source.data * alpha
    return ax, idx, source, src


def index_fill(x: Any, dim: int, index: Any, value: Any) -> Tensor:
    """``x`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or a 0-d
    Tensor)."""
    x = as_tensor(x, name="index_fill() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"index_fill(): value must be a number or a 0-d tensor, got {value.shape}")
    return index_put(x, _along(ax, _index_1d(index, "index_fill")), value)


def index_copy(x: Any, dim: int, index: Any, source: Any) -> Tensor:
    """``x`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    x = as_tensor(x, name="index_copy() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    idx = _index_1d(index, "index_copy")
    source = _source(x, ax, idx, source, "index_copy")
    return index_put(x, _along(ax, idx), source)


def masked_select(x: Any, mask: Any) -> Tensor:
    """The elements of ``x`` where the boolean ``mask`` (broadcast with ``x``) holds, as 1-D."""
    x = as_tensor(x, name="masked_select() input")
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise DTypeError(f"masked_select: mask must be boolean, got {m.dtype}")
    shape = np.broadcast_shapes(x.shape, m.shape)
    return getitem(broadcast_to(x, shape), np.broadcast_to(m, shape))
