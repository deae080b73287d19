"""Central-difference check of derived gradients (for `tadiff derive --check` and the demo)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["central_vjp"]


def central_vjp(
    f: Callable[..., np.ndarray],
    arrays: Mapping[str, np.ndarray],
    wrt: str,
    g: np.ndarray,
    eps: float = 1e-6,
) -> np.ndarray:
    """The gradient of ``sum(g * f(**arrays))`` wrt ``arrays[wrt]`` by central differences.

    Two evaluations of ``f`` per element of ``arrays[wrt]``: for checking at small sizes only.
    A :class:`~tadiff.index.TensorFunction` is evaluated by its reference interpreter, so the
    check does not go through the compiled kernels it checks.

    Args:
        f: a function of keyword arrays, e.g. a :class:`~tadiff.index.TensorFunction`.
        arrays: the arguments, float64 for a meaningful check.
        wrt: the name of the argument to perturb.
        g: the upstream gradient, shaped like ``f``'s output.
        eps: the step.

    Returns:
        An array shaped like ``arrays[wrt]``.

    Example:
        >>> square = lambda x: x**2
        >>> central_vjp(square, {"x": np.array([3.0])}, "x", np.array([1.0])).round(6)
        array([6.])
    """
    f = getattr(f, "reference", f)
    x = np.array(arrays[wrt], dtype=np.float64)
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        keep = x[idx]
        x[idx] = keep + eps
        plus = np.sum(g * f(**{**arrays, wrt: x}))
        x[idx] = keep - eps
        minus = np.sum(g * f(**{**arrays, wrt: x}))
        x[idx] = keep
        out[idx] = (plus - minus) / (2 * eps)
    return out
