"""Adaptive average pooling: ``adaptive_avg_pool1d``/``2d`` and their modules.

Output bin ``i`` of ``out`` bins over a length ``L`` averages the inputs
``floor(i L / out) .. ceil((i + 1) L / out) - 1`` (torch's bins; they overlap when ``out`` does
not divide ``L``). Pooling one axis is then a product with a constant ``(out, L)`` averaging
matrix, so the 2-d pool is ``A_h @ x @ A_w.T`` and the engine differentiates it like any matmul.

Example:
    >>> import tadiff as td
    >>> adaptive_avg_pool1d(td.tensor([[[1.0, 3.0, 5.0, 7.0]]]), 2)
    tensor([[[2., 6.]]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.module import Module


def _averaging_matrix(length: int, bins: int, dtype: Any) -> np.ndarray:
    """``(bins, length)``: row ``i`` holds ``1 / size`` over bin ``i``'s inputs."""
    matrix = np.zeros((bins, length), dtype=dtype)
    for i in range(bins):
        start = (i * length) // bins
        stop = -((-(i + 1) * length) // bins)  # ceil((i + 1) * length / bins)
        matrix[i, start:stop] = 1.0 / (stop - start)
    return matrix


def _sizes(output_size: Any, spatial: tuple[int, ...], where: str) -> tuple[int, ...]:
    n = len(spatial)
    sizes = (output_size,) * n if isinstance(output_size, (int, np.integer)) else output_size
    sizes = tuple(sizes) if isinstance(sizes, (tuple, list)) else None
    if sizes is None or len(sizes) != n:
        raise InputError(f"{where}: output_size={output_size!r}; expected an int or {n} ints")
    # None keeps that axis's input size (torch's convention)
    sizes = tuple(s if s is not None else length for s, length in zip(sizes, spatial, strict=True))
    if not all(isinstance(s, (int, np.integer)) and s > 0 for s in sizes):
        raise InputError(f"{where}: output_size={output_size!r}; expected positive sizes")
    return tuple(int(s) for s in sizes)


def _check_input(x: Tensor, dims: int, where: str) -> None:
    if x.ndim not in (dims + 1, dims + 2) or 0 in x.shape[-dims:]:
        raise ShapeError(
            f"{where}: input of shape {x.shape}; expected {dims + 1} or {dims + 2} dims "
            f"((N,) C, *spatial) with non-empty spatial dims"
        )


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to exactly ``output_size`` positions, whatever the input length.

    Args:
        input: shape ``(N, C, L)`` or ``(C, L)``.
        output_size: the output length (an int, or a 1-tuple).

    Returns:
        Shape ``(N, C, output_size)`` (or ``(C, output_size)``).

    Example:
        >>> import tadiff as td
        >>> adaptive_avg_pool1d(td.ones(2, 3, 7), 3).shape
        (2, 3, 3)
    """
    x = as_tensor_arg(input, "adaptive_avg_pool1d")
    _check_input(x, 1, "adaptive_avg_pool1d")
    (bins,) = _sizes(output_size, x.shape[-1:], "adaptive_avg_pool1d")
    if bins == x.shape[-1]:
        return x * 1.0  # a new tensor, as torch returns
    return x @ Tensor(_averaging_matrix(x.shape[-1], bins, x.dtype).T)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to exactly ``output_size = (H_out, W_out)`` positions.

    Args:
        input: shape ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: an int (square) or ``(H_out, W_out)``; a None entry keeps that input size.

    Returns:
        Shape ``(N, C, H_out, W_out)`` (or without ``N``).

    Example:
        >>> import tadiff as td
        >>> adaptive_avg_pool2d(td.ones(1, 2, 5, 6), (2, 3)).shape
        (1, 2, 2, 3)
    """
    x = as_tensor_arg(input, "adaptive_avg_pool2d")
    _check_input(x, 2, "adaptive_avg_pool2d")
    rows, cols = _sizes(output_size, x.shape[-2:], "adaptive_avg_pool2d")
    height, width = x.shape[-2:]
    if rows != height:
        x = Tensor(_averaging_matrix(height, rows, x.dtype)) @ x
    if cols != width:
        x = x @ Tensor(_averaging_matrix(width, cols, x.dtype).T)
    return x * 1.0 if (rows, cols) == (height, width) else x


class AdaptiveAvgPool1d(Module):
    """Adaptive average pooling to ``output_size`` positions (see :func:`adaptive_avg_pool1d`).

    Example:
        >>> import tadiff as td
        >>> AdaptiveAvgPool1d(1)(td.ones(2, 3, 5)).shape
        (2, 3, 1)
    """

    def __init__(self, output_size: Any):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(Module):
    """Adaptive average pooling to ``output_size`` (see :func:`adaptive_avg_pool2d`).

    Example:
        >>> import tadiff as td
        >>> AdaptiveAvgPool2d((1, 1))(td.ones(2, 3, 5, 4)).shape
        (2, 3, 1, 1)
    """

    def __init__(self, output_size: Any):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d"]
