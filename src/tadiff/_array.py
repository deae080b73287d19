"""The array namespace of a value: write array code once for NumPy, torch and tadiff Tensors.

Kernels that must run both in tadiff's engine (NumPy arrays) and inside ``torch.autograd`` (torch
tensors, CPU or CUDA) are written against ``xp = namespace(x)`` and use the subset NumPy and torch
share (``@``, ``exp``, ``einsum``, ``sum``, indexing, ...).
"""

from __future__ import annotations

import itertools
import math
from types import ModuleType

import numpy as np


def namespace(*values: object) -> ModuleType:
    """Return the array module that operates on ``values``: ``numpy``, ``torch`` or ``tadiff``.

    The first value that is not a plain NumPy array or Python scalar decides. torch is imported
    only when a torch tensor is actually passed, so NumPy-only users never pay for it. An object
    can name its own namespace through ``__tadiff_namespace__`` (tadiff Tensors do).

    Example:
        >>> namespace(np.ones(3)).__name__
        'numpy'
    """
    for value in values:
        own = getattr(type(value), "__tadiff_namespace__", None)
        if own is not None:
            return own()
        if type(value).__module__.startswith("torch"):
            import torch  # deferred: torch is an optional extra

            return torch
    return np


def pad_constant(array: np.ndarray, pairs, value: float = 0.0) -> np.ndarray:
    """``array`` with ``(before, after)`` elements of ``value`` around each axis: a new
    C-contiguous array, like ``np.pad(array, pairs, constant_values=value)`` but several times
    faster on small arrays (one fill and one copy, none of ``np.pad``'s per-call Python work:
    about 20 against 120 microseconds on a convolution's (32, 8, 8, 8) input).

    Example:
        >>> pad_constant(np.ones((1, 2)), [(0, 0), (1, 0)]).tolist()
        [[0.0, 1.0, 1.0]]
    """
    pairs = [(int(lo), int(hi)) for lo, hi in pairs]
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(array.shape, pairs, strict=True))
    out = np.full(shape, value, dtype=array.dtype) if value else np.zeros(shape, array.dtype)
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(array.shape, pairs, strict=True))] = array
    return out


def stack_arrays(arrays, ax: int) -> np.ndarray:
    """``np.stack(arrays, ax)`` for arrays (or NumPy scalars) of one shape, which the caller
    has checked, and ``0 <= ax <= ndim``. A few arrays of one dtype are copied into a
    preallocated result: ``np.stack``'s own Python-level work costs several times the copies of
    small arrays (14 scalars: 27 against 4 µs).

    Example:
        >>> stack_arrays([np.float64(1.5), np.float64(2.5)], 0).tolist()
        [1.5, 2.5]
    """
    first = arrays[0]
    dtype = first.dtype
    for a in arrays:  # a loop, not any(): its generator cost as much as stacking three scalars
        if a.dtype != dtype:
            return np.stack(arrays, axis=ax)
    if ax == 0:
        return np.array(arrays)  # equal shapes (checked): a new leading dim, C-contiguous
    if len(arrays) > 16:
        return np.stack(arrays, axis=ax)
    shape = first.shape
    out = np.empty((*shape[:ax], len(arrays), *shape[ax:]), dtype)
    lead = (slice(None),) * ax
    for i, a in enumerate(arrays):
        out[(*lead, i)] = a
    return out


def out_of_range(idx: np.ndarray, n: int) -> bool:
    """Whether some entry of the integer array ``idx`` lies outside ``[0, n)``.

    One pass for the largest entry: seen as unsigned, a negative index is larger than any size
    (the check costs as much as a small scatter itself, so the minimum and maximum cost one).
    Below 65 536 entries ``argmax`` finds it at half the cost of NumPy's reduction (0.5 against
    1.3 µs for 180 entries, whose call overhead dominates); above, the reduction is faster.

    Example:
        >>> out_of_range(np.array([0, 2]), 3), out_of_range(np.array([0, -1]), 3)
        (False, True)
    """
    size = idx.size
    if size == 0:
        return False
    dtype = idx.dtype
    if dtype.kind == "i":
        idx = idx.view(_UNSIGNED[dtype.itemsize])
    if size < _ARGMAX_BELOW:
        at = idx.argmax()  # a flat position: ``flat`` reads it in any shape, at a cost
        return int(idx[at] if idx.ndim == 1 else idx.flat[at]) >= n
    return int(_maximum(idx, None)) >= n


