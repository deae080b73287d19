"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tadiff.errors import InputError
from tadiff.optim.optimizer import Optimizer, _check_hyper


class SGD(Optimizer):
    """Stochastic gradient descent, the same update as ``torch.optim.SGD``.

    With gradient ``g`` (negated when ``maximize``), per step::

        g = g + weight_decay * p
        b = g                                   (first step)
        b = momentum * b + (1 - dampening) * g  (later steps)
        g = g + momentum * b  if nesterov  else  b      (only when momentum != 0)
        p = p - lr * g

    Args:
        params: Parameters or parameter groups (see :class:`Optimizer`).
        lr: learning rate (>= 0).
        momentum: momentum factor in [0, 1).
        dampening: dampening of the momentum's gradient term.
        weight_decay: L2 penalty added to the gradient.
        nesterov: use Nesterov momentum (needs momentum > 0 and dampening 0).
        maximize: ascend instead of descend.

    Example:
        >>> opt = SGD(model.parameters(), lr=0.1, momentum=0.9)  # doctest: +SKIP
        >>> loss.backward(); opt.step(); opt.zero_grad()          # doctest: +SKIP
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ):
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        _check_hyper("lr", group["lr"])
        _check_hyper("momentum", group["momentum"])
        _check_hyper("weight_decay", group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise InputError(
                "SGD: nesterov=True needs momentum > 0 and dampening == 0, got "
                f"momentum={group['momentum']}, dampening={group['dampening']}"
            )

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        for group, p, grad in self._params_with_grad():
            lr, momentum, decay = group["lr"], group["momentum"], group["weight_decay"]
            g = -grad if group["maximize"] else grad
            if decay != 0:
                g = g + decay * p.data
            scratch = self._scratch(p)
            if momentum != 0:
                state = self.state.setdefault(id(p), {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    # np.array, not g.copy(): arithmetic on 0-d arrays yields NumPy scalars
                    buf = state["momentum_buffer"] = np.array(g, copy=True)
                else:
                    buf *= momentum
                    if group["dampening"] == 0:
                        buf += g
                    else:
                        buf += np.multiply(g, 1 - group["dampening"], out=scratch)
                if group["nesterov"]:
                    g = np.add(g, np.multiply(buf, momentum, out=scratch), out=scratch)
                else:
                    g = buf
            p.data -= np.multiply(g, lr, out=scratch)
