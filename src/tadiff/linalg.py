"""``tadiff.linalg``: differentiable linear algebra with ``torch.linalg``'s names.

Decompositions and solvers (``inv det slogdet logdet solve solve_triangular cholesky eigh
eigvalsh svd svdvals qr``), what is built from them (``pinv matrix_power matrix_norm
vector_norm norm``), the matrix helpers torch also lists here (``cross diagonal matmul vecdot
multi_dot``), and ``LinAlgError`` (raised for singular or indefinite input, a ``RuntimeError``
like torch's). Gradients and second derivatives are exact under the assumptions of each function
(see :mod:`tadiff.ops.decompositions`); every one is tested against torch.

Example:
    >>> import tadiff as td
    >>> a = td.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=td.float64, requires_grad=True)
    >>> L = td.linalg.cholesky(a)
    >>> (L ** 2).sum().backward(); a.grad.shape
    (2, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, LinAlgError, ShapeError
from tadiff.ops._common import as_tensor
from tadiff.ops.decompositions import (
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    logdet,
    matrix_norm,
    matrix_power,
    norm,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
    vector_norm,
)
from tadiff.ops.linalg import matmul
from tadiff.ops.matrix import cross, diagonal
from tadiff.ops.reductions import sum as _sum

__all__ = [
    "LinAlgError", "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "logdet",
    "matmul", "matrix_norm", "matrix_power", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
    "solve_triangular", "svd", "svdvals", "vecdot", "vector_norm",
]  # fmt: skip


def vecdot(x: Any, y: Any, *, dim: int = -1) -> Tensor:
    """Dot products of the vectors along ``dim`` (real inputs), broadcasting the other dims."""
    return _sum(x * y, dim)


def multi_dot(tensors: Sequence[Any]) -> Tensor:
    """The product of two or more matrices, multiplied in the order that costs the fewest
    multiply-adds (the matrix-chain order); the first may be a 1-d row and the last a 1-d
    column, whose dims the result then drops.

    Raises:
        InputError: fewer than two tensors.
        ShapeError: a middle tensor that is not 2-d, an end with more than 2 dims, or sizes
            that do not chain (naming the pair).

    Example:
        >>> import tadiff as td
        >>> td.linalg.multi_dot([td.ones(3), td.ones(3, 2), td.ones(2)])
        tensor(6.)
    """
    ts = [as_tensor(t, name=f"multi_dot() tensor {i}") for i, t in enumerate(tensors)]
    if len(ts) < 2:
        raise InputError(f"multi_dot: got {len(ts)} tensor(s); expected at least two")
    first_1d, last_1d = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0].reshape(1, -1) if first_1d else ts[0], *ts[1:-1]]
    mats.append(ts[-1].reshape(-1, 1) if last_1d else ts[-1])
    for i, m in enumerate(mats):
        if m.ndim != 2:
            raise ShapeError(f"multi_dot: tensor {i} has shape {ts[i].shape}; expected 2 dims")
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise ShapeError(
                f"multi_dot: tensors {i} and {i + 1} have shapes {ts[i].shape} and "
                f"{ts[i + 1].shape}, which cannot be multiplied"
            )
    out = _chain(mats, _chain_order([m.shape[0] for m in mats] + [mats[-1].shape[1]]))
    if first_1d:
        out = out.reshape(out.shape[1:])
    if last_1d:
        out = out.reshape(out.shape[:-1])
    return out


def _chain_order(dims: list[int]) -> dict[tuple[int, int], int]:
    """Where to split each run ``i..j`` of matrices ``dims[k] x dims[k + 1]`` so that the whole
    product costs the fewest multiply-adds (dynamic programming over the runs)."""
    n = len(dims) - 1
    cost = {(i, i): 0 for i in range(n)}
    split: dict[tuple[int, int], int] = {}
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            cost[i, j], split[i, j] = min(
                (cost[i, k] + cost[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j)
            )
    return split


def _chain(mats: list[Tensor], split: dict[tuple[int, int], int]) -> Tensor:
    def product(i: int, j: int) -> Tensor:
        if i == j:
            return mats[i]
        k = split[i, j]
        return matmul(product(i, k), product(k + 1, j))

    return product(0, len(mats) - 1)
