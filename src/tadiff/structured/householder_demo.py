"""``tadiff demo`` showcase for FastH: checks against the explicit product and sequential gradient.

``run(out)`` prints through ``out`` and returns whether every self-check passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from tadiff.structured import householder as hh


def _explicit_product(V: np.ndarray) -> np.ndarray:
    d = V.shape[1]
    U = np.eye(d)
    for v in V:
        U = U @ (np.eye(d) - 2.0 * np.outer(v, v) / (v @ v))
    return U


def _best_ms(fn: Callable[[], object], repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def _engine_gradient_error(V: np.ndarray, X: np.ndarray, G: np.ndarray, block: int) -> float | None:
    """Max |FastH − sequential| of dL/dV through tadiff's engine, or None without the engine."""
    try:
        import tadiff as td
        from tadiff.autograd.tensor import Tensor
    except ImportError:  # pragma: no cover - the engine is part of tadiff once it has landed
        return None
    grads = []
    for fn in (
        lambda v: hh.householder_apply(v, Tensor(X), block=block),
        lambda v: hh.householder_sequential(v, Tensor(X)),
    ):
        v = td.tensor(V, requires_grad=True)
        (fn(v) * Tensor(G)).sum().backward()
        grads.append(v.grad.data)
    return float(np.abs(grads[0] - grads[1]).max())


def _torch_per_sample_error(
    V: np.ndarray, X: np.ndarray, G: np.ndarray, block: int, want: list[np.ndarray]
) -> float | None:
    """Max |vmap(grad) − sequential| of per-sample dL/dV with torch.func, or None without torch."""
    try:
        import torch

        from tadiff.torch.householder import householder_apply
    except ImportError:  # torch is an optional extra
        return None

    def loss(V, x, g):
        return (householder_apply(V, x, block=block) * g).sum()

    per_sample = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    got = per_sample(*(torch.from_numpy(a) for a in (V, X, G))).numpy()
    return float(np.abs(got - np.stack(want)).max())


def run(out: Callable[[str], None]) -> bool:
    """Apply FastH to a small batch, check it, time one size; True if every check passed."""
    rng = np.random.default_rng(0)
    k, d, m, block = 13, 20, 4, 5  # k < d, and d is not a multiple of the block
    V = rng.standard_normal((k, d))
    X = rng.standard_normal((3, d, m))
    G = rng.standard_normal((3, d, m))
    ok = True

    def check(name: str, err: float, tol: float) -> None:
        nonlocal ok
        passed = err <= tol
        ok &= passed
        out(f"  {name:<52} max error {err:.1e}  {'ok' if passed else 'FAILED'}")

    out(f"U = H_1 ⋯ H_{k} in R^{d}x{d}, X of shape {X.shape}, block size {block} (float64)")
    U = _explicit_product(V)
    Y = hh.householder_apply(V, X, block=block)
    check("FastH U X vs dense product of the reflectors", float(np.abs(Y - U @ X).max()), 1e-12)
    check("U orthogonal (Uᵀ U = I)", float(np.abs(U.T @ U - np.eye(d)).max()), 1e-12)
    back = hh.householder_apply(V, Y, block=block, transpose=True)
    check("inverse: Uᵀ (U X) = X", float(np.abs(back - X).max()), 1e-12)

    dV, dX = hh.householder_vjp(V, X, G, block=block)
    per_item = [
        hh._sequential_backward(V, hh.householder_sequential(V, x), g)
        for x, g in zip(X, G, strict=True)
    ]
    sV = sum(gv for gv, _ in per_item)
    sX = np.stack([gx for _, gx in per_item])
    check("FastH dL/dV vs sequential per-reflector backward", float(np.abs(dV - sV).max()), 1e-11)
    check("FastH dL/dX vs sequential per-reflector backward", float(np.abs(dX - sX).max()), 1e-11)
    eps, i, j = 1e-6, 4, 7
    E = np.zeros_like(V)
    E[i, j] = eps
    fd = np.sum(G * hh.householder_apply(V + E, X)) - np.sum(G * hh.householder_apply(V - E, X))
    check(f"dL/dV[{i},{j}] vs central difference", abs(fd / (2 * eps) - dV[i, j]), 1e-7)

    engine_err = _engine_gradient_error(V, X, G, block)
    if engine_err is not None:
        check("engine Function dL/dV vs engine autograd of the loop", engine_err, 1e-11)
    per_sample_err = _torch_per_sample_error(V, X, G, block, [gv for gv, _ in per_item])
    if per_sample_err is not None:
        check("torch.func vmap(grad) per-sample dL/dV vs sequential", per_sample_err, 1e-11)

    d, m = 256, 32
    V = rng.standard_normal((d, d)).astype(np.float32)
    X = rng.standard_normal((d, m)).astype(np.float32)
    G = rng.standard_normal((d, m)).astype(np.float32)

    def sequential() -> None:
        hh._sequential_backward(V, hh.householder_sequential(V, X), G)

    t_fast = _best_ms(lambda: hh.householder_vjp(V, X, G))
    t_seq = _best_ms(sequential)
    out(
        f"Forward+backward, d = {d}, m = {m}, float32, NumPy: FastH {t_fast:.2f} ms, "
        f"sequential {t_seq:.2f} ms ({t_seq / t_fast:.1f}x faster; block {hh.default_block(d)})"
    )
    return ok
