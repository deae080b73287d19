"""RMSprop: divide the gradient by a running root mean square of recent gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tadiff.optim.optimizer import Optimizer, _check_hyper


class RMSprop(Optimizer):
    """RMSprop (Hinton), the same update as ``torch.optim.RMSprop``.

    With gradient ``g`` (negated when ``maximize``), per step::

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g**2
        m = alpha * m + (1 - alpha) * g                  if centered
        d = sqrt(v - m**2) + eps   if centered,   else   sqrt(v) + eps
        b = momentum * b + g / d;  p = p - lr * b        if momentum > 0
        p = p - lr * g / d                               otherwise

    Args:
        params: Parameters or parameter groups (see :class:`Optimizer`).
        lr: learning rate (>= 0).
        alpha: smoothing constant of the running averages (>= 0).
        eps: added to the denominator (>= 0).
        weight_decay: L2 penalty factor (>= 0).
        momentum: momentum factor (>= 0).
        centered: subtract the squared running mean of the gradient (a variance estimate).
        maximize: ascend instead of descend.

    Example:
        >>> opt = RMSprop(model.parameters(), lr=1e-3, momentum=0.9)  # doctest: +SKIP
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ):
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        for name in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            _check_hyper(name, group[name])

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        for group, p, grad in self._params_with_grad():
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            decay, momentum = group["weight_decay"], group["momentum"]
            state = self.state.setdefault(id(p), {})
            if not state:
                state["step"] = 0
                state["square_avg"] = np.zeros_like(p.data)
                if momentum > 0:
                    state["momentum_buffer"] = np.zeros_like(p.data)
                if group["centered"]:
                    state["grad_avg"] = np.zeros_like(p.data)
            state["step"] += 1
            g = -grad if group["maximize"] else grad
            if decay != 0:
                g = g + decay * p.data
            square_avg = state["square_avg"]
            square_avg *= alpha
            square_avg += (1 - alpha) * g * g
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg += (1 - alpha) * (g - grad_avg)
                denom = np.sqrt(square_avg - grad_avg * grad_avg)
            else:
                denom = np.sqrt(square_avg)
            denom += eps
            if momentum > 0:
                # a group may turn momentum on later (e.g. OneCycleLR): start the buffer then
                buf = state.setdefault("momentum_buffer", np.zeros_like(p.data))
                buf *= momentum
                buf += g / denom
                p.data -= lr * buf
            else:
                p.data -= lr * (g / denom)
