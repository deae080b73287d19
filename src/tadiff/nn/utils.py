"""``td.nn.utils``: gradient clipping and flattening parameters into one vector (torch's names).

``clip_grad_norm_`` and ``clip_grad_value_`` are those of :mod:`tadiff.optim.clip`.

Example:
    >>> import tadiff as td
    >>> model = td.nn.Linear(3, 2)
    >>> vec = parameters_to_vector(model.parameters())
    >>> vec.shape
    (8,)
    >>> vector_to_parameters(vec * 0.0, model.parameters())
    >>> float(model.weight.abs().sum())
    0.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, ShapeError
from tadiff.optim.clip import clip_grad_norm_, clip_grad_value_


def _tensors(parameters: Iterable[Any] | Any, where: str) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise DTypeError(f"{where}: parameter {i} is a {type(p).__name__}; expected a Tensor")
    return params


def parameters_to_vector(parameters: Iterable[Any]) -> Tensor:
    """Every parameter flattened and concatenated in order into one 1-d Tensor.

    The result is differentiable: gradients flow back to the parameters.

    Args:
        parameters: an iterable of Tensors (e.g. ``model.parameters()``).

    Returns:
        Shape ``(total number of elements,)``.
    """
    params = _tensors(parameters, "parameters_to_vector")
    if not params:
        return Tensor(np.zeros(0, dtype=np.float32))
    return td.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Any]) -> None:
    """Copy consecutive slices of ``vec`` into the parameters' values, in place (no graph).

    Args:
        vec: a 1-d Tensor with exactly as many elements as the parameters together.
        parameters: an iterable of Tensors.

    Raises:
        DTypeError: ``vec`` is not a Tensor.
        ShapeError: ``vec`` is not 1-d or its length differs from the parameters' total.
    """
    if not isinstance(vec, Tensor):
        raise DTypeError(f"vector_to_parameters: vec is a {type(vec).__name__}; expected a Tensor")
    params = _tensors(parameters, "vector_to_parameters")
    total = sum(p.data.size for p in params)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ShapeError(
            f"vector_to_parameters: vec of shape {vec.shape}; expected ({total},), the "
            "parameters' total number of elements"
        )
    start = 0
    for p in params:
        stop = start + p.data.size
        p.data[...] = vec.data[start:stop].reshape(p.data.shape)
        start = stop


__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "vector_to_parameters",
]
