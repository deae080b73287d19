"""Sinkhorn–Knopp balancing, differentiated implicitly instead of through its iterations.

``R = sinkhorn(X)`` scales ``exp(X)`` (a batch ``(..., n, m)``) into the matrix ``R`` with row sums
``a`` and column sums ``b`` (by default all ones: a doubly stochastic matrix when ``n == m``).
Every iteration first scales the columns to ``b`` and then the rows to ``a``, so the returned ``R``
has exact row sums and the column sums carry the residual.

The backward does not retrace the iterations. At the fixed point ``R = diag(e^f) exp(X) diag(e^g)``
and, for an upstream gradient ``G = dL/dR``::

    dL/dX = R ⊙ (G − u 1ᵀ − 1 vᵀ),   [diag(R1)  R       ] [u]   [(G⊙R) 1 ]
                                      [Rᵀ        diag(Rᵀ1)] [v] = [(G⊙R)ᵀ1]

The block matrix is positive semi-definite (``zᵀKz = Σ R_ij (u_i + v_j)²``) with null vector
``(1, −1)``, which leaves ``u_i + v_j`` and hence the gradient unique. Eliminating ``u`` leaves the
``m × m`` system ``(diag(Rᵀ1) − Rᵀ diag(R1)⁻¹ R) v = s_c − Rᵀ diag(R1)⁻¹ s_r``, again PSD with null
vector ``1``, solved by batched conjugate gradient with the right-hand side projected orthogonal
to ``1``; the smaller side is eliminated when ``n ≠ m``. The diagonal blocks use the *attained*
marginals ``R1`` and ``Rᵀ1`` rather than the targets, so the system is consistent (exactly singular
along ``1``, exactly PSD) even when the forward stopped early. See docs/sinkhorn.md.

The kernels below are written once against the array namespace of their inputs (NumPy arrays,
torch tensors and, for ``backward="unrolled"``, tadiff Tensors).
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any, NamedTuple

import numpy as np

from tadiff._array import namespace
from tadiff.errors import (
    ConvergenceError,
    ConvergenceWarning,
    DTypeError,
    InputError,
    ShapeError,
)

__all__ = ["SinkhornStats", "choose_backward", "sinkhorn", "sinkhorn_forward", "sinkhorn_vjp"]

BACKWARD_MODES = ("auto", "implicit", "implicit-2n", "direct", "unrolled")
_SOLVERS = ("implicit", "implicit-2n", "direct")


class SinkhornStats(NamedTuple):
    """What a forward did.

    Attributes:
        iterations: full column+row iterations performed.
        residual: max |Rᵀ1 − b| over the batch after the last iteration (None when neither
            ``tol`` nor ``warn_tol`` asked for it).
        log_domain: whether the log-domain iteration was used.
    """

    iterations: int
    residual: float | None
    log_domain: bool


#: Default ``warn_tol``: relative column-marginal error above which sinkhorn warns.
WARN_TOL = 1e-3


# ----------------------------------------------------------------------------------------------
# Small namespace adapters: the few places where NumPy, torch and tadiff spell things differently.


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _raw(x: Any) -> Any:
    """The value without autograd history: an ndarray or a detached torch tensor."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch(x):
        return x.detach()
    return np.asarray(x.data)


def _amax(x: Any, axis: int, keepdims: bool = False) -> Any:
    if _is_torch(x):
        return x.amax(dim=axis, keepdim=keepdims)
    return x.max(axis=axis, keepdims=keepdims)


def _amin(x: Any, axis: int) -> Any:
    return x.amin(dim=axis) if _is_torch(x) else x.min(axis=axis)


def _constant_max(x: Any, axis: int) -> Any:
    """Max along ``axis`` (kept) as a constant: a shift that cancels needs no gradient."""
    raw = _amax(_raw(x), axis, keepdims=True)
    if isinstance(x, np.ndarray) or _is_torch(x):
        return raw
    return namespace(x).tensor(raw)


def _finfo(x: Any) -> Any:
    return namespace(x).finfo(x.dtype) if _is_torch(x) else np.finfo(x.dtype)


def _is_floating(x: Any) -> bool:
    return x.dtype.is_floating_point if _is_torch(x) else np.issubdtype(x.dtype, np.floating)


def _max_value(x: Any) -> float:
    return float(_raw(x).max())


