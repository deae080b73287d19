"""Convolutions whose gradients are derived symbolically: ``conv1d``/``conv2d``, ``pad``, and the
``Conv1d``/``Conv2d`` layers.

A convolution here is an index-notation definition (``tadiff.index``) such as::

    y[b, o, i, j] = sum[c, p, q](x[b, c, 2*i + p, 2*j + q] * w[o, c, p, q])     # stride 2

built once per (dimensions, stride, dilation). Its input and weight gradients are derived from
that text — exact sum ranges, no scatter — and all three run as compiled, cached kernels (see
``docs/index-notation.md``, "Backends and performance"); they are differentiable again. Padding
is a separate recorded op (:func:`pad`), the bias an ordinary broadcast add.

Example:
    >>> import tadiff as td
    >>> layer = Conv2d(3, 8, kernel_size=3, padding=1)
    >>> layer(td.randn(2, 3, 16, 16)).shape
    (2, 8, 16, 16)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from tadiff._array import pad_constant
from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.graph import record
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import init
from tadiff.nn._args import as_tensor_arg, empty_batch, int_tuple, with_batch
from tadiff.nn.module import Module, Parameter
from tadiff.ops._common import needs_grad
from tadiff.ops.derivatives import ConstantPadNdBackward0

__all__ = ["Conv1d", "Conv2d", "conv1d", "conv2d", "pad"]

_SPATIAL_NAMES = ("i", "j")
_KERNEL_NAMES = ("p", "q")


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad the last dimensions with a constant, like ``torch.nn.functional.pad``.

    Args:
        x: any tensor.
        pad: ``(left, right)`` for the last dimension, then ``(left, right)`` for the one
            before, and so on (torch's order); non-negative ints.
        mode: only ``"constant"`` here; ``tadiff.nn.functional.pad`` also takes
            ``"reflect"``, ``"replicate"`` and ``"circular"``.
        value: the fill value.

    Returns:
        ``x`` with each padded dimension longer by ``left + right``; the gradient is the
        gradient's interior slice (node ``ConstantPadNdBackward0``).

    Example:
        >>> import tadiff as td
        >>> pad(td.ones(2, 3), (1, 2)).shape
        (2, 6)
    """
    x = as_tensor_arg(x, "pad input")
    widths = tuple(pad)
    if mode != "constant":
        raise InputError(f"pad: mode={mode!r} is not supported; only 'constant'")
    if len(widths) % 2 or len(widths) // 2 > x.data.ndim:
        raise ShapeError(
            f"pad: {widths} must hold (left, right) pairs for at most {x.data.ndim} dimensions "
            f"of the input of shape {x.data.shape}"
        )
    if not all(isinstance(w, (int, np.integer)) and w >= 0 for w in widths):
        raise InputError(f"pad: widths {widths} must be non-negative ints")
    dims = len(widths) // 2
    pairs = [(0, 0)] * (x.data.ndim - dims) + [
        (int(widths[2 * k]), int(widths[2 * k + 1])) for k in reversed(range(dims))
    ]
    data = pad_constant(x.data, pairs, value)
    if not needs_grad(x):
        return _make(data)
    interior = tuple(slice(lo, lo + n) for (lo, _), n in zip(pairs, x.data.shape, strict=True))
    return record(ConstantPadNdBackward0, data, (x,), (), (interior,))


@cache
def _definition(dims: int, stride: tuple[int, ...], dilation: tuple[int, ...], bias: bool = False):
    """The index-notation convolution (defined once per geometry; derivations are cached).

    With ``bias`` the bias is part of the definition, ``y = bias[o] + sum[...](...)``: the
    kernels start each output element from it instead of adding it in a pass of its own, and
    its gradient is one more derivative of the same backward node."""
    from tadiff.index import define

    out = ", ".join(_SPATIAL_NAMES[:dims])
    ker = ", ".join(_KERNEL_NAMES[:dims])
    reads = ", ".join(
        f"{s}*{i} + {d}*{k}"
        for s, d, i, k in zip(stride, dilation, _SPATIAL_NAMES, _KERNEL_NAMES, strict=False)
    )
    start = "bias[o] + " if bias else ""
    return define(f"y[b, o, {out}] = {start}sum[c, {ker}](x[b, c, {reads}] * w[o, c, {ker}])")


