"""``tadiff.linalg``: differentiable linear algebra with ``torch.linalg``'s names.

Decompositions and solvers (``inv det slogdet logdet solve solve_triangular cholesky eigh
eigvalsh svd svdvals qr``), what is built from them (``pinv matrix_power matrix_norm
vector_norm norm``), and the matrix helpers torch also lists here (``cross diagonal matmul
vecdot``), and ``LinAlgError`` (raised for singular or indefinite input, a ``RuntimeError`` like
torch's). Gradients and second derivatives are exact under the assumptions of each function
(see :mod:`tadiff.ops.decompositions`); every one is tested against torch.

Example:
    >>> import tadiff as td
    >>> a = td.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=td.float64, requires_grad=True)
    >>> L = td.linalg.cholesky(a)
    >>> (L ** 2).sum().backward(); a.grad.shape
    (2, 2)
"""

from __future__ import annotations

from typing import Any

from tadiff.autograd.tensor import Tensor
from tadiff.errors import LinAlgError
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
    "matmul", "matrix_norm", "matrix_power", "norm", "pinv", "qr", "slogdet", "solve",
    "solve_triangular", "svd", "svdvals", "vecdot", "vector_norm",
]  # fmt: skip


def vecdot(x: Any, y: Any, *, dim: int = -1) -> Tensor:
    """Dot products of the vectors along ``dim`` (real inputs), broadcasting the other dims."""
    return _sum(x * y, dim)
