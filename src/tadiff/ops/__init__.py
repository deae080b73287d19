"""Primitive tensor ops with their VJPs.

Forward functions live in ``elementwise``, ``reductions``, ``shape``, ``indexing``, ``linalg`` and
``inplace``; every gradient formula lives in one table, ``derivatives``. Importing this package
binds the ops onto ``Tensor`` as methods and operators, and gives the VJP formulas their
differentiable namespace (``_dual.GRAPH``) for ``create_graph``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.factories import zeros
from tadiff.autograd.tensor import Tensor
from tadiff.ops import _dual, tensor_methods
from tadiff.ops._dual import _reduced_axes, keepdim_shape
from tadiff.ops.elementwise import (
    abs,
    add,
    clamp,
    cos,
    div,
    eq,
    erf,
    erfc,
    exp,
    expm1,
    ge,
    gt,
    le,
    log,
    log1p,
    logical_not,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    pow,
    relu,
    sigmoid,
    sign,
    sin,
    sqrt,
    sub,
    tan,
    tanh,
    where,
)
from tadiff.ops.indexing import gather, getitem, index_put, index_scatter, scatter_add
from tadiff.ops.linalg import einsum, matmul
from tadiff.ops.reductions import (
    amax,
    amin,
    argmax,
    argmin,
    log_softmax,
    logsumexp,
    max,
    mean,
    min,
    norm,
    prod,
    softmax,
    std,
    sum,
    var,
)
from tadiff.ops.shape import (
    broadcast_to,
    cat,
    chunk,
    clone,
    concatenate,
    contiguous,
    expand,
    flatten,
    flip,
    moveaxis,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    to,
    transpose,
    tril,
    triu,
    unbind,
    unsqueeze,
    view,
)


def _graph_sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    if g.shape == shape:
        return g
    return reshape(sum(g, _reduced_axes(g.shape, shape), True), shape)


def _graph_unreduce(g: Tensor, shape: tuple[int, ...], dims: Any, keepdim: bool) -> Tensor:
    if not keepdim:
        g = reshape(g, keepdim_shape(shape, dims))
    return broadcast_to(g, shape)


def _graph_prod_others(x: Tensor, dims: Any) -> Tensor:
    """Differentiable product of the other elements of each reduction group: the group is laid
    out along a new axis with the element itself replaced by 1 (O(n^2) memory per group, fine for
    the second derivatives this serves)."""
    if x.data.size == 0:
        return x * 0
    dims = tuple(range(x.ndim)) if dims is None else dims
    keep = [i for i in range(x.ndim) if i not in dims]
    moved = permute(x, *(keep + list(dims)))
    n = int(np.prod([x.shape[i] for i in dims], dtype=np.int64))
    flat = reshape(moved, (*moved.shape[: len(keep)], n))
    square = broadcast_to(unsqueeze(flat, -2), (*flat.shape[:-1], n, n))
    others = prod(where(np.eye(n, dtype=bool), 1.0, square), -1)
    back = np.argsort(keep + list(dims))
    return permute(reshape(others, moved.shape), *back)


def _graph_data(x: Any) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


_dual.GRAPH.__dict__.update(
    data=_graph_data,
    dtype=lambda x: x.dtype,
    sum_to=_graph_sum_to,
    unreduce=_graph_unreduce,
    broadcast_to=broadcast_to,
    reshape=reshape,
    permute=lambda x, axes: permute(x, *axes),
    swapaxes=transpose,
    flip=flip,
    exp=exp,
    log=log,
    sin=sin,
    cos=cos,
    sign=sign,
    where=where,
    masked=lambda keep, g: where(keep, g, 0),
    sum=sum,
    mean=mean,
    cast=to,
    stack=stack,
    cat=cat,
    index_scatter=index_scatter,
    gather=gather,
    scatter_add_zeros=lambda g, dim, idx, shape: scatter_add(
        zeros(shape, dtype=g.dtype), dim, idx, g
    ),
    einsum=einsum,
    prod_others=_graph_prod_others,
)
tensor_methods.install()

__all__ = [
    "abs", "add", "amax", "amin", "argmax", "argmin", "broadcast_to", "cat", "chunk", "clamp",
    "clone", "concatenate", "contiguous", "cos", "div", "einsum", "eq", "erf", "erfc", "exp",
    "expand", "expm1", "flatten", "flip", "gather", "ge", "getitem", "gt", "index_put",
    "index_scatter", "le", "log", "log1p", "log_softmax", "logical_not", "logsumexp", "lt",
    "matmul", "max", "maximum", "mean", "min", "minimum", "moveaxis", "mul", "ne", "neg", "norm",
    "permute", "pow", "prod", "relu", "reshape", "scatter_add", "sigmoid", "sign", "sin",
    "softmax", "split", "sqrt", "squeeze", "stack", "std", "sub", "sum", "swapaxes", "tan", "tanh",
    "to", "transpose", "tril", "triu", "unbind", "unsqueeze", "var", "view", "where"
]  # fmt: skip
