"""Shape ops: ``reshape view flatten transpose permute T mT expand broadcast_to squeeze unsqueeze
cat stack split chunk unbind flip clone to``.

Like torch, the view ops (``reshape``, ``transpose``, ``expand``, ``squeeze``, ...) return tensors
that share memory with their input; they also share its version counter, so an in-place change
through either is seen by the saved-tensor checks.

Example:
    >>> import tadiff as td
    >>> x = td.arange(6.0).reshape(2, 3)
    >>> x.T.shape, td.cat([x, x], dim=1).shape
    ((3, 2), (2, 6))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any
from weakref import ref

import numpy as np

from tadiff._array import stack_arrays
from tadiff._device import DEVICE_TYPES, check_device, device
from tadiff.autograd.tensor import _Meta
from tadiff.errors import DTypeError, InputError, ShapeError, type_name
from tadiff.ops import derivatives as d
from tadiff.ops._common import (
    Tensor,
    _make,
    _state,
    as_tensor,
    norm_dim,
    pick_axis,
    record,
    record_multi,
)
from tadiff.ops._dual import broadcast_view


def _as_view(out: Tensor, x: Tensor) -> Tensor:
    """Mark ``out`` as a view of ``x``: one version counter for both, flagged as shared; ``out``
    remembers the base of ``x`` (``x`` itself unless ``x`` is a view) as its ``_base``.

    The base keeps weak references to its views: an in-place op recorded on the base or on one
    view rewrites the graph of every view still alive (``tadiff.ops.inplace``).
    """
    vc = x._vc
    if vc is None:
        vc = x._vc = [0, True]
    elif len(vc) == 1:
        vc.append(True)
    out._vc = vc
    base = x._base
    if base is None:
        base = x
    out._base = base
    if base._rg and not _state.enabled:  # rare: the view may not be written while recording
        out._meta = _Meta(view_no_grad=True)
    meta = base._meta or base._get_meta()
    views = meta.views
    if views is None:
        meta.views = [ref(out)]
        return out
    views.append(ref(out))
    n = len(views)
    if n >= 64 and not n & (n - 1):  # at powers of two: drop dead views, amortised O(1)
        views[:] = [r for r in views if r() is not None]
    return out


def _as_views(outs: tuple[Tensor, ...], x: Tensor) -> tuple[Tensor, ...]:
    """:func:`_as_view` for several new views of ``x`` at once (``unbind``, ``split``, iterating):
    the base's bookkeeping is looked up once."""
    vc = x._vc
    if vc is None:
        vc = x._vc = [0, True]
    elif len(vc) == 1:
        vc.append(True)
    base = x._base
    if base is None:
        base = x
    flagged = base._rg and not _state.enabled  # as in _as_view
    for out in outs:
        out._vc = vc
        out._base = base
        if flagged:
            out._meta = _Meta(view_no_grad=True)
    meta = base._meta or base._get_meta()
    views = meta.views
    if views is None:
        views = meta.views = []
    before = len(views)
    views += map(ref, outs)
    if len(views) >= 64 and len(views).bit_length() > before.bit_length():
        views[:] = [r for r in views if r() is not None]  # crossed a power of two: as _as_view
    return outs


def _view_op(x: Tensor, data: np.ndarray, node: type, args: tuple[Any, ...]) -> Tensor:
    out = record(node, data, (x,), (), args) if x._rg and _state.enabled else _make(data)
    base = data.base
    if base is not None:
        # NumPy points a view at the array owning the memory: that is proof enough, and costs
        # nothing beside np.may_share_memory, which is left for what reshape may have copied
        xd = x.data
        if base is (xd if xd.base is None else xd.base) or np.may_share_memory(data, xd):
            _as_view(out, x)
    return out


