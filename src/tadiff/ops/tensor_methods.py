"""Binds the ops onto ``Tensor`` as methods and operators (``x.exp()``, ``x + y``, ``x[i]``).

Operators are bound to the op functions themselves, not to wrappers, so ``x * y`` costs one
Python call before NumPy. Methods accept torch's ``dim=``/``keepdim=`` and NumPy's
``axis=``/``keepdims=`` because the op functions do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor, _make
from tadiff.ops import elementwise as ew
from tadiff.ops import indexing, inplace, linalg, reductions, shape


def _rmatmul(a: Tensor, b: Any) -> Tensor:
    return linalg.matmul(b, a)


def _logical(fn: Any) -> Any:
    def op(a: Tensor, b: Any) -> Tensor:
        bd = b.data if isinstance(b, Tensor) else b
        return _make(np.asarray(fn(a.data, bd)))

    return op


def _iop(fn: Any) -> Any:
    def op(a: Tensor, b: Any) -> Tensor:
        return fn(a, b)

    return op


def _expand_as(x: Tensor, other: Tensor) -> Tensor:
    return shape.expand(x, *other.shape)


def _type_as(x: Tensor, other: Tensor) -> Tensor:
    return shape.to(x, other.dtype)


_METHODS: dict[str, Any] = {
    # operators
    "__add__": ew.add,
    "__radd__": ew.add,
    "__sub__": ew.sub,
    "__rsub__": ew.rsub,
    "__mul__": ew.mul,
    "__rmul__": ew.mul,
    "__truediv__": ew.div,
    "__rtruediv__": ew.rdiv,
    "__pow__": ew.pow,
    "__rpow__": ew.rpow,
    "__matmul__": linalg.matmul,
    "__rmatmul__": _rmatmul,
    "__neg__": ew.neg,
    "__pos__": lambda x: x,
    "__abs__": ew.abs,
    "__eq__": ew.eq,
    "__ne__": ew.ne,
    "__lt__": ew.lt,
    "__le__": ew.le,
    "__gt__": ew.gt,
    "__ge__": ew.ge,
    "__and__": _logical(np.logical_and),
    "__or__": _logical(np.logical_or),
    "__xor__": _logical(np.logical_xor),
    "__invert__": ew.logical_not,
    "__getitem__": indexing.getitem,
    "__setitem__": inplace.setitem,
    "__iadd__": _iop(inplace.add_),
    "__isub__": _iop(inplace.sub_),
    "__imul__": _iop(inplace.mul_),
    "__itruediv__": _iop(inplace.div_),
    "__ipow__": _iop(inplace.pow_),
    # arithmetic and math
    "add": ew.add,
    "sub": ew.sub,
    "mul": ew.mul,
    "div": ew.div,
    "pow": ew.pow,
    "neg": ew.neg,
    "matmul": linalg.matmul,
    "mm": linalg.matmul,
    "exp": ew.exp,
    "erf": ew.erf,
    "erfc": ew.erfc,
    "log": ew.log,
    "log1p": ew.log1p,
    "expm1": ew.expm1,
    "sin": ew.sin,
    "cos": ew.cos,
    "tan": ew.tan,
    "tanh": ew.tanh,
    "sigmoid": ew.sigmoid,
    "relu": ew.relu,
    "sqrt": ew.sqrt,
    "abs": ew.abs,
    "sign": ew.sign,
    "clamp": ew.clamp,
    "clip": ew.clamp,
    "maximum": ew.maximum,
    "minimum": ew.minimum,
    "eq": ew.eq,
    "ne": ew.ne,
    "lt": ew.lt,
    "le": ew.le,
    "gt": ew.gt,
    "ge": ew.ge,
    # reductions
    "sum": reductions.sum,
    "mean": reductions.mean,
    "var": reductions.var,
    "std": reductions.std,
    "prod": reductions.prod,
    "max": reductions.max,
    "min": reductions.min,
    "amax": reductions.amax,
    "amin": reductions.amin,
    "logsumexp": reductions.logsumexp,
    "norm": reductions.norm,
    "softmax": reductions.softmax,
    "log_softmax": reductions.log_softmax,
    # shape
    "reshape": shape.reshape,
    "view": shape.view,
    "flatten": shape.flatten,
    "transpose": shape.transpose,
    "swapaxes": shape.transpose,
    "permute": shape.permute,
    "expand": shape.expand,
    "expand_as": _expand_as,
    "broadcast_to": shape.broadcast_to,
    "squeeze": shape.squeeze,
    "unsqueeze": shape.unsqueeze,
    "split": shape.split,
    "chunk": shape.chunk,
    "unbind": shape.unbind,
    "flip": shape.flip,
    "moveaxis": shape.moveaxis,
    "triu": shape.triu,
    "tril": shape.tril,
    "argmax": reductions.argmax,
    "argmin": reductions.argmin,
    "__iter__": lambda x: iter(shape.unbind(x, 0)),
    "clone": shape.clone,
    "to": shape.to,
    "astype": shape.to,
    "type_as": _type_as,
    "float": lambda x: shape.to(x, np.float32),
    "double": lambda x: shape.to(x, np.float64),
    "contiguous": shape.contiguous,
    "cpu": lambda x: x,
    # indexing
    "gather": indexing.gather,
    "scatter_add": indexing.scatter_add,
    # in place
    "add_": inplace.add_,
    "sub_": inplace.sub_,
    "mul_": inplace.mul_,
    "div_": inplace.div_,
    "pow_": inplace.pow_,
    "clamp_": inplace.clamp_,
    "zero_": inplace.zero_,
    "fill_": inplace.fill_,
    "copy_": inplace.copy_,
}


def install() -> None:
    """Attach the methods and the ``T``/``mT`` properties to ``Tensor``."""
    for name, fn in _METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(lambda x: shape.transpose(x), doc="All dims reversed.")
    Tensor.mT = property(
        lambda x: shape.transpose(x, -2, -1), doc="The last two dims swapped (batched transpose)."
    )
