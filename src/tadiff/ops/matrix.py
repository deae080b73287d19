"""Matrix functions with torch's shape rules: ``mm bmm mv dot outer addmm addmv baddbmm
tensordot kron cross diagonal diag trace``.

All are compositions of differentiable ops (``matmul``, ``einsum``, views, ``index_put``), so
their gradients and second derivatives come from those; what they add is torch's stricter shape
checks (``mm`` wants 2-D operands, ``bmm`` 3-D ones, ...) with errors that name the shapes.
``diagonal`` is always a view (``A.diagonal().add_(eps)`` writes into ``A``).

Example:
    >>> import tadiff as td
    >>> a = td.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> td.trace(a @ a).backward(); a.grad
    tensor([[2., 6.],
            [4., 8.]])
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tadiff.errors import InputError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops._common import (
    INPUTS,
    Tensor,
    _make,
    _state,
    as_tensor,
    broadcasts_to,
    norm_dim,
    record,
)
from tadiff.ops._dual import cross_array
from tadiff.ops.elementwise import mul
from tadiff.ops.indexing import index_put
from tadiff.ops.linalg import einsum, matmul
from tadiff.ops.reductions import sum
from tadiff.ops.shape import _as_view, moveaxis, reshape

__all__ = [
    "addmm", "addmv", "baddbmm", "bmm", "cross", "diag", "diagonal", "dot", "kron", "mm", "mv",
    "outer", "tensordot", "trace",
]  # fmt: skip


def _dims(name: str, want: int, **tensors: Tensor) -> None:
    for arg, t in tensors.items():
        if t.ndim != want:
            raise ShapeError(f"{name}: {arg} must be a {want}-D tensor, got shape {t.shape}")


def mm(a: Any, b: Any) -> Tensor:
    """``(n, k) @ (k, m)`` for 2-D tensors only."""
    a, b = as_tensor(a, name="mm() argument"), as_tensor(b, name="mm() argument")
    _dims("mm", 2, self=a, mat2=b)
    return matmul(a, b)


def bmm(a: Any, b: Any) -> Tensor:
    """``(B, n, k) @ (B, k, m)`` for 3-D tensors with equal batch sizes (no broadcasting)."""
    a, b = as_tensor(a, name="bmm() argument"), as_tensor(b, name="bmm() argument")
    _dims("bmm", 3, self=a, mat2=b)
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {a.shape} and {b.shape}")
    return matmul(a, b)


def mv(a: Any, v: Any) -> Tensor:
    """``(n, k) @ (k,)``."""
    a, v = as_tensor(a, name="mv() argument"), as_tensor(v, name="mv() argument")
    _dims("mv", 2, self=a)
    _dims("mv", 1, vec=v)
    return matmul(a, v)


def dot(a: Any, b: Any) -> Tensor:
    """Inner product of two 1-D tensors of equal length."""
    a, b = as_tensor(a, name="dot() argument"), as_tensor(b, name="dot() argument")
    _dims("dot", 1, self=a, tensor=b)
    if a.shape != b.shape:
        raise ShapeError(f"dot: the two 1-D tensors differ in size: {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


def outer(a: Any, b: Any) -> Tensor:
    """``a[:, None] * b[None, :]`` for 1-D tensors: shape ``(n, m)``."""
    a, b = as_tensor(a, name="outer() argument"), as_tensor(b, name="outer() argument")
    _dims("outer", 1, self=a, vec2=b)
    return mul(reshape(a, (-1, 1)), b)


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to the product's shape."""
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


def addmv(input: Any, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (batch1 @ batch2)`` for 3-D batches."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def _scaled_sum(input: Any, product: Tensor, beta: float, alpha: float) -> Tensor:
    input = as_tensor(input, product, "input")
    if not broadcasts_to(input.shape, product.shape):
        raise ShapeError(
            f"input of shape {input.shape} does not broadcast to the product's shape "
            f"{product.shape}"
        )
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:  # torch ignores input then (even NaN in it)
        return scaled
    return scaled + (input if beta == 1 else input * beta)


def tensordot(a: Any, b: Any, dims: Any = 2) -> Tensor:
    """Contract the last ``dims`` axes of ``a`` with the first ``dims`` of ``b``, or the axis
    lists ``dims = ([a axes], [b axes])``."""
    a, b = as_tensor(a, name="tensordot() argument"), as_tensor(b, name="tensordot() argument")
    if isinstance(dims, (int, np.integer)):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise InputError(f"tensordot: dims ({dims}) must be in [0, {min(a.ndim, b.ndim)}]")
        axes_a, axes_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        axes_a, axes_b = ([int(i)] if np.ndim(i) == 0 else list(i) for i in dims)
        axes_a = [norm_dim(i, a.ndim) for i in axes_a]
        axes_b = [norm_dim(i, b.ndim) for i in axes_b]
    if len(axes_a) != len(axes_b):
        raise ShapeError(f"tensordot: {len(axes_a)} axes of a against {len(axes_b)} axes of b")
    for i, j in zip(axes_a, axes_b, strict=True):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"tensordot: contracted dims differ: a.shape[{i}] = {a.shape[i]}, "
                f"b.shape[{j}] = {b.shape[j]}"
            )
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(axes_a, axes_b, strict=True):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in axes_a]
    out += [c for k, c in enumerate(sb) if k not in axes_b]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


