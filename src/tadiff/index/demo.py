"""Showcase for ``tadiff demo``: derive a strided convolution's gradients and check them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tadiff.index.function import define
from tadiff.index.numcheck import central_vjp

__all__ = ["run"]

_CONV = "y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])"


def run(out: Callable[[str], None]) -> bool:
    """Print the derived gradients of a stride-2 convolution and check them numerically.

    Returns:
        True if both gradients match central differences (float64) to 1e-7.
    """
    f = define(_CONV)
    out(f"definition:  {f}")
    rng = np.random.default_rng(0)
    arrays = {"x": rng.normal(size=(2, 2, 9)), "w": rng.normal(size=(3, 2, 3))}
    y = f(**arrays)
    out(f"shapes:      x {arrays['x'].shape}, w {arrays['w'].shape} -> y {y.shape}")
    g = rng.normal(size=y.shape)
    ok = True
    for name in f.args:
        grad = f.grad(name)
        out(f"gradient:    {grad}")
        derived = grad(**arrays, dy=g)
        error = float(np.max(np.abs(derived - central_vjp(f, arrays, name, g))))
        passed = error < 1e-7
        ok &= passed
        verdict = "ok" if passed else "MISMATCH"
        out(f"             max |derived - central difference| = {error:.1e}  {verdict}")
    return ok
