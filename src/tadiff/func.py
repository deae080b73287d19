"""Function transforms in the style of ``torch.func`` / JAX: ``grad value_and_grad vjp jvp
jacrev jacfwd hessian``.

A transform takes a function of Tensors and returns a function computing its derivative, so they
compose: ``grad(grad(f))`` is the second derivative, ``jacrev(grad(f))`` the Hessian. They run on
tadiff's reverse-mode engine: an input that already requires grad (because an outer transform
or the caller differentiates through it) is used as is and the result stays differentiable;
any other input is differentiated as a fresh leaf. ``jvp`` and ``jacfwd`` have no forward mode
behind them: ``jvp`` is two reverse passes (the double-backward trick) and ``jacfwd`` returns
the same Jacobian as ``jacrev``. There is no ``vmap``.

Example:
    >>> import tadiff as td
    >>> from tadiff import func
    >>> f = lambda x: (x ** 3).sum()
    >>> x = td.tensor([1.0, 2.0], dtype=td.float64)
    >>> func.grad(f)(x), func.grad(lambda t: func.grad(f)(t).sum())(x)
    (tensor([ 3., 12.], dtype=float64), tensor([ 6., 12.], dtype=float64))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tadiff.autograd.engine import grad as _grad
from tadiff.autograd.grad_mode import enable_grad, is_grad_enabled
from tadiff.autograd.graph import AccumulateGrad
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import InputError, ShapeError
from tadiff.ops.shape import reshape, stack

__all__ = ["grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "value_and_grad", "vjp"]


def _argnums(argnums: int | Sequence[int], n: int) -> tuple[tuple[int, ...], bool]:
    many = not isinstance(argnums, (int, np.integer))
    nums = tuple(int(a) for a in argnums) if many else (int(argnums),)
    if not nums or any(not -n <= a < n for a in nums):
        raise InputError(f"argnums {argnums!r} out of range for a function of {n} arguments")
    return tuple(a % n for a in nums), many


def _prepare(args: Sequence[Any], argnums: Any, where: str) -> tuple[list, list, bool, bool]:
    """The arguments with the differentiated ones as Tensors that require grad; whether the
    result must stay differentiable (an input was already tracked by an outer transform or the
    caller); and whether ``argnums`` was a sequence."""
    nums, many = _argnums(argnums, len(args))
    full = list(args)
    tracked = False
    for a in nums:
        x = full[a] if isinstance(full[a], Tensor) else Tensor(np.asarray(full[a]))
        if x.data.dtype.kind != "f":
            raise InputError(
                f"{where}: argument {a} must be a floating tensor to be differentiated, "
                f"got dtype {x.dtype}"
            )
        if x.requires_grad and is_grad_enabled():
            tracked = True
        else:
            x = x.detach().requires_grad_(True)
        full[a] = x
    return full, [full[a] for a in nums], tracked, many


def _depends_on_others(out: Tensor, inputs: Sequence[Tensor]) -> bool:
    """Whether ``out``'s graph reaches a leaf other than ``inputs`` (a captured parameter): then
    derivatives must stay differentiable, as torch.func's do, even without an outer transform."""
    own = {id(x) for x in inputs}
    seen, stack_ = set(), [out.grad_fn]
    while stack_:
        node = stack_.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            if id(node.variable) not in own:
                return True
            continue
        stack_.extend(node._next)
    return False


def _plain(value: Any, keep: bool) -> Any:
    return value.detach() if isinstance(value, Tensor) and not keep else value


def _zeros_for_none(gs: Sequence[Any], xs: Sequence[Tensor]) -> tuple[Tensor, ...]:
    return tuple(
        _make(np.zeros_like(x.data)) if g is None else g for g, x in zip(gs, xs, strict=True)
    )


def _split_aux(out: Any, has_aux: bool, where: str) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not isinstance(out, tuple) or len(out) != 2:
        raise InputError(f"{where}(has_aux=True): the function must return (output, aux)")
    return out


