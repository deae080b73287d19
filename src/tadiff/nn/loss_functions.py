"""Regression and binary losses with ``torch.nn.functional``'s names, reductions and checks.

``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy``,
``binary_cross_entropy_with_logits`` and ``kl_div``: compositions of tadiff ops (so the engine
supplies every gradient, also with respect to a target that requires grad). Input and target
must have the same shape: torch only warns when they broadcast, which is nearly always a bug
such as ``(N, 1)`` against ``(N,)``, so here it is a ShapeError.

Example:
    >>> import tadiff as td
    >>> float(l1_loss(td.tensor([1.0, -1.0]), td.tensor([0.0, 0.0])))
    1.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.activation_functions import _log1p_exp
from tadiff.ops._common import broadcasts_to

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.mean()


def _check_reduction(reduction: str, where: str, reductions=_REDUCTIONS) -> None:
    if reduction not in reductions:
        raise InputError(f"{where}: reduction={reduction!r}; expected one of {reductions}")


def _pair(input: Any, target: Any, reduction: str, where: str, reductions=_REDUCTIONS):
    """Checked ``(input, target)`` Tensors of one shape; the target may be an array."""
    _check_reduction(reduction, where, reductions)
    input = as_tensor_arg(input, f"{where} input")
    if not isinstance(target, Tensor):
        target = Tensor(np.asarray(target, dtype=input.dtype))
    if input.shape != target.shape:
        raise ShapeError(
            f"{where}: input shape {input.shape} and target shape {target.shape} differ; "
            "expected equal shapes"
        )
    return input, target


def _weight(weight: Any, shape: tuple[int, ...], dtype: Any, name: str, where: str) -> Tensor:
    """An optional weight that must broadcast to the loss's ``shape``; a constant one (an
    array, or a Tensor without grad) takes the input's dtype, so float32 losses stay float32."""
    if isinstance(weight, Tensor) and (weight.requires_grad or weight.dtype == dtype):
        w = weight
    else:
        w = Tensor(np.asarray(weight.data if isinstance(weight, Tensor) else weight, dtype=dtype))
    if not broadcasts_to(w.shape, shape):
        raise ShapeError(
            f"{where}: {name} of shape {w.shape} does not broadcast to the input's shape {shape}"
        )
    return w