def checked_operands(
    where: str, dims: int, x: Any, weight: Any, groups: int, transposed: bool
) -> tuple[Tensor, Tensor, bool]:
    """The input (with a batch dim added if it had none) and weight of a convolution, checked:
    ``groups == 1``, a ``dims + 2``-dimensional weight whose input-channel dim (1, or 0 for a
    transposed convolution) matches the input's channels, one floating dtype. Returns
    ``(x, weight, batched)``."""
    x, weight = as_tensor_arg(x, f"{where} input"), as_tensor_arg(weight, f"{where} weight")
    if groups != 1:
        raise InputError(f"{where}: groups={groups} is not supported; only groups=1")
    layout = (
        "(in_channels, out_channels, *kernel)"
        if transposed
        else "(out_channels, in_channels, *kernel)"
    )
    if weight.ndim != dims + 2:
        raise ShapeError(
            f"{where}: weight of shape {weight.shape}; expected {dims + 2} dims {layout}"
        )
    x, batched = with_batch(x, dims, where)
    channels = weight.shape[0 if transposed else 1]
    if x.shape[1] != channels:
        raise ShapeError(
            f"{where}: input has {x.shape[1]} channels (shape {x.shape}) but the weight expects "
            f"{channels} (shape {weight.shape})"
        )
    if x.dtype != weight.dtype or x.dtype.kind != "f":
        raise DTypeError(
            f"{where}: input has dtype {x.dtype} and weight {weight.dtype}; expected one "
            "floating dtype"
        )
    return x, weight, batched


