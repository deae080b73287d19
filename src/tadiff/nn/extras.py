"""More of torch.nn: padding by reflection, replication or wrap-around (``F.pad`` modes and the
``*Pad1d/2d`` modules), instance normalization, ``PReLU``, and the ``CosineSimilarity`` /
``PairwiseDistance`` modules.

The padding modes gather along each padded dim with an index table (reflection leaves the edge
element out, as torch does), so the gradient scatters back through indexing; constant padding
stays :func:`tadiff.nn.conv.pad`'s. Instance normalization is group normalization with one
group per channel, plus torch's optional running statistics.

Example:
    >>> import tadiff as td
    >>> pad_mode(td.tensor([[1.0, 2.0, 3.0]]), (2, 1), "reflect").tolist()
    [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.grad_mode import no_grad
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.conv import pad as constant_pad
from tadiff.nn.module import Module, Parameter
from tadiff.nn.normalization import cosine_similarity, group_norm, pairwise_distance
from tadiff.ops.elementwise import where
from tadiff.ops.indexing import getitem

__all__ = [
    "ConstantPad1d", "ConstantPad2d", "CosineSimilarity", "InstanceNorm1d", "InstanceNorm2d",
    "PReLU", "PairwiseDistance", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
    "ReplicationPad2d", "ZeroPad1d", "ZeroPad2d", "instance_norm", "pad_mode", "prelu",
]  # fmt: skip

_MODES = ("constant", "reflect", "replicate", "circular")


def _table(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source index of every padded position along a dim of length ``n``."""
    pos = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(pos, 0, n - 1)
    if mode == "circular":
        return pos % n
    period = 2 * (n - 1)  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
    folded = np.abs(pos) % period if period else np.zeros_like(pos)
    return np.where(folded >= n, period - folded, folded)


def pad_mode(x: Any, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """torch's ``F.pad`` with every mode: ``"constant"`` (``value``), ``"reflect"``,
    ``"replicate"``, ``"circular"``; ``pad`` is ``(left, right)`` for the last dim, then the one
    before, ... (non-constant modes pad at most the last three dims, as torch)."""
    if mode not in _MODES:
        raise InputError(f"pad: mode={mode!r}; expected one of {_MODES}")
    if mode == "constant":
        return constant_pad(x, pad, value=value)
    x = as_tensor_arg(x, "pad input")
    widths = [int(w) for w in pad]
    dims = len(widths) // 2
    if len(widths) % 2 or not 1 <= dims <= min(3, x.ndim - 1):
        raise ShapeError(
            f"pad: mode={mode!r} takes (left, right) pairs for 1 to {min(3, x.ndim - 1)} "
            f"trailing dims of the input of shape {x.shape}, got {tuple(pad)}"
        )
    out = x
    for k in range(dims):
        ax = x.ndim - 1 - k
        lo, hi = widths[2 * k], widths[2 * k + 1]
        n = x.shape[ax]
        if min(lo, hi) < 0:
            raise InputError(f"pad: widths {tuple(pad)} must be non-negative for mode={mode!r}")
        if mode == "reflect" and max(lo, hi) >= n:
            raise ShapeError(
                f"pad: reflect padding ({lo}, {hi}) must be smaller than the dim's size {n}"
            )
        if mode == "circular" and max(lo, hi) > n:
            raise ShapeError(f"pad: circular padding ({lo}, {hi}) must be at most the size {n}")
        out = getitem(out, (slice(None),) * ax + (_table(n, lo, hi, mode),))
    return out


class _Pad(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding: int | Sequence[int], value: float = 0.0):
        super().__init__()
        widths = (padding,) * (2 * self._dims) if isinstance(padding, int) else tuple(padding)
        if len(widths) != 2 * self._dims:
            raise InputError(
                f"{type(self).__name__}: padding {padding!r} needs one int or {2 * self._dims}"
            )
        self.padding, self.value = widths, value

    def forward(self, x: Tensor) -> Tensor:
        return pad_mode(x, self.padding, self._mode, self.value)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_Pad):
    """Pads the last dim with zeros; ``padding`` one int or (left, right)."""

    def __init__(self, padding: int | Sequence[int]):
        super().__init__(padding, 0.0)