_UNSIGNED = {k: np.dtype(f"u{k}") for k in (1, 2, 4, 8)}  # dtypes: a view by type costs more
_maximum = np.maximum.reduce
_ARGMAX_BELOW = 1 << 16


def strided_view(
    array: np.ndarray,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    start: tuple[int, ...] | None = None,
    writeable: bool = False,
) -> np.ndarray:
    """A view of ``array``'s memory with ``shape`` and byte ``strides`` from the element at
    index ``start`` (the first one by default): ``np.lib.stride_tricks.as_strided`` at an
    eighth of its cost (about 1 against 8 microseconds, which a small convolution pays several
    times per call).

    For a C-contiguous ``array`` the view is made over its buffer, and NumPy refuses one that
    would reach past the buffer's ends; for other arrays it falls back to ``as_strided``, which
    does not check (as there, the caller keeps the view inside the array).

    Example:
        >>> x = np.arange(6.0)
        >>> strided_view(x, (3, 2), (8, 8), start=(1,)).tolist()
        [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]
    """
    if array.flags.c_contiguous:
        offset = 0
        if start is not None:
            offset = sum(i * s for i, s in zip(start, array.strides, strict=True))
        view = np.ndarray(shape, array.dtype, array, offset, strides)
        if not writeable:
            view.flags.writeable = False
        return view
    if start is not None:
        array = array[tuple(slice(i, None) for i in start)]
    return np.lib.stride_tricks.as_strided(array, shape, strides, writeable=writeable)