def _records_graph(*values: Any) -> bool:
    """Whether autograd records operations on these values (then nothing may change in place)."""
    if all(isinstance(v, np.ndarray) for v in values):
        return False
    if _is_torch(values[0]):
        import torch  # deferred: only reached with torch tensors

        return torch.is_grad_enabled() and any(v.requires_grad for v in values)
    return True


def _logsumexp(x: Any, axis: int) -> Any:
    shift = _constant_max(x, axis)
    xp = namespace(x)
    return shift + xp.log(xp.exp(x - shift).sum(axis=axis, keepdims=True))


# ----------------------------------------------------------------------------------------------
# Input checks.


def _check_matrix(X: Any) -> tuple[int, int]:
    if not hasattr(X, "shape") or not hasattr(X, "dtype"):
        raise DTypeError(
            f"sinkhorn: X must be an array or tensor of shape (..., n, m), got {type(X).__name__}"
        )
    if len(X.shape) < 2:
        raise ShapeError(
            f"sinkhorn: X must have shape (..., n, m) with at least 2 dimensions, got shape "
            f"{tuple(X.shape)}"
        )
    n, m = int(X.shape[-2]), int(X.shape[-1])
    if n == 0 or m == 0:
        raise ShapeError(f"sinkhorn: X must have n, m >= 1, got shape {tuple(X.shape)}")
    _check_batch(X.shape[:-2], "X", X.shape)
    if not _is_floating(_raw(X)):
        raise DTypeError(f"sinkhorn: X must have a floating dtype, got {X.dtype}")
    raw = _raw(X)
    finite = namespace(raw).isfinite(raw)
    if not bool(finite.all()):
        bad = tuple(int(i) for i in namespace(raw).argwhere(~finite)[0])
        raise InputError(
            f"sinkhorn: X must be finite, but X{list(bad)} = {float(raw[bad])} "
            "(use a large negative number, not -inf, to mask an entry)"
        )
    return n, m


def _check_batch(batch: Any, name: str, shape: Any) -> None:
    empty = [i for i, s in enumerate(batch) if int(s) == 0]
    if empty:
        raise ShapeError(
            f"sinkhorn: {name} of shape {tuple(shape)} has an empty batch (dim {empty[0]} has "
            "size 0); there is no matrix to balance"
        )


def _constant_like(X: Any, values: Any) -> Any:
    """``values`` as a constant of X's kind (ndarray or torch tensor), dtype and device."""
    raw = _raw(X)
    values = np.asarray(values, dtype=float)
    return raw.new_tensor(values) if _is_torch(raw) else values.astype(raw.dtype)


