"""Higher-level derivatives of Python functions: ``vjp``, ``jvp``, ``jacobian``, ``hessian``.

``vjp`` costs one backward pass. ``jvp`` uses the double-backward trick (two reverse passes, no
forward mode). ``jacobian`` and ``hessian`` build the explicit matrix *row by row*: one reverse
pass per output element (per gradient element for the Hessian), i.e. ``O(n_out)`` passes and
``O(n_out * n_in)`` memory — a fall-back for small problems, not the way to compute products with
large Jacobians (use ``vjp``/``jvp`` for those).

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, 2.0], dtype="float64")
    >>> hessian(lambda t: (t ** 3).sum(), x)
    tensor([[ 6.,  0.],
            [ 0., 12.]], dtype=float64)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.autograd.engine import grad
from tadiff.autograd.grad_mode import enable_grad
from tadiff.autograd.tensor import Tensor, _make


def _prepare(inputs: Any, create_graph: bool = False) -> tuple[tuple[Tensor, ...], bool]:
    """The inputs as fresh tensors requiring grad; with ``create_graph``, an input that already
    requires grad stays connected to its graph (as in torch), so the result can be
    differentiated with respect to it."""
    is_tuple = isinstance(inputs, (tuple, list))
    items = tuple(inputs) if is_tuple else (inputs,)
    prepared = []
    for t in items:
        if create_graph and isinstance(t, Tensor) and t.requires_grad:
            with enable_grad():
                prepared.append(t.view_as(t))
        else:
            data = t.data if isinstance(t, Tensor) else np.asarray(t)
            prepared.append(Tensor(data).detach().requires_grad_(True))
    return tuple(prepared), is_tuple


def _zeros_if_none(gs: tuple[Any, ...], xs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return tuple(
        _make(np.zeros_like(x.data)) if g is None else g for g, x in zip(gs, xs, strict=True)
    )


def vjp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), vᵀ J)``.

    Args:
        func: maps Tensors to a Tensor.
        inputs: a Tensor or tuple of Tensors.
        v: shaped like the output (may be omitted for a single-element output).
        create_graph: keep the result differentiable.

    Returns:
        The output and the VJP (a tuple when ``inputs`` is).
    """
    xs, is_tuple = _prepare(inputs, create_graph)
    with enable_grad():
        out = func(*xs)
        gs = grad(out, xs, v, create_graph=create_graph, allow_unused=True)
    gs = _zeros_if_none(gs, xs)
    return (out if create_graph else out.detach()), (gs if is_tuple else gs[0])


def jvp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False
) -> tuple[Any, Any]:
    """``(func(inputs), J v)`` by the double-backward trick: ``J v = d/du (uᵀ J) v``."""
    xs, _is_tuple = _prepare(inputs)
    vs = (v,) if not isinstance(v, (tuple, list)) else tuple(v)
    if v is None:
        vs = tuple(_make(np.ones_like(x.data)) for x in xs)
    with enable_grad():
        out = func(*xs)
        u = Tensor(np.zeros_like(out.data), requires_grad=True)
        gs = grad(out, xs, u, create_graph=True, allow_unused=True)
        pairs = [(g, w) for g, w in zip(gs, vs, strict=False) if g is not None and g.requires_grad]
        if not pairs:
            return out.detach(), _make(np.zeros_like(out.data))
        (jv,) = grad([g for g, _ in pairs], u, [w for _, w in pairs], create_graph=create_graph)
    return (out if create_graph else out.detach()), jv


def jacobian(func: Callable[..., Any], inputs: Any, create_graph: bool = False) -> Any:
    """The explicit Jacobian, shaped ``output.shape + input.shape`` (one reverse pass per output
    element; tuples of inputs/outputs give nested tuples like torch)."""
    xs, in_tuple = _prepare(inputs)
    with enable_grad():
        outs = func(*xs)
    out_tuple = isinstance(outs, tuple)
    outs = outs if out_tuple else (outs,)
    table = []
    for out in outs:
        rows = [[] for _ in xs]
        for m in range(out.data.size):
            v = np.zeros(out.data.size, out.data.dtype)
            v[m] = 1
            if out.requires_grad:
                gs = grad(out, xs, _make(v.reshape(out.shape)), retain_graph=True,
                          create_graph=create_graph, allow_unused=True)  # fmt: skip
            else:
                gs = (None,) * len(xs)
            for r, g in enumerate(_zeros_if_none(gs, xs)):
                rows[r].append(g)
        per_input = []
        for r, x in enumerate(xs):
            if rows[r]:
                from tadiff.ops import reshape, stack

                per_input.append(reshape(stack(rows[r]), (*out.shape, *x.shape)))
            else:
                per_input.append(_make(np.zeros((*out.shape, *x.shape), x.dtype)))
        table.append(tuple(per_input) if in_tuple else per_input[0])
    return tuple(table) if out_tuple else table[0]


