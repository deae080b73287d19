"""The kernel cache: derive and compile once per (definition, shapes, dtype, backend).

A definition is identified by its structure: the body is a hash-consed node (equal expressions
are the same object), so two ``define`` calls of the same text share their kernels.
:func:`stats` reports what was derived and compiled and how long it took.

The cache keeps the most recently used kernels, at most :func:`cache_limit` of them (512 by
default, or ``$TADIFF_KERNEL_CACHE``): a kernel holds the gather indices and masks of its
shapes, so a program that meets ever new shapes (variable sequence lengths) would otherwise
grow without bound. The least recently used kernel is dropped first, and compiled again if its
key comes back.

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    >>> k = kernel(f, {"x": (2, 3), "w": (3, 4)}, np.float64)
    >>> k.backend, k is kernel(f, {"x": (2, 3), "w": (3, 4)}, np.float64)
    ('einsum', True)
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tadiff.errors import InputError
from tadiff.index import shapes as _shapes
from tadiff.index.compile.vectorized import Kernel, lower_einsum
from tadiff.index.limits import check_kernel_limits

__all__ = [
    "BACKENDS",
    "CacheKey",
    "cache_limit",
    "cached",
    "clear_cache",
    "gradient_kernel",
    "gradient_key",
    "kernel",
    "kernel_key",
    "record_derivation",
    "set_cache_limit",
    "source_dir",
    "stats",
]

BACKENDS = ("auto", "einsum", "numpy", "numba", "triton")
"""Backend names: ``auto`` is einsum for pure contractions, else the vectorized NumPy kernel;
``triton`` needs torch and triton (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""

_KERNELS: OrderedDict[CacheKey, Kernel] = OrderedDict()  # least recently used first
_STATS = {
    "derivations": 0,
    "derivation_seconds": 0.0,
    "compilations": 0,
    "compile_seconds": 0.0,
    "jit_compilations": 0,
    "jit_seconds": 0.0,
    "cache_hits": 0,
    "evictions": 0,
}


def _limit_from_environment() -> int:
    text = os.environ.get("TADIFF_KERNEL_CACHE", "512")
    try:
        limit = int(text)
    except ValueError:
        raise InputError(
            f"TADIFF_KERNEL_CACHE={text!r}; expected a positive number of kernels"
        ) from None
    if limit < 1:
        raise InputError(f"TADIFF_KERNEL_CACHE={limit}; expected at least 1 kernel")
    return limit


_LIMIT = [_limit_from_environment()]


def cache_limit() -> int:
    """How many compiled kernels the cache keeps (the least recently used go first)."""
    return _LIMIT[0]


def set_cache_limit(kernels: int) -> int:
    """Keep at most ``kernels`` compiled kernels; drops the oldest now if there are more.

    Args:
        kernels: a positive int.

    Returns:
        The previous limit (to restore it).

    Example:
        >>> previous = set_cache_limit(64)
        >>> cache_limit(), set_cache_limit(previous) == 64
        (64, True)
    """
    if not isinstance(kernels, int) or isinstance(kernels, bool) or kernels < 1:
        raise InputError(f"set_cache_limit({kernels!r}): expected a positive int")
    previous, _LIMIT[0] = _LIMIT[0], kernels
    _evict()
    return previous


def _evict() -> None:
    while len(_KERNELS) > _LIMIT[0]:
        _KERNELS.popitem(last=False)
        _STATS["evictions"] += 1


_BY_BACKEND: dict[str, int] = {}


def source_dir(kind: str) -> Path:
    """Folder for generated kernel sources of ``kind`` (``numba``, ``triton``): numba's disk
    cache lives next to them. ``$TADIFF_CACHE_DIR``, default ``~/.cache/tadiff``."""
    root = os.environ.get("TADIFF_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tadiff"
    )
    path = Path(root) / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def record_derivation(seconds: float) -> None:
    """Count one symbolic derivation (called by ``TensorFunction.grad``)."""
    _STATS["derivations"] += 1
    _STATS["derivation_seconds"] += seconds


def record_jit(seconds: float) -> None:
    """Count one just-in-time compilation (or disk-cache load) of machine code: a Numba
    kernel's first call in a process (called by the backend)."""
    _STATS["jit_compilations"] += 1
    _STATS["jit_seconds"] += seconds


def stats() -> dict[str, object]:
    """Counts and total times of derivations and compilations so far, and cache hits.

    Returns:
        ``{"derivations", "derivation_seconds", "compilations", "compile_seconds",
        "jit_compilations", "jit_seconds", "cache_hits", "evictions", "kernels" (cached now),
        "limit", "by_backend" {backend: compilations}}``. ``compile_seconds`` is the time
        spent planning and generating kernels; ``jit_seconds`` the time the first calls of Numba
        kernels spent compiling machine code (or loading it from the disk cache).

    Example:
        >>> sorted(stats())[:3]
        ['by_backend', 'cache_hits', 'compilations']
    """
    return {
        **_STATS,
        "kernels": len(_KERNELS),
        "limit": _LIMIT[0],
        "by_backend": dict(_BY_BACKEND),
    }


def clear_cache() -> None:
    """Drop every cached kernel and reset the counters (numba's disk cache and the limit stay)."""
    _KERNELS.clear()
    _BY_BACKEND.clear()
    for k in _STATS:
        _STATS[k] = 0 if isinstance(_STATS[k], int) else 0.0


def _key(fn) -> tuple:
    return (
        fn.out_name,
        fn.out_vars,
        fn.out_ranges,
        fn.args,
        fn.body,
        fn.equal_sizes,
        fn.jacobian_of,
    )


def kernel(
    fn,
    shapes: Mapping[str, tuple[int, ...]],
    dtype: object = np.float64,
    backend: str = "auto",
    known: Mapping[str, tuple[object, tuple[int, ...]]] | None = None,
) -> Kernel:
    """The compiled kernel of ``fn`` for argument ``shapes`` and ``dtype``, from the cache.

    Args:
        fn: a TensorFunction (a definition or a derivative).
        shapes: argument name -> shape.
        dtype: ``float32`` or ``float64``; arguments and result have it.
        backend: one of :data:`BACKENDS`.
        known: values the caller will pass besides the arguments, ``name -> (function,
            shape)``: the array ``name`` is that function's output for the same arguments
            (the engine passes a forward's output to its derivatives, which read it instead of
            recomputing it).

    Returns:
        A callable :class:`~tadiff.index.compile.vectorized.Kernel`; ``kernel.program`` is
        its plan (None for an einsum).

    Raises:
        InputError: unknown backend, or ``"einsum"`` for a body that is not a contraction.
        ShapeError, BoundsError: shapes that do not fit the definition (checked once per key).
        MissingDependencyError: ``"numba"`` without numba installed.
    """
    dtype = _checked(backend, dtype)
    shapes = {name: tuple(int(n) for n in shapes[name]) for name in fn.args}
    known = dict(known or {})
    key = kernel_key(fn, shapes, dtype, backend, known)
    hit = cached(key)
    if hit is not None:
        return hit
    start = time.perf_counter()
    params = fn._params(shapes)
    out_shape = fn.output_shape(**shapes)
    _shapes.check_bounds(fn.body, fn.out_vars, out_shape, params, shapes)
    check_kernel_limits(fn, shapes, out_shape, dtype, backend)  # int64 indices, memory
    result = _lower(fn, shapes, dtype, backend, params, out_shape, known)
    return _keep(key, result, [result.backend], start)


class CacheKey:
    """A kernel cache key: a tuple of the definition's structure, shapes, dtype and backend,
    hashed once (hashing the tuple itself walks the definition's ranges every lookup)."""

    __slots__ = ("_hash", "parts")

    def __init__(self, parts: tuple):
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is CacheKey and self.parts == other.parts)

    def __repr__(self) -> str:
        return f"CacheKey{self.parts!r}"


