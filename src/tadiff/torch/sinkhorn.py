"""Sinkhorn–Knopp for torch tensors (CPU or CUDA), with the implicit backward.

The forward and the backward solvers are the kernels of :mod:`tadiff.structured.sinkhorn`, run on
torch tensors. On CUDA, with Triton installed and ``n, m <= 64``, the fused kernels of
:mod:`tadiff.structured.sinkhorn_triton` take over: the "implicit" backward always, the forward
when it needs neither ``tol`` nor the log domain.

Inside ``torch.func`` transforms (``grad``, ``vmap``, ``jacrev``, ``vjp``, nestings of them) a
second Function in torch 2's style (``forward`` without ``ctx``, ``setup_context``) takes over:
``vmap`` folds the mapped dimension into Sinkhorn's own batch (one call for the whole batch) and
the backward runs without in-place updates or values read back, so it can be vmapped too
(per-sample gradients, Jacobians). Under ``torch.autocast``, float16/bfloat16 inputs are computed
in float32 and the kernels run with autocast off (:mod:`tadiff.torch._autocast`, FastH's policy).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from tadiff.errors import AutogradError
from tadiff.structured.sinkhorn import (
    WARN_TOL,
    _check_cg,
    _check_matrix,
    _complete_marginals,
    _prepare,
    check_balanced,
    choose_backward,
    forward_options,
    sinkhorn_forward,
    sinkhorn_vjp,
)
from tadiff.torch._autocast import autocast_inputs, without_autocast
from tadiff.torch._once import guard_inputs, refuse_second_order

__all__ = ["SinkhornFunction", "sinkhorn"]

_ONCE = (
    "sinkhorn: the implicit backward is once-differentiable (no create_graph through the linear "
    "solve); use backward='unrolled' for higher derivatives"
)


def _triton_usable(R: torch.Tensor, method: str = "implicit") -> bool:
    if method != "implicit" or not R.is_cuda:
        return False
    try:
        from tadiff.structured import sinkhorn_triton
    except ImportError:  # Triton is an optional extra: fall back to the torch kernels
        return False
    return sinkhorn_triton.supports(R)


def _forward(X, a, b, options):
    """The forward: the fused Triton kernel on CUDA when it applies, else the generic loop."""
    fwd = options["forward"]
    if fwd["tol"] is None and _triton_usable(X):
        a3, b3, use_log = _prepare(X, a, b, fwd["iters"], None, fwd["log_domain"])
        if not use_log:  # the fused kernel iterates in the scaling domain only
            from tadiff.structured.sinkhorn_triton import sinkhorn_forward_triton

            R = sinkhorn_forward_triton(X, a3[..., 0], b3[..., 0, :], iters=fwd["iters"])
            if fwd["warn_tol"] is not None:
                check_balanced(R, b3, fwd["iters"], fwd["warn_tol"], fwd["strict"])
            return R
    return sinkhorn_forward(X, a, b, **fwd)[0]


class SinkhornFunction(torch.autograd.Function):
    """``R = sinkhorn(X, a, b)`` as a ``torch.autograd.Function``.

    ``apply(X, a, b, options)``: ``a``/``b`` are tensors or None; ``options`` is a dict with the
    keys "forward" (keywords of :func:`~tadiff.structured.sinkhorn.sinkhorn_forward`) and
    "backward" (keywords of :func:`~tadiff.structured.sinkhorn.sinkhorn_vjp`). Prefer
    :func:`sinkhorn`, which builds them.
    """

    @staticmethod
    @without_autocast
    def forward(ctx, X, a, b, options):
        R = _forward(X, a, b, options)
        ctx.options = options["backward"]
        ctx.marginal_shapes = (
            None if a is None else a.shape,
            None if b is None else b.shape,
        )
        ctx.save_for_backward(R)
        return R

    @staticmethod
    @once_differentiable
    @without_autocast
    def backward(ctx, G):
        (R,) = ctx.saved_tensors
        want_a, want_b = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        G = G.contiguous()
        if not (want_a or want_b) and _triton_usable(R, ctx.options["method"]):
            from tadiff.structured.sinkhorn_triton import sinkhorn_vjp_triton

            opts = {k: v for k, v in ctx.options.items() if k != "method"}
            return sinkhorn_vjp_triton(R, G, **opts), None, None, None
        if not (want_a or want_b):
            return sinkhorn_vjp(R, G, **ctx.options), None, None, None
        dX, ga, gb = sinkhorn_vjp(R, G, marginal_grads=True, **ctx.options)
        shape_a, shape_b = ctx.marginal_shapes
        ga = ga.sum_to_size(shape_a) if want_a else None
        gb = gb.sum_to_size(shape_b) if want_b else None
        return dX, ga, gb, None


class _SinkhornForTransforms(torch.autograd.Function):
    """``R = sinkhorn(X, a, b)`` for ``torch.func`` transforms (see the module docstring): the
    same forward and implicit backward as :class:`SinkhornFunction`, in the form the transforms
    need. The backward is once-differentiable: a second derivative (``grad(grad(f))``) raises
    an ``AutogradError`` naming ``backward="unrolled"``."""

    @staticmethod
    @without_autocast
    def forward(X, a, b, options):
        return _forward(X, a, b, options)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, a, b, options = inputs
        ctx.save_for_backward(output)
        ctx.options = options["backward"]
        ctx.marginal_shapes = tuple(None if v is None else v.shape for v in (a, b))

    @staticmethod
    @without_autocast
    def backward(ctx, G):
        (R,) = ctx.saved_tensors
        want_a, want_b = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        with torch.no_grad():
            if want_a or want_b:
                dX, ga, gb = sinkhorn_vjp(R, G, marginal_grads=True, functional=True, **ctx.options)
                shape_a, shape_b = ctx.marginal_shapes
                ga = ga.sum_to_size(shape_a) if want_a else None
                gb = gb.sum_to_size(shape_b) if want_b else None
            else:
                dX, ga, gb = sinkhorn_vjp(R, G, functional=True, **ctx.options), None, None
        # a transform differentiating this result again (grad of grad) meets an error, not zeros
        return (*refuse_second_order(_ONCE, (dX, ga, gb), (R, G), transforms=True), None)

    @staticmethod
    def jvp(ctx, *tangents):
        raise AutogradError(
            "sinkhorn: forward-mode derivatives (torch.func.jvp, jacfwd, hessian) are not "
            "implemented for the implicit backward; use backward='unrolled', or jacrev"
        )

    @staticmethod
    def vmap(info, in_dims, X, a, b, options):
        # The mapped dimension becomes Sinkhorn's leading batch dimension: one call. Each mapped
        # tensor gets it in front of its own batch dimensions, padded with 1s to the longest
        # per-sample batch so that it lines up; X is expanded to the whole batch (its marginals
        # broadcast against it, not the other way round).
        cores = (2, 1, 1)  # trailing (n, m), (n,), (m,) of X, a, b
        tensors = (X, a, b)
        dims = in_dims[:3]
        rank = max(
            t.ndim - core - (dim is not None)
            for t, dim, core in zip(tensors, dims, cores, strict=True)
            if t is not None
        )

        def leading(t, dim, core):
            if t is None or dim is None:
                return t
            t = t.movedim(dim, 0)
            return t.reshape(t.shape[0], *(1,) * (rank + 1 - t.ndim + core), *t.shape[1:])

        X, a, b = (leading(*args) for args in zip(tensors, dims, cores, strict=True))
        batch = torch.broadcast_shapes(
            *(
                t.shape[: t.ndim - core]
                for t, core in zip((X, a, b), cores, strict=True)
                if t is not None
            )
        )
        X = X.expand(*batch, *X.shape[-2:])
        return _SinkhornForTransforms.apply(X, a, b, options), 0


_transforms_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def sinkhorn(
    X: torch.Tensor,
    a: Any = None,
    b: Any = None,
    *,
    iters: int = 20,
    tol: float | None = None,
    log_domain: bool | str = "auto",
    backward: str = "auto",
    strict: bool = False,
    cg_maxiter: int | None = None,
    cg_tol: float | None = None,
    warn_tol: float | None = WARN_TOL,
) -> torch.Tensor:
    """Sinkhorn–Knopp projection of ``exp(X)`` for torch tensors, implicit backward.

    Works under ``torch.func`` transforms (``grad``, ``vmap``, ``jacrev``, ``vjp``; the implicit
    backward is once-differentiable, ``backward="unrolled"`` differentiates to any order) and
    under ``torch.autocast`` (float16/bfloat16 inputs computed in float32, result float32).

    Args:
        X: logits, shape ``(..., n, m)``, floating, any device.
        a, b: row / column marginals, ``(..., n)`` / ``(..., m)``, positive, equal mass; defaults
            as in :func:`tadiff.structured.sinkhorn.sinkhorn_forward`. Gradients flow to them.
        iters, tol, log_domain, strict, warn_tol: see
            :func:`tadiff.structured.sinkhorn.sinkhorn_forward`; an unbalanced ``R`` warns by
            default (not with ``backward="unrolled"``).
        backward: "implicit", "implicit-2n", "direct", "unrolled" (torch autograd through the
            iterations) or "auto" (see :func:`tadiff.structured.sinkhorn.choose_backward`).
        cg_maxiter, cg_tol: see :func:`tadiff.structured.sinkhorn.sinkhorn_vjp`.

    Returns:
        ``R``, shape, dtype and device of ``X``.

    Example:
        >>> X = torch.randn(8, 4, 4, dtype=torch.float64, requires_grad=True)
        >>> R = sinkhorn(X, iters=100)
        >>> (R * torch.randn(8, 4, 4, dtype=torch.float64)).sum().backward()
        >>> bool(X.grad.sum(-1).abs().max() < 1e-10)   # rows of the gradient sum to zero
        True
    """
    transforms = _transforms_active()  # inside torch.func.grad / vmap / jacrev / …
    n, m = _check_matrix(X, values=not transforms)  # values: in the forward, see _check_matrix
    method = choose_backward(backward, n, m)
    _check_cg(cg_maxiter, cg_tol)  # now, not at the first backward
    forward = forward_options(iters, tol, log_domain, strict, warn_tol, method)
    X, a, b = autocast_inputs(X, a, b)
    if method == "unrolled":
        return without_autocast(lambda X, a, b: sinkhorn_forward(X, a, b, **forward)[0])(X, a, b)
    a = a if a is None or isinstance(a, torch.Tensor) else X.detach().new_tensor(a)
    b = b if b is None or isinstance(b, torch.Tensor) else X.detach().new_tensor(b)
    a, b = _complete_marginals(X, a, b, values=not transforms)
    options = {
        "forward": forward,
        "backward": {"method": method, "cg_maxiter": cg_maxiter, "cg_tol": cg_tol},
    }
    if transforms:
        return _SinkhornForTransforms.apply(X, a, b, options)
    # The Function's backward is once-differentiable; torch would make a second derivative wrt X
    # silently zero, the guard makes it raise instead (see tadiff.torch._once).
    X, a, b = guard_inputs(_ONCE, X, a, b)
    return SinkhornFunction.apply(X, a, b, options)
