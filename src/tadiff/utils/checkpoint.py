"""Activation checkpointing: ``checkpoint(function, *args)`` keeps no intermediate of
``function`` for the backward pass and recomputes them there, trading compute for memory.

The forward runs under ``no_grad``; the backward reruns ``function`` on the saved inputs with
the random generator in the state it had (so ``dropout`` draws the same mask) and
backpropagates through that recomputation. Gradients of tensors ``function`` captures
(a module's parameters) are accumulated into their ``.grad`` by that inner pass — the
semantics of torch's reentrant checkpoint, with its limits: use it with ``.backward()``, not with
``td.autograd.grad`` or ``create_graph=True`` (refused with an error).

Example:
    >>> import tadiff as td
    >>> from tadiff.utils.checkpoint import checkpoint
    >>> x = td.tensor([1.0, 2.0], requires_grad=True)
    >>> checkpoint(lambda t: (t.sin() * t).sum(), x).backward()
    >>> x.grad.shape
    (2,)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tadiff.autograd import factories
from tadiff.autograd.engine import backward as _backward
from tadiff.autograd.function import Function
from tadiff.autograd.grad_mode import enable_grad, is_grad_enabled
from tadiff.autograd.tensor import Tensor
from tadiff.errors import AutogradError, InputError

__all__ = ["checkpoint"]


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` without storing its intermediates (recomputed in backward).

    Args:
        function: returns a Tensor or a tuple of Tensors (other values pass through).
        *args: its positional arguments; Tensors among them receive gradients.
        use_reentrant: accepted for torch's signature (the recomputation is reentrant).
        preserve_rng_state: rerun with the random generator's state of the forward call.
        **kwargs: keyword arguments for ``function`` (not differentiated).

    Returns:
        What ``function`` returns.
    """
    if not callable(function):
        raise InputError(f"checkpoint: function must be callable, got {type(function)!r}")
    return _Checkpoint.apply(function, preserve_rng_state, kwargs, *args)


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx: Any, function: Any, preserve: bool, kwargs: dict, *args: Any) -> Any:
        ctx.function, ctx.kwargs, ctx.args = function, kwargs, args
        ctx.rng_state = factories._rng.bit_generator.state if preserve else None
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return function(*args, **kwargs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if is_grad_enabled():
            raise AutogradError(
                "checkpoint: create_graph=True is not supported (the recomputed graph is "
                "differentiated once, inside this backward)"
            )
        saved = iter(ctx.saved_tensors)
        inputs = []
        for a in ctx.args:
            if isinstance(a, Tensor):
                t = next(saved)
                a = t.detach().requires_grad_(t.requires_grad)
            inputs.append(a)
        after = factories._rng.bit_generator.state
        if ctx.rng_state is not None:
            factories._rng.bit_generator.state = ctx.rng_state
        try:
            with enable_grad():
                out = ctx.function(*inputs, **ctx.kwargs)
        finally:
            factories._rng.bit_generator.state = after
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [
            (o, g)
            for o, g in zip(outs, grads, strict=False)
            if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        if pairs:
            _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None, *(
            a.grad if isinstance(a, Tensor) and a.requires_grad else None for a in inputs
        ))  # fmt: skip
