"""Learning-rate schedules: set each parameter group's ``lr`` as a function of the epoch.

Each scheduler computes the rate in closed form from the group's initial rate, so a run that is
resumed at epoch ``k`` gets the same rates as one that went through epochs ``0..k-1``
(``OneCycleLR`` counts batches instead of epochs). :class:`ReduceLROnPlateau` is the exception:
it reacts to a measured metric, so its state is the metric's history (best value, counters).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
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


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each milestone epoch: ``lr0 * gamma**k`` with ``k`` the
    number of milestones ``<= e`` (a milestone listed twice counts twice, as in torch).

    Example:
        >>> sched = MultiStepLR(opt, milestones=[30, 80], gamma=0.1)  # doctest: +SKIP
    """

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ):
        self.milestones = sorted(milestones)
        if not all(isinstance(m, int) for m in self.milestones):
            raise InputError(f"MultiStepLR: milestones={milestones!r}; expected ints")
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** bisect.bisect_right(self.milestones, epoch)


class LinearLR(LRScheduler):
    """Scale the rate by a factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs, then constant: ``lr0 * (s + (f - s) * min(e, T) / T)``.

    Example:
        >>> sched = LinearLR(opt, start_factor=0.1, total_iters=10)  # warm-up  # doctest: +SKIP
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if not 0 < start_factor <= 1:
            raise InputError(f"LinearLR: start_factor={start_factor}; expected 0 < value <= 1")
        if not 0 <= end_factor <= 1:
            raise InputError(f"LinearLR: end_factor={end_factor}; expected 0 <= value <= 1")
        if not (isinstance(total_iters, int) and total_iters > 0):
            raise InputError(f"LinearLR: total_iters must be a positive int, got {total_iters!r}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr: float, epoch: int) -> float:
        progress = min(epoch, self.total_iters) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)


def _per_group(value: Any, count: int, name: str, where: str) -> list[float]:
    """One value per parameter group, from a number or a list of ``count`` numbers."""
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise InputError(
                f"{where}: {name} has {len(value)} values for {count} parameter groups; "
                "expected one per group (or a single number)"
            )
        return [float(v) for v in value]
    return [float(value)] * count


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin): the rate rises from ``max_lr / div_factor`` to
    ``max_lr`` over the first ``pct_start`` of ``total_steps``, then anneals to
    ``max_lr / (div_factor * final_div_factor)``; the momentum (or Adam's ``beta1``) moves the
    opposite way between ``max_momentum`` and ``base_momentum``. Call :meth:`step` after every
    batch; stepping more than ``total_steps`` times raises InputError.

    The phase boundaries and the cosine/linear annealing are ``torch.optim.lr_scheduler
    .OneCycleLR``'s, including ``three_phase`` (back down to the initial rate before the final
    annealing).

    Args:
        optimizer: its groups get ``lr`` (and ``momentum`` or ``betas``) set every step.
        max_lr: the peak rate (a number or one per group).
        total_steps: the cycle's length; or give ``epochs`` and ``steps_per_epoch``.
        pct_start: the fraction of the cycle spent rising, in ``[0, 1]``.
        anneal_strategy: ``"cos"`` or ``"linear"``.
        cycle_momentum: also cycle the momentum (the optimizer needs ``momentum`` or ``betas``).
        base_momentum, max_momentum: the momentum's range (numbers or one per group).
        div_factor: initial rate ``= max_lr / div_factor``.
        final_div_factor: final rate ``= initial rate / final_div_factor``.
        three_phase: rise, fall back to the initial rate, then anneal to the final rate.

    Example:
        >>> sched = OneCycleLR(opt, max_lr=0.1, total_steps=1000)  # doctest: +SKIP
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ):
        where = "OneCycleLR"
        if not isinstance(optimizer, Optimizer):
            raise InputError(
                f"{where}: expected a tadiff optimizer, got {type(optimizer).__name__}"
            )
        if total_steps is None:
            if not all(isinstance(v, int) and v > 0 for v in (epochs, steps_per_epoch)):
                raise InputError(
                    f"{where}: total_steps=None, epochs={epochs!r}, steps_per_epoch="
                    f"{steps_per_epoch!r}; expected a positive int total_steps, or positive "
                    "int epochs and steps_per_epoch"
                )
            total_steps = epochs * steps_per_epoch
        if not (isinstance(total_steps, int) and total_steps > 0):
            raise InputError(f"{where}: total_steps must be a positive int, got {total_steps!r}")
        if not 0 <= pct_start <= 1:
            raise InputError(f"{where}: pct_start={pct_start}; expected a float in [0, 1]")
        if anneal_strategy not in ("cos", "linear"):
            raise InputError(
                f"{where}: anneal_strategy={anneal_strategy!r}; expected 'cos' or 'linear'"
            )
        groups = optimizer.param_groups
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        self.cycle_momentum, self.three_phase = cycle_momentum, three_phase
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self._phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * up, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        if last_epoch == -1:
            for group, peak in zip(
                groups, _per_group(max_lr, len(groups), "max_lr", where), strict=True
            ):
                group["initial_lr"] = peak / div_factor
                group["max_lr"] = peak
                group["min_lr"] = group["initial_lr"] / final_div_factor
        if cycle_momentum:
            defaults = optimizer.defaults
            if "momentum" not in defaults and "betas" not in defaults:
                raise InputError(
                    f"{where}: cycle_momentum=True needs an optimizer with 'momentum' or "
                    f"'betas' ({type(optimizer).__name__} has neither); pass "
                    "cycle_momentum=False"
                )
            self._use_beta1 = "betas" in defaults
            if last_epoch == -1:
                lows = _per_group(base_momentum, len(groups), "base_momentum", where)
                highs = _per_group(max_momentum, len(groups), "max_momentum", where)
                for group, low, high in zip(groups, lows, highs, strict=True):
                    self._set_momentum(group, high)
                    group["base_momentum"], group["max_momentum"] = low, high
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def step(self) -> None:
        """Advance one batch and write the new rate (and momentum) into every group."""
        self.last_epoch += 1
        step = self.last_epoch
        if step > self.total_steps:
            raise InputError(
                f"OneCycleLR: stepped {step} times, but the cycle has total_steps="
                f"{self.total_steps}; make a new scheduler (or a longer cycle) to go on"
            )
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    group["lr"] = self._anneal(group[lr_from], group[lr_to], pct)
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m_from], group[m_to], pct))
                    break
                start = end


class ReduceLROnPlateau:
    """Multiply the rate by ``factor`` when a metric has stopped improving for ``patience``
    epochs, like ``torch.optim.lr_scheduler.ReduceLROnPlateau``. Call ``step(metric)`` once
    per epoch.

    A value is an improvement when it beats the best so far by more than ``threshold``
    (relative: ``best * (1 -/+ threshold)``; absolute: ``best -/+ threshold``). After a
    reduction, ``cooldown`` epochs pass before bad epochs count again. A rate never goes below
    its group's ``min_lr``, and changes smaller than ``eps`` are skipped.

    Args:
        optimizer: the optimizer whose groups' ``lr`` this scheduler lowers.
        mode: ``"min"`` (lower is better, e.g. a loss) or ``"max"`` (e.g. an accuracy).
        factor: the multiplier, ``< 1``.
        patience: epochs without improvement tolerated before reducing.
        threshold: the least improvement that counts.
        threshold_mode: ``"rel"`` or ``"abs"``.
        cooldown: epochs to wait after a reduction.
        min_lr: the lowest rate (a number, or one per group).
        eps: the smallest change of rate applied.

    Example:
        >>> sched = ReduceLROnPlateau(opt, patience=3)   # doctest: +SKIP
        >>> sched.step(validation_loss)                  # doctest: +SKIP
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0.0,
        eps: float = 1e-8,
    ):
        where = "ReduceLROnPlateau"
        if not isinstance(optimizer, Optimizer):
            raise InputError(
                f"{where}: expected a tadiff optimizer, got {type(optimizer).__name__}"
            )
        if not factor < 1.0:
            raise InputError(f"{where}: factor={factor}; expected a factor < 1")
        if mode not in ("min", "max"):
            raise InputError(f"{where}: mode={mode!r}; expected 'min' or 'max'")
        if threshold_mode not in ("rel", "abs"):
            raise InputError(f"{where}: threshold_mode={threshold_mode!r}; expected 'rel' or 'abs'")
        self.optimizer = optimizer
        self.min_lrs = _per_group(min_lr, len(optimizer.param_groups), "min_lr", where)
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0

    def _is_better(self, value: float) -> bool:
        best, t = self.best, self.threshold
        if self.mode == "min":
            return value < (best * (1.0 - t) if self.threshold_mode == "rel" else best - t)
        return value > (best * (t + 1.0) if self.threshold_mode == "rel" else best + t)

    def step(self, metrics: Any) -> None:
        """Record this epoch's metric value and lower the rates if it has plateaued."""
        value = float(metrics)
        self.last_epoch += 1
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                old = float(group["lr"])
                new = max(old * self.factor, floor)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def get_last_lr(self) -> list[float]:
        """The rate of each parameter group now."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer, to resume."""
        return {k: v for k, v in vars(self).items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        vars(self).update(state_dict)