def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False) -> Any:
    """The explicit Hessian of a scalar ``func``, shaped ``input.shape + input.shape`` (one
    reverse pass per gradient element; nested tuples for tuple inputs)."""
    xs, in_tuple = _prepare(inputs)

    def gradient(*ts: Tensor) -> Any:
        out = func(*ts)
        if out.data.size != 1:
            from tadiff.errors import ShapeError

            raise ShapeError(
                f"hessian expects a function with a single-element output, got {out.shape}"
            )
        gs = _zeros_if_none(grad(out, ts, create_graph=True, allow_unused=True), ts)
        return gs if in_tuple else gs[0]

    return jacobian(gradient, xs if in_tuple else xs[0], create_graph=create_graph)


def vhp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(inputs), vᵀ H)``: a vector-Hessian product of a scalar ``func``, by two reverse
    passes (the gradient with ``create_graph``, then its VJP with ``v``).

    Args:
        func: maps Tensors to a single-element Tensor.
        inputs: a Tensor or tuple of Tensors.
        v: shaped like ``inputs`` (may be omitted when the input has one element).
        create_graph: keep the result differentiable.
        strict: raise when the output or its gradient does not depend on an input (else zeros).

    Returns:
        The output and the product (a tuple when ``inputs`` is).

    Example:
        >>> import tadiff as td
        >>> x = td.tensor([1.0, 2.0], dtype="float64")
        >>> vhp(lambda t: (t ** 3).sum(), x, td.ones(2, dtype="float64"))[1]
        tensor([ 6., 12.], dtype=float64)
    """
    xs, is_tuple = _prepare(inputs, create_graph)
    vs = _vectors(v, xs, "vhp")
    with enable_grad():
        out = func(*xs)
        if not isinstance(out, Tensor) or out.data.size != 1:
            from tadiff.errors import ShapeError

            raise ShapeError(
                "The function given to vhp should return a single element Tensor, got "
                f"{getattr(out, 'shape', type(out).__name__)}"
            )
        gs: tuple[Any, ...] = (None,) * len(xs)
        if out.requires_grad:
            gs = grad(out, xs, create_graph=True, allow_unused=True)
        elif strict:
            from tadiff.errors import AutogradError

            raise AutogradError(
                "Output 0 of the user-provided function does not require gradients. The outputs "
                "must be computed in a differentiable manner from the input when running in "
                "strict mode."
            )
        _check_strict(strict, gs, "The output of the user-provided function is independent of "
                      "input {i}. This is not allowed in strict mode.")  # fmt: skip
        used = [(g, x, w) for g, x, w in zip(gs, xs, vs, strict=True) if g is not None and g._rg]
        products: tuple[Any, ...] = (None,) * len(xs)
        if used:
            products = grad([g for g, _, _ in used], xs, [w for _, _, w in used],
                            create_graph=create_graph, allow_unused=True)  # fmt: skip
        _check_strict(strict, products, "While computing the hessian, found that the jacobian "
                      "of the user-provided function with respect to input {i} is independent "
                      "of the input. This is not allowed in strict mode.")  # fmt: skip
    products = _zeros_if_none(products, xs)
    out = out if create_graph else out.detach()
    return out, (products if is_tuple else products[0])


def hvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(inputs), H v)``: a Hessian-vector product of a scalar ``func``.

    The Hessian of a twice continuously differentiable function is symmetric, so ``H v`` is
    :func:`vhp`'s ``vᵀ H`` computed the same way (torch uses a double-backward trick that
    costs one more reverse pass for the same numbers). Arguments as :func:`vhp`.

    Example:
        >>> import tadiff as td
        >>> x = td.tensor([1.0, 2.0], dtype="float64")
        >>> hvp(lambda t: (t[0] * t[1]) ** 2, x, td.tensor([1.0, 0.0], dtype="float64"))[1]
        tensor([8., 8.], dtype=float64)
    """
    return vhp(func, inputs, v, create_graph=create_graph, strict=strict)


def _vectors(v: Any, xs: tuple[Tensor, ...], who: str) -> tuple[Tensor, ...]:
    """``v`` as one Tensor per input, checked against the inputs' shapes."""
    from tadiff.errors import ShapeError

    if v is None:
        if len(xs) != 1 or xs[0].data.size != 1:
            raise ShapeError(
                f"The vector v can only be None if the input to the user-provided function is "
                f"a single Tensor with a single element ({who})"
            )
        return (_make(np.ones_like(xs[0].data)),)
    vs = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(vs) != len(xs):
        raise ShapeError(f"{who}: v has {len(vs)} entries but there are {len(xs)} inputs")
    out = []
    for i, (w, x) in enumerate(zip(vs, xs, strict=True)):
        w = w if isinstance(w, Tensor) else _make(np.asarray(w))
        if w.shape != x.shape:
            raise ShapeError(
                f"{who}: entry {i} of v has shape {w.shape}; expected the input's {x.shape}"
            )
        out.append(w)
    return tuple(out)


def _check_strict(strict: bool, gs: tuple[Any, ...], message: str) -> None:
    if not strict:
        return
    for i, g in enumerate(gs):
        if g is None:
            from tadiff.errors import AutogradError

            raise AutogradError(message.format(i=i))