class ZeroPad2d(ZeroPad1d):
    """Pads the last two dims with zeros; ``padding`` one int or (left, right, top, bottom)."""

    _dims = 2


class ConstantPad1d(_Pad):
    """Pads the last dim with ``value``."""


class ConstantPad2d(_Pad):
    """Pads the last two dims with ``value``."""

    _dims = 2


class ReflectionPad1d(ZeroPad1d):
    """Pads the last dim by reflection (the edge element not repeated)."""

    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Pads the last two dims by reflection."""

    _dims = 2


class ReplicationPad1d(ZeroPad1d):
    """Pads the last dim by repeating the edge element."""

    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Pads the last two dims by repeating the edge elements."""

    _dims = 2


def instance_norm(
    input: Any,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize every channel of every sample over its spatial positions (torch's
    ``F.instance_norm``): with ``use_input_stats`` the statistics of the input, updating the
    optional running ones (their batch mean, unbiased variance); otherwise the running ones."""
    x = as_tensor_arg(input, "instance_norm input")
    if x.ndim < 3:
        raise ShapeError(f"instance_norm: input of shape {x.shape}; expected (N, C, *spatial)")
    n, c = x.shape[:2]
    if use_input_stats:
        if running_mean is not None or running_var is not None:
            flat = x.data.reshape(n, c, math.prod(x.shape[2:]))
            count = flat.shape[-1]
            if n:
                means, unbiased = flat.mean(-1).mean(0), flat.var(-1).mean(0)
                unbiased *= count / max(count - 1, 1)
            else:  # an empty batch: no statistics, NaN as in torch
                means = unbiased = np.full(c, np.nan, flat.dtype)
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(Tensor(means * momentum))
                if running_var is not None:
                    running_var.mul_(1 - momentum).add_(Tensor(unbiased * momentum))
        return group_norm(x, c, weight, bias, eps)
    if running_mean is None or running_var is None:
        raise InputError("instance_norm: use_input_stats=False needs running_mean and running_var")
    shape = (1, c) + (1,) * (x.ndim - 2)
    out = (x - running_mean.reshape(shape)) / (running_var.reshape(shape) + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


class _InstanceNorm(Module):
    _optional_state = ("num_batches_tracked",)  # states saved before it was there load
    _dims = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "_InstanceNorm")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.ones(num_features, dtype))
            self.bias = Parameter(np.zeros(num_features, dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype)))
            # in the state dict as in torch's (which never increments it for instance norm)
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != self._dims + 2:
            raise ShapeError(
                f"{type(self).__name__}: expected a {self._dims + 2}-D input (N, C, *), got "
                f"{x.shape}"
            )
        use_input = self.training or not self.track_running_stats
        return instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_input,
            self.momentum, self.eps,
        )  # fmt: skip


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over (N, C, L); ``affine`` and ``track_running_stats`` default
    to False, as torch's."""

    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over (N, C, H, W); see :class:`InstanceNorm1d`."""

    _dims = 2


def prelu(input: Any, weight: Tensor) -> Tensor:
    """``x`` where ``x >= 0``, else ``weight * x`` with one slope per channel (dim 1), or one
    shared slope."""
    x = as_tensor_arg(input, "prelu input")
    if weight.ndim != 1 or (weight.shape[0] != 1 and (x.ndim < 2 or weight.shape[0] != x.shape[1])):
        raise ShapeError(
            f"prelu: weight of shape {weight.shape} needs one slope or one per channel of the "
            f"input of shape {x.shape}"
        )
    slope = weight.reshape((1, -1) + (1,) * (x.ndim - 2)) if weight.shape[0] != 1 else weight[0]
    return where(x.data >= 0, x, x * slope)


class PReLU(Module):
    """Leaky ReLU with learned slopes (``num_parameters`` 1 or the channel count, ``init``
    0.25)."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, dtype: Any = None, device: Any = None
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "PReLU")
        self.num_parameters = num_parameters
        self.weight = Parameter(np.full(num_parameters, init, dtype))

    def forward(self, x: Tensor) -> Tensor:
        return prelu(x, self.weight)


class CosineSimilarity(Module):
    """:func:`tadiff.nn.functional.cosine_similarity` as a module."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """:func:`tadiff.nn.functional.pairwise_distance` as a module."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
