"""Tensor factories: ``tensor zeros ones full arange linspace eye``, the random ``rand randn
randint randperm normal bernoulli multinomial``, and ``*_like``.

Floating results default to float32, as in torch; arrays passed to ``tensor`` keep their dtype
(float64 stays float64). ``manual_seed`` seeds the one generator behind every random factory.

Example:
    >>> import tadiff as td
    >>> td.tensor([1.0, 2.0]).dtype, td.tensor(np.zeros(2)).dtype
    (dtype('float32'), dtype('float64'))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DataError, DTypeError, InputError

_rng = np.random.default_rng()
"""The default generator's NumPy generator (``tadiff.random.default_generator``); read at each
draw, since seeding or setting the state replaces it."""


def manual_seed(seed: int) -> Any:
    """Seed the default generator behind every random function; returns it."""
    from tadiff.random import manual_seed as seed_default

    return seed_default(seed)


def numpy_generator(generator: Any, who: str) -> np.random.Generator:
    """The NumPy generator to draw from: ``generator``'s (a ``tadiff.Generator`` or a NumPy
    ``Generator``), or the default one for ``None``."""
    if generator is None:
        return _rng
    if isinstance(generator, np.random.Generator):
        return generator
    numpy = getattr(generator, "numpy", None)  # a tadiff.Generator
    if isinstance(numpy, np.random.Generator):
        return numpy
    raise DTypeError(
        f"{who}: generator must be a tadiff.Generator or a numpy.random.Generator, got "
        f"{type(generator).__name__}"
    )


def _dtype(dtype: Any, default: Any = np.float32) -> np.dtype:
    try:
        return np.dtype(default if dtype is None else dtype)
    except TypeError:
        raise DTypeError(f"unknown dtype {dtype!r}") from None


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    try:
        shape = tuple(int(s) for s in size)
    except TypeError:
        raise DTypeError(f"size must be ints, got {size!r}") from None
    if any(s < 0 for s in shape):
        raise InputError(f"negative dimension in size {shape}")
    return shape


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new leaf Tensor holding a copy of ``data``.

    Args:
        data: a number, nested lists, a NumPy array or a Tensor.
        dtype: NumPy dtype; default: the array's own dtype, float32 for Python floats, int64 for
            Python ints.
        requires_grad: whether gradients should be accumulated into ``.grad``.

    Raises:
        DataError: ``data`` is not a rectangular array of numbers (a ragged nested list, strings,
            ``None``); the message names the index at fault.

    Example:
        >>> tensor([[1, 2], [3, 4]]).dtype
        dtype('int64')
        >>> tensor([[1.0, 2.0], [3.0]])
        Traceback (most recent call last):
        ...
        tadiff.errors.DataError: tensor(): expected a sequence of length 2 at dim 1 ... length 1
    """
    if isinstance(data, Tensor):
        data = data.data
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.array(_numeric(data), dtype=_dtype(dtype, data.dtype), copy=True)
    else:
        arr = numeric_array(data)
        if dtype is not None:
            arr = arr.astype(_dtype(dtype), copy=False)
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    return Tensor(arr, requires_grad=requires_grad)


_NUMERIC_KINDS = "biufc"


def _numeric(arr: Any) -> Any:
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise DataError(
            f"tensor(): an array of dtype {arr.dtype} holds no numbers; tensors hold booleans, "
            "integers, floating point or complex numbers"
        )
    return arr


def numeric_array(data: Any) -> np.ndarray:
    """``np.array(data)`` for a number or nested sequences of numbers, as ``td.tensor`` reads
    them; a :class:`~tadiff.errors.DataError` naming the first index at fault otherwise (a
    sequence whose length differs from its siblings', an element that is no number)."""
    try:
        arr = np.array(data)
    except (ValueError, TypeError):
        arr = None
    if arr is None or arr.dtype.kind not in _NUMERIC_KINDS:
        raise _data_error(data)
    return arr


def _is_sequence(v: Any) -> bool:
    return isinstance(v, (list, tuple)) or (isinstance(v, (np.ndarray, Tensor)) and v.ndim > 0)


