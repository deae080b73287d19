"""Learning-rate schedules: set each parameter group's ``lr`` as a function of the epoch.

Each scheduler computes the rate in closed form from the group's initial rate, so a run that is
resumed at epoch ``k`` gets the same rates as one that went through epochs ``0..k-1``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tadiff.errors import InputError
from tadiff.optim.optimizer import Optimizer


class LRScheduler:
    """Base class: call :meth:`step` once per epoch, after the optimizer's steps.

    Args:
        optimizer: the optimizer whose groups' ``lr`` this scheduler sets.
        last_epoch: the index of the last epoch done (-1: start from scratch).
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise InputError(
                f"{type(self).__name__}: expected a tadiff optimizer, "
                f"got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        raise NotImplementedError

    def step(self) -> None:
        """Advance one epoch and write the new rates into the optimizer's groups."""
        self.last_epoch += 1
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = self._lr_at(base, self.last_epoch)

    def get_last_lr(self) -> list[float]:
        """The rate of each parameter group as set by the last :meth:`step`."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer and callables, to resume a schedule."""
        return {k: v for k, v in vars(self).items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        vars(self).update(state_dict)


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs: ``lr0 * gamma**(e // step)``.

    Example:
        >>> sched = StepLR(opt, step_size=30, gamma=0.1)  # doctest: +SKIP
    """

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ):
        if not (isinstance(step_size, int) and step_size > 0):
            raise InputError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** (epoch // self.step_size)


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch: ``lr0 * gamma**e``.

    Example:
        >>> sched = ExponentialLR(opt, gamma=0.95)  # doctest: +SKIP
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """Cosine from the initial rate down to ``eta_min`` over ``T_max`` epochs (then back up).

    ``lr = eta_min + (lr0 - eta_min) * (1 + cos(pi * e / T_max)) / 2``, the closed form of
    ``torch.optim.lr_scheduler.CosineAnnealingLR`` (without warm restarts).

    Example:
        >>> sched = CosineAnnealingLR(opt, T_max=100)  # doctest: +SKIP
    """

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ):
        if not (isinstance(T_max, int) and T_max > 0):
            raise InputError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        cosine = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return self.eta_min + (base_lr - self.eta_min) * cosine


class LambdaLR(LRScheduler):
    """The initial rate times a user function of the epoch: ``lr0 * lr_lambda(e)``.

    Example:
        >>> warmup = lambda e: min(1.0, (e + 1) / 10)  # doctest: +SKIP
        >>> sched = LambdaLR(opt, warmup)  # doctest: +SKIP
    """

    def __init__(
        self, optimizer: Optimizer, lr_lambda: Callable[[int], float], last_epoch: int = -1
    ):
        if not callable(lr_lambda):
            raise InputError(
                f"LambdaLR: lr_lambda must be callable, got {type(lr_lambda).__name__}"
            )
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.lr_lambda(epoch)
