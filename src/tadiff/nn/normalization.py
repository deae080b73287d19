"""Group normalization, vector normalization and distances: ``group_norm``/``GroupNorm``,
``normalize``, ``cosine_similarity`` and ``pairwise_distance``.

All are compositions of tadiff ops; the engine supplies the gradients.

Example:
    >>> import tadiff as td
    >>> normalize(td.tensor([[3.0, 4.0]]))
    tensor([[0.6, 0.8]])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.module import Module, Parameter


def _check_dim(x: Tensor, dim: int, where: str) -> None:
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        raise ShapeError(f"{where}: dim={dim} is out of range for an input of shape {x.shape}")


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each of ``num_groups`` channel groups of every sample to mean 0, variance 1
    (the biased variance, over the group's channels and all spatial positions), then scale and
    shift every channel by ``weight`` and ``bias``.

    Args:
        input: shape ``(N, C, *)`` with ``C`` divisible by ``num_groups``.
        num_groups: number of groups.
        weight: per-channel scale, shape ``(C,)``, or None.
        bias: per-channel shift, shape ``(C,)``, or None.
        eps: added to the variance.

    Returns:
        The input's shape.

    Example:
        >>> group_norm(td.randn(2, 4, 3), 2).shape
        (2, 4, 3)
    """
    x = as_tensor_arg(input, "group_norm")
    if x.ndim < 2:
        raise ShapeError(f"group_norm: input of shape {x.shape}; expected (N, C, *)")
    n, c = x.shape[:2]
    if not (isinstance(num_groups, int) and num_groups > 0) or c % num_groups:
        raise InputError(
            f"group_norm: num_groups={num_groups!r} does not divide the {c} channels of the "
            f"input of shape {x.shape}; expected a positive divisor of {c}"
        )
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (c,):
            raise ShapeError(f"group_norm: {name} of shape {p.shape}; expected ({c},)")
    # the group's size spelled out: an empty batch has no size for -1 to stand for
    grouped = x.reshape(n, num_groups, c // num_groups * math.prod(x.shape[2:]))
    centered = grouped - grouped.mean(dim=2, keepdim=True)
    variance = (centered * centered).mean(dim=2, keepdim=True)
    out = (centered / (variance + eps).sqrt()).reshape(*x.shape)
    per_channel = (c,) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * as_tensor_arg(weight, "group_norm weight").reshape(*per_channel)
    if bias is not None:
        out = out + as_tensor_arg(bias, "group_norm bias").reshape(*per_channel)
    return out


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``.

    Args:
        input: any shape with at least one dim.
        p: the norm's order.
        dim: the axis normalized.
        eps: the smallest divisor.
        out: not supported (must be None).

    Example:
        >>> normalize(td.tensor([[1.0, 0.0], [0.0, 2.0]]), dim=0)
        tensor([[1., 0.],
                [0., 1.]])
    """
    x = as_tensor_arg(input, "normalize")
    if out is not None:
        raise InputError("normalize: out= is not supported; use the returned tensor")
    _check_dim(x, dim, "normalize")
    return x / td.clamp(td.norm(x, p, dim=dim, keepdim=True), min=eps)


def _broadcast_pair(x1: Any, x2: Any, where: str) -> tuple[Tensor, Tensor]:
    x1, x2 = as_tensor_arg(x1, f"{where} x1"), as_tensor_arg(x2, f"{where} x2")
    try:
        shape = np.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ShapeError(
            f"{where}: x1 of shape {x1.shape} and x2 of shape {x2.shape} do not broadcast"
        ) from None
    return x1.expand(*shape), x2.expand(*shape)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (inputs broadcast).

    Each input is divided by its own norm first (keeps the result in ``[-1, 1]``); a norm
    below ``eps`` is replaced by ``eps``, and, as in torch, that replacement is not
    differentiated (the gradient flows through the unclamped norm).

    Returns:
        The broadcast shape without ``dim``.

    Example:
        >>> float(cosine_similarity(td.tensor([1.0, 0.0]), td.tensor([1.0, 1.0]), dim=0))
        0.7071067690849304
    """
    x1, x2 = _broadcast_pair(x1, x2, "cosine_similarity")
    _check_dim(x1, dim, "cosine_similarity")
    unit = []
    for x in (x1, x2):
        n = td.norm(x, 2, dim=dim, keepdim=True)
        # Add the clamp as a constant: value max(n, eps), gradient that of n (torch's choice).
        n = n + Tensor(np.maximum(n.data, eps) - n.data)
        unit.append(x / n)
    return (unit[0] * unit[1]).sum(dim=dim)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last dim (inputs broadcast).

    Example:
        >>> pairwise_distance(td.tensor([[0.0, 0.0]]), td.tensor([[3.0, 4.0]]), eps=0.0)
        tensor([5.])
    """
    x1, x2 = _broadcast_pair(x1, x2, "pairwise_distance")
    if x1.ndim == 0:
        raise ShapeError("pairwise_distance: expected inputs with at least one dim, got 0-d")
    return td.norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


class GroupNorm(Module):
    """Group normalization (Wu & He) with learned per-channel ``weight`` (ones) and ``bias``
    (zeros); see :func:`group_norm`.

    Args:
        num_groups: number of channel groups (divides ``num_channels``).
        num_channels: ``C``.
        eps: added to the variance.
        affine: learn ``weight`` and ``bias``.
        dtype: parameter dtype.

    Example:
        >>> GroupNorm(2, 4)(td.randn(3, 4, 5)).shape
        (3, 4, 5)
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "GroupNorm")
        if not (isinstance(num_groups, int) and num_groups > 0) or num_channels % num_groups:
            raise InputError(
                f"GroupNorm: num_groups={num_groups!r} does not divide num_channels="
                f"{num_channels}; expected a positive divisor"
            )
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups,
            num_channels,
            eps,
            affine,
        )
        if affine:
            self.weight = Parameter(np.ones(num_channels, dtype=dtype))
            self.bias = Parameter(np.zeros(num_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = ["GroupNorm", "cosine_similarity", "group_norm", "normalize", "pairwise_distance"]
