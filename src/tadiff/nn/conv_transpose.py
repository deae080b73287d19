"""Transposed convolutions, derived symbolically: ``conv_transpose1d``, ``conv_transpose2d``,
``ConvTranspose1d``, ``ConvTranspose2d`` (torch's signatures, ``groups=1``).

A transposed convolution is the input gradient of a convolution. Here it *is* that gradient:
the index-notation convolution of :mod:`tadiff.nn.conv` is differentiated with respect to its
input (``dx[b, c, p, q] = sum[o, h, v](dy[b, o, h, v] * w[o, c, p - s*h, q - s*v])`` with the
exact windows solved over the integers), and the derived function is called with the layer's
input in the place of ``dy``. Its own gradients — with respect to the input (a convolution
again) and to the weight — are derived from it in turn, and compiled like any definition.
``padding`` crops the full output, ``output_padding`` extends it with zeros (and the bias) at
the end, as in torch.

Example:
    >>> import tadiff as td
    >>> y = conv_transpose2d(td.ones(1, 2, 3, 3), td.ones(2, 4, 3, 3), stride=2)
    >>> y.shape
    (1, 4, 7, 7)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn import init
from tadiff.nn._args import as_tensor_arg, empty_batch, int_tuple
from tadiff.nn.conv import _definition, checked_operands, pad
from tadiff.nn.module import Module, Parameter

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "conv_transpose1d", "conv_transpose2d"]


@cache
def _transposed(dims: int, stride: tuple[int, ...], dilation: tuple[int, ...]) -> Any:
    """``dx`` of the convolution with this geometry: a function of ``(x, w, dy)`` whose result
    has ``x``'s shape (``x`` itself is not read)."""
    return _definition(dims, stride, dilation).grad("x")


def _conv_transpose(
    dims: int,
    x: Any,
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
) -> Tensor:
    where = f"conv_transpose{dims}d"
    x, weight, batched = checked_operands(where, dims, x, weight, groups, transposed=True)
    stride = int_tuple(stride, dims, "stride", where)
    dilation = int_tuple(dilation, dims, "dilation", where)
    pads = int_tuple(padding, dims, "padding", where)
    extra = int_tuple(output_padding, dims, "output_padding", where)
    if min(stride + dilation) < 1 or min(pads + extra) < 0:
        raise InputError(
            f"{where}: stride {stride} and dilation {dilation} must be >= 1, padding {pads} "
            f"and output_padding {extra} >= 0"
        )
    for op, s, d in zip(extra, stride, dilation, strict=True):
        if op >= max(s, d):
            raise InputError(
                f"{where}: output_padding {extra} must be smaller than the stride or the "
                f"dilation ({stride}, {dilation})"
            )
    kernel = weight.shape[2:]
    # the size whose convolution has exactly x's size; output_padding adds zeros after it
    base = tuple(
        (n - 1) * s + d * (k - 1) + 1
        for n, s, d, k in zip(x.shape[2:], stride, dilation, kernel, strict=True)
    )
    full = tuple(b + op for b, op in zip(base, extra, strict=True))
    if any(f - 2 * p < 1 for f, p in zip(full, pads, strict=True)):
        raise ShapeError(f"{where}: padding {pads} leaves no output of the full size {full}")
    if x.shape[0]:
        shape_only = np.broadcast_to(np.zeros((), x.dtype), (x.shape[0], weight.shape[1], *base))
        y = _transposed(dims, stride, dilation)(x=shape_only, w=weight, dy=x)
    else:
        y = empty_batch((0, weight.shape[1], *base), x.dtype, x, weight)
    if any(extra):
        y = pad(y, [w for op in reversed(extra) for w in (0, op)])
    if any(pads):
        y = y[
            (slice(None), slice(None), *(slice(p, f - p) for p, f in zip(pads, full, strict=True)))
        ]
    if bias is not None:
        bias = as_tensor_arg(bias, f"{where} bias")
        if bias.shape != (weight.shape[1],):
            raise ShapeError(f"{where}: bias of shape {bias.shape}; expected ({weight.shape[1]},)")
        y = y + bias.reshape(-1, *([1] * dims))
    return y if batched else y.squeeze(0)


def conv_transpose1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    """Like ``torch.nn.functional.conv_transpose1d``: ``x`` (N, C_in, L), ``weight``
    (C_in, C_out, K) -> (N, C_out, L_out) with
    ``L_out = (L - 1) stride - 2 padding + dilation (K - 1) + output_padding + 1``."""
    return _conv_transpose(1, x, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    """Like ``torch.nn.functional.conv_transpose2d``: ``x`` (N, C_in, H, W), ``weight``
    (C_in, C_out, K_h, K_w); each output size as in :func:`conv_transpose1d`."""
    return _conv_transpose(2, x, weight, bias, stride, padding, output_padding, groups, dilation)


class _ConvTransposeNd(Module):
    """Parameters (``weight`` (C_in, C_out, *kernel), ``bias``) initialised like torch's."""

    _dims = 0

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        output_padding: int | Sequence[int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | Sequence[int] = 1,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "_ConvTransposeNd")
        name = type(self).__name__
        for label, size in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(size, int) or size < 1:
                raise InputError(f"{name}: {label}={size!r}; expected a positive int")
        if groups != 1:
            raise InputError(f"{name}: groups={groups} is not supported; only groups=1")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = int_tuple(kernel_size, self._dims, "kernel_size", name)
        self.stride = int_tuple(stride, self._dims, "stride", name)
        self.padding = int_tuple(padding, self._dims, "padding", name)
        self.output_padding = int_tuple(output_padding, self._dims, "output_padding", name)
        self.dilation = int_tuple(dilation, self._dims, "dilation", name)
        self.weight = Parameter(np.empty((in_channels, out_channels, *self.kernel_size), dtype))
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's scheme: ``kaiming_uniform_(a=√5)`` on the weight, whose fan-in is computed
        from its dim 1 (``out_channels``), and a bias in ``±1/√fan_in``."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.out_channels * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return _conv_transpose(
            self._dims, x, self.weight, self.bias, self.stride, self.padding,
            self.output_padding, 1, self.dilation,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, output_padding={self.output_padding}, "
            f"dilation={self.dilation}, bias={self.bias is not None}"
        )


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-d convolution layer over ``(N, C_in, L)``; see :func:`conv_transpose1d`."""

    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-d convolution layer over ``(N, C_in, H, W)``; see
    :func:`conv_transpose2d`.

    Example:
        >>> import tadiff as td
        >>> up = ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
        >>> up(td.randn(1, 4, 5, 5)).shape
        (1, 2, 10, 10)
    """

    _dims = 2
