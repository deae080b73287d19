"""Binds the ops onto ``Tensor`` as methods and operators (``x.exp()``, ``x + y``, ``x[i]``).

Operators are bound to the op functions themselves, not to wrappers, so ``x * y`` costs one
Python call before NumPy. Methods accept torch's ``dim=``/``keepdim=`` and NumPy's
``axis=``/``keepdims=`` because the op functions do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff._device import check_device
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DTypeError
from tadiff.ops import (
    compositions,
    decompositions,
    indexing,
    inplace,
    linalg,
    matrix,
    pointwise,
    predicates,
    rearrange,
    reductions,
    scatter,
    shape,
    sorting,
    special,
)
from tadiff.ops import elementwise as ew


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


def _iter(x: Tensor) -> Any:
    if x.data.ndim == 0:
        raise DTypeError("iteration over a 0-d tensor")  # a TypeError, as in torch
    return iter(shape.unbind(x, 0))


def _type_as(x: Tensor, other: Tensor) -> Tensor:
    return shape.to(x, other.dtype)


def _new_like(fill: Any) -> Any:
    def op(
        x: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        check_device(device, "new_*")
        shape_ = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        out = Tensor(np.full(shape_, fill, dtype=x.dtype if dtype is None else dtype))
        return out.requires_grad_(requires_grad) if requires_grad else out

    return op


def _new_full(
    x: Tensor,
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    return _new_like(fill_value)(
        x, tuple(size), dtype=dtype, device=device, requires_grad=requires_grad
    )


def _new_tensor(
    x: Tensor, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    check_device(device, "new_tensor")
    arr = np.array(data.data if isinstance(data, Tensor) else data, dtype=dtype or x.dtype)
    return Tensor(arr, requires_grad=requires_grad)


def _floor_divide(a: Tensor, b: Any) -> Tensor:
    # torch's // rounds toward -inf and has no derivative: a plain result outside the graph
    return _make(np.asarray(np.floor_divide(a.data, b.data if isinstance(b, Tensor) else b)))


def _rfloor_divide(a: Tensor, b: Any) -> Tensor:
    return _make(np.asarray(np.floor_divide(b, a.data)))


def _random(kind: str) -> Any:
    def method(t: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from tadiff.autograd import factories

        rng = factories._rng
        if kind == "uniform_":
            lo, hi = (list(args) + [0.0, 1.0][len(args) :])[:2]
            lo, hi = kwargs.get("from", kwargs.get("a", lo)), kwargs.get("to", kwargs.get("b", hi))
            draw = lambda shape: rng.uniform(lo, hi, shape)  # noqa: E731
        elif kind == "normal_":
            mean, std = (list(args) + [0.0, 1.0][len(args) :])[:2]
            mean, std = kwargs.get("mean", mean), kwargs.get("std", std)
            draw = lambda shape: rng.normal(mean, std, shape)  # noqa: E731
        else:  # bernoulli_
            p = kwargs.get("p", args[0] if args else 0.5)
            p = p.data if isinstance(p, Tensor) else p
            draw = lambda shape: rng.random(shape) < p  # noqa: E731
        return inplace.random_fill(t, draw, kind)

    return method


def _stride(x: Tensor, dim: int | None = None) -> Any:
    strides = tuple(s // x.data.itemsize for s in x.data.strides)
    return strides if dim is None else strides[dim]


_COMPOSITION_METHODS = (
    "cummax", "cummin", "dist", "diagflat", "fliplr", "flipud", "rot90", "inner", "vdot",
    "logaddexp2", "deg2rad", "rad2deg", "float_power", "true_divide", "positive", "fix",
    "signbit",
)  # fmt: skip
"""Functions of :mod:`tadiff.ops.compositions` that are also tensor methods (as in torch)."""

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
    "__iter__": _iter,
    "clone": shape.clone,
    "to": shape.to,
    "astype": shape.to,
    "type_as": _type_as,
    "float": lambda x: shape.to(x, np.float32),
    "double": lambda x: shape.to(x, np.float64),
    "contiguous": shape.contiguous,
    # indexing
    "gather": indexing.gather,
    "scatter_add": indexing.scatter_add,
    # more math
    "__mod__": pointwise.remainder,
    "__rmod__": lambda a, b: pointwise.remainder(b, a),
    "__floordiv__": _floor_divide,
    "__rfloordiv__": _rfloor_divide,
    "asin": pointwise.asin,
    "acos": pointwise.acos,
    "atan": pointwise.atan,
    "arcsin": pointwise.asin,
    "arccos": pointwise.acos,
    "arctan": pointwise.atan,
    "sinh": pointwise.sinh,
    "cosh": pointwise.cosh,
    "asinh": pointwise.asinh,
    "acosh": pointwise.acosh,
    "atanh": pointwise.atanh,
    "atan2": pointwise.atan2,
    "log2": pointwise.log2,
    "log10": pointwise.log10,
    "exp2": pointwise.exp2,
    "logaddexp": pointwise.logaddexp,
    "reciprocal": pointwise.reciprocal,
    "rsqrt": pointwise.rsqrt,
    "square": pointwise.square,
    "floor": pointwise.floor,
    "ceil": pointwise.ceil,
    "round": pointwise.round,
    "trunc": pointwise.trunc,
    "frac": pointwise.frac,
    "remainder": pointwise.remainder,
    "fmod": pointwise.fmod,
    "clamp_min": pointwise.clamp_min,
    "clamp_max": pointwise.clamp_max,
    "lerp": pointwise.lerp,
    "masked_fill": pointwise.masked_fill,
    "nan_to_num": pointwise.nan_to_num,
    "isnan": predicates.isnan,
    "isinf": predicates.isinf,
    "isfinite": predicates.isfinite,
    "logical_and": predicates.logical_and,
    "logical_or": predicates.logical_or,
    "logical_xor": predicates.logical_xor,
    "logical_not": ew.logical_not,
    "isclose": predicates.isclose,
    "allclose": predicates.allclose,
    "equal": predicates.equal,
    "all": predicates.all,
    "any": predicates.any,
    "count_nonzero": predicates.count_nonzero,
    "nonzero": predicates.nonzero,
    # scans, sorting
    "cumsum": sorting.cumsum,
    "cumprod": sorting.cumprod,
    "sort": sorting.sort,
    "argsort": sorting.argsort,
    "topk": sorting.topk,
    "kthvalue": sorting.kthvalue,
    "median": sorting.median,
    "unique": sorting.unique,
    # matrices
    "mm": matrix.mm,
    "bmm": matrix.bmm,
    "mv": matrix.mv,
    "dot": matrix.dot,
    "outer": matrix.outer,
    "diagonal": matrix.diagonal,
    "diag": matrix.diag,
    "diag_embed": matrix.diag_embed,
    "trace": matrix.trace,
    "t": rearrange.t,
    "det": decompositions.det,
    "logdet": decompositions.logdet,
    "slogdet": decompositions.slogdet,
    "inverse": decompositions.inv,
    "pinverse": decompositions.pinv,
    "matrix_power": decompositions.matrix_power,
    # rearranging
    "narrow": rearrange.narrow,
    "movedim": rearrange.movedim,
    "roll": rearrange.roll,
    "repeat": rearrange.repeat,
    "tile": rearrange.tile,
    "repeat_interleave": rearrange.repeat_interleave,
    "index_select": rearrange.index_select,
    "take_along_dim": rearrange.take_along_dim,
    # new tensors and conversions
    "new_zeros": _new_like(0),
    "new_ones": _new_like(1),
    "new_empty": _new_like(0),
    "new_full": _new_full,
    "new_tensor": _new_tensor,
    "long": lambda x: shape.to(x, np.int64),
    "int": lambda x: shape.to(x, np.int32),
    "bool": lambda x: shape.to(x, np.bool_),
    "half": lambda x: shape.to(x, np.float16),
    "masked_fill_": inplace.masked_fill_,
    # in-place forms and more
    **{
        f"{name}_": inplace.inplace_of(fn, f"{name}_")
        for name, fn in {
            "abs": ew.abs,
            "exp": ew.exp,
            "log": ew.log,
            "log1p": ew.log1p,
            "sin": ew.sin,
            "cos": ew.cos,
            "tan": ew.tan,
            "tanh": ew.tanh,
            "sigmoid": ew.sigmoid,
            "relu": ew.relu,
            "sqrt": ew.sqrt,
            "neg": ew.neg,
            "sign": ew.sign,
            "floor": pointwise.floor,
            "ceil": pointwise.ceil,
            "round": pointwise.round,
            "trunc": pointwise.trunc,
            "square": pointwise.square,
            "reciprocal": pointwise.reciprocal,
            "rsqrt": pointwise.rsqrt,
            "clamp_min": pointwise.clamp_min,
            "clamp_max": pointwise.clamp_max,
            "lerp": pointwise.lerp,
            "addcmul": pointwise.addcmul,
            "addcdiv": pointwise.addcdiv,
            "scatter": scatter.scatter,
            "scatter_add": indexing.scatter_add,
            "index_fill": scatter.index_fill,
            "index_copy": scatter.index_copy,
            "nan_to_num": pointwise.nan_to_num,
            "remainder": pointwise.remainder,
            "fmod": pointwise.fmod,
        }.items()
    },
    "uniform_": _random("uniform_"),
    "normal_": _random("normal_"),
    "bernoulli_": _random("bernoulli_"),
    "addcmul": pointwise.addcmul,
    "addcdiv": pointwise.addcdiv,
    "lgamma": pointwise.lgamma,
    "digamma": pointwise.digamma,
    "polygamma": lambda x, n: pointwise.polygamma(n, x),
    "erfinv": special.erfinv,
    "i0": special.i0,
    "sinc": special.sinc,
    "logit": special.logit,
    "xlogy": special.xlogy,
    "scatter": scatter.scatter,
    "index_add": scatter.index_add,
    "index_fill": scatter.index_fill,
    "index_copy": scatter.index_copy,
    "masked_select": scatter.masked_select,
    "nansum": reductions.nansum,
    "nanmean": reductions.nanmean,
    "aminmax": reductions.aminmax,
    "diff": rearrange.diff,
    "tensor_split": rearrange.tensor_split,
    "unflatten": rearrange.unflatten,
    "view_as": lambda x, other: shape.view(x, *other.shape),
    "reshape_as": lambda x, other: shape.reshape(x, *other.shape),
    "H": property(lambda x: shape.transpose(x, 0, 1) if x.ndim == 2 else rearrange.t(x)),
    "mH": property(lambda x: shape.transpose(x, -2, -1)),
    "is_floating_point": lambda x: x.dtype.kind == "f",
    "is_contiguous": lambda x: bool(x.data.flags.c_contiguous),
    "element_size": lambda x: x.data.itemsize,
    "nelement": lambda x: x.data.size,
    "ndimension": lambda x: x.data.ndim,
    "stride": _stride,
    # in place
    "index_add_": scatter.index_add_,
    "add_": inplace.add_,
    "sub_": inplace.sub_,
    "mul_": inplace.mul_,
    "div_": inplace.div_,
    "pow_": inplace.pow_,
    "clamp_": inplace.clamp_,
    "zero_": inplace.zero_,
    "fill_": inplace.fill_,
    "copy_": inplace.copy_,
    # compositions (tadiff.ops.compositions)
    **{name: getattr(compositions, name) for name in _COMPOSITION_METHODS},
}


def install() -> None:
    """Attach the methods and the ``T``/``mT`` properties to ``Tensor``."""
    for name, fn in _METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(lambda x: shape.transpose(x), doc="All dims reversed.")
    Tensor.mT = property(
        lambda x: shape.transpose(x, -2, -1), doc="The last two dims swapped (batched transpose)."
    )
