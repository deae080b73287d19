"""In-place ops (``add_ sub_ mul_ div_ pow_ clamp_ zero_ fill_ copy_``, ``x[key] = v``, ``+=``).

An in-place op writes into the tensor's existing memory and bumps its version counter, so any
node that saved the old value refuses to run (PyTorch's "modified by an inplace operation"
error) instead of computing a wrong gradient.

When the op is recorded, the tensor is *rebased*: its ``grad_fn`` becomes the node of the
equivalent out-of-place op, applied to a snapshot of the old value that carries the old
``grad_fn``. Views work as in PyTorch:

- an op on a **view** rewrites its **base**'s graph: the base's ``grad_fn`` becomes
  ``CopySlices`` (the old base outside the view, the op's result inside it), so
  ``y[:, 0] += 1``, ``y[1:].mul_(w)`` or ``y.T.add_(b)`` give the gradients torch gives;
- after any recorded op on a base or one of its views, every view of that base still alive is
  re-attached to the base's new graph (``AsStridedBackward0``), so no view keeps a stale
  ``grad_fn``.

Refused with torch's errors: an op on a leaf that requires grad or on a view of one, and an op
recorded on a view that was made under ``no_grad`` from a base that requires grad.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = x * 1
    >>> y[1:] *= 3
    >>> y.grad_fn.name()
    'IndexPutBackward0'
    >>> y.sum().backward(); x.grad
    tensor([1., 3., 3.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.errors import AutogradError, DTypeError
from tadiff.ops import derivatives as d
from tadiff.ops import elementwise as ew
from tadiff.ops._common import Tensor, _make, _state, as_tensor, record
from tadiff.ops._views import view_positions
from tadiff.ops.indexing import index_put, kept_key, normalize_key, write
from tadiff.ops.pointwise import masked_fill


def _apply_inplace(t: Tensor, op: Callable[..., Tensor], *args: Any, name: str) -> Tensor:
    meta = t._meta
    base = t._base
    if base is not None and meta is not None and meta.view_no_grad and _state.enabled:
        raise AutogradError(
            f"{name}: a view was created in no_grad mode and is being modified in place with "
            "grad mode enabled; this is ambiguous and forbidden (as in torch): create the view "
            "outside no_grad, or modify it inside no_grad"
        )
    if _state.enabled and base is not None and base._rg and base.grad_fn is None:
        # also for a view made before its base was set to require grad (torch refuses too)
        raise AutogradError(
            f"a view of a leaf Variable that requires grad is being used in an in-place "
            f"operation ({name}); wrap it in td.no_grad() or work on a copy (x.clone())"
        )
    recording = _state.enabled and (t._rg or any(isinstance(a, Tensor) and a._rg for a in args))
    if recording:
        refuse_leaf(t, name)
        old = _make(t.data.copy(), t.grad_fn, t._output_nr)
        old._rg = t._rg
        result = op(old, *args)
    else:
        result = op(t, *args)
    try:
        np.copyto(t.data, result.data, casting="same_kind")
    except TypeError:
        raise DTypeError(
            f"{name}: result type {result.data.dtype} can't be cast to the desired output type "
            f"{t.data.dtype}"
        ) from None
    except ValueError as exc:
        raise AutogradError(f"{name}: cannot write into this tensor's memory: {exc}") from None
    if recording:
        if base is None:
            adopt(t, result)
            base = t
        else:
            _copy_slices(base, t, result)
        reattach_views(base)
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    vc[0] += 1
    return t


def refuse_leaf(t: Tensor, name: str) -> None:
    if t.grad_fn is None and t._rg:
        raise AutogradError(
            f"a leaf Variable that requires grad is being used in an in-place operation "
            f"({name}); wrap it in td.no_grad() or use the out-of-place op"
        )


def adopt(t: Tensor, result: Tensor) -> None:
    """Give ``t`` the graph of ``result`` (computed from ``t``'s old value)."""
    t.grad_fn = result.grad_fn
    t._output_nr = result._output_nr
    t._rg = result._rg


def _copy_slices(base: Tensor, view: Tensor, result: Tensor) -> None:
    """Rebase ``base`` after ``view`` (one of its views) was overwritten by ``result``."""
    pos = view_positions(base.data, view.data)
    kept = np.ones(base.data.shape, base.data.dtype)
    kept.reshape(-1)[pos] = 0
    # base's edge is taken from its current (old) graph: the node saves no values of it
    adopt(base, record(d.CopySlices, base.data, (base, result), (), (pos, kept)))


def _written_part(data: np.ndarray, key: tuple[Any, ...]) -> np.ndarray | None:
    """The view of ``data`` that the basic ``key`` selects; None where NumPy gives a scalar
    (every axis indexed by an integer), which is no view of it."""
    part = data[key]
    return part if type(part) is np.ndarray else None


def reattach_views(base: Tensor, written: np.ndarray | None = None) -> None:
    """Point every live view of ``base`` made while recording at ``base``'s new graph.

    ``written``, when known, is the part of ``base.data`` the in-place op wrote (a NumPy view of
    it): a view whose memory lies apart from it keeps its graph, which still computes its
    unchanged values (the LSTM's ``x = state[0]`` while ``state[2]`` is written). Views that
    may overlap it, by their memory's bounds, are rewritten.
    """
    views = base._meta.views if base._meta is not None else None
    if not views:
        return
    alive = []
    for r in views:
        view = r()
        if view is None:
            continue
        alive.append(r)
        if written is not None and not np.may_share_memory(view.data, written):
            continue
        if view._meta is None or not view._meta.view_no_grad:
            pos = view_positions(base.data, view.data)
            args = (pos, base.data.shape)
            adopt(view, record(d.AsStridedBackward0, view.data, (base,), (), args))
    views[:] = alive


def add_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    """``t += alpha * other`` in place."""
    if alpha != 1:
        other = ew.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return _apply_inplace(t, ew.add, other, name="add_")


def sub_(t: Tensor, other: Any, alpha: float = 1) -> Tensor:
    """``t -= alpha * other`` in place."""
    if alpha != 1:
        other = ew.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return _apply_inplace(t, ew.sub, other, name="sub_")


def mul_(t: Tensor, other: Any) -> Tensor:
    """``t *= other`` in place."""
    return _apply_inplace(t, ew.mul, other, name="mul_")


def div_(t: Tensor, other: Any) -> Tensor:
    """``t /= other`` in place."""
    return _apply_inplace(t, ew.div, other, name="div_")


def pow_(t: Tensor, other: Any) -> Tensor:
    """``t **= other`` in place."""
    return _apply_inplace(t, ew.pow, other, name="pow_")


def clamp_(t: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Clamp in place."""
    return _apply_inplace(t, ew.clamp, min, max, name="clamp_")


def _put(t: Tensor, key: Any, value: Any, name: str) -> Tensor:
    """``t[key] = value`` written straight into ``t``'s memory: O(size of the value), where the
    general path would copy ``t`` twice. A recorded write to a view takes the general path
    (its base's graph is rewritten)."""
    kind = type(value)
    if (kind is float or kind is int) and t.data.dtype.kind == "f":
        v = None  # a number into floats (``v[mask] = 0.0``): NumPy writes it as it is
    else:
        v = as_tensor(value, t, "assigned value")
    if t._base is not None and _state.enabled:
        return _apply_inplace(t, index_put, key, value if v is None else v, name=name)
    recording = _state.enabled and (t._rg or (v is not None and v._rg))
    if recording:
        refuse_leaf(t, name)
    if not t.data.flags.writeable:
        raise AutogradError(f"{name}: cannot write into this tensor's memory: it is read-only")
    key, basic = normalize_key(key)
    write(t.data, key, value if v is None else v)
    if recording:
        shape = () if v is None else v.data.shape
        # t's edge is still its value before the write (IndexPutBackward0 saves nothing of
        # it: its node is enough); t then becomes the node's output
        kept = key if basic else kept_key(key)
        adopt(t, record(d.IndexPutBackward0, t.data, (t, v), (), (kept, shape)))
        if t._meta is not None and t._meta.views:
            reattach_views(t, _written_part(t.data, key) if basic else None)
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    vc[0] += 1
    return t


def setitem(t: Tensor, key: Any, value: Any) -> None:
    """``t[key] = value`` in place (recorded as ``index_put``)."""
    _put(t, key, value, "__setitem__")


def fill_(t: Tensor, value: Any) -> Tensor:
    """Fill with ``value`` (a number or a one-element Tensor) in place."""
    return _put(t, Ellipsis, value, "fill_")


def zero_(t: Tensor) -> Tensor:
    """Fill with zeros in place."""
    return _put(t, Ellipsis, 0, "zero_")


def copy_(t: Tensor, src: Any) -> Tensor:
    """Copy ``src`` (broadcast to ``t``'s shape, cast to its dtype) into ``t`` in place."""
    src = src if isinstance(src, Tensor) else _make(np.asarray(src))
    if src.data.dtype != t.data.dtype:
        src = src.to(t.data.dtype)
    return _put(t, Ellipsis, src, "copy_")


def masked_fill_(t: Tensor, mask: Any, value: Any) -> Tensor:
    """Fill with ``value`` where ``mask`` holds, in place."""
    return _apply_inplace(t, masked_fill, mask, value, name="masked_fill_")


def inplace_of(op: Callable[..., Tensor], name: str) -> Callable[..., Tensor]:
    """The in-place form ``t.<name>(...)`` of an out-of-place op (``exp_``, ``scatter_``, ...):
    the result is written into ``t``'s memory and the graph is rebased like ``add_``'s."""

    def method(t: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return _apply_inplace(t, lambda x, *a: op(x, *a, **kwargs), *args, name=name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``."
    return method


def random_fill(t: Tensor, draw: Callable[[tuple[int, ...]], np.ndarray], name: str) -> Tensor:
    """Fill ``t`` with ``draw(shape)`` (``uniform_``, ``normal_``, ...): not differentiable, and
    like any in-place write refused on a leaf that requires grad unless under ``no_grad``."""
    return _put(t, Ellipsis, Tensor(np.asarray(draw(t.shape), dtype=t.dtype)), name)