def value_and_grad(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f -> (x -> (f(x), ∇f(x)))`` for a function with a single-element output.

    Args:
        func: function of Tensors returning a one-element Tensor (and an aux value with
            ``has_aux``).
        argnums: which positional argument(s) to differentiate; a tuple gives a tuple of
            gradients.
        has_aux: ``func`` returns ``(output, aux)``; aux is passed through untouched.

    Returns:
        A function returning ``(value, gradient)``, or ``((value, aux), gradient)``.
    """

    def transformed(*args: Any) -> Any:
        full, inputs, keep, many = _prepare(args, argnums, "grad")
        with enable_grad():
            out, aux = _split_aux(func(*full), has_aux, "grad")
            if not isinstance(out, Tensor) or out.data.size != 1:
                shape = getattr(out, "shape", type(out).__name__)
                raise ShapeError(
                    f"grad: the function must return a one-element Tensor, got {shape}"
                )
            keep = keep or (is_grad_enabled() and _depends_on_others(out, inputs))
            gs = _zeros_for_none(_grad(out, inputs, create_graph=keep, allow_unused=True), inputs)
        value, aux = _plain(out, keep), _plain(aux, keep)
        return ((value, aux) if has_aux else value), (gs if many else gs[0])

    return transformed


def grad(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f -> ∇f`` (see :func:`value_and_grad`); with ``has_aux`` returns ``(gradient, aux)``."""
    both = value_and_grad(func, argnums, has_aux)

    def transformed(*args: Any) -> Any:
        value, g = both(*args)
        return (g, value[1]) if has_aux else g

    return transformed


def grad_and_value(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f -> (x -> (∇f(x), f(x)))``, torch.func's order (:func:`value_and_grad` is JAX's); with
    ``has_aux`` returns ``(gradient, (value, aux))``.

    Example:
        >>> import tadiff as td
        >>> g, v = grad_and_value(lambda x: (x**2).sum())(td.tensor([1.0, 2.0]))
        >>> g, v
        (tensor([2., 4.]), tensor(5.))
    """
    both = value_and_grad(func, argnums, has_aux)

    def transformed(*args: Any) -> Any:
        value, g = both(*args)
        return g, value

    return transformed


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(f(primals), vjp_fn)``: ``vjp_fn(v)`` is the tuple of ``vᵀ ∂f/∂primal_i``; with
    ``has_aux`` a third element, the aux value. ``vjp_fn`` may be called several times."""
    _, xs, keep, _ = _prepare(primals, tuple(range(len(primals))), "vjp")
    with enable_grad():
        out, aux = _split_aux(func(*xs), has_aux, "vjp")
    keep = keep or (is_grad_enabled() and _depends_on_others(out, xs))

    def vjp_fn(v: Any) -> tuple[Tensor, ...]:
        v = v if isinstance(v, Tensor) else _make(np.asarray(v, dtype=out.dtype))
        if tuple(v.shape) != tuple(out.shape):
            raise ShapeError(
                f"vjp: the cotangent must have the output's shape {out.shape}, got {v.shape}"
            )
        with enable_grad():
            gs = _grad(out, xs, v, retain_graph=True, create_graph=keep, allow_unused=True)
        return _zeros_for_none(gs, xs)

    value, aux = _plain(out, keep), _plain(aux, keep)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def jvp(
    func: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[Any, Any]:
    """``(f(primals), J · tangents)`` by two reverse passes (no forward mode):
    ``J t = ∂/∂u (uᵀ J) t`` at ``u = 0``."""
    if len(primals) != len(tangents):
        raise InputError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    _, xs, keep, _ = _prepare(primals, tuple(range(len(primals))), "jvp")
    ts = [
        t if isinstance(t, Tensor) else _make(np.asarray(t, dtype=x.dtype))
        for t, x in zip(tangents, xs, strict=True)
    ]
    for x, t in zip(xs, ts, strict=True):
        if tuple(t.shape) != tuple(x.shape):
            raise ShapeError(
                f"jvp: a tangent of shape {t.shape} does not match its primal's shape {x.shape}"
            )
    with enable_grad():
        out = func(*xs)
        keep = keep or (is_grad_enabled() and _depends_on_others(out, xs))
        u = Tensor(np.zeros_like(out.data), requires_grad=True)
        gs = _grad(out, xs, u, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(gs, ts, strict=True) if g is not None and g.requires_grad]
        if not pairs:
            tangent_out = _make(np.zeros_like(out.data))
        else:
            (tangent_out,) = _grad(
                [g for g, _ in pairs], u, [t for _, t in pairs], create_graph=keep
            )
    return _plain(out, keep), tangent_out


def jacrev(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f -> ∂f/∂x``: the Jacobian, shaped ``output.shape + input.shape`` (one reverse pass per
    output element); a tuple ``argnums`` gives a tuple of Jacobians."""

    def transformed(*args: Any) -> Any:
        full, inputs, keep, many = _prepare(args, argnums, "jacrev")
        with enable_grad():
            out, aux = _split_aux(func(*full), has_aux, "jacrev")
            keep = keep or (is_grad_enabled() and _depends_on_others(out, inputs))
            rows = []
            for m in range(out.data.size):  # one reverse pass per output element
                e = np.zeros(out.data.size, out.dtype)
                e[m] = 1
                gs = _grad(out, inputs, _make(e.reshape(out.shape)), retain_graph=True,
                           create_graph=keep, allow_unused=True)  # fmt: skip
                rows.append(_zeros_for_none(gs, inputs))
        jacs = []
        for i, x in enumerate(inputs):
            if rows:
                jacs.append(reshape(stack([r[i] for r in rows]), (*out.shape, *x.shape)))
            else:
                jacs.append(_make(np.zeros((*out.shape, *x.shape), x.dtype)))
        result = tuple(jacs) if many else jacs[0]
        return (result, _plain(aux, keep)) if has_aux else result

    return transformed


def jacfwd(
    func: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The same Jacobian as :func:`jacrev` (tadiff has no forward mode; the name is kept so code
    written for torch.func or JAX runs unchanged)."""
    return jacrev(func, argnums, has_aux)


def hessian(func: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """``f -> ∂²f/∂x²`` of a function with a single-element output: ``jacrev(grad(f))``."""
    return jacrev(grad(func, argnums), argnums)
