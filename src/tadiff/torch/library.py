"""tadiff's torch ops registered with ``torch.library``, so ``torch.compile`` keeps them whole.

The ``torch.autograd.Function`` versions (:func:`tadiff.torch.sinkhorn`,
:func:`tadiff.torch.householder_apply`) run under ``torch.compile`` too, but Dynamo cannot trace
their data-dependent Python (convergence checks, ``.item()``) and splits the graph around them.
The ops here are opaque custom ops with a fake (shape-only) implementation and a registered
autograd formula: Dynamo records one node per call, ``fullgraph=True`` works, and the inductor and
``aot_eager`` backends compile the surrounding code. They are available as ``torch.ops.tadiff.*``
once this module is imported:

======================================  ================================================
op                                      what
======================================  ================================================
``tadiff::sinkhorn``                    ``R`` from ``X`` and (optional) marginals
``tadiff::sinkhorn_vjp``                ``dX`` (implicit/direct solve; once-differentiable)
``tadiff::sinkhorn_vjp_marginals``      ``(dX, da, db)``
``tadiff::householder_apply``           FastH ``U X`` / ``Uᵀ X``
``tadiff::householder_vjp``             FastH backward ``(dV, dX)``; differentiable again
======================================  ================================================

Differences from the Function versions: ``householder_vjp`` recomputes the forward (a custom op
cannot keep FastH's block intermediates between forward and backward), so a training step costs
one extra FastH forward; the sinkhorn ``backward="unrolled"`` option is plain torch code, not an
op; and on CUDA the Triton kernels are not used. Second derivatives: FastH through autograd of
the differentiable blocked forward (exact); Sinkhorn's implicit backward is once-differentiable
and differentiating it again raises :class:`tadiff.errors.AutogradError`.

Example (``torch.compile(fn, fullgraph=True)`` of such code keeps one graph; see the tests):
    >>> import torch
    >>> from tadiff.torch import library
    >>> X = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    >>> library.sinkhorn(X, iters=50).square().sum().backward()
    >>> X.grad.shape
    torch.Size([2, 3, 3])
    >>> torch.ops.tadiff.householder_apply.default
    <OpOverload(op='tadiff.householder_apply', overload='default')>
"""

from __future__ import annotations

from typing import Any

import torch

from tadiff.errors import AutogradError, InputError
from tadiff.structured.householder import (
    _build_blocks,
    _check_inputs,
    _fold,
    _forward,
    _unfold,
    _vjp_differentiable,
    householder_vjp,
)
from tadiff.structured.sinkhorn import (
    WARN_TOL,
    _check_cg,
    _check_matrix,
    choose_backward,
    forward_options,
    sinkhorn_forward,
    sinkhorn_vjp,
)
from tadiff.torch.householder import (
    _HouseholderApplyForTransforms,
    _transforms_active,
    autocast_inputs,
    without_autocast,
)

__all__ = ["householder_apply", "householder_product", "sinkhorn"]

_LOG_DOMAIN = {"auto": "auto", "true": True, "false": False}

# ----------------------------------------------------------------------------------------------
# Sinkhorn
# ----------------------------------------------------------------------------------------------


@torch.library.custom_op("tadiff::sinkhorn", mutates_args=())
def _sinkhorn_op(
    X: torch.Tensor,
    a: torch.Tensor | None,
    b: torch.Tensor | None,
    iters: int,
    tol: float | None,
    log_domain: str,
    strict: bool,
    method: str,
    cg_maxiter: int | None,
    cg_tol: float | None,
    warn_tol: float | None,
) -> torch.Tensor:
    log_domain = _LOG_DOMAIN[log_domain]
    R, _ = sinkhorn_forward(
        X, a, b, iters=iters, tol=tol, log_domain=log_domain, strict=strict, warn_tol=warn_tol
    )
    return R if R is not X else R.clone()  # an op's output must not alias its input


@_sinkhorn_op.register_fake
def _(X, a, b, iters, tol, log_domain, strict, method, cg_maxiter, cg_tol, warn_tol):
    return torch.empty_like(X)


def _sinkhorn_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    _, a, b, _, _, _, _, method, cg_maxiter, cg_tol, _ = inputs
    ctx.solver = (method, cg_maxiter, cg_tol)
    ctx.marginal_shapes = (None if a is None else a.shape, None if b is None else b.shape)
    ctx.save_for_backward(output)


