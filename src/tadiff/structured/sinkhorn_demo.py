"""Showcase for ``tadiff demo``: Sinkhorn's implicit gradient against autograd through the loop.

A batch of 4×4 logits is balanced to doubly stochastic matrices; the gradient of a random linear
loss is computed twice in tadiff's engine: by the implicit backward (a small CG solve) and by
ordinary autograd through every iteration. The two must agree once the forward has converged;
the demo also times the two backward passes at 20 iterations.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def _backward_seconds(td, sinkhorn, X, G, iters, method) -> tuple[float, np.ndarray]:
    x = td.tensor(X, requires_grad=True)
    R = sinkhorn(x, iters=iters, backward=method)
    start = time.perf_counter()
    R.backward(td.tensor(G))
    return time.perf_counter() - start, x.grad.numpy()


def run(out: Callable[[str], None]) -> bool:
    """Print the comparison through ``out``; return whether every self-check passed."""
    import tadiff as td
    from tadiff.structured.sinkhorn import sinkhorn

    rng = np.random.default_rng(0)
    ok = True

    X = rng.uniform(0, 4, (256, 4, 4))
    G = rng.normal(size=X.shape)  # random upstream gradient (all ones would give exactly 0)
    _, implicit = _backward_seconds(td, sinkhorn, X, G, 200, "implicit")
    _, unrolled = _backward_seconds(td, sinkhorn, X, G, 200, "unrolled")
    diff = float(abs(implicit - unrolled).max())
    out("256 matrices 4×4, float64, 200 iterations, random upstream gradient G")
    out(f"  max |implicit − unrolled autograd| = {diff:.2e}   (check: ≤ 1e-9)")
    ok &= diff <= 1e-9
    sums = max(float(abs(implicit.sum(-1)).max()), float(abs(implicit.sum(-2)).max()))
    out(f"  rows and columns of ∇X sum to ≤ {sums:.1e}   (check: ≤ 1e-10)")
    ok &= sums <= 1e-10

    X32 = rng.uniform(0, 4, (4096, 4, 4)).astype(np.float32)
    G32 = rng.normal(size=X32.shape).astype(np.float32)
    t_implicit, g_implicit = _backward_seconds(td, sinkhorn, X32, G32, 20, "implicit")
    t_unrolled, g_unrolled = _backward_seconds(td, sinkhorn, X32, G32, 20, "unrolled")
    gap = float(abs(g_implicit - g_unrolled).max())
    out("4096 matrices 4×4, float32, 20 iterations (not converged)")
    out(f"  max |implicit − unrolled| = {gap:.2e} (gradient of the limit vs of the 20-step map)")
    out(
        f"  backward: implicit {t_implicit * 1e3:.1f} ms, unrolled {t_unrolled * 1e3:.1f} ms "
        f"({t_unrolled / t_implicit:.1f}× faster; one run, see benchmarks/sinkhorn.py)"
    )
    ok &= bool(np.isfinite(g_implicit).all()) and gap <= 1e-2 * float(abs(g_unrolled).max())
    out("self-checks passed" if ok else "SELF-CHECK FAILED")
    return ok
