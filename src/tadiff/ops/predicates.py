"""Boolean and counting functions (no gradient): ``isnan isinf isfinite isposinf isneginf
logical_and logical_or logical_xor isclose allclose equal all any count_nonzero nonzero
argwhere``, and ``is_tensor is_floating_point numel``.

They return Tensors outside the graph (boolean or int64), except ``allclose`` and ``equal``,
which return Python bools as in torch.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, float("nan"), float("inf")])
    >>> td.isfinite(x), td.any(td.isnan(x))
    (tensor([ True, False, False]), tensor(True))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.ops._common import Tensor, _make, as_tensor, norm_dims

__all__ = [
    "all",
    "allclose",
    "any",
    "argwhere",
    "count_nonzero",
    "equal",
    "is_floating_point",
    "is_tensor",
    "isclose",
    "isfinite",
    "isinf",
    "isnan",
    "isneginf",
    "isposinf",
    "logical_and",
    "logical_or",
    "logical_xor",
    "nonzero",
    "numel",
]  # fmt: skip


def _data(x: Any) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def _predicate(name: str, fn: Any) -> Any:
    def op(x: Any) -> Tensor:
        return _make(np.asarray(fn(as_tensor(x, name=f"{name}() argument").data)))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Element-wise ``{name}`` (a boolean Tensor outside the graph)."
    return op


isnan = _predicate("isnan", np.isnan)
isinf = _predicate("isinf", np.isinf)
isfinite = _predicate("isfinite", np.isfinite)
isposinf = _predicate("isposinf", np.isposinf)
isneginf = _predicate("isneginf", np.isneginf)


def _logical(name: str, fn: Any) -> Any:
    def op(a: Any, b: Any) -> Tensor:
        return _make(np.asarray(fn(_data(a), _data(b))))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Element-wise ``{name}`` with broadcasting (a boolean Tensor)."
    return op


logical_and = _logical("logical_and", np.logical_and)
logical_or = _logical("logical_or", np.logical_or)
logical_xor = _logical("logical_xor", np.logical_xor)


def isclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """``|a - b| <= atol + rtol * |b|`` element-wise (a boolean Tensor)."""
    return _make(np.asarray(np.isclose(_data(a), _data(b), rtol, atol, equal_nan)))


def allclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """Whether ``isclose`` holds everywhere (a Python bool)."""
    return bool(np.allclose(_data(a), _data(b), rtol, atol, equal_nan))


def equal(a: Any, b: Any) -> bool:
    """Same shape and same elements (a Python bool)."""
    da, db = _data(a), _data(b)
    return da.shape == db.shape and bool(np.array_equal(da, db))


def _reduce(fn: Any, x: Any, dim: Any, keepdim: bool) -> Tensor:
    data = as_tensor(x).data
    axes = norm_dims(dim, data.ndim)
    return _make(np.asarray(fn(data, axis=axes, keepdims=keepdim)))


def all(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether every element (along ``dim``) is nonzero (a boolean Tensor)."""
    return _reduce(np.all, x, dim, keepdim)


def any(x: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether some element (along ``dim``) is nonzero (a boolean Tensor)."""
    return _reduce(np.any, x, dim, keepdim)


def count_nonzero(x: Any, dim: Any = None) -> Tensor:
    """Number of nonzero elements (along ``dim``), int64."""
    data = as_tensor(x).data
    axes = norm_dims(dim, data.ndim)
    return _make(np.asarray(np.count_nonzero(data, axis=axes), dtype=np.int64))


def nonzero(x: Any, *, as_tuple: bool = False) -> Any:
    """Indices of the nonzero elements: an ``(n, ndim)`` int64 Tensor, or one 1-D Tensor per
    dim with ``as_tuple``."""
    data = as_tensor(x).data
    if data.ndim == 0:  # torch: one (empty) index row when the scalar is nonzero
        rows = int(bool(data))
        if as_tuple:
            return (_make(np.zeros(rows, np.int64)),)
        return _make(np.zeros((rows, 0), np.int64))
    idx = np.nonzero(data)
    if as_tuple:
        return tuple(_make(i.astype(np.int64)) for i in idx)
    return _make(np.stack(idx, axis=1).astype(np.int64).reshape(-1, data.ndim))


def argwhere(x: Any) -> Tensor:
    """``nonzero(x)``: an ``(n, ndim)`` int64 Tensor."""
    return nonzero(x)


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a tadiff Tensor (torch's ``is_tensor``)."""
    return isinstance(obj, Tensor)


def is_floating_point(x: Tensor) -> bool:
    """Whether ``x`` has a floating dtype (torch's ``is_floating_point``)."""
    return as_tensor(x, name="is_floating_point() argument").dtype.kind == "f"


def numel(x: Tensor) -> int:
    """The number of elements of ``x``."""
    return int(as_tensor(x, name="numel() argument").data.size)