def _complete_marginals(X: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """Fill in a missing marginal when the other is given: spread the given mass evenly.

    Written with ordinary operations on the given marginal, so that gradients flow through the
    filled-in one too (the autograd Functions receive both).
    """
    if (a is None) == (b is None):
        return a, b
    n, m = int(X.shape[-2]), int(X.shape[-1])
    given, size = (a, m) if b is None else (b, n)
    if not hasattr(given, "shape") or (isinstance(given, np.ndarray) and _is_torch(X)):
        given = _constant_like(X, given)
    # Check the given marginal first, so that errors name it rather than the derived one.
    _marginal(given, X, n, "a", -1) if b is None else _marginal(given, X, m, "b", -2)
    other = given.sum(axis=-1, keepdims=True) * _constant_like(given, np.full(size, 1.0 / size))
    return (given, other) if b is None else (other, given)


def _marginal(v: Any, X: Any, size: int, name: str, axis: int) -> Any:
    """Validate a marginal of shape (..., size) and return it shaped to broadcast against X."""
    if v is None or not hasattr(v, "shape") or (isinstance(v, np.ndarray) and _is_torch(X)):
        # Defaults, lists and arrays become constants of X's kind, dtype and device.
        v = _constant_like(X, np.ones(size) if v is None else v)
    if len(v.shape) == 0 or int(v.shape[-1]) != size:
        raise ShapeError(
            f"sinkhorn: {name} must have shape (..., {size}) to match X of shape "
            f"{tuple(X.shape)}, got {tuple(v.shape)}"
        )
    _check_batch(v.shape[:-1], f"the marginal {name}", v.shape)
    raw = _raw(v)
    if not bool((raw > 0).all()) or not bool(namespace(raw).isfinite(raw).all()):
        raise InputError(f"sinkhorn: every entry of the marginal {name} must be positive, finite")
    shape = (*tuple(v.shape[:-1]), size, 1) if axis == -1 else (*tuple(v.shape[:-1]), 1, size)
    try:
        np.broadcast_shapes(tuple(X.shape), shape)
    except ValueError:
        raise ShapeError(
            f"sinkhorn: the batch shape of {name} {tuple(v.shape[:-1])} does not broadcast "
            f"against the batch shape of X {tuple(X.shape[:-2])}"
        ) from None
    return v.reshape(shape)


def _check_mass(a: Any, b: Any) -> None:
    ra, rb = _raw(a), _raw(b)
    mass_a = ra.sum(axis=(-2, -1))
    mass_b = rb.sum(axis=(-2, -1))
    gap = float(abs(mass_a - mass_b).max())
    scale = float(abs(mass_a).max())
    if gap > math.sqrt(_finfo(ra).eps) * scale:
        raise InputError(
            f"sinkhorn: the marginals must carry the same mass, but sum(a) and sum(b) differ by "
            f"{gap:.3e} (sum(a) up to {scale:.6g})"
        )


def _check_options(iters: Any, tol: Any, log_domain: Any) -> None:
    if isinstance(iters, bool) or not isinstance(iters, int | np.integer) or iters < 1:
        raise InputError(f"sinkhorn: iters must be an integer >= 1, got {iters!r}")
    if tol is not None and not (isinstance(tol, int | float) and tol > 0):
        raise InputError(f"sinkhorn: tol must be None or a positive number, got {tol!r}")
    if log_domain not in ("auto", True, False):
        raise InputError(f"sinkhorn: log_domain must be 'auto', True or False, got {log_domain!r}")


def _check_cg(cg_maxiter: Any, cg_tol: Any) -> None:
    if cg_maxiter is not None and (
        isinstance(cg_maxiter, bool) or not isinstance(cg_maxiter, int) or cg_maxiter < 1
    ):
        raise InputError(f"sinkhorn: cg_maxiter must be an integer >= 1, got {cg_maxiter!r}")
    if cg_tol is not None and not (isinstance(cg_tol, int | float) and cg_tol >= 0):
        raise InputError(f"sinkhorn: cg_tol must be a non-negative number, got {cg_tol!r}")


def _check_solver(backward: Any, allowed: tuple[str, ...]) -> None:
    if backward not in allowed:
        raise InputError(f"sinkhorn: backward must be one of {allowed}, got {backward!r}")


# ----------------------------------------------------------------------------------------------
# Forward.


def _needs_log_domain(X: Any) -> bool:
    """True when exp(X − colmax) could underflow: some column spreads over more than −log(tiny)/4.

    Below that spread every entry of the scaled kernel stays above tiny^(1/4), so the scaling
    factors of the iteration cannot overflow or underflow either.
    """
    raw = _raw(X)
    spread = float((_amax(raw, -2) - _amin(raw, -2)).max())
    return spread > -math.log(float(_finfo(raw).tiny)) / 4


def _prepare(X: Any, a: Any, b: Any, iters: Any, tol: Any, log_domain: Any) -> tuple:
    """Check the inputs; return the marginals shaped (..., n, 1), (..., 1, m) and the domain."""
    n, m = _check_matrix(X)
    _check_options(iters, tol, log_domain)
    if a is None and b is None:
        b = _constant_like(X, np.full(m, n / m))
    a, b = _complete_marginals(X, a, b)
    a = _marginal(a, X, n, "a", -1)
    b = _marginal(b, X, m, "b", -2)
    _check_mass(a, b)
    use_log = _needs_log_domain(X) if log_domain == "auto" else bool(log_domain)
    return a, b, use_log


def _user_stacklevel() -> int:
    """Stack level of the first caller outside tadiff and torch (where the warning belongs)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("tadiff", "torch")):
        frame, level = frame.f_back, level + 1
    return level


def sinkhorn_forward(
    X: Any,
    a: Any = None,
    b: Any = None,
    *,
    iters: int = 20,
    tol: float | None = None,
    log_domain: bool | str = "auto",
    strict: bool = False,
    warn_tol: float | None = WARN_TOL,
) -> tuple[Any, SinkhornStats]:
    """Balance ``exp(X)`` to row sums ``a`` and column sums ``b`` (no autograd wrapper).

    Written against the namespace of ``X``: NumPy arrays, torch tensors (differentiable by torch
    autograd when ``X`` requires grad: that is the "unrolled" reference) or tadiff Tensors.

    Args:
        X: logits, shape ``(..., n, m)``, finite, floating.
        a: row marginals, shape ``(..., n)``, positive. Default: all ones, or ``b``'s mass
            spread evenly when only ``b`` is given.
        b: column marginals, shape ``(..., m)``, positive, ``sum(b) == sum(a)``. Default:
            ``a``'s mass spread evenly (``n / m`` each without ``a``: all ones when square).
        iters: maximum number of iterations (one = scale columns, then rows).
        tol: stop once ``max |Rᵀ1 − b| <= tol`` over the whole batch (checked every iteration);
            None runs exactly ``iters`` iterations and checks nothing.
        log_domain: iterate on ``log R`` (True), on ``R`` (False), or decide from the spread of
            each column of ``X`` ("auto"; large entries such as ±500 switch to the log domain).
        strict: raise :class:`tadiff.errors.ConvergenceError` instead of warning
            (:class:`tadiff.errors.ConvergenceWarning`) when ``tol`` or ``warn_tol`` is missed.
        warn_tol: without ``tol``, warn when the returned ``R`` is not balanced: when its column
            sums are off by more than ``warn_tol`` times the largest entry of ``b``
            (``max |Rᵀ1 − b| > warn_tol · max b``). The implicit backward is the gradient of the
            balanced limit, so it does not fit an unbalanced ``R``. Costs one column sum (and
            one device synchronisation on a GPU); None skips the check.

    Returns:
        ``(R, stats)``: ``R`` of the shape and dtype of ``X`` and a :class:`SinkhornStats`.

    Example:
        >>> R, stats = sinkhorn_forward(np.zeros((2, 3, 3)), iters=5)
        >>> R[0, 0, 0].round(6), stats.iterations
        (np.float64(0.333333), 5)
    """
    a, b, use_log = _prepare(X, a, b, iters, tol, log_domain)
    _check_warn_tol(warn_tol)
    xp = namespace(X)
    recording = _records_graph(X, a, b)
    # Subtract each column's maximum: exp cannot overflow, and since the first step scales the
    # columns, every iterate equals that of the unshifted loop (a row shift would change them).
    shifted = X - _constant_max(X, -2)
    if use_log:
        log_a, log_b = xp.log(a), xp.log(b)
        state = shifted
    else:
        state = xp.exp(shifted, out=shifted) if not recording else xp.exp(shifted)
    residual = None
    done = 0
    while True:
        if done == iters and tol is None:
            break
        # Column sums of the current R: both the next column step and the convergence check.
        if use_log:
            log_col = _logsumexp(state, -2)
            col = xp.exp(log_col)
        else:
            col = state.sum(axis=-2, keepdims=True)
        if tol is not None and done > 0:
            residual = _max_value(abs(_raw(col) - _raw(b)))
            if residual <= tol:
                break
        if done == iters:
            break
        if not recording:  # in place: no fresh matrix-sized buffer (and page faults) per step
            if use_log:
                state += log_b - log_col
                state += log_a - _logsumexp(state, -1)
            else:
                state *= b / col
                state *= a / state.sum(axis=-1, keepdims=True)
        elif use_log:
            state = state + (log_b - log_col)
            state = state + (log_a - _logsumexp(state, -1))
        else:
            state = state * (b / col)
            state = state * (a / state.sum(axis=-1, keepdims=True))
        done += 1
    R = xp.exp(state) if use_log else state
    if tol is not None and residual is not None and residual > tol:
        _not_converged(
            f"sinkhorn did not converge: column-marginal error {residual:.3e} > tol {tol:.3e} "
            f"after {iters} iterations (raise iters, or loosen tol)",
            strict,
        )
    elif tol is None and warn_tol is not None:
        residual = check_balanced(R, b, iters, warn_tol, strict)
    return R, SinkhornStats(done, residual, use_log)


def _check_warn_tol(warn_tol: Any) -> None:
    if warn_tol is not None and not (isinstance(warn_tol, int | float) and warn_tol > 0):
        raise InputError(f"sinkhorn: warn_tol must be None or a positive number, got {warn_tol!r}")


def _not_converged(message: str, strict: bool) -> None:
    if strict:
        raise ConvergenceError(message)
    warnings.warn(message, ConvergenceWarning, stacklevel=_user_stacklevel())


def check_balanced(R: Any, b: Any, iters: int, warn_tol: float, strict: bool = False) -> float:
    """Warn (raise with ``strict``) when the column sums of ``R`` are more than ``warn_tol``
    (relative to the largest entry of ``b``) away from ``b``; return ``max |Rᵀ1 − b|``.

    ``R`` is (..., n, m) and ``b`` broadcasts against its column sums (..., 1, m).
    """
    raw, target = _raw(R), _raw(b)
    residual = _max_value(abs(raw.sum(axis=-2, keepdims=True) - target))
    scale = _max_value(target)
    if residual > warn_tol * scale:
        _not_converged(
            f"sinkhorn returned a matrix whose column sums are off by {residual:.3e} "
            f"({residual / scale:.1e} of the largest marginal, more than warn_tol={warn_tol:g}) "
            f"after {iters} iterations; the implicit backward is the gradient of the balanced "
            "limit, not of this matrix. Raise iters, pass tol= to iterate until balanced, or "
            "use backward='unrolled' (warn_tol=None turns this check off).",
            strict,
        )
    return residual


# ----------------------------------------------------------------------------------------------
# Backward: linear solvers for the adjoint system. All work on raw arrays (no autograd).


def _default_cg_tol(x: Any) -> float:
    """Relative CG residual at which to stop: about what the dtype can resolve."""
    eps = float(_finfo(x).eps)
    return 1e-12 if eps < 1e-10 else max(1e-6, 8 * eps)


def _mv(R: Any, p: Any) -> Any:
    """R p for batches: (..., n, m), (..., m) -> (..., n)."""
    return (R @ p[..., None])[..., 0]


def _mtv(R: Any, q: Any) -> Any:
    """Rᵀ q for batches: (..., n, m), (..., n) -> (..., m)."""
    return (q[..., None, :] @ R)[..., 0, :]


def _cg(apply: Any, rhs: Any, scale: Any, maxiter: int, rtol: float) -> Any:
    """Batched conjugate gradient for PSD systems with a consistent right-hand side.

    Each batch element stops on its own (its step becomes zero) once its residual falls below
    ``rtol * |rhs|``, or when ``pᵀSp`` is at the rounding level of ``scale * |p|²`` (the direction
    lies, numerically, in the null space: dividing by it would amplify noise, so it is not taken).
    The loop ends when every element has stopped or after ``maxiter`` steps.

    Args:
        apply: ``p -> S p`` on ``(..., k)``.
        rhs: ``(..., k)``, orthogonal to the null space of S.
        scale: ``(...)``, an upper bound of the spectrum of S (for the breakdown guard).
        maxiter: at most this many steps.
        rtol: relative residual tolerance.
    """
    xp = namespace(rhs)
    guard = 16 * float(_finfo(rhs).eps) * scale
    x = xp.zeros_like(rhs)
    r = rhs
    p = r
    rs = (r * r).sum(axis=-1)
    target = rs * (rtol * rtol)
    active = rs > target  # hence rs > 0 wherever active
    for _ in range(maxiter):
        if not bool(active.any()):
            break
        Sp = apply(p)
        pSp = (p * Sp).sum(axis=-1)
        active = active & (pSp > guard * (p * p).sum(axis=-1))
        # Stopped elements divide by +inf: their step is exactly zero, and nothing divides by 0.
        alpha = (rs / xp.where(active, pSp, math.inf))[..., None]
        x = x + alpha * p
        r = r - alpha * Sp
        rs_new = (r * r).sum(axis=-1)
        active = active & (rs_new > target)
        beta = (rs_new / xp.where(active, rs, math.inf))[..., None]
        p = r + beta * p
        rs = rs_new
    return x


def _safe(d: Any) -> Any:
    """Divisor with zeros replaced by one (a zero row/column of R contributes nothing anyway)."""
    return namespace(d).where(d > 0, d, 1.0)


def _solve_schur_cg(R, s_r, s_c, maxiter, rtol):
    """u, v from the m × m Schur system (m = columns), by CG."""
    rows, cols = R.sum(axis=-1), R.sum(axis=-2)
    inv_rows = 1.0 / _safe(rows)
    rhs = s_c - _mtv(R, s_r * inv_rows)
    rhs = rhs - rhs.mean(axis=-1, keepdims=True)  # project out the null vector 1

    # Two matrix-vector products per step; forming S = diag(c) − Rᵀ diag(r)⁻¹ R once instead
    # measured slower on CPU from m = 16 on (and no faster below), as reported on GPU too.
    def apply(p):
        return cols * p - _mtv(R, _mv(R, p) * inv_rows)

    v = _cg(apply, rhs, _amax(cols, -1), maxiter, rtol)
    u = (s_r - _mv(R, v)) * inv_rows
    return u, v


def _solve_full_cg(R, s_r, s_c, maxiter, rtol):
    """u, v from the (n + m) × (n + m) block system, by CG (the baseline)."""
    xp = namespace(R)
    n = R.shape[-2]
    rows, cols = R.sum(axis=-1), R.sum(axis=-2)
    shift = (s_r.sum(axis=-1, keepdims=True) - s_c.sum(axis=-1, keepdims=True)) / (
        R.shape[-2] + R.shape[-1]
    )
    rhs = xp.concatenate([s_r - shift, s_c + shift], axis=-1)  # project out (1, −1)

    def apply(z):
        u, v = z[..., :n], z[..., n:]
        return xp.concatenate([rows * u + _mv(R, v), _mtv(R, u) + cols * v], axis=-1)

    scale = 2 * xp.maximum(_amax(rows, -1), _amax(cols, -1))
    z = _cg(apply, rhs, scale, maxiter, rtol)
    return z[..., :n], z[..., n:]


def _solve_direct(R, s_r, s_c):
    """u, v from the m × m Schur system, regularised and solved densely."""
    xp = namespace(R)
    m = R.shape[-1]
    rows, cols = R.sum(axis=-1), R.sum(axis=-2)
    inv_rows = 1.0 / _safe(rows)
    rhs = s_c - _mtv(R, s_r * inv_rows)
    rhs = rhs - rhs.mean(axis=-1, keepdims=True)
    S = -(R * inv_rows[..., None]).swapaxes(-1, -2) @ R
    eye = xp.eye(m, dtype=R.dtype) if not _is_torch(R) else R.new_zeros(m, m).fill_diagonal_(1)
    # (τ/m) 11ᵀ lifts the null vector to eigenvalue τ: since rhs ⊥ 1, the solution then has
    # 1ᵀv = 0 and solves the singular system exactly. A ridge at the rounding level keeps
    # near-permutation inputs (S ≈ 0) solvable.
    tau = cols.mean(axis=-1)[..., None, None]
    ridge = 16 * float(_finfo(R).eps) * tau
    S = S + eye * (cols[..., None] + ridge) + tau / m
    v = xp.linalg.solve(S, rhs[..., None])[..., 0]
    u = (s_r - _mv(R, v)) * inv_rows
    return u, v


def _adjoint(R: Any, s_r: Any, s_c: Any, method: str, cg_maxiter: int | None, cg_tol: float | None):
    """(u, v) of the adjoint system, eliminating the smaller side."""
    n, m = R.shape[-2], R.shape[-1]
    rtol = _default_cg_tol(R) if cg_tol is None else cg_tol
    if method == "implicit-2n":
        return _solve_full_cg(R, s_r, s_c, cg_maxiter or n + m, rtol)
    if m > n:  # eliminate u instead of v: the transposed problem has the smaller system
        R = R.swapaxes(-1, -2)
        s_r, s_c = s_c, s_r
    if method == "direct":
        u, v = _solve_direct(R, s_r, s_c)
    else:
        u, v = _solve_schur_cg(R, s_r, s_c, cg_maxiter or min(n, m), rtol)
    return (v, u) if m > n else (u, v)


def sinkhorn_vjp(
    R: Any,
    G: Any,
    *,
    method: str = "implicit",
    cg_maxiter: int | None = None,
    cg_tol: float | None = None,
    marginal_grads: bool = False,
) -> Any:
    """Gradient of ``L`` with respect to ``X`` given ``R = sinkhorn(X)`` and ``G = dL/dR``.

    Works on raw arrays of one namespace (NumPy arrays or torch tensors, any device); nothing is
    recorded for autograd.

    Args:
        R: balanced matrices, shape ``(..., n, m)``.
        G: upstream gradient, same shape.
        method: "implicit" (CG on the min(n, m)-sized Schur system), "implicit-2n" (CG on the
            (n + m)-sized block system) or "direct" (dense solve of the regularised Schur system).
        cg_maxiter: CG steps at most; default the system size.
        cg_tol: relative CG residual to stop at; default 1e-6 (float32) or 1e-12 (float64).
            float16 / bfloat16 inputs are solved in float32.
        marginal_grads: also return the gradients with respect to the marginals ``a`` and ``b``.
            They are defined up to adding ``k`` to one and subtracting it from the other (the total
            mass is fixed); the returned pair has ``sum(grad_a) == sum(grad_b)``.

    Returns:
        ``dX`` of shape ``(..., n, m)``, or ``(dX, grad_a, grad_b)`` with ``marginal_grads``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(2, 4, 4))
        >>> R, _ = sinkhorn_forward(X, iters=200)
        >>> dX = sinkhorn_vjp(R, np.ones_like(R))      # sum(R) is constant: zero gradient
        >>> bool(abs(dX).max() < 1e-12)
        True
    """
    _check_solver(method, _SOLVERS)
    _check_batch(R.shape[:-2], "R", R.shape)
    if tuple(R.shape) != tuple(G.shape):
        raise ShapeError(
            f"sinkhorn_vjp: G must have the shape of R {tuple(R.shape)}, got {tuple(G.shape)}"
        )
    _check_cg(cg_maxiter, cg_tol)
    dtype = R.dtype
    if float(_finfo(R).eps) > 1e-6:  # float16 / bfloat16: solve in float32, return in dtype
        R, G = (t.float() if _is_torch(t) else t.astype(np.float32) for t in (R, G))
    # One matrix-sized buffer for everything: fresh large buffers cost page faults on CPU.
    dX = G * R
    s_r, s_c = dX.sum(axis=-1), dX.sum(axis=-2)
    u, v = _adjoint(R, s_r, s_c, method, cg_maxiter, cg_tol)
    namespace(R).subtract(G, u[..., :, None], out=dX)
    dX -= v[..., None, :]
    dX *= R
    if not marginal_grads:
        return _cast(dX, dtype)
    shift = (u.sum(axis=-1, keepdims=True) - v.sum(axis=-1, keepdims=True)) / (
        R.shape[-2] + R.shape[-1]
    )
    return _cast(dX, dtype), _cast(u - shift, dtype), _cast(v + shift, dtype)


def _cast(x: Any, dtype: Any) -> Any:
    return x.to(dtype) if _is_torch(x) else x.astype(dtype, copy=False)


# ----------------------------------------------------------------------------------------------
# Default backward per size, from benchmarks/sinkhorn.py (see docs/sinkhorn.md).


def choose_backward(backward: str, n: int, m: int) -> str:
    """The backward method that ``backward`` names for an ``n × m`` problem ("auto" resolved).

    "auto" is "implicit" at every size, from benchmarks/sinkhorn.py (batch 16384, float32, CPU):
    it is 5.2–14× faster than unrolled autograd at 20 iterations with memory independent of the
    iteration count, 1.6–2.1× faster than "implicit-2n" everywhere, within noise of "direct" for
    min(n, m) <= 8 and 1.2–2.1× faster than it from 16 on; on CUDA it runs the fused Triton
    kernel. The table is in docs/sinkhorn.md.

    Example:
        >>> choose_backward("direct", 4, 4)
        'direct'
    """
    _check_solver(backward, BACKWARD_MODES)
    if backward != "auto":
        return backward
    return "implicit"


# ----------------------------------------------------------------------------------------------
# The op in tadiff's engine.

_ENGINE_FUNCTION: Any = None


def _engine_function() -> Any:
    """Build (once) the tadiff ``autograd.Function``; the engine is imported only when used."""
    global _ENGINE_FUNCTION
    if _ENGINE_FUNCTION is not None:
        return _ENGINE_FUNCTION
    from tadiff.autograd import Function, once_differentiable

    class SinkhornFunction(Function):
        """R = sinkhorn(X, a, b) with the implicit backward, for tadiff Tensors."""

        @staticmethod
        def forward(ctx, X, a, b, options):
            raw_a, raw_b = (v if v is None or not hasattr(v, "shape") else _raw(v) for v in (a, b))
            R, _ = sinkhorn_forward(_raw(X), raw_a, raw_b, **options["forward"])
            ctx.options = options["backward"]
            ctx.batch_a, ctx.batch_b = (tuple(getattr(v, "shape", ())) for v in (a, b))
            # The raw output array, not the output Tensor: saving an output on its own ctx
            # would make a reference cycle.
            ctx.R = R
            return R

        @staticmethod
        @once_differentiable
        def backward(ctx, G):
            R = ctx.R
            want_a, want_b = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
            out = sinkhorn_vjp(_raw(R), _raw(G), marginal_grads=want_a or want_b, **ctx.options)
            if not (want_a or want_b):
                return out, None, None, None
            dX, ga, gb = out
            ga = _sum_to(ga, ctx.batch_a) if want_a else None
            gb = _sum_to(gb, ctx.batch_b) if want_b else None
            return dX, ga, gb, None

    _ENGINE_FUNCTION = SinkhornFunction
    return SinkhornFunction


def forward_options(
    iters: int, tol: Any, log_domain: Any, strict: bool, warn_tol: Any, backward: str
) -> dict[str, Any]:
    """The keywords of :func:`sinkhorn_forward` for a call of ``sinkhorn``: no balance check for
    ``backward="unrolled"``, whose gradient is that of the iterations actually run."""
    _check_warn_tol(warn_tol)
    return {
        "iters": iters, "tol": tol, "log_domain": log_domain, "strict": strict,
        "warn_tol": None if backward == "unrolled" else warn_tol,
    }  # fmt: skip


def _sum_to(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back to ``shape`` (marginals may be shared across the batch)."""
    extra = len(g.shape) - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def sinkhorn(
    X: Any,
    a: Any = None,
    b: Any = None,
    *,
    iters: int = 20,
    tol: float | None = None,
    log_domain: bool | str = "auto",
    backward: str = "auto",
    strict: bool = False,
    cg_maxiter: int | None = None,
    cg_tol: float | None = None,
    warn_tol: float | None = WARN_TOL,
) -> Any:
    """Sinkhorn–Knopp projection of ``exp(X)``, differentiable without unrolling the iterations.

    Dispatches on the type of ``X``: tadiff Tensors go through tadiff's engine, torch tensors
    through :func:`tadiff.torch.sinkhorn`, NumPy arrays are balanced without any autograd.

    Args:
        X: logits, shape ``(..., n, m)``.
        a, b: row / column marginals, shapes ``(..., n)`` / ``(..., m)`` (positive, equal mass);
            see :func:`sinkhorn_forward` for the defaults. Gradients flow to them too.
        iters, tol, log_domain, strict, warn_tol: see :func:`sinkhorn_forward`; by default a
            returned ``R`` whose column sums are off by more than 1e-3 of the largest marginal
            warns (:class:`tadiff.errors.ConvergenceWarning`), except with
            ``backward="unrolled"``, whose gradient is that of the iterations performed.
        backward: "implicit", "implicit-2n", "direct", "unrolled" (autograd through the iterations,
            the reference) or "auto" (chosen from the size; see docs/sinkhorn.md).
        cg_maxiter, cg_tol: see :func:`sinkhorn_vjp`.

    Returns:
        ``R``, shape and type of ``X``: rows sum to ``a``, columns to ``b`` (up to ``tol``).

    Raises:
        ShapeError: ``X`` or a marginal has a wrong shape or an empty batch.
        InputError: a non-finite entry of ``X`` (named by its index) or of a marginal.

    Example:
        >>> import tadiff as td
        >>> rng = np.random.default_rng(0)
        >>> X = td.tensor(rng.normal(size=(8, 4, 4)), requires_grad=True)
        >>> R = sinkhorn(X, iters=100)
        >>> (R * td.tensor(rng.normal(size=(8, 4, 4)))).sum().backward()
        >>> bool(abs(X.grad.numpy().sum(-1)).max() < 1e-12)   # rows of the gradient sum to 0
        True
    """
    _check_solver(backward, BACKWARD_MODES)
    _check_cg(cg_maxiter, cg_tol)
    if _is_torch(X):
        from tadiff.torch.sinkhorn import sinkhorn as torch_sinkhorn

        return torch_sinkhorn(
            X, a, b, iters=iters, tol=tol, log_domain=log_domain, backward=backward,
            strict=strict, cg_maxiter=cg_maxiter, cg_tol=cg_tol, warn_tol=warn_tol,
        )  # fmt: skip
    forward = forward_options(iters, tol, log_domain, strict, warn_tol, backward)
    if isinstance(X, np.ndarray) or backward == "unrolled":
        return sinkhorn_forward(X, a, b, **forward)[0]
    _check_matrix(X)
    method = choose_backward(backward, X.shape[-2], X.shape[-1])
    a, b = _complete_marginals(X, a, b)
    options = {
        "forward": forward,
        "backward": {"method": method, "cg_maxiter": cg_maxiter, "cg_tol": cg_tol},
    }
    return _engine_function().apply(X, a, b, options)