def l1_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Absolute error ``|input - target|``, reduced by ``"mean"``, ``"sum"`` or ``"none"``.

    The gradient at ``input == target`` is 0 (as torch).

    Args:
        input: any shape.
        target: the input's shape.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (per-element losses).

    Example:
        >>> float(l1_loss(td.tensor([3.0]), td.tensor([1.0])))
        2.0
    """
    input, target = _pair(input, target, reduction, "l1_loss")
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(
    input: Tensor, target: Any, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``).

    ``beta == 0`` is the L1 loss.

    Raises:
        InputError: ``beta < 0`` or an unknown reduction.

    Example:
        >>> float(smooth_l1_loss(td.tensor([0.5, 3.0]), td.tensor([0.0, 0.0]), "sum"))
        2.625
    """
    input, target = _pair(input, target, reduction, "smooth_l1_loss")
    if beta < 0:
        raise InputError(f"smooth_l1_loss: beta={beta}; expected beta >= 0")
    d = input - target
    if beta == 0:
        return _reduce(d.abs(), reduction)
    small = np.abs(d.data) < beta
    return _reduce(td.where(small, d * d * (0.5 / beta), d.abs() - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Any, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - delta / 2)``, ``d = input - target``.

    Equals ``delta * smooth_l1_loss(..., beta=delta)``.

    Raises:
        InputError: ``delta <= 0`` or an unknown reduction.

    Example:
        >>> float(huber_loss(td.tensor([0.5, 3.0]), td.tensor([0.0, 0.0]), "sum", delta=2.0))
        4.125
    """
    input, target = _pair(input, target, reduction, "huber_loss")
    if not delta > 0:
        raise InputError(f"huber_loss: delta={delta}; expected delta > 0")
    d = input - target
    small = np.abs(d.data) < delta
    return _reduce(td.where(small, d * d * 0.5, (d.abs() - 0.5 * delta) * delta), reduction)


def binary_cross_entropy(
    input: Tensor, target: Any, weight: Any = None, reduction: str = "mean"
) -> Tensor:
    """``-w (t log x + (1 - t) log(1 - x))`` for probabilities ``x``; each log is clamped at
    -100 (as torch) so ``x = 0`` or ``1`` gives a finite loss.

    Args:
        input: probabilities in ``[0, 1]``, any shape.
        target: the input's shape (usually 0/1 labels).
        weight: rescaling weight that broadcasts to the input's shape, or None.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        InputError: an input element outside ``[0, 1]`` (names its position).

    Example:
        >>> round(float(binary_cross_entropy(td.tensor([0.5]), td.tensor([1.0]))), 4)
        0.6931
    """
    input, target = _pair(input, target, reduction, "binary_cross_entropy")
    x = input.data
    bad = ~((x >= 0) & (x <= 1))  # also catches nan
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(
            f"binary_cross_entropy: input {x[where]} at position {where} is not a probability; "
            "expected every element in [0, 1] (for logits use binary_cross_entropy_with_logits)"
        )
    with np.errstate(divide="ignore"):  # log(0) = -inf, then clamped to -100
        log_x = td.clamp(input.log(), min=-100.0)
        log_1mx = td.clamp((-input).log1p(), min=-100.0)
    losses = -(target * log_x + (1.0 - target) * log_1mx)
    if weight is not None:
        losses = losses * _weight(weight, x.shape, x.dtype, "weight", "binary_cross_entropy")
    return _reduce(losses, reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Any,
    weight: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from the logits ``x``.

    Per element ``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)``, times ``weight``; the
    softplus never overflows, so any ``|x|`` gives a finite loss and gradient.

    Args:
        input: logits, any shape.
        target: the input's shape.
        weight: broadcasts to the input's shape, or None.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        pos_weight: weight of the positive term, broadcasting along the last dim (one per
            class, shape ``(C,)``), or None.

    Example:
        >>> round(float(binary_cross_entropy_with_logits(td.tensor([0.0]), td.tensor([1.0]))), 4)
        0.6931
    """
    where = "binary_cross_entropy_with_logits"
    input, target = _pair(input, target, reduction, where)
    softplus_neg = _log1p_exp(-input)
    if pos_weight is not None:
        pw = _weight(pos_weight, input.shape, input.dtype, "pos_weight", where)
        losses = (1.0 - target) * input + ((pw - 1.0) * target + 1.0) * softplus_neg
    else:
        losses = (1.0 - target) * input + softplus_neg
    if weight is not None:
        losses = losses * _weight(weight, input.shape, input.dtype, "weight", where)
    return _reduce(losses, reduction)


def kl_div(input: Tensor, target: Any, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence ``t (log t - x)`` of the target from log-probabilities ``x``.

    ``0 log 0`` counts as 0. With ``log_target=True`` the target holds log-probabilities too:
    ``exp(t) (t - x)``. A target that requires grad gets one; where a (non-log) target is 0
    the true derivative ``log t + 1`` diverges, and this gradient leaves that term out (torch
    returns nan there).

    Args:
        input: log-probabilities, any shape.
        target: probabilities (or log-probabilities), the input's shape.
        reduction: ``"mean"`` (over all elements, as torch), ``"batchmean"`` (the sum divided
            by the batch size ``input.shape[0]``: the mathematical KL divergence per sample),
            ``"sum"`` or ``"none"``.
        log_target: whether ``target`` is given in log space.

    Example:
        >>> p = td.tensor([0.5, 0.5])
        >>> float(kl_div(p.log(), p, reduction="sum"))
        0.0
    """
    input, target = _pair(
        input, target, reduction, "kl_div", reductions=("mean", "batchmean", "sum", "none")
    )
    if log_target:
        losses = target.exp() * (target - input)
    else:
        positive = target.data > 0
        # t log t with log of 1 where t <= 0, so that the unused branch has no -inf or nan
        safe = td.where(positive, target, 1.0)
        losses = td.where(positive, target * safe.log(), 0.0) - target * input
    if reduction == "batchmean":
        batch = input.shape[0] if input.ndim else 1
        return losses.sum() / batch
    return _reduce(losses, reduction)


def poisson_nll_loss(
    input: Tensor,
    target: Any,
    log_input: bool = True,
    full: bool = False,
    eps: float = 1e-8,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of counts ``target`` under a Poisson rate: ``exp(x) - t x`` for
    a log-rate ``x`` (``log_input=True``), else ``x - t log(x + eps)``; ``full`` adds
    Stirling's ``t log t - t + log(2 pi t) / 2`` where ``t > 1`` (torch's terms).

    Example:
        >>> float(poisson_nll_loss(td.tensor([0.0]), td.tensor([1.0])))
        1.0
    """
    input, target = _pair(input, target, reduction, "poisson_nll_loss")
    losses = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        big = target.data > 1
        # the term at a safe count where it is left out, so its gradient there is 0, not nan
        t = td.where(big, target, 2.0)
        stirling = t * t.log() - t + 0.5 * (t * (2 * math.pi)).log()
        losses = losses + td.where(big, stirling, 0.0)
    return _reduce(losses, reduction)


def gaussian_nll_loss(
    input: Tensor,
    target: Any,
    var: Any,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of ``target`` under normal distributions of mean ``input`` and
    variance ``var``: ``(log(var) + (x - t)**2 / var) / 2`` (plus ``log(2 pi) / 2`` if
    ``full``).

    ``var`` is the input's shape, or one dim short of it (one variance per row), or differs
    from it in one dim of size 1, or a float: torch's shapes. Variances below ``eps`` are raised
    to ``eps`` for the value, and, as in torch, that clamp is not differentiated.

    Raises:
        InputError: a negative variance; ShapeError: a ``var`` of another shape.

    Example:
        >>> float(gaussian_nll_loss(td.tensor([1.0]), td.tensor([1.0]), td.tensor([1.0])))
        0.0
    """
    input, target = _pair(input, target, reduction, "gaussian_nll_loss")
    if isinstance(var, (int, float)):
        if var < 0:
            raise InputError(f"gaussian_nll_loss: var={var} is negative; expected var >= 0")
        var = Tensor(np.full(input.shape, var, dtype=input.dtype))
    var = as_tensor_arg(var, "gaussian_nll_loss var")
    if (var.data < 0).any():
        raise InputError("gaussian_nll_loss: var has negative entries; expected var >= 0")
    if var.shape != input.shape:
        mismatched = (
            [v for x, v in zip(input.shape, var.shape, strict=True) if x != v]
            if var.ndim == input.ndim
            else None
        )
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif mismatched != [1]:
            raise ShapeError(
                f"gaussian_nll_loss: var of shape {var.shape} for an input of shape "
                f"{input.shape}; expected the input's shape, one dim short of it, or 1 in one dim"
            )
    # torch clamps under no_grad: the value is clamped, the gradient is that of var itself
    var = var + Tensor(np.maximum(var.data, eps).astype(var.dtype, copy=False) - var.data)
    losses = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        losses = losses + 0.5 * math.log(2 * math.pi)
    return _reduce(losses, reduction)


__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "gaussian_nll_loss",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
]
