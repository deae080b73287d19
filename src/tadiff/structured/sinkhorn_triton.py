"""Fused Triton kernel for the implicit Sinkhorn backward (CUDA; CPU under ``TRITON_INTERPRET=1``).

One program loads ``TILE`` matrices ``R`` and ``G`` once, runs the whole projected conjugate
gradient on the Schur system ``(diag(Rᵀ1) − Rᵀ diag(R1)⁻¹ R) v = s_c − Rᵀ diag(R1)⁻¹ s_r`` in
registers and writes ``dX = R ⊙ (G − u1ᵀ − 1vᵀ)``: 12 bytes per entry of traffic in float32,
the floor of any backward that reads R and G and writes dX. ``Rᵀ diag(R1)⁻¹ R`` is never formed:
each CG step is two matrix–vector products with ``R`` (see docs/sinkhorn.md). The mathematics,
stopping rule and guards are those of :func:`tadiff.structured.sinkhorn.sinkhorn_vjp`.

Requires the ``triton`` extra.
"""

from __future__ import annotations

import os
from typing import Any

from tadiff.errors import InputError, MissingDependencyError, ShapeError

try:
    import torch
    import triton
    import triton.language as tl
except ImportError as _exc:  # pragma: no cover - exercised only without the extras
    raise MissingDependencyError("the fused Sinkhorn kernel", "triton", "triton") from _exc

__all__ = ["sinkhorn_forward_triton", "sinkhorn_vjp_triton", "supports"]

_MAX_SIDE = 64  # registers hold a TILE × BN × BM block: larger matrices use the torch kernels
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _vjp_kernel(
    R_ptr, G_ptr, D_ptr,  # R, G in, dX out
    batch, n, m,  # the kernel sees n >= m: the system is m × m
    sRb, sRi, sRj, sGb, sGi, sGj, sDb, sDi, sDj,
    maxiter, rtol2,
    TILE: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr, WIDE: tl.constexpr,
):  # fmt: skip
    ctype = tl.float64 if WIDE else tl.float32
    eps16 = 16 * (2.220446049250313e-16 if WIDE else 1.1920928955078125e-07)
    bat = tl.program_id(0) * TILE + tl.arange(0, TILE)
    i = tl.arange(0, BN)
    j = tl.arange(0, BM)
    b3, i3, j3 = bat[:, None, None], i[None, :, None], j[None, None, :]
    mask = (b3 < batch) & (i3 < n) & (j3 < m)
    R = tl.load(R_ptr + b3 * sRb + i3 * sRi + j3 * sRj, mask=mask, other=0.0).to(ctype)
    G = tl.load(G_ptr + b3 * sGb + i3 * sGi + j3 * sGj, mask=mask, other=0.0).to(ctype)

    GR = G * R
    s_r = tl.sum(GR, axis=2)  # (TILE, BN)
    s_c = tl.sum(GR, axis=1)  # (TILE, BM)
    rows = tl.sum(R, axis=2)
    cols = tl.sum(R, axis=1)
    inv_rows = tl.where(rows > 0, 1.0 / tl.where(rows > 0, rows, 1.0), 0.0)  # padding: rows = 0
    col_ok = (j < m)[None, :]
    rhs = s_c - tl.sum(R * (s_r * inv_rows)[:, :, None], axis=1)
    rhs = tl.where(col_ok, rhs - (tl.sum(tl.where(col_ok, rhs, 0.0), axis=1) / m)[:, None], 0.0)

    x = tl.zeros((TILE, BM), dtype=ctype)
    r = rhs
    p = rhs
    rs = tl.sum(r * r, axis=1)
    target = rs * rtol2
    active = rs > target
    scale = tl.max(cols, axis=1)
    step = 0
    while (step < maxiter) & (tl.max(active.to(tl.int32), axis=0) > 0):
        # S p = diag(cols) p − Rᵀ (diag(rows)⁻¹ (R p)): two matvecs, RᵀR never formed.
        q = tl.sum(R * p[:, None, :], axis=2) * inv_rows
        Sp = cols * p - tl.sum(R * q[:, :, None], axis=1)
        pSp = tl.sum(p * Sp, axis=1)
        pp = tl.sum(p * p, axis=1)
        active = active & (pSp > eps16 * scale * pp)
        alpha = tl.where(active, rs / tl.where(active, pSp, 1.0), 0.0)
        x += alpha[:, None] * p
        r -= alpha[:, None] * Sp
        rs_new = tl.sum(r * r, axis=1)
        active = active & (rs_new > target)
        beta = tl.where(active, rs_new / tl.where(rs > 0, rs, 1.0), 0.0)
        p = r + beta[:, None] * p
        rs = rs_new
        step += 1

    u = (s_r - tl.sum(R * x[:, None, :], axis=2)) * inv_rows
    dX = R * (G - u[:, :, None] - x[:, None, :])
    tl.store(D_ptr + b3 * sDb + i3 * sDi + j3 * sDj, dX, mask=mask)


