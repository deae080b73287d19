"""The two namespaces VJP formulas are written against: plain arrays, or recorded Tensors.

Every VJP in ``tadiff.ops.derivatives`` receives ``F`` as its first argument and uses only Python
operators and ``F.<function>``. In an ordinary backward pass ``F`` is ``ARRAY`` (NumPy
functions on raw ndarrays: no Tensor, no node, no bookkeeping); when ``create_graph=True`` it is
``GRAPH`` (the differentiable tadiff ops on Tensors), so the very same formula is recorded and can
be differentiated again. One formula, two engines — the same idea as ``tadiff._array.namespace``.

Both namespaces expose the same functions with the same semantics; ``tests/ops`` checks gradients
in both modes (first order through ``ARRAY``, higher orders through ``GRAPH``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from tadiff._array import (
    add_at,
    broadcast_apply,
    broadcast_copy,
    short_last_axis,
    stack_arrays,
)
from tadiff._sums import (
    BLAS_ROWS_FROM,
    BLAS_TRAILING_MAX,
    fast_sum,
    keepdim_shape,
    sum_leading,
    sum_outer,
    sum_trailing,
)
from tadiff.ops._gamma import polygamma_array
from tadiff.ops._special import erfcx_array, i0_array, i0e_array, i1_array, i1e_array
from tadiff.ops.fast_loops import masked_array, put_array, relu_grad_array


def _reduced_axes(gshape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of a gradient of shape ``gshape`` to sum so it fits a broadcast input ``shape``."""
    lead = len(gshape) - len(shape)
    return tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1
    )


def _index_scatter(g: Any, key: Any, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, np.result_type(g))
    if any(isinstance(k, np.ndarray) for k in key):
        add_at(out, key, g)  # advanced indices may repeat: accumulate
    else:
        out[key] = g  # basic indexing addresses each element at most once
    return out


