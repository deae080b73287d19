"""Resampling with torch's semantics: ``interpolate`` (modes ``nearest``, ``nearest-exact``,
``linear``, ``bilinear``; ``size`` or ``scale_factor``; ``align_corners``), ``Upsample``,
``pixel_shuffle``/``pixel_unshuffle`` and their modules.

Interpolation along each spatial dim is a gather of source indices (nearest) or a weighted sum
of two gathers (linear), so gradients scatter back through the engine's indexing; the index
and weight tables follow torch's coordinate rules exactly (``scale_factor`` given: the source
coordinate uses ``1 / scale_factor``, as torch does unless ``recompute_scale_factor``).

Example:
    >>> import tadiff as td
    >>> interpolate(td.arange(4.0).reshape(1, 1, 4), scale_factor=2, mode="linear").tolist()
    [[[0.0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.0]]]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.module import Module
from tadiff.ops.indexing import getitem
from tadiff.ops.shape import permute, reshape

__all__ = [
    "PixelShuffle",
    "PixelUnshuffle",
    "Upsample",
    "interpolate",
    "pixel_shuffle",
    "pixel_unshuffle",
]

_MODES = {"nearest": 1, "nearest-exact": 1, "linear": 1, "bilinear": 2}


def _targets(spatial: tuple[int, ...], size: Any, scale_factor: Any, where: str):
    dims = len(spatial)
    if (size is None) == (scale_factor is None):
        raise InputError(f"{where}: give exactly one of size and scale_factor")
    if size is not None:
        sizes = (size,) * dims if isinstance(size, (int, np.integer)) else tuple(size)
        if len(sizes) != dims or min(sizes) < 1:
            raise InputError(f"{where}: size {size!r} needs {dims} positive entries")
        return tuple(int(v) for v in sizes), (None,) * dims
    scales = (
        (scale_factor,) * dims if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
    )
    if len(scales) != dims or min(scales) <= 0:
        raise InputError(f"{where}: scale_factor {scale_factor!r} needs {dims} positive entries")
    return tuple(math.floor(n * s) for n, s in zip(spatial, scales, strict=True)), scales


def _nearest(n_in: int, n_out: int, scale: float | None, exact: bool) -> np.ndarray:
    ratio = n_in / n_out if scale is None else 1.0 / scale
    pos = np.arange(n_out, dtype=np.float64)
    src = np.floor((pos + 0.5) * ratio) if exact else np.floor(pos * ratio)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear(n_in: int, n_out: int, scale: float | None, align: bool):
    """Left indices, right indices and right weights of linear interpolation (torch's rules)."""
    pos = np.arange(n_out, dtype=np.float64)
    if align:
        src = pos * ((n_in - 1) / (n_out - 1)) if n_out > 1 else pos * 0
    else:
        ratio = n_in / n_out if scale is None else 1.0 / scale
        src = np.maximum((pos + 0.5) * ratio - 0.5, 0.0)
    left = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    right = np.minimum(left + 1, n_in - 1)
    return left, right, src - left


def interpolate(
    input: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dims of ``input`` (N, C, *spatial) like
    ``torch.nn.functional.interpolate``.

    Args:
        input: (N, C, L) for ``linear``/``nearest``, (N, C, H, W) for ``bilinear``/``nearest``.
        size, scale_factor: the output size, or the factor (exactly one).
        mode: ``"nearest"``, ``"nearest-exact"``, ``"linear"`` or ``"bilinear"``.
        align_corners: for the linear modes (default False), as torch.
        recompute_scale_factor: True computes source coordinates from the output size.
        antialias: must be False.

    Returns:
        (N, C, *size).
    """
    where = "interpolate"
    x = as_tensor_arg(input, f"{where} input")
    if mode not in _MODES:
        raise InputError(
            f"{where}: mode {mode!r} is not supported; expected one of {sorted(_MODES)}"
        )
    if antialias:
        raise InputError(f"{where}: antialias=True is not supported")
    if x.ndim < 3:
        raise ShapeError(f"{where}: input must be (N, C, *spatial), got shape {x.shape}")
    linear = mode in ("linear", "bilinear")
    if linear and x.ndim - 2 != _MODES[mode]:
        raise ShapeError(
            f"{where}: mode={mode!r} expects {_MODES[mode] + 2}-D input, got {x.shape}"
        )
    if align_corners is not None and not linear:
        raise InputError(f"{where}: align_corners applies to the linear modes only")
    spatial = x.shape[2:]
    out_sizes, scales = _targets(spatial, size, scale_factor, where)
    if recompute_scale_factor:
        scales = (None,) * len(spatial)
    y = x
    for ax, (n_in, n_out, scale) in enumerate(
        zip(spatial, out_sizes, scales, strict=True), start=2
    ):
        lead = (slice(None),) * ax
        if not linear:
            y = getitem(y, (*lead, _nearest(n_in, n_out, scale, mode == "nearest-exact")))
            continue
        left, right, weight = _linear(n_in, n_out, scale, bool(align_corners))
        shape = (n_out,) + (1,) * (x.ndim - 1 - ax)
        w = Tensor(weight.astype(x.dtype).reshape(shape))
        y = getitem(y, (*lead, left)) * (1 - w) + getitem(y, (*lead, right)) * w
    return y


class Upsample(Module):
    """``interpolate`` as a module: ``Upsample(size=None, scale_factor=None, mode="nearest",
    align_corners=None)``."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return interpolate(
            x, self.size, self.scale_factor, self.mode, self.align_corners,
            self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"size={self.size}, scale_factor={self.scale_factor}, mode={self.mode!r}"


def pixel_shuffle(x: Any, upscale_factor: int) -> Tensor:
    """(…, C·r², H, W) -> (…, C, H·r, W·r), as torch's ``pixel_shuffle``."""
    x = as_tensor_arg(x, "pixel_shuffle input")
    r = int(upscale_factor)
    if x.ndim < 3 or r < 1 or x.shape[-3] % (r * r):
        raise ShapeError(
            f"pixel_shuffle: input of shape {x.shape} needs a channel count divisible by "
            f"upscale_factor² = {r * r}"
        )
    *lead, c, h, w = x.shape
    y = reshape(x, (*lead, c // (r * r), r, r, h, w))
    n = len(lead)
    y = permute(y, *range(n), n, n + 3, n + 1, n + 4, n + 2)
    return reshape(y, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(x: Any, downscale_factor: int) -> Tensor:
    """(…, C, H·r, W·r) -> (…, C·r², H, W), the inverse of :func:`pixel_shuffle`."""
    x = as_tensor_arg(x, "pixel_unshuffle input")
    r = int(downscale_factor)
    if x.ndim < 3 or r < 1 or x.shape[-2] % r or x.shape[-1] % r:
        raise ShapeError(
            f"pixel_unshuffle: input of shape {x.shape} needs spatial sizes divisible by "
            f"downscale_factor = {r}"
        )
    *lead, c, h, w = x.shape
    y = reshape(x, (*lead, c, h // r, r, w // r, r))
    n = len(lead)
    y = permute(y, *range(n), n, n + 2, n + 4, n + 1, n + 3)
    return reshape(y, (*lead, c * r * r, h // r, w // r))


class PixelShuffle(Module):
    """:func:`pixel_shuffle` as a module."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return pixel_shuffle(x, self.upscale_factor)


class PixelUnshuffle(Module):
    """:func:`pixel_unshuffle` as a module."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return pixel_unshuffle(x, self.downscale_factor)
