"""Loss modules: ``MSELoss``, ``CrossEntropyLoss``, ``NLLLoss`` (see ``tadiff.nn.functional``)."""

from __future__ import annotations

from typing import Any

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