def _forward_kernel(
    X_ptr, A_ptr, B_ptr, R_ptr,
    batch, n, m,
    sXb, sXi, sXj, sAb, sAi, sBb, sBj, sRb, sRi, sRj,
    iters,
    TILE: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr, WIDE: tl.constexpr,
):  # fmt: skip
    ctype = tl.float64 if WIDE else tl.float32
    bat = tl.program_id(0) * TILE + tl.arange(0, TILE)
    i = tl.arange(0, BN)
    j = tl.arange(0, BM)
    b3, i3, j3 = bat[:, None, None], i[None, :, None], j[None, None, :]
    mask = (b3 < batch) & (i3 < n) & (j3 < m)
    X = tl.load(X_ptr + b3 * sXb + i3 * sXi + j3 * sXj, mask=mask, other=0.0).to(ctype)
    row_ok = (bat[:, None] < batch) & (i[None, :] < n)
    col_ok = (bat[:, None] < batch) & (j[None, :] < m)
    a = tl.load(A_ptr + bat[:, None] * sAb + i[None, :] * sAi, mask=row_ok, other=0.0).to(ctype)
    b = tl.load(B_ptr + bat[:, None] * sBb + j[None, :] * sBj, mask=col_ok, other=0.0).to(ctype)
    # Column-max shift (the first step scales columns, so the iterates are unchanged); padding
    # becomes exact zeros and drops out of every sum.
    colmax = tl.max(tl.where(mask, X, float("-inf")), axis=1)
    K = tl.where(mask, tl.exp(X - tl.where(col_ok, colmax, 0.0)[:, None, :]), 0.0)
    for _ in range(iters):
        col = tl.sum(K, axis=1)
        K = K * (b / tl.where(col > 0, col, 1.0))[:, None, :]
        row = tl.sum(K, axis=2)
        K = K * (a / tl.where(row > 0, row, 1.0))[:, :, None]
    tl.store(R_ptr + b3 * sRb + i3 * sRi + j3 * sRj, K, mask=mask)


_COMPILED: dict[tuple[str, bool], Any] = {}


def _jit(fn: Any) -> Any:
    """``fn`` jitted on first use, so ``TRITON_INTERPRET`` may be set until then."""
    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    key = (fn.__name__, interpret)
    if key not in _COMPILED:
        _COMPILED[key] = triton.jit(fn)
    return _COMPILED[key]


def _kernel() -> Any:
    return _jit(_vjp_kernel)


def supports(R: torch.Tensor) -> bool:
    """Whether the fused kernel handles ``R``: a float dtype and both sides at most 64."""
    return R.dtype in _DTYPES and R.dim() >= 2 and max(R.shape[-2:]) <= _MAX_SIDE


