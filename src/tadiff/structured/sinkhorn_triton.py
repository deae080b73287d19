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
    import triton
    import triton.language as tl

    import torch
except ImportError as _exc:  # pragma: no cover - exercised only without the extras
    raise MissingDependencyError("the fused Sinkhorn kernel", "triton", "triton") from _exc

__all__ = ["sinkhorn_vjp_triton", "supports"]

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


_COMPILED: dict[bool, Any] = {}


def _kernel() -> Any:
    """The jitted kernel; built on first use so ``TRITON_INTERPRET`` may be set until then."""
    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if interpret not in _COMPILED:
        _COMPILED[interpret] = triton.jit(_vjp_kernel)
    return _COMPILED[interpret]


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
