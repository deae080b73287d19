"""Tensor factories: ``tensor zeros ones full arange linspace eye``, the random ``rand randn
randint randperm normal bernoulli multinomial``, and ``*_like``.

Floating results default to float32, as in torch (``set_default_dtype`` changes that); arrays
passed to ``tensor`` keep their dtype (float64 stays float64). ``manual_seed`` seeds the one
generator behind every random factory. Every factory takes torch's ``device=``: ``None`` or
``"cpu"`` (tadiff's one device; any other raises :class:`~tadiff.errors.DeviceError`).

Example:
    >>> import tadiff as td
    >>> td.tensor([1.0, 2.0]).dtype, td.tensor(np.zeros(2)).dtype
    (dtype('float32'), dtype('float64'))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tadiff._device import check_device
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DataError, DTypeError, InputError, SharingError, type_name

_rng = np.random.default_rng()
"""The default generator's NumPy generator (``tadiff.random.default_generator``); read at each
draw, since seeding or setting the state replaces it."""

_default_dtype = [np.dtype(np.float32)]  # a one-element list: read on hot paths without a call


def get_default_dtype() -> np.dtype:
    """The dtype of floating tensors made from Python floats or without a ``dtype=``.

    Example:
        >>> get_default_dtype()
        dtype('float32')
    """
    return _default_dtype[0]


def set_default_dtype(dtype: Any) -> None:
    """Make ``dtype`` (float16, float32 or float64) the default floating dtype, as torch's.

    Factories, ``tensor`` of Python floats, arithmetic of integer tensors with Python floats
    and the parameters of ``nn`` layers use it from then on.

    Raises:
        DTypeError: for a dtype that is not floating point (a TypeError, as in torch).

    Example:
        >>> set_default_dtype("float64"); tensor([1.5]).dtype
        dtype('float64')
        >>> set_default_dtype("float32")
    """
    resolved = _dtype(dtype)
    if resolved.kind != "f":
        raise DTypeError(
            f"only floating-point types are supported as the default type, got {resolved}"
        )
    _default_dtype[0] = resolved


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


def _dtype(dtype: Any, default: Any = None) -> np.dtype:
    if dtype is None:
        dtype = _default_dtype[0] if default is None else default
    try:
        return np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"unknown dtype {dtype!r}") from None


def factory_dtype(dtype: Any, device: Any, who: str) -> np.dtype:
    """The dtype a layer or factory with ``dtype=``/``device=`` arguments makes: ``dtype``, or
    the default dtype for None; the device must be the CPU."""
    check_device(device, who)
    return _dtype(dtype)


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


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new leaf Tensor holding a copy of ``data``.

    Args:
        data: a number, nested lists, a NumPy array or a Tensor.
        dtype: NumPy dtype; default: the array's own dtype, the default dtype (float32) for
            Python floats, int64 for Python ints.
        device: ``None`` or ``"cpu"``.
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
    check_device(device, "tensor")
    if isinstance(data, Tensor):
        data = data.data
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.array(_numeric(data), dtype=_dtype(dtype, data.dtype), copy=True)
    else:
        arr = numeric_array(data)
        if dtype is not None:
            arr = arr.astype(_dtype(dtype), copy=False)
        elif arr.dtype == np.float64:
            arr = arr.astype(_default_dtype[0])
    return Tensor(arr, requires_grad=requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A Tensor sharing ``array``'s memory and dtype (writes to either show in both).

    Raises:
        DTypeError: ``array`` is not a NumPy array (a TypeError, as in torch).

    Example:
        >>> a = np.zeros(2); t = from_numpy(a); a[0] = 5.0; t
        tensor([5., 0.], dtype=float64)
    """
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy: expected np.ndarray (got {type_name(array)})")
    return Tensor(_numeric(array))


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a Tensor, sharing memory where it can (torch's ``as_tensor``).

    A Tensor of the asked dtype is returned itself; a NumPy array of the asked dtype is wrapped
    without a copy; objects with ``__dlpack__`` (a CPU torch tensor, a JAX array) are shared
    through DLPack; anything else is copied as by :func:`tensor`. A Tensor converted to another
    dtype stays in the graph (like ``Tensor.to``).

    Example:
        >>> a = np.ones(2, dtype=np.float32); as_tensor(a).data is a
        True
    """
    check_device(device, "as_tensor")
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(_dtype(dtype))
    if not isinstance(data, (np.ndarray, np.generic)) and hasattr(data, "__dlpack__"):
        data = from_dlpack(data).data
    if isinstance(data, np.ndarray) and (dtype is None or _dtype(dtype) == data.dtype):
        return Tensor(_numeric(data))
    return tensor(data, dtype=dtype)


def from_dlpack(external: Any) -> Tensor:
    """A Tensor sharing the memory of ``external``, an object with ``__dlpack__`` on the CPU
    (a torch tensor, a JAX or CuPy array, a NumPy array).

    Raises:
        DTypeError: ``external`` has no ``__dlpack__``.
        DeviceError: its memory is on a GPU (move it to the CPU first, e.g. ``t.cpu()``).
        SharingError: it refuses to share (a torch tensor that requires grad: detach it).

    Example:
        >>> from_dlpack(np.arange(3.0))
        tensor([0., 1., 2.], dtype=float64)
    """
    if isinstance(external, Tensor):
        return external
    if not hasattr(external, "__dlpack__"):
        raise DTypeError(
            f"from_dlpack: expected an object with __dlpack__, got {type_name(external)}"
        )
    device_type = external.__dlpack_device__()[0] if hasattr(external, "__dlpack_device__") else 1
    if int(device_type) != 1:  # kDLCPU
        check_device("cuda", f"from_dlpack of a {type_name(external)} on a GPU")
    try:
        return Tensor(np.from_dlpack(external))
    except BufferError as error:
        raise SharingError(
            f"from_dlpack: a {type_name(external)} could not be shared ({error}); a torch "
            "tensor that requires grad must be detached first (t.detach())"
        ) from None


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


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of shape ``size`` (ints or one tuple)."""
    check_device(device, "zeros")
    return _new(np.zeros(_size(size), _dtype(dtype)), requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of shape ``size``."""
    check_device(device, "ones")
    return _new(np.ones(_size(size), _dtype(dtype)), requires_grad)


def full(
    size: Any, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """A tensor of shape ``size`` filled with ``fill_value`` (dtype inferred like ``tensor``)."""
    check_device(device, "full")
    if dtype is None:
        dtype = tensor(fill_value).dtype
    return _new(np.full(_size((size,)), fill_value, _dtype(dtype)), requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor (zeros here: NumPy's ``empty`` would expose stale memory)."""
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Values ``start, start+step, ...`` below ``end`` (``arange(n)``: ``0..n-1``); int64 for
    integer arguments, the default dtype (float32) otherwise."""
    check_device(device, "arange")
    if end is None:
        start, end = 0, start
    if step == 0:
        raise InputError("arange: step must be nonzero")
    is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    arr = np.arange(start, end, step, dtype=_dtype(dtype, np.int64 if is_int else None))
    return _new(arr, requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    check_device(device, "linspace")
    if steps < 0:
        raise InputError(f"linspace: number of steps must be non-negative, got {steps}")
    return _new(np.linspace(start, end, steps, dtype=_dtype(dtype)), requires_grad)


def eye(
    n: int, m: int | None = None, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """The ``n x m`` identity (``m`` defaults to ``n``)."""
    check_device(device, "eye")
    return _new(np.eye(n, m, dtype=_dtype(dtype)), requires_grad)


def rand(
    *size: Any,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples in [0, 1) (seed with ``manual_seed``, or pass a ``generator``)."""
    check_device(device, "rand")
    rng = numpy_generator(generator, "rand")
    return _new(rng.random(_size(size)).astype(_dtype(dtype)), requires_grad)


def randn(
    *size: Any,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal samples (seed with ``manual_seed``, or pass a ``generator``)."""
    check_device(device, "randn")
    rng = numpy_generator(generator, "randn")
    return _new(rng.standard_normal(_size(size)).astype(_dtype(dtype)), requires_grad)


def randint(
    low: int,
    high: int | None = None,
    size: Any = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform integers in ``[low, high)``; ``randint(high, size)`` starts at 0 (torch's
    overloads). int64 unless ``dtype`` says otherwise."""
    check_device(device, "randint")
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
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64)."""
    check_device(device, "randperm")
    if int(n) < 0:
        raise InputError(f"randperm: n must be non-negative, got {n}")
    rng = numpy_generator(generator, "randperm")
    return _new(rng.permutation(int(n)).astype(_dtype(dtype, np.int64)), requires_grad)


def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Any = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """Normal samples with the given ``mean`` and ``std`` (numbers or arrays that broadcast;
    ``size`` when both are numbers). Not differentiable in ``mean``/``std``."""
    check_device(device, "normal")
    m = np.asarray(mean.data if isinstance(mean, Tensor) else mean, dtype=np.float64)
    s = np.asarray(std.data if isinstance(std, Tensor) else std, dtype=np.float64)
    if (s < 0).any():
        raise InputError("normal: std must be non-negative")
    shape = np.broadcast_shapes(m.shape, s.shape) if size is None else _size(_tuple(size))
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    dt = _dtype(dtype, like.dtype if like is not None else None)
    rng = numpy_generator(generator, "normal")
    return _new((m + s * rng.standard_normal(shape)).astype(dt), False)


def bernoulli(p: Any, *, generator: Any = None) -> Tensor:
    """0/1 samples with probabilities ``p`` (a Tensor or array in [0, 1]), in ``p``'s dtype."""
    probs = p.data if isinstance(p, Tensor) else np.asarray(p, dtype=_default_dtype[0])
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


def zeros_like(
    t: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Zeros with ``t``'s shape and dtype."""
    if type(t) is Tensor and dtype is None and device is None and not requires_grad:
        # the common call (a buffer shaped like a tensor, once per simulation step): no checks
        # are needed, and the general path's argument handling costs about 8x the allocation
        return _make(np.zeros(t.data.shape, t.data.dtype))
    shape, dt = _like(t, dtype)
    return zeros(shape, dtype=dt, device=device, requires_grad=requires_grad)


def ones_like(t: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with ``t``'s shape and dtype."""
    if type(t) is Tensor and dtype is None and device is None and not requires_grad:
        out = np.empty(t.data.shape, t.data.dtype)  # as zeros_like (np.ones is Python-level:
        out.fill(1)  # 7.5k instructions against 2.5k for a 0-d result)
        return _make(out)
    shape, dt = _like(t, dtype)
    return ones(shape, dtype=dt, device=device, requires_grad=requires_grad)


def full_like(
    t: Any, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """``fill_value`` everywhere, with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return full(shape, fill_value, dtype=dt, device=device, requires_grad=requires_grad)


def rand_like(t: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return rand(shape, dtype=dt, device=device, requires_grad=requires_grad)


def randn_like(
    t: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Normal samples with ``t``'s shape and dtype."""
    shape, dt = _like(t, dtype)
    return randn(shape, dtype=dt, device=device, requires_grad=requires_grad)


def empty_like(
    t: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """An uninitialized tensor with ``t``'s shape and dtype (zeros, as ``empty``)."""
    shape, dt = _like(t, dtype)
    return zeros(shape, dtype=dt, device=device, requires_grad=requires_grad)


def _triangle_indices(row: int, col: int, offset: int, dtype: Any, device: Any, who: str,
                      lower: bool) -> Tensor:  # fmt: skip
    check_device(device, who)
    if row < 0 or col < 0:
        raise InputError(f"{who}: row and col must be non-negative, got {row} and {col}")
    rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    return Tensor(np.stack([rows, cols]).astype(_dtype(dtype, np.int64)))


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The indices ``(2, N)`` of the lower triangle of a ``row x col`` matrix, row by row;
    ``offset`` moves the diagonal up (> 0) or down (< 0).

    Example:
        >>> tril_indices(3, 3, -1)
        tensor([[1, 2, 2],
                [0, 0, 1]])
    """
    return _triangle_indices(row, col, offset, dtype, device, "tril_indices", True)


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The indices ``(2, N)`` of the upper triangle of a ``row x col`` matrix, row by row.

    Example:
        >>> triu_indices(2, 3)
        tensor([[0, 0, 0, 1, 1],
                [0, 1, 2, 1, 2]])
    """
    return _triangle_indices(row, col, offset, dtype, device, "triu_indices", False)
