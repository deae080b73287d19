"""Adam and AdamW: adaptive moment estimation, with L2 or decoupled weight decay."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from tadiff.optim.optimizer import Optimizer, _check_hyper


class Adam(Optimizer):
    """Adam (Kingma & Ba), the same update as ``torch.optim.Adam``.

    With gradient ``g`` (negated when ``maximize``) at step ``t``::

        p = p * (1 - lr * weight_decay)        if decoupled_weight_decay (AdamW)
        g = g + weight_decay * p               otherwise (L2 penalty)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        v_hat = max(v_hat, v)                  if amsgrad (v_hat replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    Args:
        params: Parameters or parameter groups (see :class:`Optimizer`).
        lr: learning rate (>= 0).
        betas: decay rates ``(beta1, beta2)`` of the moment estimates, each in [0, 1).
        eps: added to the denominator for numerical stability.
        weight_decay: weight decay factor (L2 penalty, or decoupled for AdamW).
        amsgrad: use the maximum of past second moments (AMSGrad).
        maximize: ascend instead of descend.
        decoupled_weight_decay: decay the weights directly instead of through the gradient.

    Example:
        >>> opt = Adam(model.parameters(), lr=1e-3)  # doctest: +SKIP
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
    ):
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        _check_hyper("lr", group["lr"])
        _check_hyper("eps", group["eps"])
        _check_hyper("beta1", group["betas"][0], 0.0, 1.0)
        _check_hyper("beta2", group["betas"][1], 0.0, 1.0)
        _check_hyper("weight_decay", group["weight_decay"])

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        for group, p, grad in self._params_with_grad():
            lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            state = self.state.setdefault(id(p), {})
            if not state:
                state["step"] = 0
                state["exp_avg"] = np.zeros_like(p.data)
                state["exp_avg_sq"] = np.zeros_like(p.data)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = np.zeros_like(p.data)
            state["step"] += 1
            t = state["step"]
            g = -grad if group["maximize"] else grad
            if decay != 0:
                if group["decoupled_weight_decay"]:
                    p.data *= 1 - lr * decay
                else:
                    g = g + decay * p.data
            m, v = state["exp_avg"], state["exp_avg_sq"]
            scratch = self._scratch(p)
            # In place through one scratch array: no temporaries the size of the parameter.
            m += np.multiply(np.subtract(g, m, out=scratch), 1 - beta1, out=scratch)
            v *= beta2
            v += np.multiply(np.multiply(g, g, out=scratch), 1 - beta2, out=scratch)
            if group["amsgrad"]:
                np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
                v = state["max_exp_avg_sq"]
            # Python floats, not NumPy scalars: a float64 scalar would promote float32 parameters.
            step_size = lr / (1 - beta1**t)
            root_correction = math.sqrt(1 - beta2**t)
            denom = np.sqrt(v, out=scratch)
            denom /= root_correction
            denom += eps
            update = np.divide(m, denom, out=scratch)
            update *= step_size
            p.data -= update


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), like ``torch.optim.AdamW``.

    Same arguments as :class:`Adam`; ``weight_decay`` defaults to 0.01 and multiplies the
    parameter by ``1 - lr * weight_decay`` before the Adam step instead of entering the gradient.

    Example:
        >>> opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)  # doctest: +SKIP
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ):
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            decoupled_weight_decay=True,
        )
