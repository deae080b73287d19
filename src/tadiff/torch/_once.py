"""Once-differentiable backwards that refuse a second derivative instead of returning zeros.

torch's ``once_differentiable`` connects the error it raises on a second derivative only to the
*output gradients*: the dependence of the backward's result on the forward inputs (through the
saved tensors) is dropped without a trace, so ``gradgradcheck`` reports zeros for it, a silent
wrong answer. Here the result is also connected to the saved tensors and forward inputs, through
a node whose backward raises :class:`tadiff.errors.AutogradError` naming the op.
"""

from __future__ import annotations

from typing import Any

import torch

from tadiff.errors import AutogradError


class _Refuse(torch.autograd.Function):
    """Identity on ``value``; differentiating it (wrt anything in ``connect``) raises."""

    @staticmethod
    def forward(ctx: Any, message: str, value: torch.Tensor, *connect: torch.Tensor) -> Any:
        ctx.message = message
        return value.view_as(value)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise AutogradError(ctx.message)


class _RefuseInTransforms(torch.autograd.Function):
    """:class:`_Refuse` in the form ``torch.func`` transforms need (``setup_context``, a vmap
    rule): inside ``torch.func.grad(torch.func.grad(f))`` the outer transform differentiates the
    inner backward's result, and must hit this node instead of reading a silent zero."""

    generate_vmap_rule = True

    @staticmethod
    def forward(message: str, value: torch.Tensor, *connect: torch.Tensor) -> Any:
        return value.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.message = inputs[0]

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise AutogradError(ctx.message)


def refuse_second_order(
    message: str, results: Any, connect: tuple, transforms: bool = False
) -> Any:
    """Connect each tensor of ``results`` to the tensors of ``connect`` that require grad, so a
    later differentiation raises ``message`` (only while grad mode records, i.e. under
    ``create_graph`` or a ``torch.func`` transform; otherwise ``results`` come back unchanged).
    ``transforms``: inside ``torch.func`` transforms.
    """
    if not torch.is_grad_enabled():
        return results
    links = tuple(t for t in connect if isinstance(t, torch.Tensor) and t.requires_grad)
    if not links:
        return results
    refuse = _RefuseInTransforms if transforms else _Refuse
    single = not isinstance(results, tuple)
    wrapped = tuple(
        refuse.apply(message, r, *links) if isinstance(r, torch.Tensor) else r
        for r in ((results,) if single else results)
    )
    return wrapped[0] if single else wrapped


class _Guard(torch.autograd.Function):
    """Identity on the inputs of a once-differentiable op; under ``create_graph`` the gradients
    it passes back are tied to those inputs by :class:`_Refuse`."""

    @staticmethod
    def forward(ctx: Any, message: str, *tensors: torch.Tensor) -> Any:
        ctx.message = message
        ctx.save_for_backward(*tensors)
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        out = refuse_second_order(ctx.message, tuple(grads), tuple(ctx.saved_tensors))
        return (None, *out)


def guard_inputs(message: str, *values: Any) -> tuple:
    """Pass the tensors among ``values`` that require grad through :class:`_Guard`.

    Returns:
        ``values`` with those tensors replaced by guarded views (same data).
    """
    picked = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor) and v.requires_grad]
    if not picked or not torch.is_grad_enabled():
        return values
    guarded = _Guard.apply(message, *(values[i] for i in picked))
    out = list(values)
    for i, g in zip(picked, guarded, strict=True):
        out[i] = g
    return tuple(out)
