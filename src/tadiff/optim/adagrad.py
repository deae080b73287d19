"""Adagrad: per-element step sizes shrinking with the sum of all past squared gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tadiff.optim.optimizer import Optimizer, _check_hyper


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), the same update as ``torch.optim.Adagrad``.

    With gradient ``g`` (negated when ``maximize``) at step ``t``::

        g = g + weight_decay * p
        s = s + g**2                       (s starts at initial_accumulator_value)
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    Args:
        params: Parameters or parameter groups (see :class:`Optimizer`).
        lr: learning rate (>= 0).
        lr_decay: the rate's decay per step (>= 0).
        weight_decay: L2 penalty factor (>= 0).
        initial_accumulator_value: the starting value of ``s`` (>= 0).
        eps: added to the denominator (>= 0).
        maximize: ascend instead of descend.

    Example:
        >>> opt = Adagrad(model.parameters(), lr=0.1)  # doctest: +SKIP
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
    ):
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        for name in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            _check_hyper(name, group[name])

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        for group, p, grad in self._params_with_grad():
            state = self.state.setdefault(id(p), {})
            if not state:
                state["step"] = 0
                state["sum"] = np.full_like(p.data, group["initial_accumulator_value"])
            state["step"] += 1
            g = -grad if group["maximize"] else grad
            if group["weight_decay"] != 0:
                g = g + group["weight_decay"] * p.data
            rate = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
            state["sum"] += g * g
            p.data -= rate * (g / (np.sqrt(state["sum"]) + group["eps"]))