def _conv(
    dims: int,
    x: Any,
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> Tensor:
    where = f"conv{dims}d"
    x, weight, batched = checked_operands(where, dims, x, weight, groups, transposed=False)
    stride = int_tuple(stride, dims, "stride", where)
    dilation = int_tuple(dilation, dims, "dilation", where)
    if min(stride + dilation) < 1:
        raise InputError(f"{where}: stride {stride} and dilation {dilation} must be >= 1")
    kernel = weight.data.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            widths = [(0, 0)] * dims
        elif padding == "same":
            if stride != (1,) * dims:
                raise InputError(f"{where}: padding='same' needs stride 1, got {stride}")
            total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
            widths = [(t // 2, t - t // 2) for t in total]
        else:
            raise InputError(
                f"{where}: padding={padding!r}; expected an int, ints, 'valid' or 'same'"
            )
    else:
        widths = [(p, p) for p in int_tuple(padding, dims, "padding", where)]
        if min(p for p, _ in widths) < 0:
            raise InputError(f"{where}: padding {padding!r} must be >= 0")
    if any(lo or hi for lo, hi in widths):
        x = pad(x, [w for lo_hi in reversed(widths) for w in lo_hi])
    spatial = x.data.shape[2:]
    reach = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    if any(r > size for r, size in zip(reach, spatial, strict=True)):
        raise ShapeError(
            f"{where}: the (padded) input's spatial size {spatial} is smaller than the dilated "
            f"kernel {reach}"
        )
    if bias is not None:
        bias = as_tensor_arg(bias, f"{where} bias")
        if bias.data.shape != (weight.data.shape[0],):
            raise ShapeError(
                f"{where}: bias of shape {bias.data.shape}; expected ({weight.data.shape[0]},)"
            )
        if bias.dtype != x.dtype:
            raise DTypeError(
                f"{where}: bias has dtype {bias.dtype} and input {x.dtype}; expected one dtype"
            )
    if not x.data.shape[0]:
        out = tuple((n - r) // s + 1 for n, r, s in zip(spatial, reach, stride, strict=True))
        y = empty_batch((0, weight.data.shape[0], *out), x.data.dtype, x, weight)
        if bias is not None:
            y = y + bias.reshape(-1, *([1] * dims))
    elif bias is None:
        y = _definition(dims, stride, dilation)(x=x, w=weight)
    else:
        y = _definition(dims, stride, dilation, True)(x=x, w=weight, bias=bias)
    return y if batched else y.squeeze(0)


def conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] | str = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """1-d cross-correlation, like ``torch.nn.functional.conv1d`` (``groups=1`` only).

    Args:
        x: ``(N, C_in, L)`` or ``(C_in, L)``.
        weight: ``(C_out, C_in, K)``.
        bias: ``(C_out,)`` or None.
        stride, dilation: ints >= 1.
        padding: zeros on both sides, or ``"valid"`` (none) / ``"same"`` (stride 1).

    Returns:
        ``(N, C_out, L_out)`` with ``L_out = (L + 2 padding - dilation (K - 1) - 1) // stride + 1``.

    Example:
        >>> import tadiff as td
        >>> conv1d(td.ones(1, 2, 5), td.ones(3, 2, 3)).tolist()[0][0]
        [6.0, 6.0, 6.0]
    """
    return _conv(1, x, weight, bias, stride, padding, dilation, groups)


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] | str = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """2-d cross-correlation, like ``torch.nn.functional.conv2d`` (``groups=1`` only).

    Args:
        x: ``(N, C_in, H, W)`` or ``(C_in, H, W)``.
        weight: ``(C_out, C_in, K_h, K_w)``.
        bias: ``(C_out,)`` or None.
        stride, padding, dilation: an int or one per spatial dimension; ``padding`` may also be
            ``"valid"`` or ``"same"`` (stride 1).

    Returns:
        ``(N, C_out, H_out, W_out)``, sizes as in torch.

    Example:
        >>> import tadiff as td
        >>> conv2d(td.ones(1, 1, 4, 4), td.ones(2, 1, 3, 3), stride=1, padding=1).shape
        (1, 2, 4, 4)
    """
    return _conv(2, x, weight, bias, stride, padding, dilation, groups)


class _ConvNd(Module):
    """Shared parameters and initialisation of ``Conv1d``/``Conv2d`` (torch's scheme)."""

    _dims = 0

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] | str = 0,
        dilation: int | Sequence[int] = 1,
        bias: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "_ConvNd")
        name = type(self).__name__
        for label, size in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(size, int) or size < 1:
                raise InputError(f"{name}: {label}={size!r}; expected a positive int")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = int_tuple(kernel_size, self._dims, "kernel_size", name)
        if min(self.kernel_size) < 1:
            raise InputError(f"{name}: kernel_size={kernel_size!r} must be >= 1")
        self.stride = int_tuple(stride, self._dims, "stride", name)
        self.dilation = int_tuple(dilation, self._dims, "dilation", name)
        self.padding = (
            padding if isinstance(padding, str) else int_tuple(padding, self._dims, "padding", name)
        )
        self.weight = Parameter(
            np.empty((out_channels, in_channels, *self.kernel_size), dtype=dtype)
        )
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw fresh weights and bias: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` as in torch."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_channels * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return _conv(
            self._dims, x, self.weight, self.bias, self.stride, self.padding, self.dilation, 1
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
            f"bias={self.bias is not None}"
        )


class Conv1d(_ConvNd):
    """1-d convolution layer over ``(N, C_in, L)``; see :func:`conv1d`.

    Example:
        >>> import tadiff as td
        >>> Conv1d(4, 6, kernel_size=3, stride=2)(td.randn(2, 4, 11)).shape
        (2, 6, 5)
    """

    _dims = 1


class Conv2d(_ConvNd):
    """2-d convolution layer over ``(N, C_in, H, W)``; see :func:`conv2d`.

    Args:
        in_channels, out_channels: channel counts.
        kernel_size, stride, padding, dilation: an int or a pair; ``padding`` also
            ``"valid"``/``"same"``.
        bias: whether to add a learned per-channel bias.
        dtype: parameter dtype (float32 by default).

    Example:
        >>> import tadiff as td
        >>> Conv2d(3, 4, kernel_size=(3, 5), padding="same")(td.randn(1, 3, 8, 8)).shape
        (1, 4, 8, 8)
    """

    _dims = 2
