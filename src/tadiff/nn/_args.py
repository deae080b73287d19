"""Argument checks shared by the layer functions (``functional``, ``conv``, ``pooling``, ...)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError


def as_tensor_arg(x: Any, name: str) -> Tensor:
    """``x`` as a Tensor: Tensors pass, arrays are wrapped; anything else is a DTypeError."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor(x)
    raise DTypeError(f"{name}: expected a Tensor, got {type(x).__name__}")


def int_tuple(value: Any, n: int, name: str, where: str) -> tuple[int, ...]:
    """An int or ``n`` ints (kernel size, stride, ...) as a tuple of ``n`` ints."""
    values = (value,) * n if isinstance(value, (int, np.integer)) else tuple(value)
    if len(values) != n or not all(isinstance(v, (int, np.integer)) for v in values):
        raise InputError(f"{where}: {name}={value!r}; expected an int or {n} ints")
    return tuple(int(v) for v in values)


def with_batch(x: Tensor, dims: int, where: str) -> tuple[Tensor, bool]:
    """``(N, C, *spatial)`` input, adding the batch axis to an unbatched ``(C, *spatial)`` one.

    Returns:
        The batched tensor and whether the caller was given a batch (so it can drop it again).
    """
    batched = x.data.ndim == dims + 2
    if not batched and x.data.ndim != dims + 1:
        raise ShapeError(
            f"{where}: input of shape {x.data.shape}; expected {dims + 2} dims (batch, channels, "
            f"*spatial) or {dims + 1} without the batch"
        )
    return (x if batched else x.unsqueeze(0)), batched


def empty_batch(shape: tuple[int, ...], dtype: Any, *inputs: Tensor) -> Tensor:
    """The result of a layer on an empty batch: zeros of ``shape`` (its batch size 0), recorded
    as depending on ``inputs`` so that their gradients are zeros, as torch's are. Index
    functions (convolutions, average pooling) need every size to be at least 1, so the layers
    that use them answer an empty batch here.

    Example:
        >>> import tadiff as td
        >>> w = td.ones(3, 2, 3, requires_grad=True)
        >>> y = empty_batch((0, 3, 6), w.dtype, w)
        >>> y.sum().backward(); y.shape, w.grad.abs().sum().item()
        ((0, 3, 6), 0.0)
    """
    from tadiff.autograd.factories import zeros

    y = zeros(shape, dtype=dtype)
    for x in inputs:
        if x.requires_grad:  # 0 times the sum: a zero gradient, whatever the values
            y = y + x.sum() * 0.0
    return y


__all__ = ["as_tensor_arg", "empty_batch", "int_tuple", "with_batch"]