def _data_error(data: Any) -> DataError:
    """Walk nested ``data`` level by level to the first element that makes it no array of
    numbers."""
    level: list[tuple[tuple[int, ...], Any]] = [((), data)]
    for dim in range(64):
        seqs = [(i, v) for i, v in level if _is_sequence(v)]
        if not seqs:
            break
        if len(seqs) != len(level):
            idx, v = next((i, v) for i, v in level if not _is_sequence(v))
            return DataError(
                f"tensor(): ragged nesting at dim {dim}: index {list(idx)} holds "
                f"{type(v).__name__} {v!r} where index {list(seqs[0][0])} holds a sequence"
            )
        n = len(seqs[0][1])
        for idx, v in seqs:
            if len(v) != n:
                return DataError(
                    f"tensor(): expected a sequence of length {n} at dim {dim} (like index "
                    f"{list(seqs[0][0])}), but index {list(idx)} has length {len(v)}"
                )
        level = [((*i, j), item) for i, v in seqs for j, item in enumerate(v)]
    for idx, v in level:
        if np.asarray(v).dtype.kind not in _NUMERIC_KINDS:
            where = f" at index {list(idx)}" if idx else ""
            return DataError(
                f"tensor(): element {v!r}{where} is a {type(v).__name__}, not a number; "
                "tensors hold booleans, integers, floating point or complex numbers"
            )
    return DataError(f"tensor(): cannot make a numeric array from {type(data).__name__}")


def _new(arr: np.ndarray, requires_grad: bool) -> Tensor:
    return Tensor(arr, requires_grad=requires_grad)


