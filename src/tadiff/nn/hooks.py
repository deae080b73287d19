"""Module hooks with torch's semantics: forward pre-hooks, forward hooks and full backward hooks.

``Module.__call__`` runs them when any is registered (and is a plain ``forward`` call when none
is). A full backward hook sees the gradients with respect to the module's tensor inputs and
outputs: the inputs and outputs of the call pass through an identity node whose backward
catches them, as torch's ``BackwardHook`` does.

Example:
    >>> import tadiff as td
    >>> lin = td.nn.Linear(2, 1)
    >>> seen = []
    >>> handle = lin.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    >>> _ = lin(td.ones(3, 2)); handle.remove(); _ = lin(td.ones(3, 2))
    >>> seen
    [(3, 1)]
"""

from __future__ import annotations

from typing import Any

from tadiff.autograd.function import Function
from tadiff.autograd.grad_mode import is_grad_enabled
from tadiff.autograd.graph import RemovableHandle
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError


class Hooks:
    """The hooks of one module, in registration order."""

    __slots__ = ("backward", "forward", "forward_pre")

    def __init__(self) -> None:
        self.forward_pre: list[Any] = []
        self.forward: list[Any] = []
        self.backward: list[Any] = []


def register(module: Any, kind: str, hook: Any) -> RemovableHandle:
    if not callable(hook):
        raise InputError(f"register_{kind}_hook: the hook must be callable, got {type(hook)!r}")
    hooks = module.__dict__.get("_hooks")
    if hooks is None:
        hooks = Hooks()
        object.__setattr__(module, "_hooks", hooks)
    table = getattr(hooks, kind)
    entry = (hook,)  # a fresh object per registration: removing one leaves the others
    table.append(entry)
    return RemovableHandle(table, entry)


def call(module: Any, hooks: Hooks, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``module(*args, **kwargs)`` with its hooks."""
    for (hook,) in list(hooks.forward_pre):
        changed = hook(module, args)
        if changed is not None:
            args = changed if isinstance(changed, tuple) else (changed,)
    state = None
    if hooks.backward and is_grad_enabled():
        state = _BackwardState(module, hooks)
        args = state.wrap_inputs(args)
    out = module.forward(*args, **kwargs)
    for (hook,) in list(hooks.forward):
        changed = hook(module, args, out)
        if changed is not None:
            out = changed
    if state is not None:
        out = state.wrap_outputs(out)
    return out


class _BackwardState:
    """What a full backward hook needs between the output's and the input's gradients."""

    def __init__(self, module: Any, hooks: Hooks):
        self.module, self.hooks = module, hooks
        self.n_inputs = 0
        self.grad_output: tuple[Any, ...] | None = None

    def wrap_inputs(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        slots = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        self.n_inputs = len([a for a in args if isinstance(a, Tensor)])
        self.positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not slots:
            return args
        wrapped = _Identity.apply(self, "input", *(args[i] for i in slots))
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        out = list(args)
        for i, w in zip(slots, wrapped, strict=True):
            out[i] = w
        self.input_slots = slots
        return tuple(out)

    def wrap_outputs(self, out: Any) -> Any:
        outs = out if isinstance(out, tuple) else (out,)
        slots = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not slots:
            return out
        self.output_slots, self.n_outputs = slots, len(outs)
        wrapped = _Identity.apply(self, "output", *(outs[i] for i in slots))
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        result = list(outs)
        for i, w in zip(slots, wrapped, strict=True):
            result[i] = w
        return tuple(result) if isinstance(out, tuple) else result[0]

    def caught(self, where: str, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        if where == "output":
            full = [None] * self.n_outputs
            for i, g in zip(self.output_slots, grads, strict=True):
                full[i] = g
            self.grad_output = tuple(full)
            if not hasattr(self, "input_slots"):  # no input needs a gradient: call now
                self._run((None,) * self.n_inputs)
            return grads
        by_position = dict(zip(self.input_slots, grads, strict=True))
        grad_input = tuple(by_position.get(p) for p in self.positions)
        grad_input = self._run(grad_input)
        lookup = dict(zip(self.positions, grad_input, strict=True))
        return tuple(lookup[p] for p in self.input_slots)

    def _run(self, grad_input: tuple[Any, ...]) -> tuple[Any, ...]:
        for (hook,) in list(self.hooks.backward):
            changed = hook(self.module, grad_input, self.grad_output)
            if changed is not None:
                changed = tuple(changed) if isinstance(changed, (tuple, list)) else (changed,)
                if len(changed) != len(grad_input):
                    raise InputError(
                        f"backward hook returned {len(changed)} gradients, expected "
                        f"{len(grad_input)} (one per tensor input)"
                    )
                grad_input = changed
        return grad_input


class _Identity(Function):
    """Passes tensors through; its backward hands their gradients to a ``_BackwardState``."""

    @staticmethod
    def forward(ctx: Any, state: _BackwardState, where: str, *tensors: Tensor) -> Any:
        ctx.state, ctx.where = state, where
        outs = tuple(t.data for t in tensors)
        return outs if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None, None, *ctx.state.caught(ctx.where, grads))