def _sinkhorn_backward(ctx: Any, G: torch.Tensor) -> tuple:
    (R,) = ctx.saved_tensors
    method, cg_maxiter, cg_tol = ctx.solver
    want_a, want_b = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
    options = (None,) * 8  # iters, tol, log_domain, strict, method, cg_maxiter, cg_tol, warn_tol
    if not (want_a or want_b):
        return (_sinkhorn_vjp_op(R, G, method, cg_maxiter, cg_tol), None, None, *options)
    dX, ga, gb = _sinkhorn_vjp_marginals_op(R, G, method, cg_maxiter, cg_tol)
    shape_a, shape_b = ctx.marginal_shapes
    ga = ga.sum_to_size(shape_a) if want_a else None
    gb = gb.sum_to_size(shape_b) if want_b else None
    return (dX, ga, gb, *options)


_sinkhorn_op.register_autograd(_sinkhorn_backward, setup_context=_sinkhorn_setup)


@torch.library.custom_op("tadiff::sinkhorn_vjp", mutates_args=())
def _sinkhorn_vjp_op(
    R: torch.Tensor, G: torch.Tensor, method: str, cg_maxiter: int | None, cg_tol: float | None
) -> torch.Tensor:
    return sinkhorn_vjp(R, G.contiguous(), method=method, cg_maxiter=cg_maxiter, cg_tol=cg_tol)


@_sinkhorn_vjp_op.register_fake
def _(R, G, method, cg_maxiter, cg_tol):
    return torch.empty_like(R)


