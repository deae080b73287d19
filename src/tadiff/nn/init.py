"""Parameter initialization, in place, with ``torch.nn.init``'s names and formulas.

Random draws come from tadiff's generator (``td.rand``/``td.randn``), so ``td.manual_seed``
makes them reproducible. Each function fills ``tensor.data`` in place (keeping its dtype) and
returns the tensor.

Example:
    >>> import tadiff as td
    >>> w = td.nn.Parameter(td.zeros(3, 4))
    >>> _ = kaiming_uniform_(w, nonlinearity="relu")
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError

_LINEAR_LIKE = ("linear", "conv1d", "conv2d", "conv3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended scale of weights for a nonlinearity (torch's table).

    Args:
        nonlinearity: ``"linear"``, ``"sigmoid"``, ``"tanh"``, ``"relu"``, ``"leaky_relu"``,
            ``"selu"`` (or a conv name, same as linear).
        param: the negative slope for ``"leaky_relu"`` (default 0.01).

    Example:
        >>> round(calculate_gain("relu"), 4)
        1.4142
    """
    if nonlinearity in _LINEAR_LIKE:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise InputError(f"calculate_gain: negative slope {slope!r} is not a number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise InputError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of shape ``(out, in, *kernel)``."""
    if tensor.ndim < 2:
        raise ShapeError(
            f"fan in and fan out need a tensor with at least 2 dims, got shape {tensor.shape}"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _target(tensor: Any, where: str) -> np.ndarray:
    if not isinstance(tensor, Tensor):
        raise DTypeError(f"{where}: expected a Tensor or Parameter, got {type(tensor).__name__}")
    if tensor.data.dtype.kind != "f":
        raise DTypeError(f"{where}: expected a floating tensor, got dtype {tensor.data.dtype}")
    return tensor.data


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with draws from ``U(a, b)``."""
    data = _target(tensor, "uniform_")
    if not a <= b:
        raise InputError(f"uniform_: lower bound a={a} exceeds upper bound b={b}")
    draw = td.rand(*data.shape, dtype=np.float64).data
    data[...] = a + (b - a) * draw
    return tensor


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with draws from ``N(mean, std**2)``."""
    data = _target(tensor, "normal_")
    if not std >= 0:
        raise InputError(f"normal_: std={std} must be >= 0")
    data[...] = mean + std * td.randn(*data.shape, dtype=np.float64).data
    return tensor


def constant_(tensor: Tensor, value: float) -> Tensor:
    """Fill with ``value``."""
    _target(tensor, "constant_")[...] = value
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with 0."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with 1."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    if _target(tensor, "xavier_uniform_").size == 0:
        return tensor
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot normal: ``N(0, std**2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    if _target(tensor, "xavier_normal_").size == 0:
        return tensor
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise InputError(f"kaiming init: mode={mode!r}; expected 'fan_in' or 'fan_out'")
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He uniform: ``U(-b, b)`` with ``b = sqrt(3) * gain / sqrt(fan)``.

    ``Linear`` uses ``a=sqrt(5)``, which gives ``b = 1 / sqrt(fan_in)`` as in torch. A tensor
    with no elements is left as it is (its fan may be 0), as in torch.
    """
    if _target(tensor, "kaiming_uniform_").size == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He normal: ``N(0, std**2)`` with ``std = gain / sqrt(fan)`` (no-op without elements)."""
    if _target(tensor, "kaiming_normal_").size == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