def zeros(*size: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of shape ``size`` (ints or one tuple)."""
    return _new(np.zeros(_size(size), _dtype(dtype)), requires_grad)


def ones(*size: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of shape ``size``."""
    return _new(np.ones(_size(size), _dtype(dtype)), requires_grad)


def full(size: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of shape ``size`` filled with ``fill_value`` (dtype inferred like ``tensor``)."""
    if dtype is None:
        dtype = tensor(fill_value).dtype
    return _new(np.full(_size((size,)), fill_value, _dtype(dtype)), requires_grad)


def empty(*size: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor (zeros here: NumPy's ``empty`` would expose stale memory)."""
    return zeros(*size, dtype=dtype, requires_grad=requires_grad)


def arange(
    start: Any, end: Any = None, step: Any = 1, dtype: Any = None, requires_grad: bool = False
) -> Tensor:
    """Values ``start, start+step, ...`` below ``end`` (``arange(n)``: ``0..n-1``); int64 for
    integer arguments, float32 otherwise."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise InputError("arange: step must be nonzero")
    is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    arr = np.arange(start, end, step, dtype=_dtype(dtype, np.int64 if is_int else np.float32))
    return _new(arr, requires_grad)


def linspace(
    start: float, end: float, steps: int, dtype: Any = None, requires_grad: bool = False
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise InputError(f"linspace: number of steps must be non-negative, got {steps}")
    return _new(np.linspace(start, end, steps, dtype=_dtype(dtype)), requires_grad)


def eye(n: int, m: int | None = None, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """The ``n x m`` identity (``m`` defaults to ``n``)."""
    return _new(np.eye(n, m, dtype=_dtype(dtype)), requires_grad)


def rand(
    *size: Any, generator: Any = None, dtype: Any = None, requires_grad: bool = False
) -> Tensor:
    """Uniform samples in [0, 1) (seed with ``manual_seed``, or pass a ``generator``)."""
    rng = numpy_generator(generator, "rand")
    return _new(rng.random(_size(size)).astype(_dtype(dtype)), requires_grad)


def randn(
    *size: Any, generator: Any = None, dtype: Any = None, requires_grad: bool = False
) -> Tensor:
    """Standard normal samples (seed with ``manual_seed``, or pass a ``generator``)."""
    rng = numpy_generator(generator, "randn")
    return _new(rng.standard_normal(_size(size)).astype(_dtype(dtype)), requires_grad)


def randint(
    low: int,
    high: int | None = None,
    size: Any = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform integers in ``[low, high)``; ``randint(high, size)`` starts at 0 (torch's
    overloads). int64 unless ``dtype`` says otherwise."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise InputError("randint: a size tuple is required, e.g. randint(0, 10, (3,))")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise InputError(f"randint: expected low < high, got low={low}, high={high}")
    rng = numpy_generator(generator, "randint")
    data = rng.integers(int(low), int(high), _size((size,) if isinstance(size, int) else size))
    return _new(data.astype(_dtype(dtype, np.int64)), requires_grad)


def randperm(
    n: int, *, generator: Any = None, dtype: Any = None, requires_grad: bool = False
) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64)."""
    if int(n) < 0:
        raise InputError(f"randperm: n must be non-negative, got {n}")
    rng = numpy_generator(generator, "randperm")
    return _new(rng.permutation(int(n)).astype(_dtype(dtype, np.int64)), requires_grad)


def normal(
    mean: Any = 0.0, std: Any = 1.0, size: Any = None, *, generator: Any = None, dtype: Any = None
) -> Tensor:
    """Normal samples with the given ``mean`` and ``std`` (numbers or arrays that broadcast;
    ``size`` when both are numbers). Not differentiable in ``mean``/``std``."""
    m = np.asarray(mean.data if isinstance(mean, Tensor) else mean, dtype=np.float64)
    s = np.asarray(std.data if isinstance(std, Tensor) else std, dtype=np.float64)
    if (s < 0).any():
        raise InputError("normal: std must be non-negative")
    shape = np.broadcast_shapes(m.shape, s.shape) if size is None else _size(_tuple(size))
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    dt = _dtype(dtype, like.dtype if like is not None else np.float32)
    rng = numpy_generator(generator, "normal")
    return _new((m + s * rng.standard_normal(shape)).astype(dt), False)


def bernoulli(p: Any, *, generator: Any = None) -> Tensor:
    """0/1 samples with probabilities ``p`` (a Tensor or array in [0, 1]), in ``p``'s dtype."""
    probs = p.data if isinstance(p, Tensor) else np.asarray(p, dtype=np.float32)
    if probs.size and (probs.min() < 0 or probs.max() > 1):
        raise InputError("bernoulli: probabilities must be in [0, 1]")
    rng = numpy_generator(generator, "bernoulli")
    return _new((rng.random(probs.shape) < probs).astype(probs.dtype), False)


def multinomial(
    input: Any, num_samples: int, replacement: bool = False, *, generator: Any = None
) -> Tensor:
    """Indices sampled from the rows of ``input`` (non-negative weights, 1-D or 2-D), int64."""
    w = np.asarray(input.data if isinstance(input, Tensor) else input, dtype=np.float64)
    if w.ndim not in (1, 2):
        raise InputError(f"multinomial: input must be 1-D or 2-D, got shape {w.shape}")
    rows = w.reshape(-1, w.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(1) <= 0).any():
        raise InputError("multinomial: weights must be finite, non-negative, with positive sum")
    if not replacement and num_samples > (rows > 0).sum(1).min():
        raise InputError(
            f"multinomial: cannot draw {num_samples} samples without replacement from "
            f"{int((rows > 0).sum(1).min())} categories of nonzero weight"
        )
    rng = numpy_generator(generator, "multinomial")
    picks = [
        rng.choice(rows.shape[1], int(num_samples), replace=replacement, p=r / r.sum())
        for r in rows
    ]
    out = np.asarray(picks, dtype=np.int64).reshape((*w.shape[:-1], int(num_samples)))
    return _new(out, False)


def _tuple(size: Any) -> tuple[Any, ...]:
    return (size,) if isinstance(size, (int, np.integer)) else tuple(size)


def _like(t: Any, dtype: Any) -> tuple[tuple[int, ...], Any]:
    shape = t.shape if isinstance(t, (Tensor, np.ndarray)) else np.shape(t)
    dt = dtype if dtype is not None else getattr(t, "dtype", None)
    return shape, dt


def zeros_like(t: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return zeros(shape, dtype=dt, requires_grad=requires_grad)


def ones_like(t: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return ones(shape, dtype=dt, requires_grad=requires_grad)


def full_like(t: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere, with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return full(shape, fill_value, dtype=dt, requires_grad=requires_grad)


def rand_like(t: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return rand(shape, dtype=dt, requires_grad=requires_grad)


def randn_like(t: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Normal samples with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return randn(shape, dtype=dt, requires_grad=requires_grad)
