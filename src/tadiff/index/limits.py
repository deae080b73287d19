"""What the compiled backends can represent, checked before a kernel is built.

The index algebra (parsing, derivation, bounds checking, the reference interpreter) is exact:
Python integers and fractions, any size. The compiled backends are not: NumPy's index grids,
Numba's loops and Triton's programs compute every index, sum bound and condition in 64-bit
integers. :func:`check_kernel_limits` bounds every such computation over the loop ranges of the
given shapes and refuses, naming the backend and the expression, where one could pass
``2**63 - 1``; and it refuses an output or argument larger than this machine's memory before
anything is allocated.

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> big = 10**20
    >>> f = define(f"y[i:3, j:3] = where(i == j, x[{big}*i - {big}*j + i], 0)")
    >>> f.reference(x=np.arange(3.0))[1]          # exact integers: fine
    array([0., 1., 0.])
    >>> check_kernel_limits(f, {"x": (3,)}, (3, 3), np.float64, "numpy")
    Traceback (most recent call last):
    ...
    tadiff.errors.InputError: compiled kernels (backend 'numpy') compute indices in 64-bit ...
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np

from tadiff.errors import InputError
from tadiff.index.expr import Access, Affine, Index, Node, Op, Sum, Where, is_param
from tadiff.index.printer import affine_text

__all__ = ["INDEX_LIMIT", "check_kernel_limits", "check_memory", "index_extent", "memory_limit"]

INDEX_LIMIT = 2**63 - 1
"""Largest integer a compiled backend's index arithmetic holds (int64)."""


def memory_limit() -> int:
    """Bytes of physical memory (the most any one array may take); 2**63 where unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 2**63


def _magnitude(e: Affine, box: Mapping[str, tuple[int, int]], params: Mapping[str, int]) -> int:
    """A bound on every partial sum the backends form for ``e`` (scaled to integers)."""
    den = math.lcm(e.const.denominator, *(c.denominator for _, c in e.items()))
    total = abs(int(e.const * den))
    for name, c in e.items():
        if is_param(name):
            value = abs(params.get(name, 0))
        else:
            lo, hi = box.get(name, (0, 0))
            value = max(abs(lo), abs(hi))
        total += abs(int(c * den)) * value
    return total


def _interval(e: Affine, box, params) -> tuple[float, float]:
    lo = hi = e.const
    for name, c in e.items():
        if is_param(name):
            lo += c * params.get(name, 0)
            hi += c * params.get(name, 0)
            continue
        a, b = box.get(name, (0, 0))
        lo += min(c * a, c * b)
        hi += max(c * a, c * b)
    return lo, hi


def index_extent(
    body: Node, out_vars: tuple[str, ...], out_shape: tuple[int, ...], params: Mapping[str, int]
) -> tuple[int, Affine, list[str]]:
    """The largest magnitude an integer computation of ``body`` can reach for these sizes,
    with the expression that reaches it and the loop variables in scope (for printing).

    Sum indices range over the interval hull of their bounds (a safe over-estimate).
    """
    worst: tuple[int, Affine, list[str]] = (0, Affine.constant(0), list(out_vars))
    box0 = {v: (0, n - 1) for v, n in zip(out_vars, out_shape, strict=True)}
    stack: list[tuple[Node, dict, list[str]]] = [(body, box0, list(out_vars))]
    seen: set[tuple[int, tuple]] = set()
    while stack:
        node, box, order = stack.pop()
        key = (id(node), tuple(sorted(box.items())))
        if key in seen:
            continue
        seen.add(key)
        exprs: list[Affine] = []
        if isinstance(node, Index):
            exprs = [node.expr]
        elif isinstance(node, Access):
            exprs = list(node.indices)
        elif isinstance(node, Where):
            exprs = [c.expr for c in node.conds]
            stack += [(node.then, box, order), (node.other, box, order)]
        elif isinstance(node, Op):
            stack += [(a, box, order) for a in node.args]
        elif isinstance(node, Sum):
            exprs = [*node.lower, *node.upper]
            lo = max(math.floor(_interval(b, box, params)[0]) for b in node.lower)
            hi = min(math.ceil(_interval(b, box, params)[1]) for b in node.upper)
            stack.append((node.body, {**box, node.var: (lo, max(lo, hi))}, [*order, node.var]))
        for e in exprs:
            value = _magnitude(e, box, params)
            if value > worst[0]:
                worst = (value, e, order)
    return worst


def check_memory(arrays: Mapping[str, tuple[tuple[int, ...], str]], itemsize: int) -> None:
    """Refuse arrays larger than this machine's memory before they are made.

    Args:
        arrays: name -> (shape, what it is: "output", "argument").
        itemsize: bytes per element.

    Raises:
        InputError: naming the array, its shape and the bytes it would take.
    """
    limit = memory_limit()
    for name, (shape, what) in arrays.items():
        nbytes = math.prod(shape) * itemsize
        if nbytes > limit:
            raise InputError(
                f"the {what} {name} of shape {tuple(shape)} would take {nbytes:.3g} bytes, more "
                f"than this machine's memory ({limit:.3g} bytes)"
            )


def check_kernel_limits(fn, shapes: Mapping[str, tuple[int, ...]], out_shape, dtype, backend):
    """Refuse, before anything is allocated, what a compiled ``backend`` cannot compute exactly.

    Raises:
        InputError: an index computation that can pass ``2**63 - 1`` (naming the backend and
            the expression), or an output or argument larger than this machine's memory.
    """
    arrays = {a: (tuple(shapes[a]), "argument") for a in fn.args}
    arrays[fn.out_name] = (tuple(out_shape), "output")
    check_memory(arrays, np.dtype(dtype).itemsize)
    params = fn._params(shapes)
    value, expr, order = index_extent(fn.body, fn.out_vars, tuple(out_shape), params)
    if value > INDEX_LIMIT:
        raise InputError(
            f"compiled kernels (backend {backend!r}) compute indices in 64-bit integers, but "
            f"{affine_text(expr, order)} can reach {value:.3g} for these shapes (more than "
            "2**63 - 1); the reference interpreter (.reference(...)) computes it exactly"
        )
