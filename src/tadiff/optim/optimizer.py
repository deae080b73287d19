"""The optimizer base class: parameter groups, per-parameter state, ``zero_grad``, ``state_dict``.

An optimizer reads each parameter's gradient (``p.grad``, a Tensor) and updates the parameter's
array (``p.data``, a ``numpy.ndarray``) *in place*, so every module and every other reference to
the parameter sees the new value. Updates run on raw arrays, outside the autograd graph, exactly
like ``torch.optim`` under ``torch.no_grad()``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from tadiff.errors import DTypeError, InputError, ShapeError


def _grad_array(param: Any) -> np.ndarray | None:
    """The gradient of ``param`` as an ndarray, or None when it has none yet."""
    grad = param.grad
    if grad is None:
        return None
    return grad.data if hasattr(grad, "data") else np.asarray(grad)


def _check_param(param: Any, where: str) -> None:
    if not (hasattr(param, "data") and hasattr(param, "grad") and hasattr(param, "requires_grad")):
        raise DTypeError(
            f"{where}: expected a tadiff Tensor or Parameter, got {type(param).__name__}"
        )
    if not getattr(param, "is_leaf", True):
        raise InputError(
            f"{where}: cannot optimize a non-leaf tensor (it is the result of an operation); "
            "optimize the leaf it was computed from, or call .detach().requires_grad_()"
        )
    if not param.requires_grad:
        raise InputError(f"{where}: the parameter does not require gradients")


def _check_hyper(name: str, value: float, low: float = 0.0, high: float | None = None) -> None:
    """Raise when a hyperparameter is outside ``[low, high)`` (``high`` None: no upper bound)."""
    ok = value >= low and (high is None or value < high)
    if not ok:
        expected = f">= {low}" if high is None else f"in [{low}, {high})"
        raise InputError(f"invalid {name}: {value} (expected {expected})")


class Optimizer:
    """Base class of tadiff's optimizers (same shape as ``torch.optim.Optimizer``).

    Args:
        params: an iterable of Parameters, or of dicts (parameter groups) each with a ``"params"``
            entry and optional per-group hyperparameters that override ``defaults``.
        defaults: the hyperparameters every group gets unless it sets its own.

    Subclasses implement :meth:`step`. Per-parameter state (momentum buffers, moment estimates)
    lives in ``self.state[id(param)]`` as NumPy arrays.
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}
        # Per-parameter work arrays so that updates allocate nothing (not part of the state).
        self._scratch_arrays: dict[int, np.ndarray] = {}
        params = list(params)
        if not params:
            raise InputError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (e.g. a lower ``lr``).

        Example:
            >>> opt.add_param_group({"params": head.parameters(), "lr": 1e-4})  # doctest: +SKIP
        """
        if not isinstance(group, dict) or "params" not in group:
            raise DTypeError(
                f"{type(self).__name__}: a parameter group must be a dict with a 'params' entry, "
                f"got {type(group).__name__}"
            )
        group = dict(group)
        group_index = len(self.param_groups)
        params = group["params"]
        params = [params] if hasattr(params, "grad") else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for i, p in enumerate(params):
            _check_param(p, f"{type(self).__name__}: parameter {i} of group {group_index}")
            if id(p) in seen:
                raise InputError(
                    f"{type(self).__name__}: parameter {i} of group {group_index} appears more "
                    "than once among the optimizer's parameters"
                )
            seen.add(id(p))
        group["params"] = params
        unknown = sorted(set(group) - set(self.defaults) - {"params", "initial_lr"})
        if unknown:
            raise InputError(
                f"{type(self).__name__}: unknown hyperparameter(s) {unknown} in group "
                f"{group_index}; known: {sorted(self.defaults)}"
            )
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._validate_group(group)
        self.param_groups.append(group)

    def _validate_group(self, group: dict[str, Any]) -> None:
        """Check one group's hyperparameters; subclasses raise InputError on bad values."""

    def _params_with_grad(self) -> Iterator[tuple[dict[str, Any], Any, np.ndarray]]:
        """Yield (group, parameter, gradient array) for every parameter that has a gradient."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = _grad_array(p)
                if grad is None:
                    continue
                if grad.shape != p.data.shape:
                    raise ShapeError(
                        f"{type(self).__name__}: gradient of shape {grad.shape} for a parameter "
                        f"of shape {p.data.shape}"
                    )
                yield group, p, grad

    def _scratch(self, param: Any) -> np.ndarray:
        """A reusable array shaped and typed like ``param`` (contents undefined)."""
        scratch = self._scratch_arrays.get(id(param))
        if scratch is None or scratch.shape != param.data.shape or scratch.dtype != param.dtype:
            scratch = self._scratch_arrays[id(param)] = np.empty_like(param.data)
        return scratch

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (to None, or to zeros in place)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    _grad_array(p)[...] = 0

    def step(self) -> None:
        """Update every parameter that has a gradient; implemented by each optimizer."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state and hyperparameters, with parameters replaced by their positions.

        Returns:
            ``{"state": {position: {name: array or number}}, "param_groups": [...]}``, deep copies.
        """
        positions: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                positions.setdefault(id(p), len(positions))
                packed["params"].append(positions[id(p)])
            groups.append(packed)
        state = {positions[key]: copy.deepcopy(value) for key, value in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state saved by :meth:`state_dict` of an optimizer over the same parameters."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise InputError(
                f"{type(self).__name__}.load_state_dict: the saved state has {len(groups)} "
                f"parameter groups, this optimizer has {len(self.param_groups)}"
            )
        by_position: dict[int, Any] = {}
        for index, (saved, group) in enumerate(zip(groups, self.param_groups, strict=True)):
            if len(saved["params"]) != len(group["params"]):
                raise InputError(
                    f"{type(self).__name__}.load_state_dict: group {index} has "
                    f"{len(saved['params'])} parameters in the saved state, "
                    f"{len(group['params'])} here"
                )
            by_position.update(zip(saved["params"], group["params"], strict=True))
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for position, value in state_dict["state"].items():
            param = by_position[position]
            restored = copy.deepcopy(value)
            for name, item in restored.items():
                if isinstance(item, np.ndarray) and item.shape == param.data.shape:
                    restored[name] = item.astype(param.data.dtype, copy=False)
            self.state[id(param)] = restored

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params")
        lines.append(")")
        return "\n".join(lines)
