"""Pooling: ``avg_pool1d/2d`` (index-notation definitions, like the convolutions) and
``max_pool1d/2d`` (a gather of each window's maximum), with the ``AvgPool*``/``MaxPool*`` layers.

Example:
    >>> import tadiff as td
    >>> MaxPool2d(2)(td.randn(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

import numpy as np

from tadiff.autograd.graph import record
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn._args import as_tensor_arg, empty_batch, int_tuple, with_batch
from tadiff.nn.conv import pad
from tadiff.nn.module import Module
from tadiff.ops._common import needs_grad
from tadiff.ops.derivatives import MaxPoolTiledBackward0
from tadiff.ops.fast_loops import loops_apply

__all__ = [
    "AvgPool1d",
    "AvgPool2d",
    "MaxPool1d",
    "MaxPool2d",
    "avg_pool1d",
    "avg_pool2d",
    "max_pool1d",
    "max_pool2d",
]

_SPATIAL = ("i", "j")
_WINDOW = ("p", "q")


@cache
def _window_sum(kernel: tuple[int, ...], stride: tuple[int, ...]):
    """``y[b, c, i, j] = sum[p=0:K, q=0:L](x[b, c, S*i + p, T*j + q])`` for this geometry."""
    from tadiff.index import define

    dims = len(kernel)
    out = ", ".join(_SPATIAL[:dims])
    ranges = ", ".join(f"{w}=0:{k}" for w, k in zip(_WINDOW, kernel, strict=False))
    reads = ", ".join(f"{s}*{i} + {w}" for s, i, w in zip(stride, _SPATIAL, _WINDOW, strict=False))
    return define(f"y[b, c, {out}] = sum[{ranges}](x[b, c, {reads}])")


def _prepare(
    dims: int, x: Any, kernel_size: Any, stride: Any, padding: Any, fill: float, where: str
) -> tuple[Tensor, bool, tuple[int, ...], tuple[int, ...]]:
    """Checked, batched and padded input; whether a batch axis was added; kernel; stride."""
    x = as_tensor_arg(x, f"{where} input")
    if x.data.dtype.kind != "f":
        raise DTypeError(f"{where}: input dtype {x.data.dtype}; expected a floating dtype")
    x, batched = with_batch(x, dims, where)
    kernel = int_tuple(kernel_size, dims, "kernel_size", where)
    stride = kernel if stride is None else int_tuple(stride, dims, "stride", where)
    padding = int_tuple(padding, dims, "padding", where)
    if min(kernel + stride) < 1 or min(padding) < 0:
        raise InputError(
            f"{where}: kernel_size {kernel} and stride {stride} must be >= 1, padding {padding} "
            ">= 0"
        )
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise InputError(
            f"{where}: padding {padding} must be at most half the kernel size {kernel}"
        )
    if any(padding):
        x = pad(x, [w for p in reversed(padding) for w in (p, p)], value=fill)
    if any(k > n for k, n in zip(kernel, x.data.shape[2:], strict=True)):
        raise ShapeError(
            f"{where}: the (padded) input's spatial size {x.data.shape[2:]} is smaller than the "
            f"kernel {kernel}"
        )
    return x, batched, kernel, stride


def _avg_pool(dims, x, kernel_size, stride, padding) -> Tensor:
    where = f"avg_pool{dims}d"
    x, batched, kernel, stride = _prepare(dims, x, kernel_size, stride, padding, 0.0, where)
    if not x.data.shape[0]:
        return _empty(x, kernel, stride)
    y = _window_sum(kernel, stride)(x=x) * (1.0 / math.prod(kernel))
    return y if batched else y.squeeze(0)


def _empty(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...]) -> Tensor:
    """A pooling's result on an empty batch (only a batched input can be empty there)."""
    out = tuple((n - k) // s + 1 for n, k, s in zip(x.data.shape[2:], kernel, stride, strict=True))
    return empty_batch((0, x.data.shape[1], *out), x.data.dtype, x)


def _max_pool(dims, x, kernel_size, stride, padding) -> Tensor:
    where = f"max_pool{dims}d"
    x, batched, kernel, stride = _prepare(dims, x, kernel_size, stride, padding, -np.inf, where)
    data = x.data
    if not data.shape[0]:
        return _empty(x, kernel, stride)
    if stride == kernel and all(n % k == 0 for n, k in zip(data.shape[2:], kernel, strict=True)):
        y = _tiled_max_pool(x, kernel)
        return y if batched else y.squeeze(0)
    windows = np.lib.stride_tricks.sliding_window_view(data, kernel, axis=tuple(range(2, 2 + dims)))
    windows = windows[(slice(None), slice(None), *(slice(None, None, s) for s in stride))]
    flat = windows.reshape(*windows.shape[: 2 + dims], -1)
    best = flat.argmax(axis=-1)  # first maximum in the window, as torch
    # the flat position of each maximum in x: window origin plus the offset inside the window
    offsets = np.unravel_index(best, kernel)
    grids = np.indices(best.shape, sparse=True)
    index = [grids[0], grids[1]]
    for d in range(dims):
        index.append(grids[2 + d] * stride[d] + offsets[d])
    y = x[tuple(index)]
    return y if batched else y.squeeze(0)


def _tiled_max_pool(x: Tensor, kernel: tuple[int, ...]) -> Tensor:
    """Max pooling whose windows tile ``x`` (stride = kernel, sizes divisible), over views of
    ``x`` as ``(n, c, out1, k1, out2, k2, ...)``: one element-wise maximum per position inside
    the window (NumPy's reduction over the short window axes of such a view is several times
    slower), no copy of the windows. The gradient goes to each window's first maximum
    (row-major inside the window, as torch; the first NaN where there is one), written at its
    flat position in ``x`` (each position at most once: one assignment, no scatter-add).

    With Numba installed, 1-d and 2-d pooling of C-contiguous float32/float64 inputs of at
    least ``FAST_LOOP_MIN_SIZE`` values run as one compiled loop (:func:`_compiled_max_pool`)."""
    data = x.data
    compiled = _compiled_max_pool(data, kernel)
    if compiled is not None:
        best, first = compiled
        if not needs_grad(x):
            return _make(best)
        return record(MaxPoolTiledBackward0, best, (x,), (first,), (data.shape,))
    tiled = (*data.shape[:2], *(v for n, k in zip(data.shape[2:], kernel, strict=True)
                                 for v in (n // k, k)))  # fmt: skip
    windows = data.reshape(tiled)
    positions = [(slice(None), slice(None), *(v for o in offset for v in (slice(None), o)))
                 for offset in np.ndindex(*kernel)]  # fmt: skip
    best = windows[positions[0]].copy()
    for at in positions[1:]:
        np.maximum(best, windows[at], out=best)
    if not needs_grad(x):
        return _make(best)
    # a comparison of the whole input with the repeated maxima would find them in one pass,
    # but after a ReLU most windows tie at zero, and the pass for the first of each costs more
    first = _first_maxima(windows, best, positions, _window_offsets(tiled))
    first += _window_origins(tiled)
    return record(MaxPoolTiledBackward0, best, (x,), (first,), (data.shape,))


def _compiled_max_pool(
    data: np.ndarray, kernel: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each tiling window's maximum and the flat position in ``data`` of its first maximum, both
    of the output's shape, through one compiled loop (``tadiff.nn._pooling_numba``); None where
    NumPy's passes run: Numba missing, a 3-d pooling, fewer than ``FAST_LOOP_MIN_SIZE`` values,
    a dtype other than float32/float64 or an input that is not C-contiguous. For the 2 x 2
    pooling of 32 x 8 images of 16 x 16 (float64, maxima and positions), NumPy's passes take
    3.4x the loop's time, and so does torch's ``max_pool2d`` (``benchmarks/fast_loops.py``)."""
    if len(kernel) > 2 or not data.size or not loops_apply(data):
        return None
    from tadiff.nn import _pooling_numba

    out_shape = (*data.shape[:2], *(n // k for n, k in zip(data.shape[2:], kernel, strict=True)))
    best = np.empty(out_shape, data.dtype)
    first = np.empty(out_shape, np.int64)
    kh, kw = kernel if len(kernel) == 2 else (1, kernel[0])
    flat = (data.reshape(-1), out_shape[-1], best.reshape(-1), first.reshape(-1))
    if (kh, kw) == (2, 2):
        _pooling_numba.tiled_max_2x2(*flat)
    else:
        _pooling_numba.tiled_max(flat[0], kh, kw, *flat[1:])
    return best, first


def _first_maxima(
    windows: np.ndarray, best: np.ndarray, positions: list, offsets: list[int]
) -> np.ndarray:
    """Per window (``best``'s shape), the flat offset in ``x`` from the window's origin to its
    first maximum, row-major inside the window, as torch (the first NaN where there is one).
    ``offsets`` holds each window position's offset."""
    nan = bool(np.isnan(best).any())  # NaN is the maximum of its window, at its first position
    which = np.zeros(best.shape, dtype=np.intp)
    taken = None
    for at, offset in zip(positions, offsets, strict=True):
        here = windows[at] == best
        if nan:
            here |= np.isnan(windows[at])
        if taken is None:  # the first position: its offset is 0
            taken = here
            continue
        np.greater(here, taken, out=here)  # a maximum not found at an earlier position
        which += np.multiply(here, offset, dtype=np.intp)
        taken |= here
    return which


@lru_cache(maxsize=64)
def _window_offsets(tiled: tuple[int, ...]) -> list[int]:
    """The flat offset in ``x`` of each position inside a window (row-major), for ``x`` seen as
    ``tiled = (n, c, out1, k1, out2, k2, ...)``."""
    strides = _element_strides(tiled)
    return [int(np.dot(offset, strides[3::2])) for offset in np.ndindex(*tiled[3::2])]


@lru_cache(maxsize=64)
def _window_origins(tiled: tuple[int, ...]) -> np.ndarray:
    """The flat index in ``x`` of each window's first element, shape ``(n, c, out1, out2, ...)``
    (read-only: cached per shape)."""
    strides = _element_strides(tiled)
    outer = [a for a in range(len(tiled)) if a < 3 or a % 2 == 0]
    origins = sum(np.ix_(*(np.arange(tiled[a]) * strides[a] for a in outer)))
    origins.flags.writeable = False
    return origins


def _element_strides(shape: tuple[int, ...]) -> list[int]:
    """Element strides of a C-contiguous array of ``shape``."""
    return [math.prod(shape[d + 1 :]) for d in range(len(shape))]


def avg_pool1d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> Tensor:
    """Mean over windows of the last dimension, like ``torch.nn.functional.avg_pool1d``.

    ``x``: ``(N, C, L)`` or ``(C, L)``; ``stride`` defaults to ``kernel_size``; zero padding
    counts in the mean (torch's ``count_include_pad=True``).

    Example:
        >>> import tadiff as td
        >>> avg_pool1d(td.arange(6.0).reshape(1, 1, 6), 2).tolist()
        [[[0.5, 2.5, 4.5]]]
    """
    return _avg_pool(1, x, kernel_size, stride, padding)


def avg_pool2d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> Tensor:
    """Mean over windows of the last two dimensions, like ``torch.nn.functional.avg_pool2d``.

    ``x``: ``(N, C, H, W)`` or ``(C, H, W)``; the gradient is derived from the index-notation
    window sum. Zero padding counts in the mean (torch's default).

    Example:
        >>> import tadiff as td
        >>> avg_pool2d(td.ones(1, 2, 4, 4), 2).shape
        (1, 2, 2, 2)
    """
    return _avg_pool(2, x, kernel_size, stride, padding)


def max_pool1d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> Tensor:
    """Maximum over windows of the last dimension, like ``torch.nn.functional.max_pool1d``.

    The gradient goes to the first maximum of each window (as torch); windows that overlap add
    their gradients. Padding is ``-inf``.

    Example:
        >>> import tadiff as td
        >>> max_pool1d(td.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    return _max_pool(1, x, kernel_size, stride, padding)


def max_pool2d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> Tensor:
    """Maximum over windows of the last two dimensions, like ``torch.nn.functional.max_pool2d``.

    Example:
        >>> import tadiff as td
        >>> max_pool2d(td.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool(2, x, kernel_size, stride, padding)


class _Pool(Module):
    _dims = 0
    _fn: Any = None

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
    ):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = int_tuple(kernel_size, self._dims, "kernel_size", name)
        self.stride = (
            self.kernel_size if stride is None else int_tuple(stride, self._dims, "stride", name)
        )
        self.padding = int_tuple(padding, self._dims, "padding", name)

    def forward(self, x: Tensor) -> Tensor:
        return type(self)._fn(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_Pool):
    """Average pooling over ``(N, C, L)``; see :func:`avg_pool1d`."""

    _dims, _fn = 1, staticmethod(avg_pool1d)


class AvgPool2d(_Pool):
    """Average pooling over ``(N, C, H, W)``; see :func:`avg_pool2d`."""

    _dims, _fn = 2, staticmethod(avg_pool2d)


class MaxPool1d(_Pool):
    """Max pooling over ``(N, C, L)``; see :func:`max_pool1d`."""

    _dims, _fn = 1, staticmethod(max_pool1d)


class MaxPool2d(_Pool):
    """Max pooling over ``(N, C, H, W)``; see :func:`max_pool2d`.

    Example:
        >>> import tadiff as td
        >>> MaxPool2d(3, stride=2, padding=1)(td.randn(2, 4, 9, 9)).shape
        (2, 4, 5, 5)
    """

    _dims, _fn = 2, staticmethod(max_pool2d)
