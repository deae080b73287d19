"""Shared helpers of the op modules: converting arguments and checking dims."""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.factories import _default_dtype, numeric_array
from tadiff.autograd.grad_mode import _state
from tadiff.autograd.graph import INPUTS, record, record_multi
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DTypeError, IndexingError, InputError, ShapeError, type_name

__all__ = [
    "INPUTS",
    "Tensor",
    "_make",
    "_state",
    "as_tensor",
    "broadcasts_to",
    "needs_grad",
    "norm_dim",
    "norm_dims",
    "not_broadcastable",
    "record",
    "record_multi",
    "scalar_array",
]

_SCALARS = (int, float, bool)


def scalar_array(value: Any, like: np.dtype) -> np.ndarray:
    """A Python scalar as a 0-d array that does not promote a tensor of dtype ``like``.

    NumPy keeps Python scalars "weak" but not 0-d arrays, so a float64 0-d array would turn a
    float32 computation into float64; torch's rule is to take the tensor's dtype, which this
    follows (an int tensor meeting a float takes the default dtype, float32 unless changed).
    """
    if isinstance(value, bool):
        dtype = like if like.kind in "biufc" else np.bool_
    elif isinstance(value, int):
        dtype = like if like.kind in "iufc" else np.int64
    elif isinstance(value, float):
        dtype = like if like.kind in "fc" else _default_dtype[0]
    else:
        dtype = like if like.kind == "c" else np.complex64
    return np.asarray(value, dtype)


def as_tensor(value: Any, like: Tensor | None = None, name: str = "operand") -> Tensor:
    """``value`` as a Tensor: Tensors pass through, arrays are wrapped (no copy), Python scalars
    take the dtype of ``like`` (see :func:`scalar_array`)."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return _make(value)
    if isinstance(value, np.generic):
        return _make(np.asarray(value))
    if isinstance(value, (_SCALARS, complex)):
        if like is not None:
            return _make(scalar_array(value, like.data.dtype))
        return _make(np.asarray(value, _default_dtype[0] if isinstance(value, float) else None))
    if isinstance(value, (list, tuple)):
        arr = numeric_array(value)
        if arr.dtype == np.float64:
            arr = arr.astype(_default_dtype[0])
        return _make(arr)
    raise foreign_operand(value, name)


def foreign_operand(value: Any, name: str) -> DTypeError:
    """The error for an operand tadiff cannot take, naming its type in full and how to convert
    it (a torch tensor: ``tadiff.from_dlpack`` or ``tadiff.torch``'s bridge)."""
    kind = type_name(value)
    if hasattr(value, "__dlpack__"):
        hint = (
            "; convert it with tadiff.from_dlpack(x) (shares CPU memory) or "
            "tadiff.tensor(x.detach().cpu().numpy())"
        )
        if kind.startswith("torch."):
            hint += ", or run tadiff's ops on torch tensors through tadiff.torch"
    elif hasattr(value, "__array__"):
        hint = "; convert it with tadiff.as_tensor(x)"
    else:
        hint = ""
    return DTypeError(
        f"{name} must be a tadiff Tensor, a NumPy array or a number; got {kind}{hint}"
    )


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to exactly ``target``."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def not_broadcastable(op: str, *operands: Any) -> ShapeError:
    """The error for operands whose shapes do not broadcast: names every shape and, like torch,
    the first dimension (of the broadcast result, from the end) where two sizes conflict.

    Example:
        >>> print(not_broadcastable("add", np.ones((2, 3)), np.ones(2)))
        add: shapes (2, 3) and (2,) do not broadcast: sizes 3 and 2 at non-singleton dimension 1
    """
    shapes = [tuple(np.shape(o.data if isinstance(o, Tensor) else o)) for o in operands]
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + s for s in shapes]
    where = ""
    for dim in reversed(range(ndim)):
        sizes = list(dict.fromkeys(p[dim] for p in padded if p[dim] != 1))
        if len(sizes) > 1:
            where = f": sizes {sizes[0]} and {sizes[1]} at non-singleton dimension {dim}"
            break
    listed = ", ".join(map(str, shapes[:-1])) + f" and {shapes[-1]}"
    return ShapeError(f"{op}: shapes {listed} do not broadcast{where}")


def needs_grad(*tensors: Tensor) -> bool:
    """Whether an op over ``tensors`` must be recorded now."""
    if not _state.enabled:
        return False
    return any(t._rg for t in tensors)


def norm_dim(dim: Any, ndim: int, what: str = "dim") -> int:
    """A dimension index in ``range(ndim)``; negative counts from the end."""
    if type(dim) is int and -ndim <= dim < ndim:  # the common case, without the general checks
        return dim + ndim if dim < 0 else dim
    try:
        d = int(dim)
    except TypeError:
        raise DTypeError(f"{what} must be an int, got {type(dim).__name__}") from None
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexingError(
            f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
            f"{max(ndim, 1) - 1}], but got {d}) for a {ndim}-d tensor ({what})"
        )
    return d % max(ndim, 1)


def norm_dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """Reduction dims as a sorted tuple of distinct non-negative ints, or None for all."""
    if dim is None:
        return None
    if type(dim) is int and -ndim <= dim < ndim:  # the common case, without the general checks
        return (dim % ndim,)
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = tuple(sorted({norm_dim(d, ndim) for d in dims}))
    if ndim == 0:
        return None
    if len(out) != len(dims):
        raise InputError(f"dim {dims} appears multiple times in the list of dims")
    return out


def pick_axis(dim: Any, axis: Any, default: Any = None) -> Any:
    """Accept torch's ``dim=`` or NumPy's ``axis=`` (not both)."""
    if axis is not None:
        if dim is not None:
            raise InputError("pass either dim= or axis=, not both")
        return axis
    return default if dim is None else dim