def kernel_key(fn, shapes, dtype, backend: str, known) -> CacheKey:
    """The cache key of :func:`kernel` ``(fn, shapes, dtype, backend, known)``, shapes as tuples
    of ints: a caller that keeps it finds the kernel again with :func:`cached`, without
    building the key per call."""
    shapes = tuple([(name, shapes[name]) for name in fn.args])
    return CacheKey((_key(fn), shapes, np.dtype(dtype).str, backend, _known_key(known)))


def gradient_key(fn, wrts: tuple[str, ...], shapes, dtype, backend: str, known) -> CacheKey:
    """The cache key of :func:`gradient_kernel` for the same arguments (see
    :func:`kernel_key`)."""
    shapes = tuple([(n, shapes[n]) for n in (*fn.args, fn.grad_name)])
    dtype = np.dtype(dtype).str
    parts = ("gradients", _key(fn), tuple(wrts), shapes, dtype, backend, _known_key(known))
    return CacheKey(parts)


def cached(key: CacheKey):
    """The kernel (or gradient kernel) cached under ``key``, counted as a hit and kept as the
    most recently used; None if it is not (or no longer) cached."""
    hit = _KERNELS.get(key)
    if hit is not None:
        _STATS["cache_hits"] += 1
        _KERNELS.move_to_end(key)
    return hit


