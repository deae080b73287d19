"""Functions of torch's namespace written as compositions of other tadiff ops: distances,
cumulative extremes, statistics, quadrature, and stacking and flipping helpers.

Each differentiates through the ops it is made of (so also to higher orders); where torch's
gradient is a convention (a zero distance, tied extremes) the composition gives torch's.

Example:
    >>> import tadiff as td
    >>> td.cdist(td.tensor([[0.0, 0.0]]), td.tensor([[3.0, 4.0], [0.0, 1.0]]))
    tensor([[5., 1.]])
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.ops._common import as_tensor
from tadiff.ops.reductions import ValuesIndices

# ---- distances ---------------------------------------------------------------------------


def dist(input: Any, other: Any, p: float = 2.0) -> Tensor:
    """The ``p``-norm of ``input - other`` over all elements (they broadcast).

    Example:
        >>> td.dist(td.tensor([0.0, 0.0]), td.tensor([3.0, 4.0]))
        tensor(5.)
    """
    a, b = as_tensor(input, name="dist() input"), as_tensor(other, name="dist() other")
    return td.linalg.vector_norm(a - b, p)


def cdist(x1: Any, x2: Any, p: float = 2.0) -> Tensor:
    """Distances between the rows of ``x1 (..., P, M)`` and ``x2 (..., R, M)``: ``(..., P, R)``.

    Computed from the differences (``P * R * M`` values at once), so close points keep their
    digits where the expansion ``|x|^2 + |y|^2 - 2 x.y`` would cancel; a zero distance has
    gradient 0, as in torch.

    Raises:
        ShapeError: fewer than 2 dims, or different row lengths ``M``.
        InputError: ``p < 0``.

    Example:
        >>> td.cdist(td.tensor([[0.0, 0.0], [1.0, 1.0]]), td.tensor([[1.0, 1.0]]), p=1.0)
        tensor([[2.],
                [0.]])
    """
    a, b = as_tensor(x1, name="cdist() x1"), as_tensor(x2, name="cdist() x2")
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise ShapeError(
            f"cdist: x1 of shape {a.shape} and x2 of shape {b.shape}; expected (..., P, M) and "
            "(..., R, M) with one M"
        )
    if not p >= 0:
        raise InputError(f"cdist: p={p}; expected p >= 0")
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)  # (..., P, R, M)
    return td.linalg.vector_norm(diff, p, dim=-1)


def pdist(input: Any, p: float = 2.0) -> Tensor:
    """The distances between the rows of ``input (N, M)``, ``i < j`` in row-major order:
    ``N (N - 1) / 2`` values.

    Example:
        >>> td.pdist(td.tensor([[0.0], [1.0], [3.0]]))
        tensor([1., 3., 2.])
    """
    x = as_tensor(input, name="pdist() input")
    if x.ndim != 2:
        raise ShapeError(f"pdist: input of shape {x.shape}; expected (N, M)")
    rows, cols = np.triu_indices(x.shape[0], 1)
    return cdist(x, x, p)[rows, cols]


# ---- cumulative extremes -----------------------------------------------------------------


def _cumulative_extreme(x: Any, dim: int, largest: bool, where: str) -> ValuesIndices:
    t = as_tensor(x, name=f"{where}() input")
    if t.ndim == 0:
        return ValuesIndices(t.clone(), Tensor(np.zeros((), np.int64)))
    if not -t.ndim <= dim < t.ndim:
        raise ShapeError(f"{where}: dim={dim} is out of range for a tensor of shape {t.shape}")
    data = np.moveaxis(t.data, dim, 0)
    index = np.zeros(data.shape, np.int64)
    if data.shape[0] == 0:  # nothing to scan: empty values and indices
        indices = Tensor(np.moveaxis(index, 0, dim).copy())
        return ValuesIndices(td.gather(t, dim, indices), indices)
    best = data[0].copy()
    current = np.zeros(data.shape[1:], np.int64)
    beats = np.greater_equal if largest else np.less_equal
    for k in range(1, data.shape[0]):
        # torch's rule: a NaN always takes over, a tie moves to the later element, and once
        # the running extreme is NaN only a later NaN replaces it
        row = data[k]
        take = np.isnan(row) | (~np.isnan(best) & beats(row, best))
        best = np.where(take, row, best)
        current = np.where(take, k, current)
        index[k] = current
    indices = Tensor(np.ascontiguousarray(np.moveaxis(index, 0, dim)))
    return ValuesIndices(td.gather(t, dim, indices), indices)


def cummax(input: Any, dim: int) -> ValuesIndices:
    """Running maximum along ``dim`` and where it was found (a tie moves to the later element,
    as in torch); the gradient goes to those elements.

    Example:
        >>> td.cummax(td.tensor([1.0, 3.0, 2.0, 3.0]), 0).indices
        tensor([0, 1, 1, 3])
    """
    return _cumulative_extreme(input, dim, True, "cummax")


def cummin(input: Any, dim: int) -> ValuesIndices:
    """Running minimum along ``dim`` and where it was found (see :func:`cummax`).

    Example:
        >>> td.cummin(td.tensor([2.0, 1.0, 3.0]), 0).values
        tensor([2., 1., 1.])
    """
    return _cumulative_extreme(input, dim, False, "cummin")


# ---- statistics ---------------------------------------------------------------------------


def std_mean(input: Any, dim: Any = None, *, correction: float = 1, keepdim: bool = False):
    """``(std, mean)`` over ``dim`` (all elements by default), as torch returns them.

    Example:
        >>> std, mean = td.std_mean(td.tensor([1.0, 3.0]))
        >>> float(std), float(mean)
        (1.4142135381698608, 2.0)
    """
    return _with_mean(td.std, input, dim, correction, keepdim, "std_mean")


def var_mean(input: Any, dim: Any = None, *, correction: float = 1, keepdim: bool = False):
    """``(var, mean)`` over ``dim`` (all elements by default).

    Example:
        >>> var, mean = td.var_mean(td.tensor([1.0, 3.0]))
        >>> float(var), float(mean)
        (2.0, 2.0)
    """
    return _with_mean(td.var, input, dim, correction, keepdim, "var_mean")


def _with_mean(spread, input: Any, dim: Any, correction: float, keepdim: bool, where: str):
    """``(spread(x), mean(x))`` over ``dim``, with one set of arguments."""
    x = as_tensor(input, name=f"{where}() input")
    return spread(x, dim, correction=correction, keepdim=keepdim), td.mean(x, dim, keepdim=keepdim)


def cov(input: Any, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Tensor:
    """Covariance of the variables in the rows of ``input (V, N)`` (or one variable ``(N,)``)
    observed in its columns, with torch's frequency and observation weights.

    The normalizer is ``sum(w) - correction * sum(w * aweights) / sum(w)`` (``w = fweights *
    aweights``), as in torch; it is ``N - correction`` without weights.

    Example:
        >>> td.cov(td.tensor([[0.0, 2.0], [1.0, 1.0]]))
        tensor([[2., 0.],
                [0., 0.]])
    """
    x = as_tensor(input, name="cov() input")
    if x.ndim > 2:
        raise ShapeError(f"cov: input of shape {x.shape}; expected (V, N) or (N,)")
    x2 = x.reshape(1, -1) if x.ndim < 2 else x
    n = x2.shape[1]
    weights = None
    for name, w in (("fweights", fweights), ("aweights", aweights)):
        if w is None:
            continue
        wt = as_tensor(w, name=f"cov() {name}")
        if wt.ndim > 1 or wt.numel() != n:
            raise ShapeError(f"cov: {name} of shape {wt.shape}; expected ({n},)")
        if name == "fweights" and wt.dtype.kind not in "iu":
            raise InputError(f"cov: fweights of dtype {wt.dtype}; expected integers")
        if (wt.data < 0).any():
            raise InputError(f"cov: {name} has negative entries; expected weights >= 0")
        wt = wt.to(x2.dtype)
        weights = wt if weights is None else weights * wt
    if weights is None:
        norm = Tensor(np.asarray(max(n - correction, 0), dtype=x2.dtype))
        centered = x2 - x2.mean(1, keepdim=True)
        scatter = centered @ centered.transpose(0, 1)
    else:
        total = weights.sum()
        centered = x2 - (x2 * weights).sum(1, keepdim=True) / total
        if aweights is None:
            norm = total - correction
        else:
            aw = as_tensor(aweights).to(x2.dtype)
            norm = total - correction * (weights * aw).sum() / total
        norm = td.clamp(norm, min=0.0)
        scatter = (centered * weights) @ centered.transpose(0, 1)
    if not float(norm.data) > 0:
        # torch's warning and its inf/nan values, not NumPy's division warnings
        warnings.warn(
            "cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
            "number of observations.",
            UserWarning,
            stacklevel=2,
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        out = scatter / norm
    return out.reshape(()) if x.ndim < 2 else out


def corrcoef(input: Any) -> Tensor:
    """Pearson correlation coefficients of the rows of ``input (V, N)``, clipped to
    ``[-1, 1]`` (as torch).

    Example:
        >>> td.corrcoef(td.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]))
        tensor([[ 1., -1.],
                [-1.,  1.]])
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = td.diagonal(c).sqrt()
    return td.clamp(c / d.unsqueeze(1) / d.unsqueeze(0), -1.0, 1.0)