@torch.library.custom_op("tadiff::sinkhorn_vjp_marginals", mutates_args=())
def _sinkhorn_vjp_marginals_op(
    R: torch.Tensor, G: torch.Tensor, method: str, cg_maxiter: int | None, cg_tol: float | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return sinkhorn_vjp(
        R, G.contiguous(), method=method, cg_maxiter=cg_maxiter, cg_tol=cg_tol, marginal_grads=True
    )


@_sinkhorn_vjp_marginals_op.register_fake
def _(R, G, method, cg_maxiter, cg_tol):
    return torch.empty_like(R), R.new_empty(R.shape[:-1]), R.new_empty((*R.shape[:-2], R.shape[-1]))


def _once_differentiable(ctx: Any, *grads: Any) -> tuple:
    raise AutogradError(
        "tadiff::sinkhorn: the implicit backward is once-differentiable (no create_graph through "
        "the linear solve); use backward='unrolled' for higher derivatives"
    )


def _setup_nothing(ctx: Any, inputs: tuple, output: Any) -> None:
    pass


_sinkhorn_vjp_op.register_autograd(_once_differentiable, setup_context=_setup_nothing)
_sinkhorn_vjp_marginals_op.register_autograd(_once_differentiable, setup_context=_setup_nothing)


def sinkhorn(
    X: torch.Tensor,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
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
    """:func:`tadiff.torch.sinkhorn` as the custom op ``tadiff::sinkhorn`` (compiles whole).

    Args and Returns: as :func:`tadiff.torch.sinkhorn`; ``a``/``b`` must be tensors or None.
    ``backward="unrolled"`` runs the plain torch loop (no op), which Dynamo traces itself.

    Example:
        >>> X = torch.randn(4, 3, 3, dtype=torch.float64)
        >>> R = sinkhorn(X, iters=100)
        >>> bool((R.sum(-1) - 1).abs().max() < 1e-12)
        True
    """
    n, m = _check_matrix(X) if not _is_compiling() else (int(X.shape[-2]), int(X.shape[-1]))
    method = choose_backward(backward, n, m)
    _check_cg(cg_maxiter, cg_tol)
    if log_domain not in ("auto", True, False):
        raise InputError(f"sinkhorn: log_domain must be 'auto', True or False, got {log_domain!r}")
    forward = forward_options(iters, tol, log_domain, strict, warn_tol, method)
    if method == "unrolled":
        return sinkhorn_forward(X, a, b, **forward)[0]
    for name, v in (("a", a), ("b", b)):
        if v is not None and not isinstance(v, torch.Tensor):
            raise InputError(f"sinkhorn: {name} must be a torch tensor or None, got {type(v)}")
    if (a is None) != (b is None):
        # Spread the given mass evenly over the other side with differentiable torch ops, so
        # gradients flow from both marginals to the given one (values are checked in the op).
        given, size = (a, m) if b is None else (b, n)
        other = given.sum(-1, keepdim=True) * given.new_full((size,), 1.0 / size)
        a, b = (given, other) if b is None else (other, given)
    mode = {True: "true", False: "false"}.get(log_domain, "auto")
    return _sinkhorn_op(X, a, b, iters, tol, mode, strict, method, cg_maxiter, cg_tol, warn_tol)


def _is_compiling() -> bool:
    return torch.compiler.is_compiling()


# ----------------------------------------------------------------------------------------------
# FastH
# ----------------------------------------------------------------------------------------------


@torch.library.custom_op("tadiff::householder_apply", mutates_args=())
@without_autocast
def _householder_op(V: torch.Tensor, X: torch.Tensor, block: int, transpose: bool) -> torch.Tensor:
    d = int(V.shape[1])
    blocks = _build_blocks(torch, V.flip(0) if transpose else V, block)
    Y, _ = _forward(torch, blocks, _fold(torch, X, d), save=False)
    return _unfold(torch, Y, tuple(X.shape))


@_householder_op.register_fake
def _(V, X, block, transpose):
    return torch.empty_like(X)


def _householder_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    V, X, block, transpose = inputs
    ctx.options = (block, transpose)
    ctx.save_for_backward(V, X)


def _householder_backward(ctx: Any, G: torch.Tensor) -> tuple:
    V, X = ctx.saved_tensors
    block, transpose = ctx.options
    gV, gX = _householder_vjp_op(V, X, G, block, transpose)
    need_v, need_x = ctx.needs_input_grad[:2]
    return (gV if need_v else None, gX if need_x else None, None, None)


_householder_op.register_autograd(_householder_backward, setup_context=_householder_setup)


@torch.library.custom_op("tadiff::householder_vjp", mutates_args=())
@without_autocast
def _householder_vjp_op(
    V: torch.Tensor, X: torch.Tensor, G: torch.Tensor, block: int, transpose: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    return householder_vjp(V, X, G.contiguous(), block=block, transpose=transpose)


@_householder_vjp_op.register_fake
def _(V, X, G, block, transpose):
    return torch.empty_like(V), torch.empty_like(X)


def _householder_vjp_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    V, X, G, block, transpose = inputs
    ctx.options = (block, transpose)
    ctx.save_for_backward(V, X, G)


@without_autocast
def _householder_vjp_backward(ctx: Any, ggV: Any, ggX: Any) -> tuple:
    """Second order: autograd through the differentiable blocked gradient.

    When the caller records (``create_graph`` at this level too), the saved tensors keep their
    history and the result is differentiable again; otherwise they are detached.
    """
    V, X, G = ctx.saved_tensors
    block, transpose = ctx.options
    recording = torch.is_grad_enabled()
    with torch.enable_grad():
        leaves = [
            t if recording and t.requires_grad else t.detach().requires_grad_(True)
            for t in (V, X, G)
        ]
        gV, gX = _vjp_differentiable(torch, *leaves, block, transpose)
        pairs = [(o, g) for o, g in ((gV, ggV), (gX, ggX)) if g is not None]
        grads = torch.autograd.grad(
            [o for o, _ in pairs],
            leaves,
            [g for _, g in pairs],
            create_graph=recording,
            allow_unused=True,
        )
    need = ctx.needs_input_grad[:3]
    out = [g if n else None for g, n in zip(grads, need, strict=True)]
    out = [
        torch.zeros_like(t) if n and g is None else g
        for g, n, t in zip(out, need, (V, X, G), strict=True)
    ]
    return (*out, None, None)


_householder_vjp_op.register_autograd(
    _householder_vjp_backward, setup_context=_householder_vjp_setup
)


def householder_apply(
    V: torch.Tensor, X: torch.Tensor, *, block: int | None = None, transpose: bool = False
) -> torch.Tensor:
    """:func:`tadiff.torch.householder_apply` as the custom op ``tadiff::householder_apply``.

    Args:
        V: (k, d) Householder vectors (nonzero rows), float32 or float64.
        X: (..., d, m), same dtype and device.
        block: FastH block size (None: the default rule).
        transpose: compute ``Uᵀ X``.

    Returns:
        (..., d, m) tensor.

    Example:
        >>> V = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        >>> Y = householder_apply(V, torch.eye(4, dtype=torch.float64))
        >>> bool(torch.allclose(Y @ Y.T, torch.eye(4, dtype=torch.float64)))
        True
    """
    V, X = autocast_inputs(V, X)
    # the block rule differs when a gradient wrt V will be computed (see default_block)
    backward = torch.is_grad_enabled() and getattr(V, "requires_grad", False)
    _, _, b = _check_inputs(V, X, block, backward=backward)
    if not _is_compiling() and _transforms_active():
        # torch.func cannot run a custom op's registered autograd: the Function built for it
        return _HouseholderApplyForTransforms.apply(V, X, b, bool(transpose))
    return _householder_op(V, X, b, bool(transpose))


def householder_product(
    V: torch.Tensor, *, block: int | None = None, transpose: bool = False
) -> torch.Tensor:
    """The dense (d, d) matrix ``U`` (or ``Uᵀ``) through ``tadiff::householder_apply``."""
    eye = torch.eye(int(V.shape[-1]), dtype=V.dtype, device=V.device)
    return householder_apply(V, eye, block=block, transpose=transpose)
