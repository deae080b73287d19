"""Loss modules: thin wrappers of the loss functions in ``tadiff.nn.functional``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.nn import functional as F
from tadiff.nn.module import Module


class MSELoss(Module):
    """Mean squared error; ``reduction`` is ``"mean"``, ``"sum"`` or ``"none"``."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    """Cross entropy of logits against class indices or probabilities (see ``F.cross_entropy``).

    Example:
        >>> import tadiff as td
        >>> loss = CrossEntropyLoss(label_smoothing=0.1)(td.zeros(4, 3), td.tensor([0, 1, 2, 0]))
    """

    def __init__(
        self,
        weight: Any = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ):
        super().__init__()
        self.weight = weight
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(
            input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing
        )


class NLLLoss(Module):
    """Negative log-likelihood of log-probabilities (see ``F.nll_loss``)."""

    def __init__(self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.weight = weight
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class L1Loss(Module):
    """Mean absolute error; ``reduction`` is ``"mean"``, ``"sum"`` or ``"none"`` (``F.l1_loss``).

    Example:
        >>> import tadiff as td
        >>> float(L1Loss()(td.tensor([1.0, -1.0]), td.tensor([0.0, 0.0])))
        1.0
    """

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.l1_loss(input, target, self.reduction)


class SmoothL1Loss(Module):
    """Quadratic below ``beta``, linear above (see ``F.smooth_l1_loss``)."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__()
        self.reduction, self.beta = reduction, beta

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(Module):
    """Quadratic below ``delta``, ``delta``-sloped linear above (see ``F.huber_loss``)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__()
        self.reduction, self.delta = reduction, delta

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.huber_loss(input, target, self.reduction, self.delta)


class BCELoss(Module):
    """Binary cross entropy of probabilities (see ``F.binary_cross_entropy``).

    ``weight`` (broadcasting to the input) is registered as a buffer when it is given.
    """

    def __init__(self, weight: Any = None, reduction: str = "mean"):
        super().__init__()
        self.register_buffer("weight", _as_buffer(weight))
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(Module):
    """Binary cross entropy of logits, computed stably (``F.binary_cross_entropy_with_logits``).

    Example:
        >>> import tadiff as td
        >>> loss = BCEWithLogitsLoss(pos_weight=td.tensor([2.0, 1.0]))
        >>> round(float(loss(td.zeros(1, 2), td.tensor([[1.0, 0.0]]))), 4)
        1.0397
    """

    def __init__(self, weight: Any = None, reduction: str = "mean", pos_weight: Any = None):
        super().__init__()
        self.register_buffer("weight", _as_buffer(weight))
        self.register_buffer("pos_weight", _as_buffer(pos_weight))
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, self.reduction, self.pos_weight
        )


class KLDivLoss(Module):
    """KL divergence of the target from log-probabilities (see ``F.kl_div``); ``reduction``
    also takes ``"batchmean"`` (the per-sample divergence)."""

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__()
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.kl_div(input, target, self.reduction, self.log_target)


def _as_buffer(value: Any) -> Tensor | None:
    if value is None or isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    return Tensor(array if array.dtype.kind == "f" else array.astype(np.float64))


class MarginRankingLoss(Module):
    """``max(0, -y (x1 - x2) + margin)`` (see ``F.margin_ranking_loss``).

    Example:
        >>> import tadiff as td
        >>> float(MarginRankingLoss(0.5)(td.tensor([1.0]), td.tensor([1.0]), td.tensor([1.0])))
        0.5
    """

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, input1: Tensor, input2: Tensor, target: Any) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(Module):
    """``x`` for ``y = 1``, ``max(0, margin - x)`` for ``y = -1`` (see
    ``F.hinge_embedding_loss``)."""

    def __init__(self, margin: float = 1.0, reduction: str = "mean"):
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLoss(Module):
    """``log(1 + exp(-y x))`` (see ``F.soft_margin_loss``)."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.soft_margin_loss(input, target, self.reduction)


class CosineEmbeddingLoss(Module):
    """``1 - cos`` for ``y = 1``, ``max(0, cos - margin)`` for ``y = -1`` (see
    ``F.cosine_embedding_loss``)."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, input1: Tensor, input2: Tensor, target: Any) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class TripletMarginLoss(Module):
    """``max(0, d(a, p) - d(a, n) + margin)`` (see ``F.triplet_margin_loss``)."""

    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        reduction: str = "mean",
    ):
        super().__init__()
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap
        self.reduction = reduction

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(
            anchor, positive, negative, self.margin, self.p, self.eps, self.swap, self.reduction
        )


class MultiLabelSoftMarginLoss(Module):
    """Per-class logistic losses, averaged over classes (see
    ``F.multilabel_soft_margin_loss``)."""

    def __init__(self, weight: Any = None, reduction: str = "mean"):
        super().__init__()
        self.weight, self.reduction = weight, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class PoissonNLLLoss(Module):
    """Poisson negative log-likelihood of counts (see ``F.poisson_nll_loss``)."""

    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        eps: float = 1e-8,
        reduction: str = "mean",
    ):
        super().__init__()
        self.log_input, self.full, self.eps, self.reduction = log_input, full, eps, reduction

    def forward(self, log_input: Tensor, target: Any) -> Tensor:
        return F.poisson_nll_loss(
            log_input, target, self.log_input, self.full, self.eps, self.reduction
        )


class GaussianNLLLoss(Module):
    """Gaussian negative log-likelihood with predicted variances (see
    ``F.gaussian_nll_loss``)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__()
        self.full, self.eps, self.reduction = full, eps, reduction

    def forward(self, input: Tensor, target: Any, var: Any) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)