def _put_positions(g: Any, positions: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros of ``shape`` with ``g`` written at the flat ``positions`` (shaped like ``g``, each
    position at most once): one assignment, about three times faster than repeating ``g`` over
    the windows of a max pooling and masking it."""
    return put_array(np.asarray(g), positions, shape)


def _full_index(index: np.ndarray, dim: int) -> tuple[Any, ...]:
    """Index arrays that address ``target[..., index[...], ...]`` along ``dim`` (torch gather)."""
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _scatter_add_zeros(g: Any, dim: int, index: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, np.result_type(g))
    add_at(out, _full_index(index, dim), g)
    return out


def _gather(x: Any, dim: int, index: np.ndarray) -> np.ndarray:
    return np.asarray(x)[_full_index(index, dim)]


def _prod_others(x: np.ndarray, dims: tuple[int, ...] | None) -> np.ndarray:
    """For each element, the product of the *other* elements of its reduction group.

    Exclusive prefix and suffix products along the flattened group: exact with zeros, O(n).
    """
    x = np.asarray(x)
    if x.size == 0:
        return np.zeros_like(x)
    dims = tuple(range(x.ndim)) if dims is None else dims
    keep = [i for i in range(x.ndim) if i not in dims]
    moved = np.transpose(x, keep + list(dims))
    flat = moved.reshape(*moved.shape[: len(keep)], -1)
    ones = np.ones((*flat.shape[:-1], 1), x.dtype)
    before = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.flip(np.concatenate([flat[..., 1:], ones], axis=-1), -1), -1), -1)
    others = (before * after).reshape(moved.shape)
    return np.transpose(others, np.argsort(keep + list(dims)))


def channel_rows(a: np.ndarray) -> np.ndarray:
    """``a`` of shape ``(N, C, *rest)`` as rows ``(N, C, prod(rest))`` (a view when
    contiguous): per-channel statistics then reduce each row along memory."""
    return a.reshape(a.shape[0], a.shape[1], -1)


def channel_sums(rows: np.ndarray) -> np.ndarray:
    """``(C,)`` sums of rows ``(N, C, L)`` over ``N`` and ``L``: NumPy's pairwise sum of each
    row, then of the ``N`` row sums (a reduction over axes ``(0, 2)`` at once strides across
    memory and costs twice as much)."""
    return np.add.reduce(rows, axis=2).sum(axis=0)


def channel_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(C,)`` sums of ``a * b`` over ``N`` and ``L`` for rows ``(N, C, L)``: a dot product per
    row (no product array), then the ``N`` row results summed."""
    return np.vecdot(a, b).sum(axis=0)


def broadcast_view(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only broadcast view like ``np.broadcast_to``, built directly from strides for
    C-contiguous arrays (``np.broadcast_to`` costs microseconds of Python-level setup).

    Raises:
        ValueError: when ``a`` cannot be broadcast to ``shape``.
    """
    lead = len(shape) - a.ndim
    if lead < 0 or not a.flags.c_contiguous or a.size == 0:
        return np.broadcast_to(a, shape)
    strides = [0] * lead
    for n, want, stride in zip(a.shape, shape[lead:], a.strides, strict=True):
        if n == want:
            strides.append(stride)
        elif n == 1:
            strides.append(0)
        else:
            raise ValueError(f"cannot broadcast shape {a.shape} to {shape}")
    view = np.ndarray(shape, a.dtype, buffer=a, strides=strides)
    view.flags.writeable = False
    return view


NOT_BROADCAST = (None, None)
"""The shapes an element-wise op of two inputs records when they are equal (so are the output
and the gradient): ``sum_to(g, None)`` is ``g``. One shared tuple in place of three new ones
per op, which Python's cyclic collector would walk while the graph lives."""


def _sum_to(g: Any, shape: tuple[int, ...] | None) -> Any:
    gshape = g.shape  # ndarray or NumPy scalar: both have .shape and .sum
    if shape is None or gshape == shape:
        return g
    # the last axis summed away (a factor of shape (..., 1)): BLAS rows, without the general
    # path's checks, which cost as much as the sum of 180 rows of 2
    if (
        len(gshape) == len(shape)
        and shape[-1:] == (1,)
        and gshape[:-1] == shape[:-1]
        and g.size >= BLAS_ROWS_FROM * gshape[-1]
    ):
        fast = sum_trailing(g, 1)
        if fast is not None:
            return fast.reshape(shape)
    # Fast path when the dims to sum form a leading block (a bias gradient; expand of a
    # keepdim reduction): k leading dims of g, then shape's own leading 1s, then equal dims.
    k = len(gshape) - len(shape)
    while k < len(gshape) and shape[k - len(gshape) + len(shape)] == 1 and gshape[k] != 1:
        k += 1
    if gshape[k:] == shape[k - len(gshape) + len(shape) :]:
        if math.prod(gshape[:k]) == 1:  # nothing to add up: only size-1 dims go away
            return g.reshape(shape)
        fast = sum_leading(g, k)
        if fast is not None:
            return fast.reshape(shape)
    axes = _reduced_axes(gshape, shape)
    fast = sum_outer(g, axes)
    if fast is not None:
        return fast.reshape(shape)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _mul_sum_to(g: Any, b: Any, shape: tuple[int, ...]) -> Any:
    """``sum_to(g * b, shape)``: the gradient of one factor of a broadcasting product.

    Where ``b`` varies only along the axes summed away and those form a leading block, or a
    trailing block of at most 256 elements, this is a matrix-vector product and BLAS runs it
    without the product array: ``(H, W, 3)`` gradients times a colour ``(3,)`` summed to
    ``(H, W, 1)``, or times a ``(H, W, 1)`` shading summed to ``(3,)``. NumPy's broadcast
    product and short-row reduction cost about 15 times as much there. Elsewhere (and for a
    sum of every element, which keeps NumPy's pairwise summation) the product, then
    :func:`_sum_to`. The leading-block sum is as accurate as NumPy's, which adds those rows
    one after another too.

    Shapes: ``g`` is the product's shape, ``b`` broadcasts to it and ``shape`` is the other
    factor's (``g`` broadcasts from it).

    Example:
        >>> g, colour = np.ones((2, 2, 3)), np.array([1.0, 2.0, 3.0])
        >>> _mul_sum_to(g, colour, (2, 2, 1))[..., 0].tolist()
        [[6.0, 6.0], [6.0, 6.0]]
    """
    if g.size < _CONTRACTION_FROM:  # the many small products of an eager program: no checks
        return g * b if g.shape == shape else _sum_to(g * b, shape)
    if g.shape == shape:  # a broadcast factor's short trailing block: tiled (broadcast_apply)
        return g * b if b.shape == shape else broadcast_apply(np.multiply, g, b)
    product = _contraction(g, b, shape)
    return _sum_to(g * b, shape) if product is None else product


# Below this many elements the product and NumPy's sum cost less than the checks and the BLAS
# call (counted: equal at about 512 elements, the contraction a third cheaper from 1 000).
_CONTRACTION_FROM = 512


def _contraction(g: Any, b: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """:func:`_mul_sum_to` as one BLAS matrix-vector product, or None where it is not one."""
    if (
        type(g) is not np.ndarray
        or type(b) is not np.ndarray
        or g.dtype.kind != "f"
        or g.dtype != b.dtype
        or not g.flags.c_contiguous
        or b.ndim > g.ndim
        or g.size == 0
    ):
        return None
    if b.size * math.prod(shape) != g.size:
        return None  # b does not span exactly the summed axes: an element-wise factor
    ndim = g.ndim
    axes = _reduced_axes(g.shape, shape)
    bshape = (1,) * (ndim - b.ndim) + b.shape
    # b must vary along exactly the summed axes: anything else is an element-wise factor
    if any((n != 1) != (i in axes) for i, n in enumerate(bshape)) or any(
        bshape[i] != g.shape[i] for i in axes
    ):
        return None
    count = len(axes)
    if axes == tuple(range(count)):  # a leading block of rows, added one after another
        kept = math.prod(g.shape[count:])
        if kept == 1:
            return None  # every element: NumPy's pairwise sum is the more accurate
        return (b.reshape(-1) @ g.reshape(-1, kept)).reshape(shape)
    if axes == tuple(range(ndim - count, ndim)) and b.size <= BLAS_TRAILING_MAX:
        return (g.reshape(-1, b.size) @ b.reshape(-1)).reshape(shape)
    return None


# Below this many elements a broadcast copy is cheaper than np.broadcast_to's Python overhead.
_SMALL = 4096


def _broadcast(g: Any, shape: tuple[int, ...]) -> Any:
    """``g`` broadcast to ``shape``: a copy when small, or when broadcast along a short last
    axis (the gradient of ``sum(dim=-1)`` over ``(h, w, 3)``: every op on a view would loop
    over runs of 3), else a read-only view."""
    if g.shape == shape:
        return g
    if type(g) is not np.ndarray:
        g = np.asarray(g)  # a NumPy scalar
    elif math.prod(shape) > _SMALL and not short_last_axis(g.shape, shape):
        return broadcast_view(g, shape)
    return broadcast_copy(g, shape)


def _unreduce(g: Any, shape: tuple[int, ...], dims: tuple[int, ...] | None, keepdim: bool) -> Any:
    if not keepdim:
        g = g.reshape(keepdim_shape(shape, dims))
    return _broadcast(g, shape)


def solve_triangular_array(a: np.ndarray, b: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    """``X`` with ``T X = B`` for the ``upper``/lower triangle ``T`` of ``a`` (ones on its
    diagonal when ``unit``). NumPy has no triangular solver; LU on a triangular matrix is exact
    up to rounding and keeps the batch broadcasting of ``np.linalg.solve``."""
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        t = t.copy()
        np.einsum("...ii->...i", t)[...] = 1
    return np.linalg.solve(t, b)


def _stack(xs: Sequence[Any], axis: int) -> np.ndarray:
    """``np.stack(xs, axis)`` of gradients (``unbind``'s: one per slice, often NumPy scalars).
    Arrays of one shape go through :func:`~tadiff._array.stack_arrays`, whose copies cost a
    fraction of ``np.stack``'s own work on small arrays; anything else through ``np.stack``."""
    shape = getattr(xs[0], "shape", None)
    if shape is None:  # a Python number
        return np.stack(xs, axis)
    for x in xs:
        if getattr(x, "shape", None) != shape:
            return np.stack(xs, axis)
    if axis < 0:
        axis += len(shape) + 1
    return stack_arrays(xs, axis)


def sign_array(x: Any) -> np.ndarray:
    """``np.sign(x)`` with 0 where ``x`` is NaN: torch's ``sign``/``sgn`` of a real tensor (and
    so the factor of ``abs``' gradient), where NumPy's is NaN.

    Example:
        >>> sign_array(np.array([-2.0, 0.0, np.nan, 3.0])).tolist()
        [-1.0, 0.0, 0.0, 1.0]
    """
    out = np.sign(x)
    if out.dtype.kind in "fc":
        nan = np.isnan(out)
        if nan.any():
            out = np.where(nan, 0, out).astype(out.dtype, copy=False)
    return out


def _masked(keep: Any, g: Any) -> Any:
    """``g`` where ``keep`` holds, exactly 0 elsewhere (also where ``g`` is NaN, as in torch);
    see :func:`tadiff.ops.fast_loops.masked_array`."""
    return masked_array(np.asarray(keep), np.asarray(g))


_NEXT, _PREV = np.array([1, 2, 0]), np.array([2, 0, 1])


def cross_array(a: Any, b: Any, ax: int) -> np.ndarray:
    """``a × b`` along axis ``ax`` (size 3) of two broadcasting arrays: component ``i`` is
    ``a[i+1] b[i+2] - a[i+2] b[i+1]``. Four ``take``s: ``np.cross`` costs more on small arrays
    than the arithmetic; two float64 3-vectors are computed in Python floats."""
    a, b = np.asarray(a), np.asarray(b)  # methods: np.take's dispatch costs 4x the take
    if a.shape == _THREE and b.shape == _THREE and a.dtype == _FLOAT64 and b.dtype == _FLOAT64:
        # two 3-vectors of doubles (rotations, normals): Python's float arithmetic is NumPy's,
        # the same IEEE operations in the same order, without seven calls into NumPy (9k
        # instructions against 25k)
        a0, a1, a2 = a.tolist()
        b0, b1, b2 = b.tolist()
        return np.array((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))
    return a.take(_NEXT, ax) * b.take(_PREV, ax) - a.take(_PREV, ax) * b.take(_NEXT, ax)


_FLOAT64 = np.dtype(np.float64)
_THREE = (3,)


_EINSUM_BLAS_FROM = 4096  # multiply-adds from which the BLAS product beats NumPy's einsum


def einsum_array(equation: str, *operands: Any) -> np.ndarray:
    """``np.einsum`` with an explicit ``->`` output; two-operand contractions run as one batched
    BLAS matrix product (NumPy's own einsum loops over them in C without BLAS, 2-10x slower on
    the shapes of batched linear maps).

    Example:
        >>> a, b = np.ones((4, 2, 3)), np.ones((5, 4, 3))
        >>> einsum_array("kij,nkj->nki", a, b).shape
        (5, 4, 2)
    """
    if len(operands) == 2:
        product = _einsum_as_matmul(equation, np.asarray(operands[0]), np.asarray(operands[1]))
        if product is not None:
            return product
    return np.einsum(equation, *operands, optimize=len(operands) > 2)


@functools.lru_cache(maxsize=256)
def _matmul_plan(equation: str) -> tuple[Any, ...] | None:
    """How ``equation`` (two operands, explicit output) maps onto ``(batch, left, k) @ (batch,
    k, right)``: the letters of each group and the three permutations; None when it does not
    (a letter repeated in an operand, or summed inside one operand only)."""
    lhs, out = equation.split("->")
    sa, sb = lhs.split(",")
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb) or len(set(out)) != len(out):
        return None
    batch = "".join(c for c in out if c in sa and c in sb)
    left = "".join(c for c in out if c in sa and c not in sb)
    right = "".join(c for c in out if c in sb and c not in sa)
    inner = "".join(c for c in sa if c in sb and c not in out)
    if len(batch + left + inner) != len(sa) or len(batch + right + inner) != len(sb):
        return None
    # the product's rows and columns: ``a``'s letters as rows, unless the output's innermost
    # letter is one of them — then ``bᵀ aᵀ``, so that the product's innermost axis is the
    # output's and the final copy into the output's layout moves whole rows (a (1000, 25, 10)
    # result copied across its innermost axis took 4.8 ms, along it 0.7 ms)
    swap = bool(left) and bool(right) and out[-1] in left
    rows, cols = (right, left) if swap else (left, right)
    order = batch + rows + cols
    perm_a = [sa.index(c) for c in batch + left + inner]
    perm_b = [sb.index(c) for c in batch + inner + right]
    perm_out = [order.index(c) for c in out]
    return sa, sb, (batch, left, inner, right), perm_a, perm_b, perm_out, swap


def _einsum_as_matmul(equation: str, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a``, ``b`` contracted as one batched matrix product, or None where the equation is not
    such a product, sizes broadcast, the product is small or the operands are not float."""
    if a.size * b.size < _EINSUM_BLAS_FROM or a.dtype.kind != "f" or a.dtype != b.dtype:
        return None  # at most a.size * b.size multiply-adds: small
    plan = _matmul_plan(equation)
    if plan is None or a.size == 0 or b.size == 0:
        return None
    sa, sb, groups, perm_a, perm_b, perm_out, swap = plan
    size = dict(zip(sa, a.shape, strict=True))
    for c, n in zip(sb, b.shape, strict=True):
        if size.setdefault(c, n) != n:
            return None
    dims = [math.prod(size[c] for c in part) for part in groups]
    if math.prod(dims) < _EINSUM_BLAS_FROM:
        return None  # small: the transposes and the matrix product cost more than the loops
    batch, left, _, right = groups
    a3 = a.transpose(perm_a).reshape(dims[0], dims[1], dims[2])
    b3 = b.transpose(perm_b).reshape(dims[0], dims[2], dims[3])
    if swap:  # (a b)ᵀ = bᵀ aᵀ, each factor a transposed view (BLAS takes either layout)
        a3, b3 = b3.transpose(0, 2, 1), a3.transpose(0, 2, 1)
        rows, cols = right, left
    else:
        rows, cols = left, right
    # the product written straight into the result's layout where that is a plain strided view
    # (BLAS writes rows with a stride); NumPy copies small-inner-axis transposes slowly
    out_shape = [size[c] for c in equation.split("->")[1]]
    result = np.empty(out_shape, dtype=np.result_type(a, b))
    into = result.transpose(np.argsort(perm_out))
    try:
        target = into.reshape(a3.shape[0], a3.shape[1], b3.shape[2], copy=False)
    except (ValueError, TypeError):  # the axes do not merge here (TypeError: NumPy 2.0)
        product = np.matmul(a3, b3).reshape([size[c] for c in batch + rows + cols])
        return np.ascontiguousarray(product.transpose(perm_out))
    np.matmul(a3, b3, out=target)
    return result


ARRAY = SimpleNamespace(
    data=np.asarray,
    dtype=np.result_type,
    sum_to=_sum_to,
    mul_sum_to=_mul_sum_to,
    unreduce=_unreduce,
    broadcast_to=_broadcast,
    # methods rather than np.reshape & co.: same result, without NumPy's Python-level dispatch
    reshape=lambda x, shape: x.reshape(shape),
    permute=lambda x, axes: x.transpose(axes),
    swapaxes=lambda x, a, b: x.swapaxes(a, b),
    flip=np.flip,
    exp=np.exp,
    log=np.log,
    log1p=np.log1p,
    sqrt=np.sqrt,
    sin=np.sin,
    cos=np.cos,
    sinh=np.sinh,
    cosh=np.cosh,
    cumsum=lambda x, dim: np.cumsum(x, axis=dim),
    cumprod=lambda x, dim: np.cumprod(x, axis=dim),
    inv=np.linalg.inv,
    polygamma=lambda n, x: polygamma_array(n, x),
    erfcx=erfcx_array,
    i0=i0_array,
    i0e=i0e_array,
    i1=i1_array,
    i1e=i1e_array,
    solve=np.linalg.solve,
    solve_triangular=solve_triangular_array,
    tril=np.tril,
    triu=np.triu,
    sign=sign_array,
    zeros_like=np.zeros_like,
    where=np.where,
    masked=_masked,
    relu_grad=lambda result, g: relu_grad_array(result, np.asarray(g)),
    sum=lambda x, dims, keepdim: fast_sum(np.asarray(x), dims, keepdim),
    mean=lambda x, dims, keepdim: x.mean(axis=dims, keepdims=keepdim),
    cast=lambda x, dtype: np.asarray(x).astype(dtype, copy=False),
    stack=_stack,
    cat=lambda xs, axis: np.concatenate(xs, axis),
    index_scatter=_index_scatter,
    put_positions=_put_positions,
    gather=_gather,
    scatter_add_zeros=_scatter_add_zeros,
    einsum=einsum_array,
    prod_others=_prod_others,
    cross=cross_array,
    take=lambda x, idx, ax: np.asarray(x).take(idx, ax),
)

# Filled by ``tadiff.ops`` once the differentiable ops exist (they depend on this module).
GRAPH = SimpleNamespace()


__all__ = ["ARRAY", "GRAPH", "keepdim_shape"]