def _checked(backend: str, dtype: object) -> np.dtype:
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise InputError(f"kernels compute in float32 or float64, got dtype {dtype}")
    return dtype


def _known_key(known: Mapping[str, tuple[object, tuple[int, ...]]]) -> tuple:
    return tuple((n, _key(f), tuple(s)) for n, (f, s) in sorted(known.items()))


def _keep(key: CacheKey, result, backends: list[str], start: float):
    """Cache ``result`` and count the kernels it was built from (one per backend entry)."""
    _STATS["compilations"] += len(backends)
    _STATS["compile_seconds"] += time.perf_counter() - start
    for b in backends:
        _BY_BACKEND[b] = _BY_BACKEND.get(b, 0) + 1
    _KERNELS[key] = result
    _evict()
    return result


def _lower(fn, shapes, dtype, backend, params, out_shape, known) -> Kernel:
    if backend in ("auto", "einsum"):
        k = lower_einsum(fn, params, shapes, out_shape, dtype)
        if k is not None:
            k.program = None
            return k
        if backend == "einsum":
            raise InputError(
                f"{fn.out_name} is not a pure contraction (products of accesses with plain "
                "indices over whole dimensions), so it has no einsum kernel; use backend='numpy'"
            )
    from tadiff.index.compile.lower import lower_program

    return lower_program(fn, shapes, dtype, backend, known)


def gradient_kernel(
    fn,
    wrts: tuple[str, ...],
    shapes: Mapping[str, tuple[int, ...]],
    dtype: object = np.float64,
    backend: str = "auto",
    known: Mapping[str, tuple[object, tuple[int, ...]]] | None = None,
):
    """The cached callable computing ``fn``'s derivatives with respect to ``wrts`` together,
    ``arrays -> {argument: gradient}`` (see
    :func:`~tadiff.index.compile.lower.lower_gradients`): derivatives that share their outer
    loops run as one nest.

    Args:
        fn: the forward TensorFunction.
        wrts: argument names.
        shapes: the shapes of ``fn``'s arguments and of its incoming gradient.
        dtype, backend, known: as for :func:`kernel`.
    """
    dtype = _checked(backend, dtype)
    if backend in ("einsum", "triton"):  # no fused nests there: one kernel per derivative
        kernels = {w: kernel(fn.grad(w), shapes, dtype, backend, known) for w in wrts}
        return lambda arrays: {w: k(arrays) for w, k in kernels.items()}
    names = (*fn.args, fn.grad_name)
    shapes = {n: tuple(int(d) for d in shapes[n]) for n in names}
    known = dict(known or {})
    key = gradient_key(fn, tuple(wrts), shapes, dtype, backend, known)
    hit = cached(key)
    if hit is not None:
        return hit
    from tadiff.index.compile.lower import lower_gradients

    start = time.perf_counter()
    for w in wrts:
        g = fn.grad(w)
        arg_shapes = {a: shapes[a] for a in g.args}
        params = g._params(arg_shapes)
        _shapes.check_bounds(g.body, g.out_vars, g.output_shape(**arg_shapes), params, arg_shapes)
    result = lower_gradients(fn, tuple(wrts), shapes, dtype, backend, known)
    return _keep(key, result, result.backends, start)
