"""Batch normalization: ``batch_norm`` and the ``BatchNorm1d``/``BatchNorm2d`` layers.

In training mode the batch's own mean and (biased) variance normalize it — one recorded node,
whose backward differentiates through the statistics as torch's fused kernel does (two sums over
the batch; twice differentiable) — and the running estimates move by
``momentum`` (with the unbiased variance, as torch; ``momentum=None`` keeps their cumulative
average). The layers count the training batches in the buffer ``num_batches_tracked``, as torch
does, so state dicts load in both directions. In evaluation mode the running estimates are
constants.

Example:
    >>> import tadiff as td
    >>> bn = BatchNorm2d(3)
    >>> y = bn(td.randn(4, 3, 5, 5))
    >>> bool(y.mean(dim=(0, 2, 3)).abs().max() < 1e-5), bn.running_var.shape
    (True, (3,))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.grad_mode import no_grad
from tadiff.autograd.graph import record
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg, empty_batch
from tadiff.nn.module import Module, Parameter
from tadiff.ops._common import needs_grad
from tadiff.ops._dual import channel_rows
from tadiff.ops.batchnorm_passes import training_forward, transform
from tadiff.ops.derivatives import NativeBatchNormBackward0

__all__ = ["BatchNorm1d", "BatchNorm2d", "batch_norm"]


def batch_norm(
    x: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel (dim 1) of ``x``, like ``torch.nn.functional.batch_norm``.

    Args:
        x: ``(N, C, *spatial)`` (``(N, C)`` included).
        running_mean, running_var: ``(C,)`` tensors updated in place when ``training``, used
            as the statistics otherwise; may be None when ``training``.
        weight, bias: ``(C,)`` affine parameters or None.
        training: use the batch's statistics (and update the running ones).
        momentum: weight of the new batch in the running estimates.
        eps: added to the variance.

    Returns:
        ``x`` normalized per channel, scaled and shifted.

    Example:
        >>> import tadiff as td
        >>> batch_norm(td.tensor([[1.0], [3.0]]), None, None, training=True).tolist()
        [[-0.99999...], [0.99999...]]
    """
    x = as_tensor_arg(x, "batch_norm input")
    if x.data.ndim < 2:
        raise ShapeError(f"batch_norm: input of shape {x.data.shape}; expected (N, C, *spatial)")
    channels = x.data.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):  # fmt: skip
        if t is not None and tuple(t.shape) != (channels,):
            raise ShapeError(
                f"batch_norm: {name} of shape {tuple(t.shape)}; expected ({channels},) for an "
                f"input with {channels} channels"
            )
    shape = (1, channels) + (1,) * (x.data.ndim - 2)
    dims = (0, *range(2, x.data.ndim))
    if training:
        count = x.data.size // max(channels, 1)
        if count == 0:  # an empty batch: an empty result, the running statistics kept (torch)
            affine = [t for t in (weight, bias) if t is not None]
            return empty_batch(x.data.shape, x.data.dtype, x, *affine)
        if count < 2:
            raise ShapeError(
                f"batch_norm: training needs more than one value per channel, got input of "
                f"shape {x.data.shape}"
            )
        out, mean, var, inv = training_forward(
            channel_rows(x.data),
            None if weight is None else weight.data,
            None if bias is None else bias.data,
            eps,
        )
        if running_mean is not None and running_var is not None:
            with no_grad():
                unbiased = var * (count / (count - 1))
                running_mean.data *= 1 - momentum
                running_mean.data += momentum * mean
                running_var.data *= 1 - momentum
                running_var.data += momentum * unbiased
        out = out.reshape(x.data.shape)
        if not needs_grad(x, *(t for t in (weight, bias) if t is not None)):
            return _make(out)
        # one node for normalization, scale and shift: its backward is two sums over the batch
        return record(
            NativeBatchNormBackward0,
            out,
            (x, weight, bias),
            (x, weight),
            (dims, shape, eps, mean.reshape(shape), inv.reshape(shape)),
        )
    else:
        if running_mean is None or running_var is None:
            raise InputError("batch_norm: evaluation mode needs running_mean and running_var")
        inv = (1.0 / np.sqrt(running_var.data + eps)).astype(x.data.dtype, copy=False)
        if not needs_grad(x, *(t for t in (weight, bias) if t is not None)):
            # constants only: (x - running_mean) * scale + shift per channel, in one pass
            dtype = x.data.dtype
            scale = inv if weight is None else inv * weight.data
            shift = np.zeros_like(scale) if bias is None else bias.data
            out = transform(
                channel_rows(x.data),
                running_mean.data.astype(dtype, copy=False),
                scale.astype(dtype, copy=False),
                shift.astype(dtype, copy=False),
            )
            return _make(out.reshape(x.data.shape))
        out = (x - Tensor(running_mean.data.reshape(shape))) * Tensor(inv.reshape(shape))
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


class _BatchNorm(Module):
    _ranks: tuple[int, ...] = ()
    _optional_state = ("num_batches_tracked",)  # states saved before it was counted load

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "_BatchNorm")
        name = type(self).__name__
        if not isinstance(num_features, int) or num_features < 1:
            raise InputError(f"{name}: num_features={num_features!r}; expected a positive int")
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise InputError(f"{name}: momentum={momentum}; expected a number in [0, 1] or None")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.ones(num_features, dtype=dtype))
            self.bias = Parameter(np.zeros(num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype=dtype)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype=dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Running mean back to 0, running variance to 1, the batch count to 0."""
        if self.track_running_stats:
            self.running_mean.data[...] = 0
            self.running_var.data[...] = 1
            self.num_batches_tracked.data[...] = 0

    def forward(self, x: Tensor) -> Tensor:
        x = as_tensor_arg(x, type(self).__name__)
        if x.data.ndim not in self._ranks:
            raise ShapeError(
                f"{type(self).__name__}: input of shape {x.data.shape}; expected "
                f"{' or '.join(str(r) for r in self._ranks)} dims"
            )
        use_batch = self.training or not self.track_running_stats
        momentum = self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.data[...] += 1
            if momentum is None:  # the cumulative average of every batch so far
                momentum = 1.0 / float(self.num_batches_tracked.data)
        return batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            training=use_batch, momentum=0.0 if momentum is None else momentum, eps=self.eps,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization over ``(N, C)`` or ``(N, C, L)``; see :func:`batch_norm`.

    Example:
        >>> import tadiff as td
        >>> BatchNorm1d(4)(td.randn(8, 4)).shape
        (8, 4)
    """

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over ``(N, C, H, W)``; see :func:`batch_norm`.

    Args:
        num_features: C.
        eps: added to the variance.
        momentum: weight of each new batch in the running estimates; ``None``: their
            cumulative average (weight ``1 / num_batches_tracked``).
        affine: learn a per-channel scale (ones) and shift (zeros).
        track_running_stats: keep running estimates for evaluation mode; without them the batch
            statistics are used in both modes.
        dtype: parameter and buffer dtype.
    """

    _ranks = (4,)
