"""The autocast policy of tadiff's structured ops in torch: compute in float32, whatever
``torch.autocast`` would lower.

``torch.autocast`` runs matrix products in float16/bfloat16. FastH inverts each block's triangular
factor and Sinkhorn normalizes ``exp(X)`` by repeated division: both need more than 8-11 mantissa
bits (FastH's ``U`` would drift from orthogonal, Sinkhorn's marginals would stop balancing). So,
like the precision-sensitive ops torch's autocast runs in float32, these ops cast half-precision
inputs up (:func:`autocast_inputs`), run their kernels with autocast off
(:func:`without_autocast`) and return float32; the next autocast op casts back as usual. float32
and float64 inputs are left alone, and outside autocast nothing is cast.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["autocast_inputs", "without_autocast"]

_REDUCED_FLOATS = (torch.float16, torch.bfloat16)


def _device_type(args: tuple[Any, ...]) -> str | None:
    return next((a.device.type for a in args if isinstance(a, torch.Tensor)), None)


def autocast_inputs(*tensors: Any) -> tuple[Any, ...]:
    """``tensors`` as tadiff's structured ops compute them: under ``torch.autocast`` (on the
    device of the first tensor), float16/bfloat16 tensors become float32; everything else,
    and everything outside autocast, is returned as it is.

    Example:
        >>> V, X = torch.randn(4, 4), torch.randn(4, 2, dtype=torch.bfloat16)
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     autocast_inputs(V, X)[1].dtype
        torch.float32
    """
    device = _device_type(tensors)
    if device is None or not torch.is_autocast_enabled(device):
        return tensors  # (a non-tensor argument is reported by the op's input checks)
    return tuple(
        t.float() if isinstance(t, torch.Tensor) and t.dtype in _REDUCED_FLOATS else t
        for t in tensors
    )


def without_autocast(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with ``torch.autocast`` off on the device of its first tensor argument.

    The kernels must see the precision they were given (see :func:`autocast_inputs`), also when
    a backward is called inside an autocast region, where autocast would lower every GEMM.
    """

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        device = _device_type(args)
        if device is None or not torch.is_autocast_enabled(device):
            return fn(*args)
        with torch.autocast(device, enabled=False):
            return fn(*args)

    return run