def add_at(out: np.ndarray, key, values) -> None:
    """``out[key] += values`` where positions named more than once accumulate, like
    ``np.add.at(out, key, values)``.

    A scatter along one axis (one integer array along it, full slices elsewhere,
    ``x[..., idx, ...]``) into an array with few lines along that axis runs ``np.add.at`` one
    1-D line at a time, NumPy's fast path: 2-8× faster than its loop over rows. For
    floating-point ``out`` and other scatters of that form, or one integer array per axis, it
    runs ``np.bincount`` over the flat positions, summing in float64: 2-4× faster than
    ``np.add.at`` from about ten thousand values on. It goes in chunks of at least
    ``out.size`` values, so its temporaries stay within a few times ``out``'s size or 1 MiB.
    Other keys and dtypes, and smaller scatters, use ``np.add.at``.

    Args:
        out: the array to add into, any shape, written in place.
        key: an index into ``out`` (a tuple for the fast path).
        values: broadcastable to ``out[key].shape``.

    Raises:
        IndexError: an index out of range, as ``np.add.at`` does (negative indices count from
            the end).

    Example:
        >>> out = np.zeros(3)
        >>> add_at(out, (np.array([0, 2, 0]),), np.array([1.0, 5.0, 2.0]))
        >>> out
        array([3., 0., 5.])
    """
    if type(values) is not _ndarray:
        values = np.asarray(values)
    form = None
    if type(key) is tuple and 0 < len(key) <= out.ndim:
        first = key[0]
        if (
            len(key) == 1
            and type(first) is _ndarray
            and first.ndim == 1
            and first.dtype.kind in "iu"
        ):
            ndim = out.ndim
            if ndim == 1:  # NumPy's own fast path, as it is
                np.add.at(out, first, values)
                return
            if ndim == 2 and out.shape[1] == 2 and _add_pairs(out, first, values):
                return
            form = (first.shape + out.shape[1:], 0)  # rows: the common case, without the search
        else:
            form = _scatter_form(out.shape, key)
    if form is not None and form[1] is not None and out.size:
        lines, length = out.size // out.shape[form[1]], key[form[1]].size
        if lines <= _FEW_LINES or (lines <= _LINES_UPTO and length >= _LINES_FROM_LENGTH):
            if values.shape != form[0]:
                values = np.broadcast_to(values, form[0])
            if np.may_share_memory(values, out):  # np.add.at reads such values before adding
                values = values.copy()
            _add_by_lines(out, form[1], key[form[1]], values)
            return
    if (
        form is None
        or values.size < _BINCOUNT_FROM
        or out.dtype.kind != "f"
        or values.dtype.kind not in "biuf"
    ):
        np.add.at(out, key, values)
        return
    result_shape, axis = form
    for n, k in zip(out.shape, key, strict=False):
        # checked up front: an index past the end of a later axis would land in the next row
        if type(k) is np.ndarray and k.size and (k.min() < -n or k.max() >= n):
            raise IndexError(f"index out of range for an array of shape {out.shape}")
    values = np.broadcast_to(values, result_shape)
    per_row = math.prod(result_shape[1:])
    step = max(1, max(_CHUNK, out.size) // max(per_row, 1))
    for start in range(0, result_shape[0], step):
        part = slice(start, start + step)
        if axis is None:  # one array per axis: cut those that run along the first result axis
            cut = tuple(
                k[part] if k.ndim == len(result_shape) and k.shape[0] > 1 else k for k in key
            )
            _bincount_into(out, _flat_of_arrays(out.shape, cut), values[part])
        elif axis == 0:  # rows: cut the index
            rows = key[0][part]
            _bincount_into(out, _flat_along(out.shape, 0, rows), values[part])
        else:  # an index along a later axis: cut out's first axis
            piece = out[part]
            _bincount_into(piece, _flat_along(piece.shape, axis, key[axis]), values[part])


def _add_by_lines(out: np.ndarray, axis: int, index: np.ndarray, values: np.ndarray) -> None:
    """``np.add.at(out, key, values)`` for a key indexing ``axis`` with ``index`` (full slices
    elsewhere), one 1-D line along ``axis`` at a time: NumPy's ``add.at`` has a fast path for a
    1-D array and one index array, 5-10x faster per value than its general loop over rows (the
    cloth simulation's ``index_add_`` of (180, 2) forces: 13 against 7.5 microseconds). Each
    element sums the same values in the same order as ``np.add.at`` does.

    ``values`` has the shape of ``out[key]``."""
    if out.ndim == 1:
        np.add.at(out, index, values)
        return
    if out.ndim == 2 and axis == 0:  # rows of a matrix (forces per point): one line per column
        for j in range(out.shape[1]):
            np.add.at(out[:, j], index, values[:, j])
        return
    others = out.shape[:axis] + out.shape[axis + 1 :]
    whole = slice(None)
    for position in itertools.product(*map(range, others)):
        line = (*position[:axis], whole, *position[axis:])
        np.add.at(out[line], index, values[line])


def _add_pairs(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> bool:
    """``np.add.at(out, index, values)`` for rows of two floats (points in the plane), read as
    complex numbers: one 1-D ``np.add.at``, whose sums are the two columns' sums (complex
    addition adds each part, in IEEE arithmetic, in the same order). False, with nothing
    written, where the rows cannot be read so: other dtypes, values to broadcast, columns
    apart in memory.

    ``out`` has shape ``(n, 2)``; ``values`` the shape of ``out[index]`` or one it broadcasts to.
    """
    pair = _COMPLEX_PAIR.get(out.dtype)
    if (
        pair is None
        or values.dtype != out.dtype
        or values.shape != (len(index), 2)
        or out.strides[1] != out.itemsize
        or values.strides[1] != out.itemsize
    ):
        return False
    # one np.add.at call: values in out's memory are read before adding by NumPy itself
    np.add.at(out.view(pair)[:, 0], index, values.view(pair)[:, 0])
    return True


_ndarray = np.ndarray
_COMPLEX_PAIR = {np.dtype(np.float64): np.dtype(np.complex128),
                 np.dtype(np.float32): np.dtype(np.complex64)}  # fmt: skip

# A scatter along one axis goes line by line (_add_by_lines) where the array has at most
# _FEW_LINES lines along that axis (the product of the other axes), or at most _LINES_UPTO
# lines and an index of at least _LINES_FROM_LENGTH values; otherwise by bincount (large) or
# np.add.at's general loop (small). Measured on rows of 2 to 64 columns (AMD EPYC, NumPy 2.4):
# each line costs a few microseconds of Python, and np.add.at's row loop 20-30 ns per value
# against 4-6 ns for a line; bincount overtakes lines from about 16 of them.
_FEW_LINES = 2
_LINES_UPTO = 16
_LINES_FROM_LENGTH = 500
# Below about 2000 values np.add.at's per-element loop beats bincount's fixed costs (measured
# on rows of 2 to 8 columns); the margin keeps small scatters on np.add.at.
_BINCOUNT_FROM = 4096
# Values per bincount call at least (more when out is larger): 16 bytes of temporaries each.
_CHUNK = 1 << 16


def _scatter_form(shape: tuple[int, ...], key: tuple) -> tuple[tuple[int, ...], int | None] | None:
    """``(shape of array[key], axis)`` for the keys :func:`add_at` sums with bincount: ``axis``
    of the one index array among full slices, or None for one index array per axis; None
    for any other key."""
    arrays = [k for k in key if type(k) is np.ndarray and k.dtype.kind in "iu"]
    if len(arrays) == 1 and arrays[0].ndim == 1:  # (a 1-d array's one index is also this form)
        axis = next(i for i, k in enumerate(key) if k is arrays[0])
        full = slice(None)
        if all(type(k) is slice and k == full for i, k in enumerate(key) if i != axis):
            return shape[:axis] + arrays[0].shape + shape[axis + 1 :], axis
    if len(arrays) == len(key) == len(shape):
        try:
            return np.broadcast_shapes(*(k.shape for k in arrays)), None
        except ValueError:
            return None  # np.add.at raises its own error for index arrays that do not broadcast
    return None


def _flat_of_arrays(shape: tuple[int, ...], key: tuple[np.ndarray, ...]) -> np.ndarray:
    """Flat positions in an array of ``shape`` of ``array[key]`` for one index array per axis."""
    flat = 0
    for n, k in zip(shape, key, strict=True):
        flat = flat * n + _wrapped(k, n)
    return np.asarray(flat)


def _flat_along(shape: tuple[int, ...], axis: int, index: np.ndarray) -> np.ndarray:
    """Flat positions of ``array[(slice(None),) * axis + (index,)]`` in an array of ``shape``."""
    n = shape[axis]
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    flat = _wrapped(index, n)
    if outer > 1:
        flat = np.arange(0, outer * n, n)[:, None] + flat
    if inner > 1:
        flat = (flat * inner)[..., None] + np.arange(inner)
    return flat.reshape(shape[:axis] + index.shape + shape[axis + 1 :])


def _bincount_into(out: np.ndarray, flat: np.ndarray, values: np.ndarray) -> None:
    sums = np.bincount(flat.ravel(), weights=values.ravel(), minlength=out.size)
    out += sums.reshape(out.shape)


def _wrapped(index: np.ndarray, n: int) -> np.ndarray:
    """Negative indices counted from the end; out-of-range ones stay out of range."""
    return index + n * (index < 0) if index.dtype.kind == "i" else index


def broadcast_apply(ufunc: np.ufunc, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``ufunc(x, y)`` for arrays of different shapes, the same values, faster where the two
    broadcast across each other with a short common innermost run.

    ``(1000, 1, 8) - (1, 20, 8)`` (every point minus every centroid) makes NumPy loop over runs
    of 8 elements, 20 000 times: 8× slower per element than a plain subtraction. Here the
    operand broadcast along the innermost differing axis is first written into the result (a
    copy, which NumPy does in long runs), and the op then runs in place against the other
    operand, whose run now spans the last two axes (160). A short trailing block repeated
    along the leading axes is tiled into longer runs (:func:`_tiled_apply`), and a column
    repeated along a short last axis is combined column by column (:func:`_column_plan`).
    Each result element is the same single operation of the same two values, so the result is
    exactly ``ufunc(x, y)``. Which way runs depends on the shapes alone and is worked out once
    per pair of shapes (:func:`_broadcast_plan`).

    Args:
        ufunc: a binary ufunc (``np.add``, ``np.subtract``, ``np.multiply``, ``np.divide``).
        x, y: arrays whose shapes broadcast.

    Example:
        >>> points, centroids = np.ones((1000, 1, 8)), np.ones((1, 20, 8))
        >>> broadcast_apply(np.subtract, points, centroids).shape
        (1000, 20, 8)
    """
    if x.size + y.size < _CROSSED_FROM or x.dtype != y.dtype or x.dtype.kind != "f":
        return ufunc(x, y)
    key = (x.shape, y.shape)
    plan = _BROADCAST_PLANS.get(key)
    if plan is None:
        if len(_BROADCAST_PLANS) >= _PLANS_KEPT:
            _BROADCAST_PLANS.clear()
        plan = _BROADCAST_PLANS[key] = _broadcast_plan(*key)
    kind, x_first, shape, count = plan
    if kind in ("crossed", "copied column"):  # one operand written out, the op in place
        if x_first:
            out = broadcast_copy(x, shape)
            return ufunc(out, y, out=out)
        out = broadcast_copy(y, shape)
        return ufunc(x, out, out=out)
    if kind == "tiled":
        return _tiled_apply(ufunc, x, y, x_first, count)
    if kind == "by columns":
        return _by_columns(ufunc, x, y, x_first, shape)
    return ufunc(x, y)


_BroadcastPlan = tuple[str, bool, tuple[int, ...], int]  # see _broadcast_plan


def _broadcast_plan(xs: tuple[int, ...], ys: tuple[int, ...]) -> _BroadcastPlan:
    """How :func:`broadcast_apply` runs operands of shapes ``xs`` and ``ys``: ``(kind,
    x_first, shape, count)``, where ``kind`` is ``"crossed"`` (the operand named by
    ``x_first`` is written into the result of ``shape`` first), ``"copied column"`` or
    ``"by columns"`` (the operand named by ``x_first`` is the column, see
    :func:`_column_plan`), ``"tiled"`` (``x_first``: ``x`` is the full operand; ``count``
    copies of the block make a run) or ``"plain"`` (the ufunc alone). Shapes only: the plan is
    kept per pair of shapes, since working it out costs more than some of the ops it serves."""
    column = _column_plan(xs, ys)
    if column is not None:
        return column
    expand_x = _operand_to_expand(xs, ys)
    if expand_x is not None:
        return "crossed", expand_x, np.broadcast_shapes(xs, ys), 0
    full_is_x = math.prod(xs) > math.prod(ys)
    full, block = (xs, ys) if full_is_x else (ys, xs)
    tiles = _tiles_per_run(full, block)
    if tiles:
        return "tiled", full_is_x, full, tiles
    return "plain", False, (), 0


def _column_plan(xs: tuple[int, ...], ys: tuple[int, ...]) -> _BroadcastPlan | None:
    """The plan of an op where one operand has a last axis of 1 that the result repeats 2 to 8
    times (``(48, 48, 1) * (3,)``: a shading times a colour; ``(48, 48, 1) * (48, 48, 3)``: a
    distance times directions), or None where that is not the case or too small to pay.

    NumPy runs such an op in runs of the last axis' length, 2 304 runs of 3 for a 48 x 48
    image: 3-4x the time of a same-shape op. Instead, against a mostly full-size operand, the
    column is first copied out column by column (:func:`broadcast_copy`) and the op runs in
    place along memory (``"copied column"``); against a small one, the op runs once per result
    column, each a single strided pass (``"by columns"``, :func:`_by_columns`)."""
    x_is_column = xs[-1:] == (1,)
    if x_is_column == (ys[-1:] == (1,)):
        return None  # both or neither repeated along the last axis
    lead, others = (xs[:-1], ys) if x_is_column else (ys[:-1], xs)
    columns = others[-1] if others else 1
    rows = math.prod(lead)
    if not 1 < columns <= _COLUMNS_MAX or rows < _TILED_FROM or len(others) > len(lead) + 1:
        return None
    for n, m in zip(reversed(others[:-1]), reversed(lead), strict=False):
        if n != m and n != 1:
            return None  # the column has not every row of the result: NumPy's loop is as good
    shape = (*lead, columns)
    kind = "copied column" if 2 * math.prod(others) >= rows * columns else "by columns"
    return kind, x_is_column, shape, 0


def _by_columns(
    ufunc: np.ufunc, x: np.ndarray, y: np.ndarray, x_is_column: bool, shape: tuple[int, ...]
) -> np.ndarray:
    """``ufunc(x, y)`` of shape ``shape`` one result column at a time, the column operand's
    values against the other's values of that column. Each element is the same single
    operation on the same two values, so the result is exactly ``ufunc(x, y)``."""
    out = np.empty(shape, x.dtype)
    column, other = (x, y) if x_is_column else (y, x)
    values = column[..., 0]
    for k in range(shape[-1]):
        part = other[..., k]
        if x_is_column:
            ufunc(values, part, out=out[..., k])
        else:
            ufunc(part, values, out=out[..., k])
    return out


def _tiled_apply(
    ufunc: np.ufunc, x: np.ndarray, y: np.ndarray, full_is_x: bool, tiles: int
) -> np.ndarray:
    """``ufunc(x, y)`` where one operand has the result's shape and the other is a short
    trailing block repeated along the leading axes (``(48, 48, 3) - (3,)``: points minus a
    point). NumPy loops over runs of the block's length, here 3, 2 304 times; instead the block
    is tiled ``tiles`` times (:func:`_tiles_per_run`) and the op runs over rows of that many
    blocks: 96 runs of 72. Each element is the same single operation on the same two values, so
    the result is exactly ``ufunc(x, y)``."""
    full, block = (x, y) if full_is_x else (y, x)
    if not full.flags.c_contiguous:
        return ufunc(x, y)
    run = np.empty((tiles, block.size), block.dtype)
    run[...] = block.reshape(-1)
    rows, run = full.reshape(-1, run.size), run.reshape(-1)
    out = ufunc(rows, run) if full_is_x else ufunc(run, rows)
    return out.reshape(full.shape)


def _tiles_per_run(full: tuple[int, ...], block: tuple[int, ...]) -> int:
    """For :func:`_tiled_apply`: how many copies of a block of shape ``block`` make one run
    (``r`` dividing the number of repeats, so that a run reaches 64 elements), or 0 where it
    is not a short trailing block of ``full``, is repeated too few times to pay, or no divisor
    fits."""
    size, lead = math.prod(block), len(full) - len(block)
    if not 1 < size < _LONG_RUN or lead < 0 or math.prod(full) < _TILED_FROM * size:
        return 0
    first = 0
    while first < len(block) and block[first] == 1:
        first += 1
    if block[first:] != full[lead + first :]:
        return 0  # broadcast inside the block too: not a plain repeat
    repeats = math.prod(full) // size
    least = -(-_LONG_RUN // size)
    for tiles in range(least, min(2 * least, repeats + 1)):
        if repeats % tiles == 0:
            return tiles
    return 0


def broadcast_copy(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` broadcast to ``shape``, as a new C-contiguous array.

    NumPy copies a broadcast along a short last axis (``(48, 48, 1)`` to ``(48, 48, 3)``) in runs
    of that axis' length, 2 304 runs of 3 here; from 1 024 rows and for last axes of 2 to 8,
    one strided copy per column instead (a quarter to a third of the instructions: 39 000
    against 130 000-160 000 for a 48 x 48 image of 3 columns). Then an op on the copy
    runs in long runs too, where on a broadcast view it would not.

    Example:
        >>> broadcast_copy(np.array([[1.0], [2.0]]), (2, 3)).tolist()
        [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    """
    out = np.empty(shape, a.dtype)
    if short_last_axis(a.shape, shape) and out.size >= _TILED_FROM * shape[-1]:
        rows = a[..., 0]
        for k in range(shape[-1]):
            out[..., k] = rows
    else:
        out[...] = a
    return out


def short_last_axis(source: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether broadcasting ``source`` to ``shape`` repeats it along a last axis of 2 to 8,
    where NumPy's loops (a copy, or an op on the broadcast view) run in runs that short."""
    return bool(shape) and source[-1:] == (1,) and 1 < shape[-1] <= _COLUMNS_MAX


def _operand_to_expand(xs: tuple[int, ...], ys: tuple[int, ...]) -> bool | None:
    """For :func:`broadcast_apply`: True to write ``x`` into the result first, False for
    ``y``, None where the plain ufunc is as fast (a long common run, one-sided broadcasting)
    or the shapes do not broadcast (the ufunc raises NumPy's error)."""
    if len(xs) != len(ys):  # NumPy pads the shorter shape with leading ones
        ndim = max(len(xs), len(ys))
        xs, ys = (1,) * (ndim - len(xs)) + xs, (1,) * (ndim - len(ys)) + ys
    if len(xs) < 2:
        return None
    axis, run = len(xs) - 1, 1
    while axis >= 0 and xs[axis] == ys[axis]:
        run *= xs[axis]
        axis -= 1
    if axis < 0 or 1 not in (xs[axis], ys[axis]):
        return None
    before = run if run > 1 else max(xs[axis], ys[axis])  # NumPy's inner loop now
    if before >= _LONG_RUN:
        return None
    expand_x = xs[axis] == 1
    kept, expanded = (ys, xs) if expand_x else (xs, ys)
    for n, m in zip(kept[:axis], expanded[:axis], strict=True):
        if n != m and 1 not in (n, m):
            return None
    # after the expansion the loop runs over the block where the kept operand is not broadcast
    start = axis
    while start > 0 and not (kept[start - 1] == 1 < expanded[start - 1]):
        start -= 1
    if start == 0:
        return None  # the kept operand is never broadcast: NumPy's plain loop is as long
    after = math.prod(max(n, m) for n, m in zip(xs[start:], ys[start:], strict=True))
    return expand_x if after >= 2 * before else None


# Inputs of fewer elements than this go straight to the ufunc: the check would cost more than it
# can save. Runs this long already amortize NumPy's per-run overhead.
_CROSSED_FROM = 1024
_LONG_RUN = 64
# Tiling a block pays from this many repeats of it (counted: the checks and the tile cost about
# 25 000 instructions, NumPy about 50 per run of a few elements).
_TILED_FROM = 1024
_COLUMNS_MAX = 8  # more columns: NumPy's runs are long enough to beat a copy per column
# Plans kept per pair of shapes (an eager program sees a few dozen); past this many the table
# is cleared, so that a program of ever new shapes cannot grow it without bound.
_PLANS_KEPT = 256
_BROADCAST_PLANS: dict[tuple[tuple[int, ...], tuple[int, ...]], _BroadcastPlan] = {}