# ---- quadrature -----------------------------------------------------------------------------


def _trapezoids(y: Tensor, x: Any, dx: Any, dim: int) -> Tensor:
    n = y.shape[dim]
    if n == 0:
        return td.narrow(y, dim, 0, 0)
    pairs = (td.narrow(y, dim, 1, n - 1) + td.narrow(y, dim, 0, n - 1)) / 2
    if x is None:
        return pairs * (1.0 if dx is None else dx)
    xs = as_tensor(x, name="trapezoid() x")
    if xs.ndim == 1 and y.ndim > 1:  # sample points along dim, the same for every slice
        along = dim % y.ndim
        widths = td.diff(xs).reshape(tuple(-1 if k == along else 1 for k in range(y.ndim)))
    else:
        widths = td.diff(xs, dim=dim)
    return pairs * widths


def trapezoid(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: samples ``y`` at points ``x`` (or spaced ``dx``,
    default 1).

    Example:
        >>> td.trapezoid(td.tensor([0.0, 1.0, 2.0]))
        tensor(2.)
    """
    t = as_tensor(y, name="trapezoid() y")
    return _trapezoids(t, x, dx, dim).sum(dim)


def cumulative_trapezoid(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoidal rule along ``dim`` (one value fewer than ``y`` along it).

    Example:
        >>> td.cumulative_trapezoid(td.tensor([0.0, 1.0, 2.0]))
        tensor([0.5, 2. ])
    """
    t = as_tensor(y, name="cumulative_trapezoid() y")
    return td.cumsum(_trapezoids(t, x, dx, dim), dim)


# ---- building matrices ----------------------------------------------------------------------


def block_diag(*tensors: Any) -> Tensor:
    """The block-diagonal matrix of 0-, 1- or 2-d tensors (a 1-d one is a row).

    Example:
        >>> td.block_diag(td.tensor([[1.0]]), td.tensor([2.0, 3.0]))
        tensor([[1., 0., 0.],
                [0., 2., 3.]])
    """
    blocks = []
    for i, t in enumerate(tensors):
        b = as_tensor(t, name=f"block_diag() argument {i}")
        if b.ndim > 2:
            raise ShapeError(f"block_diag: argument {i} has shape {b.shape}; expected <= 2 dims")
        blocks.append(b.reshape(1, -1) if b.ndim < 2 else b)
    if not blocks:
        return td.zeros(1, 0)
    dtype = np.result_type(*(b.dtype for b in blocks))
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = width - left - b.shape[1]
        rows.append(td.nn.functional.pad(b.to(dtype), (left, right)))
        left += b.shape[1]
    return td.cat(rows, 0)


def cartesian_prod(*tensors: Any) -> Tensor:
    """Every combination of the elements of 1-d tensors, as rows (one tensor: itself).

    Example:
        >>> td.cartesian_prod(td.tensor([1, 2]), td.tensor([3, 4]))
        tensor([[1, 3],
                [1, 4],
                [2, 3],
                [2, 4]])
    """
    ts = [as_tensor(t, name="cartesian_prod() argument") for t in tensors]
    if any(t.ndim != 1 for t in ts):
        raise ShapeError(
            f"cartesian_prod: arguments of shapes {[t.shape for t in ts]}; expected 1-d tensors"
        )
    if len(ts) == 1:
        return ts[0]
    grids = td.meshgrid(*ts, indexing="ij")
    return td.stack([g.reshape(-1) for g in grids], 1)


def diagflat(input: Any, offset: int = 0) -> Tensor:
    """The flattened input on the ``offset`` diagonal of a square matrix.

    Example:
        >>> td.diagflat(td.tensor([[1.0, 2.0]]))
        tensor([[1., 0.],
                [0., 2.]])
    """
    return td.diag(as_tensor(input, name="diagflat() input").reshape(-1), offset)


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Tensor:
    """Vandermonde matrix of a 1-d ``x``: columns ``x**(N-1), ..., x, 1`` (reversed if
    ``increasing``); ``N`` defaults to ``len(x)``.

    Example:
        >>> td.vander(td.tensor([2.0, 3.0]), 3)
        tensor([[4., 2., 1.],
                [9., 3., 1.]])
    """
    t = as_tensor(x, name="vander() x")
    if t.ndim != 1:
        raise ShapeError(f"vander: x of shape {t.shape}; expected a 1-d tensor")
    n = t.shape[0] if N is None else N
    if n < 0:
        raise InputError(f"vander: N={N}; expected N >= 0")
    powers = range(n) if increasing else range(n - 1, -1, -1)
    if n == 0:
        return td.zeros(t.shape[0], 0, dtype=t.dtype)
    return td.stack([t**k for k in powers], 1)


def addbmm(
    input: Any, batch1: Any, batch2: Any, *, beta: float = 1.0, alpha: float = 1.0
) -> Tensor:
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``.

    Example:
        >>> td.addbmm(td.zeros(1, 1), td.ones(3, 1, 2), td.ones(3, 2, 1))
        tensor([[6.]])
    """
    product = td.bmm(batch1, batch2).sum(0)
    out = product if alpha == 1 else product * alpha
    if beta == 0:  # torch ignores input (even its NaNs) when beta is 0
        return out + td.zeros_like(as_tensor(input))
    return out + (as_tensor(input) if beta == 1 else as_tensor(input) * beta)


def chain_matmul(*matrices: Any) -> Tensor:
    """The product of 2-d matrices, left to right.

    Example:
        >>> td.chain_matmul(td.ones(2, 3), td.ones(3, 1), td.ones(1, 2))
        tensor([[3., 3.],
                [3., 3.]])
    """
    if not matrices:
        raise InputError("chain_matmul: expected at least one matrix")
    out = as_tensor(matrices[0], name="chain_matmul() argument 0")
    for m in matrices[1:]:
        out = out @ m
    return out


# ---- products, flips, stacks, small pointwise helpers ---------------------------------------


def inner(input: Any, other: Any) -> Tensor:
    """Sum over the last dims: ``a.shape[:-1] + b.shape[:-1]``; a 0-d operand multiplies.

    Example:
        >>> td.inner(td.tensor([1.0, 2.0]), td.tensor([3.0, 4.0]))
        tensor(11.)
    """
    a, b = as_tensor(input, name="inner() input"), as_tensor(other, name="inner() other")
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return td.tensordot(a, b, dims=([-1], [-1]))


def vdot(input: Any, other: Any) -> Tensor:
    """Dot product of two 1-d tensors (real: ``dot``).

    Example:
        >>> td.vdot(td.tensor([1.0, 2.0]), td.tensor([3.0, 4.0]))
        tensor(11.)
    """
    return td.dot(input, other)


def flipud(input: Any) -> Tensor:
    """Reverse the first dim.

    Example:
        >>> td.flipud(td.tensor([1.0, 2.0]))
        tensor([2., 1.])
    """
    return td.flip(input, [0])


def fliplr(input: Any) -> Tensor:
    """Reverse the second dim (at least 2 dims).

    Example:
        >>> td.fliplr(td.tensor([[1.0, 2.0]]))
        tensor([[2., 1.]])
    """
    x = as_tensor(input, name="fliplr() input")
    if x.ndim < 2:
        raise ShapeError(f"fliplr: input of shape {x.shape}; expected at least 2 dims")
    return td.flip(x, [1])


def rot90(input: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotate by ``k`` quarter turns in the plane of ``dims``, from the first towards the
    second.

    Example:
        >>> td.rot90(td.tensor([[1.0, 2.0], [3.0, 4.0]]))
        tensor([[2., 4.],
                [1., 3.]])
    """
    x = as_tensor(input, name="rot90() input")
    if len(dims) != 2 or x.ndim < 2:
        raise ShapeError(f"rot90: dims={tuple(dims)} for shape {x.shape}; expected two dims")
    d0, d1 = (d % x.ndim for d in dims)
    if d0 == d1:
        raise ShapeError(f"rot90: dims={tuple(dims)} name one dim twice")
    k %= 4
    if k == 1:
        return td.flip(x, [d1]).transpose(d0, d1)
    if k == 2:
        return td.flip(x, [d0, d1])
    if k == 3:
        return td.flip(x, [d0]).transpose(d0, d1)
    return x.clone()


def atleast_1d(*tensors: Any) -> Any:
    """Each argument with at least 1 dim (a 0-d one as shape ``(1,)``).

    Example:
        >>> td.atleast_1d(td.tensor(2.0)).shape
        (1,)
    """
    return _at_least(tensors, 1)


def atleast_2d(*tensors: Any) -> Any:
    """Each argument with at least 2 dims (``(n,)`` becomes ``(1, n)``).

    Example:
        >>> td.atleast_2d(td.tensor([1.0, 2.0])).shape
        (1, 2)
    """
    return _at_least(tensors, 2)


def atleast_3d(*tensors: Any) -> Any:
    """Each argument with at least 3 dims (``(n,)`` becomes ``(1, n, 1)``, ``(m, n)``
    becomes ``(m, n, 1)``).

    Example:
        >>> td.atleast_3d(td.ones(2, 3)).shape
        (2, 3, 1)
    """
    return _at_least(tensors, 3)


def _at_least(tensors: tuple, n: int) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_at_least(tuple(tensors[0]), n))
    shapes = {
        1: lambda s: s or (1,),
        2: lambda s: (1, 1) if not s else (1, *s) if len(s) == 1 else s,
        3: lambda s: (
            (1, 1, 1) if not s else (1, s[0], 1) if len(s) == 1 else (*s, 1) if len(s) == 2 else s
        ),
    }[n]
    out = []
    for t in tensors:
        x = as_tensor(t, name=f"atleast_{n}d() argument")
        out.append(x if x.ndim >= n else x.reshape(shapes(x.shape)))
    return out[0] if len(out) == 1 else tuple(out)