def _shape_arg(shape: tuple[Any, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        return tuple(int(s) for s in shape)
    except TypeError:
        raise DTypeError(f"shape must be ints, got {shape!r}") from None


def reshape(x: Tensor, *shape: Any) -> Tensor:
    """The same elements in a new shape (one entry may be -1); a view when possible.

    Example:
        >>> import tadiff as td
        >>> td.zeros(6).reshape(2, -1).shape
        (2, 3)
    """
    x = as_tensor(x)
    target = _shape_arg(shape)
    try:
        data = x.data.reshape(target)
    except ValueError:
        raise ShapeError(
            f"shape '{list(target)}' is invalid for input of size {x.data.size} "
            f"(tensor shape {x.data.shape})"
        ) from None
    return _view_op(x, data, d.ViewBackward0, (x.data.shape,))


view = reshape


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` (inclusive) into one."""
    x = as_tensor(x)
    if x.data.ndim == 0:
        return reshape(x, 1)
    s = norm_dim(start_dim, x.data.ndim, "start_dim")
    e = norm_dim(end_dim, x.data.ndim, "end_dim")
    if s > e:
        raise InputError(f"flatten() has invalid args: start_dim {start_dim} > end_dim {end_dim}")
    shape = x.data.shape
    return reshape(x, (*shape[:s], math.prod(shape[s : e + 1]), *shape[e + 1 :]))


def transpose(x: Tensor, *dims: Any) -> Tensor:
    """``transpose(x, dim0, dim1)`` swaps two dims (torch); ``transpose(x)`` reverses all dims and
    ``transpose(x, axes)`` permutes (NumPy)."""
    x = as_tensor(x)
    if len(dims) == 2 and all(isinstance(v, (int, np.integer)) for v in dims):
        d0 = norm_dim(dims[0], x.data.ndim, "dim0")
        d1 = norm_dim(dims[1], x.data.ndim, "dim1")
        if x.data.ndim == 0:
            return _view_op(x, x.data.view(), d.TransposeBackward0, (0, 0))
        return _view_op(x, np.swapaxes(x.data, d0, d1), d.TransposeBackward0, (d0, d1))
    if not dims:
        return permute(x, tuple(reversed(range(x.data.ndim))))
    return permute(x, *dims)


swapaxes = transpose


def permute(x: Tensor, *dims: Any) -> Tensor:
    """Reorder dims: output dim ``i`` is input dim ``dims[i]``."""
    x = as_tensor(x)
    order = _shape_arg(dims)
    if len(order) != x.data.ndim:
        raise ShapeError(
            f"permute: number of dims don't match: tensor has {x.data.ndim} dims, got {len(order)}"
        )
    order = tuple(norm_dim(v, x.data.ndim) for v in order)
    if sorted(order) != list(range(x.data.ndim)):
        raise InputError(f"permute: dims {dims} are not a permutation of 0..{x.data.ndim - 1}")
    inverse = tuple(int(i) for i in np.argsort(order))
    return _view_op(x, np.transpose(x.data, order), d.PermuteBackward0, (inverse,))


def expand(x: Tensor, *sizes: Any) -> Tensor:
    """Broadcast to ``sizes`` without copying (-1 keeps a dim); new dims go in front."""
    x = as_tensor(x)
    target = list(_shape_arg(sizes))
    lead = len(target) - x.data.ndim
    if lead < 0:
        raise ShapeError(
            f"expand: the number of sizes provided ({len(target)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({x.data.ndim})"
        )
    for i, n in enumerate(x.data.shape):
        want = target[lead + i]
        if want == -1:
            target[lead + i] = n
        elif n != 1 and want != n:
            raise ShapeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({n}) at "
                f"non-singleton dimension {lead + i}. Target sizes: {list(sizes)}. "
                f"Tensor sizes: {list(x.data.shape)}"
            )
    return broadcast_to(x, tuple(target))


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    """A read-only broadcast view of ``x`` with ``shape``; gradients are summed back."""
    x = as_tensor(x)
    if type(shape) is not tuple:
        shape = _shape_arg((shape,)) if not isinstance(shape, int) else (shape,)
    try:
        data = broadcast_view(x.data, shape)
    except ValueError:
        raise ShapeError(f"cannot broadcast a tensor of shape {x.data.shape} to {shape}") from None
    return _view_op(x, data, d.ExpandBackward0, (x.data.shape,))


def squeeze(x: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """Remove dims of size 1 (only ``dim`` when given; a dim whose size is not 1 is kept)."""
    x = as_tensor(x)
    dim = pick_axis(dim, axis)
    shape = x.data.shape
    if dim is None:
        new = tuple(n for n in shape if n != 1)
    elif type(dim) is int and -len(shape) <= dim < len(shape):  # one dim: no set of dims
        new = shape if shape[dim] != 1 else shape[:dim] + shape[dim:][1:]
    else:
        dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        drop = {norm_dim(v, x.data.ndim) for v in dims} if x.data.ndim else set()
        new = tuple(n for i, n in enumerate(shape) if not (i in drop and n == 1))
    return _view_op(x, x.data.reshape(new), d.SqueezeBackward1, (shape,))


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Insert a dim of size 1 at ``dim`` (``-1`` appends)."""
    x = as_tensor(x)
    pos = norm_dim(dim, x.data.ndim + 1)
    new = (*x.data.shape[:pos], 1, *x.data.shape[pos:])
    return _view_op(x, x.data.reshape(new), d.UnsqueezeBackward0, (x.data.shape,))


def moveaxis(x: Tensor, source: Any, destination: Any) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (NumPy's ``moveaxis``, a permute)."""
    x = as_tensor(x)
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise InputError(f"moveaxis: source {src} and destination {dst} differ in length")
    src = tuple(norm_dim(s, x.data.ndim, "source") for s in src)
    dst = tuple(norm_dim(s, x.data.ndim, "destination") for s in dst)
    order = [i for i in range(x.data.ndim) if i not in src]
    for to, frm in sorted(zip(dst, src, strict=True)):
        order.insert(to, frm)
    return permute(x, tuple(order))


def _triangle(x: Tensor, k: int, upper: bool) -> Tensor:
    x = as_tensor(x)
    if x.data.ndim < 2:
        raise ShapeError(f"{'triu' if upper else 'tril'}: expected at least 2 dims, got {x.shape}")
    n, m = x.data.shape[-2:]
    keep = np.triu(np.ones((n, m), bool), k) if upper else np.tril(np.ones((n, m), bool), k)
    from tadiff.ops.elementwise import where

    return where(keep, x, 0)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (from ``diagonal`` up), zeros elsewhere."""
    return _triangle(x, diagonal, True)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (up to ``diagonal``), zeros elsewhere."""
    return _triangle(x, diagonal, False)


def flip(x: Tensor, dims: Any = None, *, axis: Any = None) -> Tensor:
    """Reverse the order of elements along ``dims`` (all dims when None)."""
    x = as_tensor(x)
    dims = pick_axis(dims, axis)
    if dims is None:
        axes = tuple(range(x.data.ndim))
    else:
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        axes = tuple(norm_dim(v, x.data.ndim) for v in dims)
    data = np.flip(x.data, axes).copy()
    if x._rg and _state.enabled:
        return record(d.FlipBackward0, data, (x,), (), (axes,))
    return _make(data)


def _tensors(tensors: Any, what: str) -> Sequence[Tensor]:
    """The list or tuple of ``cat``/``stack`` as Tensors (itself when it holds only Tensors)."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise DTypeError(
            f"{what}() expects a list or tuple of Tensors, got {type(tensors).__name__}"
        )
    if not tensors:
        raise InputError(f"{what}() expects a non-empty list of Tensors")
    for t in tensors:
        if type(t) is not Tensor:  # numbers, arrays, Parameters: converted (a rare case)
            name = f"{what}() element"
            return [u if type(u) is Tensor else as_tensor(u, name=name) for u in tensors]
    return tensors


def _arrays_of(tensors: Any, what: str) -> tuple[Sequence[Tensor], list[np.ndarray], bool]:
    """``cat``'s and ``stack``'s inputs: the tensors (see :func:`_tensors`), their arrays, and
    whether one requires grad, in one pass over a sequence of Tensors (a comprehension and an
    ``any()`` beside it cost about as much as a small ``cat`` itself)."""
    arrays = []
    needs_grad = False
    if type(tensors) is tuple or type(tensors) is list:
        for t in tensors:
            if type(t) is not Tensor:
                break
            arrays.append(t.data)
            if t._rg:
                needs_grad = True
    if not arrays or len(arrays) != len(tensors):  # anything but a sequence of Tensors (rare)
        ts = _tensors(tensors, what)  # its errors, or the elements converted
        return ts, [t.data for t in ts], any(t._rg for t in ts)
    return tensors, arrays, needs_grad


def cat(tensors: Any, dim: int = 0, *, axis: Any = None) -> Tensor:
    """Concatenate along an existing dim ``dim``.

    Example:
        >>> import tadiff as td
        >>> td.cat([td.zeros(2, 1), td.ones(2, 2)], dim=1).shape
        (2, 3)
    """
    if axis is not None or type(dim) is not int:
        dim = pick_axis(dim if axis is None else None, axis, 0)
    ts, arrays, needs_grad = _arrays_of(tensors, "cat")
    ref = arrays[0]
    if ref.ndim == 0:
        raise ShapeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    ax = dim if 0 <= dim < ref.ndim else norm_dim(dim, ref.ndim)
    try:  # NumPy checks the shapes as torch does (a loop here cost as much as the copy)
        data = np.concatenate(arrays, ax)
    except ValueError:
        _cat_mismatch(ref.shape, [a.shape for a in arrays], ax)
        raise
    if needs_grad and _state.enabled:
        offsets = [0]
        end = 0
        for a in arrays:  # the running ends (a loop: itertools.accumulate costs twice as much)
            end += a.shape[ax]
            offsets.append(end)
        return record(d.CatBackward0, data, tuple(ts), (), (ax, tuple(offsets)))
    return _make(data)


def _cat_mismatch(ref: tuple[int, ...], shapes: list[tuple[int, ...]], ax: int) -> None:
    """Raise torch's error for the first of ``shapes`` that cannot join ``ref`` along ``ax``
    (return if there is none)."""
    k = next(
        (k for k, s in enumerate(shapes)
         if len(s) != len(ref) or s[:ax] != ref[:ax] or s[ax + 1 :] != ref[ax + 1 :]),
        None,
    )  # fmt: skip
    if k is None:
        return
    s = shapes[k]
    if len(s) != len(ref):
        raise ShapeError(
            f"Tensors must have same number of dimensions: got {len(ref)} and {len(s)} "
            f"(tensor number {k} in the list)"
        ) from None  # called while NumPy's error is handled: torch's message alone
    n, m = next((n, m) for i, (n, m) in enumerate(zip(ref, s, strict=True)) if n != m and i != ax)
    raise ShapeError(
        f"Sizes of tensors must match except in dimension {ax}. Expected size {n} "
        f"but got size {m} for tensor number {k} in the list."
    ) from None


concatenate = cat


def stack(tensors: Any, dim: int = 0, *, axis: Any = None) -> Tensor:
    """Stack equally shaped tensors along a new dim ``dim``.

    Example:
        >>> import tadiff as td
        >>> td.stack([td.zeros(2), td.ones(2)], dim=1).shape
        (2, 2)
    """
    if axis is not None or type(dim) is not int:
        dim = pick_axis(dim if axis is None else None, axis, 0)
    ts, arrays, needs_grad = _arrays_of(tensors, "stack")
    shape = arrays[0].shape
    for k, a in enumerate(arrays):
        if a.shape != shape:
            raise ShapeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                f"and {list(a.shape)} at entry {k}"
            )
    ax = dim if type(dim) is int and 0 <= dim <= len(shape) else norm_dim(dim, len(shape) + 1)
    data = stack_arrays(arrays, ax)
    if needs_grad and _state.enabled:
        return record(d.StackBackward0, data, tuple(ts), (), (ax,))
    return _make(data)


def _pieces(x: Tensor, sizes: list[int], ax: int, node: type) -> tuple[Tensor, ...]:
    bounds = np.cumsum([0, *sizes])
    key = [slice(None)] * x.data.ndim
    datas = []
    for lo, hi in itertools.pairwise(bounds):
        key[ax] = slice(int(lo), int(hi))
        datas.append(x.data[tuple(key)])
    if x._rg and _state.enabled:
        outs = record_multi(node, datas, (x,), (ax,))
    else:
        outs = tuple([_make(v) for v in datas])
    return _as_views(outs, x)


def split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split along ``dim`` into pieces of ``split_size_or_sections`` (an int: equal pieces, the
    last maybe smaller; a list: the sizes, which must sum to the dim's length)."""
    x = as_tensor(x)
    ax = norm_dim(dim, x.data.ndim)
    n = x.data.shape[ax]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0 and n > 0:
            raise InputError(f"split expects split_size be positive, got {size}")
        sizes = [min(size, n - i) for i in range(0, n, size)] if n else [0]
        return _pieces(x, sizes, ax, d.SplitBackward0)
    sizes = [int(s) for s in split_size_or_sections]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ShapeError(
            f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
            f"dimension {ax}), but got split_sizes={sizes}"
        )
    return _pieces(x, sizes, ax, d.SplitWithSizesBackward0)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``chunks`` pieces of size ``ceil(n / chunks)`` along ``dim`` (maybe fewer)."""
    x = as_tensor(x)
    if chunks <= 0:
        raise InputError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    ax = norm_dim(dim, x.data.ndim)
    n = x.data.shape[ax]
    return split(x, max(-(-n // chunks), 1), ax)


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim``, as a tuple of tensors with that dim removed (one node,
    ``UnbindBackward0``, with one output per slice)."""
    x = as_tensor(x)
    if x.data.ndim == 0:
        raise ShapeError("unbind: dimension specified as 0 but tensor has no dimensions")
    ax = norm_dim(dim, x.data.ndim)
    # the trailing ``...`` keeps 0-d slices views (a bare int index would copy them)
    data = x.data
    if ax == 0:
        datas = [data[i, ...] for i in range(data.shape[0])]
    else:
        datas = [data[(slice(None),) * ax + (i, Ellipsis)] for i in range(data.shape[ax])]
    if x._rg and _state.enabled:
        outs = record_multi(d.UnbindBackward0, datas, (x,), (ax,), alike=True)
    else:
        outs = tuple([_make(v) for v in datas])
    return _as_views(outs, x)


def clone(x: Tensor) -> Tensor:
    """A copy with its own memory, still in the graph (``CloneBackward0``)."""
    x = as_tensor(x)
    data = x.data.copy()
    if x._rg and _state.enabled:
        return record(d.CloneBackward0, data, (x,))
    return _make(data)


def to(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Cast to a dtype; the gradient is cast back. torch's forms: ``to(dtype)``,
    ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``, and the keywords ``dtype``,
    ``device``, ``non_blocking`` (ignored) and ``copy`` (a new tensor even if nothing changes).
    The device must be the CPU (``"cpu"``, ``td.device("cpu")``).

    Example:
        >>> import tadiff as td
        >>> td.ones(2).to("cpu", td.float64).dtype
        dtype('float64')
    """
    x = as_tensor(x)
    if len(args) == 1 and not kwargs and not isinstance(args[0], (str, int, Tensor, device)):
        target = _to_dtype(args[0])  # the common case, to(dtype)
    else:
        target = to_target(args, kwargs)
    if target is None or target == x.data.dtype:
        return clone(x) if kwargs.get("copy") else x
    data = x.data.astype(target)
    if x._rg and _state.enabled and target.kind == "f":
        return record(d.ToCopyBackward0, data, (x,), (), (x.data.dtype,))
    return _make(data)


def _to_dtype(value: Any) -> np.dtype:
    try:
        return np.dtype(value)
    except TypeError:
        raise DTypeError(
            f"to(): expected a dtype, a device or a Tensor, got {type_name(value)}"
        ) from None


def to_target(args: tuple[Any, ...], kwargs: dict[str, Any], who: str = "to") -> Any:
    """The dtype (or None) that ``x.to(*args, **kwargs)`` asks for (also ``Module.to``'s);
    raises for a device other than the CPU."""
    unknown = set(kwargs) - {"dtype", "device", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise DTypeError(f"{who}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        dtype = rest.pop(0).dtype
    elif rest and _is_device(rest[0]):
        device = rest.pop(0)
    if rest and not isinstance(rest[0], bool):  # a bool after them is non_blocking
        dtype = rest.pop(0)
    check_device(device, who)
    return None if dtype is None else _to_dtype(dtype)


def _is_device(value: Any) -> bool:
    if isinstance(value, str):
        return value.partition(":")[0] in DEVICE_TYPES
    return isinstance(value, (int, device)) and not isinstance(value, bool)


def contiguous(x: Tensor) -> Tensor:
    """``x`` itself when C-contiguous, else a contiguous copy in the graph."""
    return x if x.data.flags.c_contiguous else clone(x)
