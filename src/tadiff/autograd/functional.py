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


def _prepare(inputs: Any) -> tuple[tuple[Tensor, ...], bool]:
    is_tuple = isinstance(inputs, (tuple, list))
    items = tuple(inputs) if is_tuple else (inputs,)
    return tuple(Tensor(t.data if isinstance(t, Tensor) else np.asarray(t)).detach()
                 .requires_grad_(True) for t in items), is_tuple  # fmt: skip


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
    xs, is_tuple = _prepare(inputs)
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