def dstack(tensors: Sequence[Any]) -> Tensor:
    """Concatenate along the third dim, after :func:`atleast_3d`.

    Example:
        >>> td.dstack([td.ones(2, 3), td.zeros(2, 3)]).shape
        (2, 3, 2)
    """
    parts = _at_least(tuple(tensors), 3)
    return td.cat(list(parts) if isinstance(parts, tuple) else [parts], 2)


def column_stack(tensors: Sequence[Any]) -> Tensor:
    """Concatenate columns: 0- and 1-d tensors become columns ``(n, 1)``, others stay.

    Example:
        >>> td.column_stack([td.tensor([1.0, 2.0]), td.ones(2, 2)]).shape
        (2, 3)
    """
    cols = []
    for t in tensors:
        x = as_tensor(t, name="column_stack() argument")
        cols.append(x.reshape(-1, 1) if x.ndim < 2 else x)
    return td.cat(cols, 1)


def logaddexp2(input: Any, other: Any) -> Tensor:
    """``log2(2**a + 2**b)`` without overflow.

    Example:
        >>> td.logaddexp2(td.tensor([1.0]), td.tensor([1.0]))
        tensor([2.])
    """
    a, b = as_tensor(input, name="logaddexp2() input"), as_tensor(other, name="logaddexp2()")
    return td.logaddexp(a * math.log(2.0), b * math.log(2.0)) / math.log(2.0)


