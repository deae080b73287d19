"""Shape ops built from views and indexing: ``t narrow movedim roll tile repeat
repeat_interleave index_select take_along_dim broadcast_tensors meshgrid hstack vstack``.

Each is a composition of differentiable primitives (slices, ``reshape``, ``expand``, ``cat``,
indexing), so gradients follow: ``tile``/``repeat`` sum the copies back, ``roll`` rolls the
gradient back, ``index_select`` scatter-adds repeated indices. ``narrow`` and ``t`` are views.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x.repeat(3)            # torch's repeat: tile the whole tensor
    >>> (y * td.arange(6.0)).sum().backward(); x.grad
    tensor([6., 9.])
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import Tensor, _make, as_tensor, norm_dim
from tadiff.ops.indexing import gather, getitem
from tadiff.ops.shape import _view_op, broadcast_to, cat, expand, moveaxis, reshape

__all__ = [
    "broadcast_tensors", "diff", "hstack", "index_select", "meshgrid", "movedim", "narrow",
    "repeat", "repeat_interleave", "roll", "t", "take_along_dim", "tensor_split", "tile",
    "unflatten", "vstack",
]  # fmt: skip

movedim = moveaxis


def t(x: Any) -> Tensor:
    """Transpose of a tensor with at most 2 dims (a view)."""
    x = as_tensor(x, name="t() input")
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    data, dims = (x.data.T, (0, 1)) if x.ndim == 2 else (x.data.view(), (0, 0))
    return _view_op(x, data, d.TBackward0, dims)


def narrow(x: Any, dim: int, start: int, length: int) -> Tensor:
    """``x`` restricted to ``start:start+length`` along ``dim`` (a view)."""
    x = as_tensor(x, name="narrow() input")
    ax = norm_dim(dim, x.ndim)
    n = x.shape[ax]
    start = int(start) + (n if start < 0 else 0)
    if not (0 <= start <= n and length >= 0 and start + length <= n):
        raise InputError(
            f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) of dim {dim}"
        )
    return getitem(x, (slice(None),) * ax + (slice(start, start + int(length)),))


def _ints(value: Any, what: str) -> tuple[int, ...]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        raise DTypeError(f"{what} must be ints, got {value!r}")
    return tuple(int(v) for v in items)


def roll(x: Any, shifts: Any, dims: Any = None) -> Tensor:
    """Shift elements cyclically by ``shifts`` along ``dims`` (flattened when ``dims`` is None).

    Example:
        >>> import tadiff as td
        >>> td.roll(td.arange(4.0), 1)
        tensor([3., 0., 1., 2.])
    """
    x = as_tensor(x, name="roll() input")
    shifts = _ints(shifts, "roll: shifts")
    if dims is None:
        if len(shifts) != 1:
            raise InputError(f"roll: without dims, shifts must be one int, got {shifts}")
        return reshape(roll(reshape(x, (-1,)), shifts[0], 0), x.shape)
    dims = _ints(dims, "roll: dims")
    if len(dims) != len(shifts):
        raise InputError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    out = x
    for shift, dim in zip(shifts, dims, strict=True):
        ax = norm_dim(dim, x.ndim)
        n = x.shape[ax]
        k = shift % n if n else 0
        if k:
            lead = (slice(None),) * ax
            out = cat(
                [getitem(out, (*lead, slice(n - k, n))), getitem(out, (*lead, slice(0, n - k)))], ax
            )
    return out if out is not x else x * 1 if x._rg else _make(x.data.copy())


def repeat(x: Any, *sizes: Any) -> Tensor:
    """torch's ``Tensor.repeat``: tile ``x`` ``sizes[i]`` times along each dim; extra leading
    sizes add dims (NumPy's ``tile``)."""
    x = as_tensor(x, name="repeat() input")
    reps = _ints(sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes,
                 "repeat: sizes")  # fmt: skip
    if len(reps) < x.ndim:
        raise ShapeError(
            f"repeat: number of repeat dims ({len(reps)}) can not be smaller than the number of "
            f"dims of the tensor ({x.ndim})"
        )
    if any(r < 0 for r in reps):
        raise InputError(f"repeat: sizes must be non-negative, got {reps}")
    shape = (1,) * (len(reps) - x.ndim) + x.shape
    # (r0, s0, r1, s1, ...) by broadcasting, then merge each pair
    spread = reshape(x, tuple(v for s in shape for v in (1, s)))
    tiled = expand(spread, *(v for r, s in zip(reps, shape, strict=True) for v in (r, s)))
    return reshape(tiled, tuple(r * s for r, s in zip(reps, shape, strict=True)))


def tile(x: Any, dims: Any) -> Tensor:
    """NumPy's ``tile``: like ``repeat``, but fewer ``dims`` than ``x.ndim`` are padded with 1s
    in front."""
    x = as_tensor(x, name="tile() input")
    reps = _ints(dims, "tile: dims")
    return repeat(x, (1,) * (x.ndim - len(reps)) + reps)


def repeat_interleave(x: Any, repeats: Any, dim: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times (an int, or one count per element) along ``dim``
    (``x`` flattened when ``dim`` is None)."""
    x = as_tensor(x, name="repeat_interleave() input")
    if dim is None:
        x, dim = reshape(x, (-1,)), 0
    ax = norm_dim(dim, max(x.ndim, 1))
    counts = repeats.data if isinstance(repeats, Tensor) else np.asarray(repeats)
    if counts.dtype.kind not in "iu":
        raise DTypeError(f"repeat_interleave: repeats must be ints, got dtype {counts.dtype}")
    n = x.shape[ax] if x.ndim else 1
    if counts.ndim == 0:
        counts = np.full(n, int(counts))
    if counts.shape != (n,) or (counts.size and counts.min() < 0):
        raise ShapeError(
            f"repeat_interleave: repeats must be a non-negative int or {n} non-negative ints "
            f"(the size of dim {dim}), got shape {counts.shape}"
        )
    return index_select(x, ax, np.repeat(np.arange(n), counts))


def index_select(x: Any, dim: int, index: Any) -> Tensor:
    """The entries of ``x`` at the 1-D integer ``index`` along ``dim`` (a copy; repeated indices
    add up in the gradient)."""
    x = as_tensor(x, name="index_select() input")
    idx = index.data if isinstance(index, Tensor) else np.asarray(index)
    if idx.dtype.kind not in "iu" or idx.ndim > 1:
        raise DTypeError(
            f"index_select: index must be a 0-D or 1-D integer tensor, got {idx.dtype} {idx.shape}"
        )
    ax = norm_dim(dim, max(x.ndim, 1))
    return getitem(x, (slice(None),) * ax + (idx.reshape(-1),))


def take_along_dim(x: Any, indices: Any, dim: int | None = None) -> Tensor:
    """``gather`` with broadcasting of ``x`` and ``indices`` over the other dims (``dim`` None:
    both flattened)."""
    x = as_tensor(x, name="take_along_dim() input")
    idx = indices.data if isinstance(indices, Tensor) else np.asarray(indices)
    if dim is None:
        return gather(reshape(x, (-1,)), 0, idx.reshape(-1))
    ax = norm_dim(dim, x.ndim)
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"take_along_dim: indices must have as many dims as the input ({x.ndim}), got "
            f"{idx.ndim}"
        )
    shape = [max(a, b) for a, b in zip(x.shape, idx.shape, strict=True)]
    shape_x, shape_i = list(shape), list(shape)
    shape_x[ax], shape_i[ax] = x.shape[ax], idx.shape[ax]
    return gather(broadcast_to(x, tuple(shape_x)), ax, np.broadcast_to(idx, tuple(shape_i)))


def broadcast_tensors(*tensors: Any) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape (views)."""
    ts = [as_tensor(t, name="broadcast_tensors() argument") for t in tensors]
    shape = np.broadcast_shapes(*(t.shape for t in ts))
    return tuple(broadcast_to(t, shape) for t in ts)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D tensors (``indexing='ij'`` or ``'xy'``), as expanded views."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise InputError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [as_tensor(t, name="meshgrid() argument") for t in tensors]
    for t_ in ts:
        if t_.ndim > 1:
            raise ShapeError(f"meshgrid: expects 0-D or 1-D tensors, got shape {t_.shape}")
    ts = [reshape(t_, (-1,)) for t_ in ts]
    order = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(ts[i].shape[0] for i in order)
    grids = []
    for k, t_ in enumerate(ts):
        pos = order.index(k)
        view = reshape(t_, tuple(-1 if i == pos else 1 for i in range(len(ts))))
        grids.append(broadcast_to(view, shape))
    return tuple(grids)


def hstack(tensors: Any) -> Tensor:
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    ts = [as_tensor(t, name="hstack() argument") for t in tensors]
    return cat(ts, 0 if ts and ts[0].ndim == 1 else 1)


def vstack(tensors: Any) -> Tensor:
    """Concatenate along dim 0, 1-D tensors as rows."""
    ts = [as_tensor(t, name="vstack() argument") for t in tensors]
    return cat([reshape(t, (1, -1)) if t.ndim < 2 else t for t in ts], 0)


def diff(x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Tensor:
    """``n``-th forward difference along ``dim`` (``prepend``/``append`` joined first)."""
    x = as_tensor(x, name="diff() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    parts = [
        as_tensor(p, x, "diff() prepend/append") for p in (prepend, x, append) if p is not None
    ]
    out = cat(parts, ax) if len(parts) > 1 else x
    if n < 0:
        raise InputError(f"diff: order n must be non-negative, got {n}")
    lead = (slice(None),) * ax
    for _ in range(n):
        out = getitem(out, (*lead, slice(1, None))) - getitem(out, (*lead, slice(None, -1)))
    return out


def tensor_split(x: Any, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of ``x`` split along ``dim``: into ``n`` nearly equal parts (the first ``size % n``
    one longer) for an int, or at the given indices."""
    x = as_tensor(x, name="tensor_split() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    size = x.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n <= 0:
            raise InputError(f"tensor_split: number of sections must be positive, got {n}")
        q, r = divmod(size, n)
        bounds = np.cumsum([0] + [q + (1 if i < r else 0) for i in range(n)])
    else:
        cuts = [
            int(i)
            for i in (
                indices_or_sections.data.tolist()
                if isinstance(indices_or_sections, Tensor)
                else indices_or_sections
            )
        ]
        bounds = [0, *cuts, size]
    lead = (slice(None),) * ax
    return tuple(
        getitem(x, (*lead, slice(int(lo), max(int(lo), int(hi)))))
        for lo, hi in itertools.pairwise(bounds)
    )


def unflatten(x: Any, dim: int, sizes: Any) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one entry may be -1)."""
    x = as_tensor(x, name="unflatten() input")
    ax = norm_dim(dim, max(x.ndim, 1))
    return reshape(x, (*x.shape[:ax], *_ints(tuple(sizes), "unflatten: sizes"), *x.shape[ax + 1 :]))
