"""Differentiable linear algebra on batches of matrices (``(..., m, n)``), with torch.linalg's
names: ``inv det slogdet logdet solve solve_triangular cholesky eigh eigvalsh svd svdvals qr``
and, composed from them, ``pinv matrix_power matrix_norm vector_norm norm``.

Each primitive is one recorded op whose backward formula (in :mod:`tadiff.ops.derivatives`) is
written with these same ops, so second derivatives work. The formulas assume what the forward
assumes: invertible matrices for ``inv``/``solve``/``det``'s gradient, distinct eigenvalues for
``eigh``'s eigenvectors and distinct nonzero singular values for ``svd``'s vectors (as in torch;
there the gradient is infinite or undefined). ``eigh`` reads the lower triangle like torch and
returns the same symmetric gradient.

Example:
    >>> import tadiff as td
    >>> a = td.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=td.float64, requires_grad=True)
    >>> td.linalg.logdet(a).backward(); a.grad   # d log det A / dA = A^-T
    tensor([[ 0.6, -0.2],
            [-0.2,  0.4]], dtype=float64)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tadiff.errors import InputError, LinAlgError, ShapeError
from tadiff.ops import derivatives as d
from tadiff.ops import elementwise as ew
from tadiff.ops import reductions as red
from tadiff.ops._common import INPUTS, Tensor, _make, _state, as_tensor, record, record_multi
from tadiff.ops._dual import solve_triangular_array
from tadiff.ops.linalg import matmul
from tadiff.ops.shape import moveaxis, transpose

__all__ = [
    "cholesky", "det", "eigh", "eigvalsh", "inv", "logdet", "matrix_norm", "matrix_power",
    "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd", "svdvals",
    "vector_norm",
]  # fmt: skip


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


def _matrix(a: Any, name: str, square: bool = True) -> Tensor:
    a = as_tensor(a, name=f"{name}() input")
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        kind = "square matrices" if square else "matrices"
        raise ShapeError(
            f"linalg.{name}: A must be a batch of {kind} of shape (*, n, n), got {a.shape}"
            if square
            else f"linalg.{name}: A must be a batch of {kind} (*, m, n), got {a.shape}"
        )
    if a.dtype.kind != "f":
        raise InputError(f"linalg.{name}: A must be float32 or float64, got {a.dtype}")
    return a


def _needs(*ts: Tensor) -> bool:
    return _state.enabled and any(t._rg for t in ts)


def _lapack(name: str, fn: Any, *arrays: Any) -> Any:
    """``fn(*arrays)`` with NumPy's errors as tadiff's (batch dims broadcast in NumPy's solvers)."""
    try:
        return fn(*arrays)
    except np.linalg.LinAlgError as exc:
        raise LinAlgError(f"linalg.{name}: {exc} (the input is singular or not definite)") from None
    except ValueError as exc:
        shapes = " and ".join(str(a.shape) for a in arrays if isinstance(a, np.ndarray))
        raise ShapeError(
            f"linalg.{name}: batch dims of {shapes} do not broadcast ({exc})"
        ) from None


def inv(a: Any) -> Tensor:
    """Inverse of square matrices (..., n, n)."""
    a = _matrix(a, "inv")
    out = _lapack("inv", np.linalg.inv, a.data)
    if _needs(a):
        return record(d.LinalgInvBackward0, out, (a,), (), (), save_result=True)
    return _make(out)


def slogdet(a: Any) -> SlogdetResult:
    """``(sign, log|det A|)`` of square matrices; the gradient flows through ``logabsdet``."""
    a = _matrix(a, "slogdet")
    sign, logabs = np.linalg.slogdet(a.data)
    sign, logabs = np.asarray(sign, a.dtype), np.asarray(logabs, a.dtype)
    if _needs(a):
        s, la = record_multi(d.LinalgSlogdetBackward0, (sign, logabs), (a,), saved=(a,))
        return SlogdetResult(s, la)
    return SlogdetResult(_make(sign), _make(logabs))


def det(a: Any) -> Tensor:
    """Determinant of square matrices (..., n, n)."""
    a = _matrix(a, "det")
    out = np.asarray(np.linalg.det(a.data), a.dtype)
    if _needs(a):
        return record(d.LinalgDetBackward0, out, (a,), INPUTS, (), save_result=True)
    return _make(out)


def logdet(a: Any) -> Tensor:
    """``log det A``: NaN where the determinant is negative, -inf where it is 0 (torch's)."""
    sign, logabs = slogdet(a)
    bad = np.where(sign.data < 0, np.nan, -np.inf).astype(logabs.dtype)
    return ew.where(sign.data > 0, logabs, bad)


def solve(a: Any, b: Any, *, left: bool = True) -> Tensor:
    """``X`` with ``A X = B`` (``X A = B`` when ``left=False``); ``B`` is (..., n, k), or
    vectors: ``(n,)`` or ``A``'s batch of them (``B.shape == A.shape[:-1]``), torch's rule.
    Batch dims broadcast: ``B`` of shape ``(n, k)`` is solved against every matrix of a batch.

    Example:
        >>> import tadiff as td
        >>> solve(td.eye(3).expand(4, 3, 3), td.ones(3, 2)).shape
        (4, 3, 2)
    """
    a = _matrix(a, "solve")
    b = as_tensor(b, a, "solve() B")
    if not left:
        return transpose(solve(transpose(a, -1, -2), transpose(b, -1, -2)), -1, -2)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    rhs = b.data[..., None] if vector else b.data
    if rhs.shape[-2] != a.shape[-1]:
        raise ShapeError(
            f"linalg.solve: A of shape {a.shape} and B of shape {b.shape} are incompatible "
            f"(B needs {a.shape[-1]} rows)"
        )
    out = _lapack("solve", np.linalg.solve, a.data, rhs)
    out = out[..., 0] if vector else out
    if _needs(a, b):
        args = (vector, b.shape)
        return record(d.LinalgSolveBackward0, out, (a, b), (a,), args, save_result=True)
    return _make(out)


def solve_triangular(
    a: Any, b: Any, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """``X`` with ``A X = B`` for triangular ``A`` (only its ``upper``/lower triangle is read;
    with ``unitriangular`` its diagonal is taken as ones). ``B`` is (..., n, k)."""
    a = _matrix(a, "solve_triangular")
    b = as_tensor(b, a, "solve_triangular() B")
    if not left:
        flipped = solve_triangular(
            transpose(a, -1, -2), transpose(b, -1, -2), upper=not upper, unitriangular=unitriangular
        )
        return transpose(flipped, -1, -2)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(
            f"linalg.solve_triangular: B must be (*, {a.shape[-1]}, k) to match A of shape "
            f"{a.shape}, got {b.shape}"
        )
    out = _lapack("solve_triangular", solve_triangular_array, a.data, b.data, upper, unitriangular)
    if _needs(a, b):
        args = (upper, unitriangular)
        return record(d.LinalgSolveTriangularBackward0, out, (a, b), (a,), args, save_result=True)
    return _make(out)


def cholesky(a: Any, *, upper: bool = False) -> Tensor:
    """Cholesky factor of symmetric positive-definite matrices: ``L`` with ``A = L Lᵀ`` (lower),
    or ``U = Lᵀ`` with ``upper``. Only the lower triangle of ``A`` is read."""
    a = _matrix(a, "cholesky")
    lower = np.tril(a.data)
    sym = lower + np.swapaxes(np.tril(a.data, -1), -1, -2)
    out = _lapack("cholesky", np.linalg.cholesky, sym)
    if _needs(a):
        result = record(d.LinalgCholeskyBackward0, out, (a,), (), (), save_result=True)
    else:
        result = _make(out)
    return transpose(result, -1, -2) if upper else result


def eigh(a: Any, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and orthonormal eigenvectors of symmetric matrices, reading the
    ``UPLO`` triangle."""
    a = _matrix(a, "eigh")
    if UPLO not in ("L", "U"):
        raise InputError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    w, v = np.linalg.eigh(a.data, UPLO=UPLO)
    if _needs(a):
        return EighResult(*record_multi(d.LinalgEighBackward0, (w, v), (a,), save_results=True))
    return EighResult(_make(w), _make(v))


def eigvalsh(a: Any, UPLO: str = "L") -> Tensor:
    """Eigenvalues (ascending) of symmetric matrices."""
    return eigh(a, UPLO).eigenvalues


def svd(a: Any, full_matrices: bool = True) -> SVDResult:
    """``A = U diag(S) Vh`` for (..., m, n) matrices; differentiable for ``full_matrices=False``
    (or square inputs), singular values descending."""
    a = _matrix(a, "svd", square=False)
    u, s, vh = np.linalg.svd(a.data, full_matrices=full_matrices)
    if _needs(a):
        m, n = a.shape[-2:]
        if full_matrices and m != n:
            raise InputError(
                "linalg.svd: the gradient needs full_matrices=False for non-square inputs "
                "(the extra singular vectors are not determined by A), as in torch"
            )
        return SVDResult(*record_multi(d.LinalgSvdBackward0, (u, s, vh), (a,), save_results=True))
    return SVDResult(_make(u), _make(s), _make(vh))


def svdvals(a: Any) -> Tensor:
    """Singular values, descending."""
    a = _matrix(a, "svdvals", square=False)
    if _needs(a):
        return svd(a, full_matrices=False).S
    return _make(np.linalg.svd(a.data, compute_uv=False))


def qr(a: Any, mode: str = "reduced") -> QRResult:
    """``A = Q R`` with orthonormal columns in ``Q`` and upper-triangular ``R``; gradients for
    ``mode='reduced'`` with rows >= columns (the common tall or square case)."""
    a = _matrix(a, "qr", square=False)
    if mode not in ("reduced", "complete", "r"):
        raise InputError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    if mode == "r":
        r = np.linalg.qr(a.data, mode="r")
        return QRResult(_make(np.zeros((*a.shape[:-2], 0, 0), a.dtype)), _make(r))
    q, r = np.linalg.qr(a.data, mode=mode)
    if _needs(a):
        m, n = a.shape[-2:]
        if m < n or (mode == "complete" and m != n):
            raise InputError(
                f"linalg.qr: gradients are implemented for mode='reduced' with rows >= columns; "
                f"got a {m}x{n} input with mode={mode!r}"
            )
        return QRResult(*record_multi(d.LinalgQrBackward0, (q, r), (a,), save_results=True))
    return QRResult(_make(q), _make(r))


# ---- composites -----------------------------------------------------------------------------


def pinv(a: Any, *, rtol: float | None = None, hermitian: bool = False) -> Tensor:
    """Moore–Penrose pseudo-inverse by the SVD; singular values at most ``rtol * max(S)``
    (default ``max(m, n) * eps``) count as zero. Differentiable away from that cutoff."""
    a = _matrix(a, "pinv", square=False)
    u, s, vh = svd(a, full_matrices=False)
    if rtol is None:
        rtol = max(a.shape[-2:]) * np.finfo(a.dtype).eps
    cutoff = rtol * s.data.max(axis=-1, keepdims=True) if s.data.size else 0.0
    keep = s.data > cutoff
    s_inv = ew.where(keep, 1 / ew.where(keep, s, 1.0), 0.0)
    return matmul(ew.mul(transpose(vh, -1, -2), s_inv[..., None, :]), transpose(u, -1, -2))


def matrix_power(a: Any, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (``n < 0``: powers of the inverse; 0: identity)."""
    a = _matrix(a, "matrix_power")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise InputError(f"linalg.matrix_power: n must be an int, got {n!r}")
    if n == 0:
        eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
        return _make(eye.copy())
    base = inv(a) if n < 0 else a
    result, n = None, -int(n) if n < 0 else int(n)
    while n:  # binary powering: log2(n) squarings
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def matrix_norm(a: Any, ord: Any = "fro", dim: tuple[int, int] = (-2, -1), keepdim: bool = False):
    """Matrix norms over ``dim``: ``'fro'``, ``'nuc'``, ``2``/``-2`` (largest/smallest singular
    value), ``1``/``-1`` (max/min column abs sum), ``inf``/``-inf`` (max/min row abs sum)."""
    a = _matrix(a, "matrix_norm", square=False)
    d0, d1 = (int(v) % a.ndim for v in dim)
    if d0 == d1:
        raise InputError(f"linalg.matrix_norm: dim must name two different dims, got {dim}")
    if ord == "fro":  # the 2-norm primitive: its gradient is 0 at a zero matrix, as torch's
        return red.norm(a, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(moveaxis(a, (d0, d1), (-2, -1)))
        pick = red.sum if ord == "nuc" else red.amax if ord == 2 else red.amin
        out = pick(s, -1)
        return _keep(out, (d0, d1)) if keepdim else out
    if ord in (1, -1, np.inf, -np.inf):
        across, along = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = red.sum(ew.abs(a), across, True)
        out = (red.amax if ord > 0 else red.amin)(sums, along, True)
        return out if keepdim else out.squeeze((d0, d1))
    raise InputError(f"linalg.matrix_norm: unsupported ord {ord!r}")


def _keep(out: Tensor, dims: tuple[int, int]) -> Tensor:
    shape = list(out.shape)
    for k in sorted(dims):
        shape.insert(k, 1)
    return out.reshape(tuple(shape))


def vector_norm(x: Any, ord: float = 2, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``(Σ |x|^ord)^(1/ord)`` over ``dim`` (all elements when None); ``inf``/``-inf``: max/min
    of ``|x|``; 0: the number of nonzeros (no gradient)."""
    x = as_tensor(x, name="vector_norm() input")
    if ord == 2:  # the common order first: each comparison with np.inf costs a float conversion
        return red.norm(x, 2, dim, keepdim)
    if ord == np.inf:
        return red.amax(ew.abs(x), dim, keepdim)
    if ord == -np.inf:
        return red.amin(ew.abs(x), dim, keepdim)
    if ord == 0:
        nz = np.count_nonzero(x.data, axis=dim, keepdims=keepdim)
        return _make(np.asarray(nz, x.dtype))
    return red.norm(x, ord, dim, keepdim)


def norm(a: Any, ord: Any = None, dim: Any = None, keepdim: bool = False) -> Tensor:
    """torch.linalg.norm: a vector norm (1-D input or an int ``dim``), a matrix norm (2-D input
    with ``ord`` given, or a pair ``dim``), the 2-norm of everything otherwise."""
    a = as_tensor(a, name="norm() input")
    pair = isinstance(dim, (tuple, list)) and len(dim) == 2
    if pair or (dim is None and ord is not None and a.ndim == 2):
        return matrix_norm(a, "fro" if ord is None else ord, tuple(dim or (-2, -1)), keepdim)
    return vector_norm(a, 2 if ord is None else ord, dim, keepdim)
