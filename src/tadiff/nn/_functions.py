"""The single-node op behind ``F.cross_entropy``.

``cross_entropy`` is one recorded op for speed (``CrossEntropyBackward0``, one node instead of
six). Its backward runs on raw arrays in a plain backward pass and with tadiff ops when the pass
is recorded (``create_graph``), so it stays differentiable to any order. (``F.linear`` is a
primitive op of the engine, ``AddmmBackward0``.) The exact GELU is an autograd Function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.graph import record
from tadiff.autograd.tensor import Tensor, _make
from tadiff.ops._common import needs_grad
from tadiff.ops.derivatives import OpNode


class ClassPicks:
    """Class-index targets in the form the loss uses directly (instead of one-hot weights).

    Attributes:
        index: the target class of every element (ignored elements hold 0), the logits' shape
            without the class axis.
        valid: bool mask of the elements that count (same shape).
        all_valid: whether every element counts (no ``ignore_index`` present).
        count: the number of elements that count (the ``"mean"`` divisor).
    """

    def __init__(self, index: np.ndarray, valid: np.ndarray | None, num_classes: int):
        """``valid`` None: every element counts (its mask is made only if asked for)."""
        self.index, self._valid, self.num_classes = index, valid, num_classes
        self.all_valid = valid is None or bool(valid.all())
        self.count = float(index.size if self.all_valid else np.count_nonzero(valid))

    @property
    def valid(self) -> np.ndarray:
        if self._valid is None:
            self._valid = np.ones(self.index.shape, bool)
        return self._valid

    def take(self, values: np.ndarray, axis: int) -> np.ndarray:
        """Each element's value at its target class: ``values`` without the class axis."""
        if values.ndim == 2 and axis == 1:  # (N, C): plain fancy indexing, far less overhead
            return values[np.arange(len(self.index)), self.index]
        picked = np.take_along_axis(values, np.expand_dims(self.index, axis), axis)
        return np.squeeze(picked, axis)

    def subtract(self, values: np.ndarray, amount: Any, axis: int) -> None:
        """``values[..., target, ...] -= amount`` in place (``amount`` broadcasts like the
        elements, i.e. like ``values`` without its class axis)."""
        if values.ndim == 2 and axis == 1:
            values[np.arange(len(self.index)), self.index] -= amount
            return
        at = np.expand_dims(self.index, axis)
        amount = np.expand_dims(np.broadcast_to(amount, self.index.shape), axis)
        np.put_along_axis(values, at, np.take_along_axis(values, at, axis) - amount, axis)

    def weights(self, axis: int, dtype: Any) -> np.ndarray:
        """The one-hot target weights ``q`` (the logits' shape), zero for ignored elements."""
        q = np.zeros((*self.index.shape, self.num_classes), dtype)
        np.put_along_axis(q, self.index[..., None], self.valid[..., None].astype(dtype), axis=-1)
        return np.moveaxis(q, -1, axis)


def cross_entropy_op(
    x: Tensor, q: np.ndarray | ClassPicks, axis: int, reduction: str, denominator: float
) -> Tensor:
    """``-sum_c q_c log_softmax(x)_c`` over the class ``axis``, then reduced: one graph node.

    Args:
        x: logits.
        q: the target weights, an array shaped like ``x`` (see ``F.cross_entropy``), or the
            target classes as :class:`ClassPicks` (one-hot ``q`` without forming it).
        axis: the class axis.
        reduction: ``"mean"`` (divide the sum by ``denominator``), ``"sum"`` or ``"none"``.
        denominator: the ``"mean"`` divisor.

    Returns:
        The loss (a scalar, or one per element for ``"none"``), recorded as
        ``CrossEntropyBackward0`` when ``x`` requires grad.
    """
    data = x.data
    # the ufuncs' reductions directly: the ndarray methods add a Python-level wrapper each
    shifted = data - np.maximum.reduce(data, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    total = np.add.reduce(exp, axis=axis, keepdims=True)
    if isinstance(q, ClassPicks):
        losses = np.log(np.squeeze(total, axis)) - q.take(shifted, axis)
        if not q.all_valid:
            losses *= q.valid
    else:
        losses = -np.add.reduce(q * (shifted - np.log(total)), axis=axis)
    if reduction != "none":
        losses = np.add.reduce(losses, axis=None)
        if reduction == "mean":
            if denominator:
                losses = losses / denominator
            else:
                with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: nan
                    losses = losses / np.float64(0.0)
        losses = np.asarray(losses, dtype=data.dtype)
    if not needs_grad(x):
        return _make(losses)
    exp /= total  # the softmax, kept for the backward
    return record(CrossEntropyBackward0, losses, (x,), (x,), (exp, q, axis, reduction, denominator))


def _cross_entropy_vjp(
    F: Any, g: Any, x: Any, probs: np.ndarray, q: Any, axis: int, reduction: str, denom: float
) -> Any:
    """The logits' gradient ``(softmax(x) * sum_c q_c - q) * g``, scaled for the reduction."""
    shape = [1] * probs.ndim
    if reduction == "none":  # one gradient per element: broadcast along the classes
        shape = list(probs.shape)
        shape[axis] = 1
    scale = 1.0
    if reduction == "mean":
        # Every target ignored: q is all zero, the loss nan and the gradient 0 (as torch).
        scale = 1.0 / denom if denom else 0.0
    picks = q if isinstance(q, ClassPicks) else None
    if type(g) is Tensor:  # create_graph: recorded with tadiff ops, differentiable in x and g
        if picks is not None:
            q = picks.weights(axis, probs.dtype)
        q_total = Tensor(q.sum(axis=axis, keepdims=True))
        return (td.softmax(x, dim=axis) * q_total - Tensor(q)) * (g.reshape(*shape) * scale)
    g = g.reshape(shape) * scale
    if picks is None:
        return (probs * q.sum(axis=axis, keepdims=True) - q) * g
    # (softmax - one-hot target) * g, zero where ignored: one new array, then the targets
    if not picks.all_valid:
        g = np.expand_dims(picks.valid, axis) * g
    out = probs * g
    picks.subtract(out, np.squeeze(g, axis), axis)
    return out


class CrossEntropyBackward0(OpNode):
    """The node of :func:`cross_entropy_op` (saved: the logits; args: softmax, targets, ...)."""

    __slots__ = ()
    vjps = (_cross_entropy_vjp,)
