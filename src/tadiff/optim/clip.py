"""Gradient clipping: rescale gradients in place before an optimizer step."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError
from tadiff.optim.optimizer import _grad_array


def _as_list(parameters: Iterable[Any] | Any) -> list[Any]:
    return [parameters] if hasattr(parameters, "grad") else list(parameters)


def clip_grad_norm_(
    parameters: Iterable[Any] | Any,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
) -> Any:
    """Scale all gradients together so that their joint norm is at most ``max_norm``.

    The joint norm is the ``norm_type``-norm of the vector of every gradient element (``inf``:
    largest absolute value). Gradients are multiplied in place by
    ``min(1, max_norm / (norm + 1e-6))``, as ``torch.nn.utils.clip_grad_norm_`` does.

    Args:
        parameters: a Parameter or an iterable of them; those without a gradient are skipped.
        max_norm: the largest joint norm allowed.
        norm_type: the p of the p-norm (a positive number or ``float("inf")``).
        error_if_nonfinite: raise InputError when the norm is nan or inf instead of scaling.

    Returns:
        The joint norm before clipping, as a 0-d tadiff Tensor.

    Example:
        >>> loss.backward()                                          # doctest: +SKIP
        >>> clip_grad_norm_(model.parameters(), max_norm=1.0)        # doctest: +SKIP
    """
    if not norm_type > 0:
        raise InputError(f"clip_grad_norm_: norm_type must be positive, got {norm_type}")
    grads = [g for g in (_grad_array(p) for p in _as_list(parameters)) if g is not None]
    if not grads:
        return Tensor(np.zeros((), dtype=np.float32))
    dtype = np.result_type(*grads)
    if math.isinf(norm_type):
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in grads)
    else:
        total = sum(float(np.sum(np.abs(g).astype(np.float64) ** norm_type)) for g in grads)
        total = total ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise InputError(
            f"clip_grad_norm_: the total {norm_type}-norm of the gradients is {total}; "
            "pass error_if_nonfinite=False to scale anyway"
        )
    coef = min(1.0, max_norm / (total + 1e-6))
    for g in grads:
        g *= coef
    return Tensor(np.asarray(total, dtype=dtype))


def clip_grad_value_(parameters: Iterable[Any] | Any, clip_value: float) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place.

    Example:
        >>> clip_grad_value_(model.parameters(), 0.5)  # doctest: +SKIP
    """
    if not clip_value >= 0:
        raise InputError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for p in _as_list(parameters):
        g = _grad_array(p)
        if g is not None:
            np.clip(g, -clip_value, clip_value, out=g)
