"""Margin and embedding losses with ``torch.nn.functional``'s names, formulas and reductions.

``margin_ranking_loss``, ``hinge_embedding_loss``, ``soft_margin_loss``,
``cosine_embedding_loss``, ``triplet_margin_loss`` and ``multilabel_soft_margin_loss``:
compositions of tadiff ops, so the engine supplies every gradient (also to second order). At a
hinge's kink (``max(0, z)`` at ``z = 0``) the gradient is torch's: that of ``clamp_min``, which
passes there. Targets are labels (``±1``, or ``0``/``1`` per class): constants, never
differentiated.

Example:
    >>> import tadiff as td
    >>> float(margin_ranking_loss(td.tensor([2.0]), td.tensor([1.0]), td.tensor([1.0])))
    0.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.activation_functions import _log1p_exp
from tadiff.nn.loss_functions import _check_reduction, _reduce, _weight
from tadiff.nn.normalization import pairwise_distance

_COSINE_EPS = 1e-12
"""Added to each squared norm in ``cosine_embedding_loss`` (torch's constant)."""


def _labels(target: Any, dtype: Any) -> Tensor:
    """The target as a constant tensor of the input's dtype (labels carry no gradient)."""
    data = target.data if isinstance(target, Tensor) else np.asarray(target)
    return Tensor(np.asarray(data, dtype=dtype))


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """``max(0, -y (x1 - x2) + margin)``: ``x1`` should rank above ``x2`` where ``y = 1``,
    below where ``y = -1``.

    Args:
        input1, input2: scores, of one number of dims (they broadcast).
        target: labels ``±1``, of the inputs' number of dims.
        margin: the gap asked for.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        ShapeError: the three differ in number of dims (torch's rule).

    Example:
        >>> float(margin_ranking_loss(td.tensor([0.0]), td.tensor([1.0]), td.tensor([1.0])))
        1.0
    """
    _check_reduction(reduction, "margin_ranking_loss")
    x1 = as_tensor_arg(input1, "margin_ranking_loss input1")
    x2 = as_tensor_arg(input2, "margin_ranking_loss input2")
    y = _labels(target, x1.dtype)
    if not x1.ndim == x2.ndim == y.ndim:
        raise ShapeError(
            f"margin_ranking_loss: input1 {x1.shape}, input2 {x2.shape} and target {y.shape} "
            "have different numbers of dims; expected one"
        )
    return _reduce(td.clamp(-y * (x1 - x2) + margin, min=0.0), reduction)


def hinge_embedding_loss(
    input: Tensor, target: Any, margin: float = 1.0, reduction: str = "mean"
) -> Tensor:
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1`` (a distance ``x`` that
    should be small for similar pairs, at least ``margin`` for dissimilar ones). As in torch, a
    label other than ``±1`` counts both terms.

    Example:
        >>> float(hinge_embedding_loss(td.tensor([0.25, 2.0]), td.tensor([1.0, -1.0])))
        0.125
    """
    _check_reduction(reduction, "hinge_embedding_loss")
    x = as_tensor_arg(input, "hinge_embedding_loss input")
    y = _labels(target, x.dtype).data
    zero = Tensor(x.dtype.type(0))
    hinge = td.where(y != 1, td.clamp(margin - x, min=0.0), zero)
    return _reduce(hinge + td.where(y != -1, x, zero), reduction)


def soft_margin_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-y x))``, the logistic loss of labels ``y = ±1`` (no overflow for large
    ``|x|``).

    Example:
        >>> round(float(soft_margin_loss(td.tensor([0.0]), td.tensor([1.0]))), 4)
        0.6931
    """
    _check_reduction(reduction, "soft_margin_loss")
    x = as_tensor_arg(input, "soft_margin_loss input")
    y = _labels(target, x.dtype)
    return _reduce(_log1p_exp(-y * x), reduction)


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """``1 - cos(x1, x2)`` where ``y = 1``, ``max(0, cos(x1, x2) - margin)`` where ``y = -1``;
    the cosine along the last dim of ``(N, D)`` or ``(D,)`` inputs, with torch's ``1e-12``
    added to each squared norm.

    Args:
        input1, input2: ``(N, D)`` or ``(D,)``.
        target: ``(N,)`` (or 0-d) labels ``±1``.

    Raises:
        ShapeError: inputs that are not 1-d or 2-d, of different shapes.

    Example:
        >>> x = td.tensor([[1.0, 0.0]])
        >>> float(cosine_embedding_loss(x, x, td.tensor([1.0])))
        0.0
    """
    _check_reduction(reduction, "cosine_embedding_loss")
    x1 = as_tensor_arg(input1, "cosine_embedding_loss input1")
    x2 = as_tensor_arg(input2, "cosine_embedding_loss input2")
    if x1.shape != x2.shape or x1.ndim not in (1, 2):
        raise ShapeError(
            f"cosine_embedding_loss: inputs of shapes {x1.shape} and {x2.shape}; expected one "
            "shape, (N, D) or (D,)"
        )
    y = _labels(target, x1.dtype).data
    dim = x1.ndim - 1
    squares = ((x1 * x1).sum(dim) + _COSINE_EPS) * ((x2 * x2).sum(dim) + _COSINE_EPS)
    cos = (x1 * x2).sum(dim) / squares.sqrt()
    zero = Tensor(x1.dtype.type(0))
    losses = td.where(y == 1, 1 - cos, zero) + td.where(
        y == -1, td.clamp(cos - margin, min=0.0), zero
    )
    return _reduce(losses, reduction)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, d(a, p) - d(a, n) + margin)`` with ``d = pairwise_distance(., ., p, eps)``
    along the last dim; ``swap=True`` uses ``min(d(a, n), d(p, n))`` for the negative distance
    (Balntas et al.).

    Args:
        anchor, positive, negative: ``(N, D)`` or ``(D,)``, of one number of dims.

    Raises:
        ShapeError: the three differ in number of dims.

    Example:
        >>> a = td.tensor([[0.0, 0.0]])
        >>> float(triplet_margin_loss(a, a, td.tensor([[3.0, 4.0]]), eps=0.0))
        0.0
    """
    _check_reduction(reduction, "triplet_margin_loss")
    a = as_tensor_arg(anchor, "triplet_margin_loss anchor")
    pos = as_tensor_arg(positive, "triplet_margin_loss positive")
    neg = as_tensor_arg(negative, "triplet_margin_loss negative")
    if not a.ndim == pos.ndim == neg.ndim:
        raise ShapeError(
            f"triplet_margin_loss: anchor {a.shape}, positive {pos.shape} and negative "
            f"{neg.shape} have different numbers of dims; expected one"
        )
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = td.minimum(d_neg, pairwise_distance(pos, neg, p, eps))
    return _reduce(td.clamp(margin + d_pos - d_neg, min=0.0), reduction)


def multilabel_soft_margin_loss(
    input: Tensor, target: Any, weight: Any = None, reduction: str = "mean"
) -> Tensor:
    """Per sample, the mean over classes of ``-(y log σ(x) + (1 - y) log σ(-x))`` (times
    ``weight``): independent binary logistic losses for ``(N, C)`` logits and 0/1 targets.

    Example:
        >>> round(float(multilabel_soft_margin_loss(td.zeros(1, 2), td.tensor([[1.0, 0.0]]))), 4)
        0.6931
    """
    _check_reduction(reduction, "multilabel_soft_margin_loss")
    x = as_tensor_arg(input, "multilabel_soft_margin_loss input")
    y = _labels(target, x.dtype)
    if y.shape != x.shape:
        raise ShapeError(
            f"multilabel_soft_margin_loss: input shape {x.shape} and target shape {y.shape} "
            "differ; expected equal shapes"
        )
    # -log σ(x) = log(1 + exp(-x)), without overflow either way
    losses = y * _log1p_exp(-x) + (1 - y) * _log1p_exp(x)
    if weight is not None:
        losses = losses * _weight(weight, x.shape, x.dtype, "weight", "multilabel_soft_margin_loss")
    per_sample = losses.mean(-1) if x.ndim else losses
    return _reduce(per_sample, reduction)


__all__ = [
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "multilabel_soft_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
]