def kron(a: Any, b: Any) -> Tensor:
    """Kronecker product: ``out[i*m + k, j*n + l] = a[i, j] * b[k, l]`` in any dimension."""
    a, b = as_tensor(a, name="kron() argument"), as_tensor(b, name="kron() argument")
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    # interleave the axes: a's axis k next to b's axis k, then merge each pair
    ea = reshape(a, tuple(v for s in sa for v in (s, 1)))
    eb = reshape(b, tuple(v for s in sb for v in (1, s)))
    return reshape(mul(ea, eb), tuple(p * q for p, q in zip(sa, sb, strict=True)))


def cross(a: Any, b: Any, dim: int = -1) -> Tensor:
    """Cross product of 3-vectors along ``dim`` (``torch.linalg.cross``), broadcasting; one
    node (``LinalgCrossBackward0``: ``b × g`` and ``g × a``)."""
    a, b = as_tensor(a, name="cross() argument"), as_tensor(b, name="cross() argument")
    nd = max(a.ndim, b.ndim)
    ax = norm_dim(dim, nd)
    for name, t in (("input", a), ("other", b)):
        if t.ndim != nd or t.shape[ax] != 3:
            raise ShapeError(
                f"cross: {name} must have size 3 at dim {dim} and {nd} dims, got shape {t.shape}"
            )
    try:
        out = cross_array(a.data, b.data, ax)
    except ValueError:
        raise ShapeError(f"cross: shapes {a.shape} and {b.shape} do not broadcast") from None
    if (a._rg or b._rg) and _state.enabled:
        return record(d.LinalgCrossBackward0, out, (a, b), INPUTS, (ax,))
    return _make(out)


def diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal ``x[..., i, i + offset]`` of the ``(dim1, dim2)`` planes, as the last dim.

    Always a view, whatever the layout (torch's semantics: ``A.T.diagonal().add_(1)`` writes
    into ``A``); its gradient scatters into the diagonal.

    Example:
        >>> import tadiff as td
        >>> td.diagonal(td.arange(9.0).reshape(3, 3), 1)
        tensor([1., 5.])
    """
    x = as_tensor(x, name="diagonal() input")
    if x.ndim < 2:
        raise ShapeError(f"diagonal: the input must have at least 2 dims, got shape {x.shape}")
    d1, d2 = norm_dim(dim1, x.ndim), norm_dim(dim2, x.ndim)
    if d1 == d2:
        raise InputError(f"diagonal: dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    planes = moveaxis(x, (d1, d2), (-2, -1))
    n, m = planes.shape[-2:]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    p = planes.data
    if length:  # a strided view of the plane's memory from its first diagonal element
        first = p[..., r0:, c0:]
        data = as_strided(
            first, (*p.shape[:-2], length), (*p.strides[:-2], p.strides[-2] + p.strides[-1])
        )
    else:
        data = p[..., :0, 0] if m else np.empty((*p.shape[:-2], 0), p.dtype)
    if planes.requires_grad and _state.enabled:
        rows = np.arange(length) + r0
        key = (Ellipsis, rows, rows - r0 + c0)
        out = record(d.DiagonalBackward0, data, (planes,), (), (planes.shape, key))
    else:
        out = _make(data)
    return _as_view(out, planes) if length else out


_diagonal = diagonal  # ``diag`` has a parameter of that name (torch's signature)


def diag(x: Any, diagonal: int = 0) -> Tensor:
    """1-D input: the square matrix with ``x`` on the ``diagonal``-th diagonal. 2-D input: a copy
    of that diagonal."""
    x = as_tensor(x, name="diag() input")
    if x.ndim == 2:
        return _copy(_diagonal(x, diagonal))
    if x.ndim != 1:
        raise ShapeError(f"diag: the input must be 1-D or 2-D, got shape {x.shape}")
    n = x.shape[0] + abs(diagonal)
    i = np.arange(x.shape[0])
    rows, cols = (i, i + diagonal) if diagonal >= 0 else (i - diagonal, i)
    zeros = Tensor(np.zeros((n, n), x.dtype))
    return index_put(zeros, (rows, cols), x)


def diag_embed(x: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices whose ``offset``-th diagonal in the ``(dim1, dim2)`` planes is the last dim of
    ``x`` (zeros elsewhere): the inverse of ``diagonal``; its gradient is that diagonal.

    Shapes: ``x (..., n)`` -> ``(..., n + |offset|, n + |offset|)`` (the two new dims placed at
    ``dim1``, ``dim2`` of the result).

    Example:
        >>> import tadiff as td
        >>> td.diag_embed(td.tensor([[1.0, 2.0]]))
        tensor([[[1., 0.],
                 [0., 2.]]])
    """
    x = as_tensor(x, name="diag_embed() input")
    ndim = x.ndim + 1
    d1, d2 = norm_dim(dim1, ndim, "dim1"), norm_dim(dim2, ndim, "dim2")
    if d1 == d2:
        raise InputError(f"diag_embed: dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    length = x.shape[-1] if x.ndim else 1
    n = length + abs(offset)
    i = np.arange(length)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    zeros = Tensor(np.zeros((*x.shape[:-1], n, n), x.dtype))
    planes = index_put(zeros, (Ellipsis, rows, cols), x if x.ndim else reshape(x, (1,)))
    if (d1, d2) == (ndim - 2, ndim - 1):
        return planes
    return moveaxis(planes, (-2, -1), (d1, d2))


def _copy(t: Tensor) -> Tensor:
    return t * 1 if t._rg else Tensor(t.data.copy())


def trace(x: Any) -> Tensor:
    """Sum of the main diagonal of a 2-D tensor."""
    x = as_tensor(x, name="trace() input")
    _dims("trace", 2, self=x)
    return sum(_diagonal(x))