def sinkhorn_vjp_triton(
    R: torch.Tensor,
    G: torch.Tensor,
    *,
    cg_maxiter: int | None = None,
    cg_tol: float | None = None,
) -> torch.Tensor:
    """``dX`` from ``R = sinkhorn(X)`` and ``G = dL/dR`` in one fused kernel (implicit method).

    Args:
        R: balanced matrices ``(..., n, m)`` on CUDA (or CPU with ``TRITON_INTERPRET=1``),
            ``max(n, m) <= 64``.
        G: upstream gradient, same shape.
        cg_maxiter: CG steps at most; default ``min(n, m)``.
        cg_tol: relative CG residual to stop at; default 1e-6 (float32) or 1e-12 (float64).
            float16/bfloat16 inputs are computed in float32.

    Returns:
        ``dX``, shape and dtype of ``R``.

    Example:
        >>> dX = sinkhorn_vjp_triton(R, G)  # doctest: +SKIP
    """
    if R.shape != G.shape:
        raise ShapeError(
            f"sinkhorn_vjp_triton: G must have the shape of R {tuple(R.shape)}, got "
            f"{tuple(G.shape)}"
        )
    if not supports(R):
        raise InputError(
            f"sinkhorn_vjp_triton: needs a float R with n, m <= {_MAX_SIDE}, got shape "
            f"{tuple(R.shape)} and dtype {R.dtype}"
        )
    n, m = R.shape[-2], R.shape[-1]
    R3 = R.reshape(-1, n, m)
    G3 = G.reshape(-1, n, m)
    D3 = torch.empty_like(R3)
    views = [R3, G3, D3]
    if m > n:  # eliminate the smaller side: read everything transposed through the strides
        views = [t.transpose(-1, -2) for t in views]
        n, m = m, n
    batch = R3.shape[0]
    BN, BM = triton.next_power_of_2(n), triton.next_power_of_2(m)
    tile = max(1, min(64, 2048 // (BN * BM)))
    wide = R.dtype == torch.float64
    if cg_tol is None:
        cg_tol = 1e-12 if wide else 1e-6
    strides = [s for t in views for s in t.stride()]
    _kernel()[(triton.cdiv(batch, tile),)](
        *views, batch, n, m, *strides, cg_maxiter or m, float(cg_tol) ** 2,
        TILE=tile, BN=BN, BM=BM, WIDE=wide,
    )  # fmt: skip
    return D3.reshape(R.shape)


def sinkhorn_forward_triton(
    X: torch.Tensor,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    *,
    iters: int = 20,
) -> torch.Tensor:
    """The scaling-domain forward fused in one kernel: ``iters`` column+row steps in registers.

    Same iteration, order and column-max shift as
    :func:`tadiff.structured.sinkhorn.sinkhorn_forward` with ``log_domain=False`` and no ``tol``
    (the callers choose: inputs that need the log domain, or a tolerance, take the torch path).

    Args:
        X: logits ``(..., n, m)``, ``n, m <= 64``, on CUDA (or CPU under ``TRITON_INTERPRET=1``).
        a, b: marginals ``(..., n)`` / ``(..., m)`` broadcastable to the batch, already checked
            (positive, equal mass); default all ones and ``n / m``.
        iters: number of iterations.

    Returns:
        ``R``, shape and dtype of ``X``.
    """
    if not supports(X):
        raise InputError(
            f"sinkhorn_forward_triton: needs a float X with n, m <= {_MAX_SIDE}, got shape "
            f"{tuple(X.shape)} and dtype {X.dtype}"
        )
    n, m = X.shape[-2], X.shape[-1]
    batch_shape = X.shape[:-2]
    a = X.new_ones(n) if a is None else a
    b = X.new_full((m,), n / m) if b is None else b
    X3 = X.reshape(-1, n, m)
    batch = X3.shape[0]
    # Marginals shared by the batch are read with a zero batch stride, never copied.
    a2 = a.expand(*batch_shape, n).reshape(batch, n) if a.dim() > 1 else a.expand(batch, n)
    b2 = b.expand(*batch_shape, m).reshape(batch, m) if b.dim() > 1 else b.expand(batch, m)
    R3 = torch.empty_like(X3)
    BN, BM = triton.next_power_of_2(n), triton.next_power_of_2(m)
    tile = max(1, min(64, 2048 // (BN * BM)))
    strides = [*X3.stride(), *a2.stride(), *b2.stride(), *R3.stride()]
    _jit(_forward_kernel)[(triton.cdiv(batch, tile),)](
        X3, a2, b2, R3, batch, n, m, *strides, iters,
        TILE=tile, BN=BN, BM=BM, WIDE=X.dtype == torch.float64,
    )  # fmt: skip
    return R3.reshape(X.shape)