def deg2rad(input: Any) -> Tensor:
    """Degrees to radians.

    Example:
        >>> td.deg2rad(td.tensor([180.0]))
        tensor([3.1416])
    """
    return as_tensor(input, name="deg2rad() input") * (math.pi / 180.0)


def rad2deg(input: Any) -> Tensor:
    """Radians to degrees.

    Example:
        >>> td.rad2deg(td.tensor([math.pi]))
        tensor([180.])
    """
    return as_tensor(input, name="rad2deg() input") * (180.0 / math.pi)


def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` computed in float64 (torch's ``float_power``).

    Example:
        >>> td.float_power(td.tensor([2.0]), 3).dtype
        dtype('float64')
    """
    base = as_tensor(input, name="float_power() input").to(td.float64)
    if isinstance(exponent, Tensor):
        exponent = exponent.to(td.float64)
    return base**exponent


def true_divide(input: Any, other: Any) -> Tensor:
    """``input / other`` (true division, an alias of ``div``).

    Example:
        >>> td.true_divide(td.tensor([1.0]), 4)
        tensor([0.25])
    """
    return td.div(input, other)


def positive(input: Any) -> Tensor:
    """The input itself (``+x``).

    Example:
        >>> x = td.tensor([1.0]); td.positive(x) is x
        True
    """
    return as_tensor(input, name="positive() input")


def fix(input: Any) -> Tensor:
    """Round towards zero (``trunc``).

    Example:
        >>> td.fix(td.tensor([-1.5, 1.5]))
        tensor([-1.,  1.])
    """
    return td.trunc(input)


def signbit(input: Any) -> Tensor:
    """Whether the sign bit is set (``True`` for ``-0.0`` too); not differentiable.

    Example:
        >>> td.signbit(td.tensor([-0.0, 1.0]))
        tensor([ True, False])
    """
    return Tensor(np.signbit(as_tensor(input, name="signbit() input").data))


def isin(elements: Any, test_elements: Any, *, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` is among ``test_elements`` (a bool tensor).

    Example:
        >>> td.isin(td.tensor([1, 2, 3]), td.tensor([2, 5]))
        tensor([False,  True, False])
    """
    data = np.asarray(elements.data if isinstance(elements, Tensor) else elements)
    tests = np.asarray(test_elements.data if isinstance(test_elements, Tensor) else test_elements)
    return Tensor(np.isin(data, tests, invert=invert))


__all__ = [
    "addbmm",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block_diag",
    "cartesian_prod",
    "cdist",
    "chain_matmul",
    "column_stack",
    "corrcoef",
    "cov",
    "cummax",
    "cummin",
    "cumulative_trapezoid",
    "deg2rad",
    "diagflat",
    "dist",
    "dstack",
    "fix",
    "fliplr",
    "flipud",
    "float_power",
    "inner",
    "isin",
    "logaddexp2",
    "pdist",
    "positive",
    "rad2deg",
    "rot90",
    "signbit",
    "std_mean",
    "trapezoid",
    "true_divide",
    "vander",
    "var_mean",
    "vdot",
]
