"""Element-wise ops that NumPy runs slowly, as compiled loops where Numba is installed.

* ``exp``: NumPy vectorizes its float64 ``exp`` only on CPUs with AVX-512; elsewhere (AVX2
  machines) it is a loop of scalar calls, about 3x the time of torch's vectorized one (10 000
  values: 57-75 against 24 µs). The loop uses the index-notation backend's inline exponential
  (24-31 µs; float32 7 µs where NumPy takes 15): within 1 ulp of the exact value in float64
  (NumPy's is within half an ulp), within 1 ulp of the correctly rounded value in float32;
  infinities, NaN, overflow and underflow as ``np.exp``, without NumPy's overflow warning
  (torch gives none either).
* ``masked`` (``g`` where a mask holds, exactly 0 elsewhere; the backward of ReLU, ``clamp``,
  ``where`` and others): three NumPy passes with a cast (90 µs for 65 536 float64 values)
  against one loop (38 µs; torch's ``threshold_backward`` 38).
* ``relu``: NumPy's ``clip`` with scalar bounds takes 41 µs for 65 536 float64 values where the
  loop takes 26 (torch 22).
* ``relu_grad`` (ReLU's gradient from its saved output): a NumPy comparison, its negation
  and the masked selection loop took 69 µs for 65 536 float64 values (two temporary masks);
  one loop reads the output and the gradient once: 49 µs, torch's ``threshold_backward`` 46
  (``benchmarks/fast_loops.py``).
* ``put`` (values written at flat positions of zeros; max pooling's gradient): NumPy's fancy
  assignment takes 44 µs where the loop takes 35 (16 384 float64 values into 65 536 zeros).

With Numba installed (``pip install tadiff[numba]``), C-contiguous float32 and float64 arrays
of at least :data:`FAST_LOOP_MIN_SIZE` values take the loops; other arrays, and every array
without Numba, NumPy's ufuncs. The loops compile on their first use on a machine, into Numba's
disk cache; later processes load them on first use.

Example:
    >>> import numpy as np
    >>> from tadiff.ops.fast_loops import exp_array, masked_array
    >>> exp_array(np.array([0.0, 1.0, -np.inf])).tolist()
    [1.0, 2.718281828459045, 0.0]
    >>> masked_array(np.array([True, False]), np.array([2.0, np.nan])).tolist()
    [2.0, 0.0]
"""

from __future__ import annotations

import time
from types import ModuleType

import numpy as np

from tadiff._array import broadcast_copy
from tadiff._optional import usable

__all__ = [
    "FAST_LOOP_MIN_SIZE", "exp_array", "loops_apply", "masked_array", "put_array", "relu_array",
    "relu_grad_array",
]  # fmt: skip

FAST_LOOP_MIN_SIZE = 1 << 13
"""Values from which an op runs as a compiled loop (when Numba is installed). A loop's first use
in a process imports Numba and loads it (about a second): below 8 192 values, where a loop saves
under 30 µs per call, a process would need tens of thousands of calls to earn that back."""

_COMPILED_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def loops_apply(first: np.ndarray, *others: np.ndarray | None, min_size: int | None = None) -> bool:
    """Whether compiled loops take ``first`` (float32/float64, at least ``min_size`` values, by
    default :data:`FAST_LOOP_MIN_SIZE`, C-contiguous) and the ``others`` (None, or C-contiguous
    arrays of its shape), Numba being installed and importable."""
    if (
        first.size < (FAST_LOOP_MIN_SIZE if min_size is None else min_size)
        or first.dtype not in _COMPILED_DTYPES
        or not first.flags.c_contiguous
    ):
        return False
    for a in others:
        if a is not None and (a.shape != first.shape or not a.flags.c_contiguous):
            return False
    return usable("numba")


_READY: set = set()
"""``(loop, dtype)`` pairs called before in this process (their machine code is loaded): a set
lookup, where asking the dispatcher for its ``signatures`` costs about 3 µs per call."""


def _run(loop, *arrays: np.ndarray) -> None:
    """Call ``loop`` on the arrays flattened; the first call in a process for a dtype
    (compiling or loading the loop) is counted in
    ``tadiff.index.compile.stats()["jit_seconds"]``."""
    flat = [a.reshape(-1) for a in arrays]
    key = (loop, flat[0].dtype)
    if key in _READY:
        loop(*flat)
        return
    from tadiff.index.compile.cache import record_jit

    start = time.perf_counter()
    loop(*flat)
    record_jit(time.perf_counter() - start)
    _READY.add(key)


def _elementwise() -> ModuleType:
    from tadiff.ops import _elementwise_numba

    return _elementwise_numba


def exp_array(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.exp(x, out=out)``, through the compiled loop where it applies (see the module).

    Args:
        x: any array (non-float arrays follow ``np.exp``'s rules).
        out: where to write, or None for a new array; may be ``x`` itself.

    Returns:
        ``out``, or the new array.
    """
    if x.size < FAST_LOOP_MIN_SIZE:  # the common small call: NumPy at once (a third less)
        return np.exp(x) if out is None else np.exp(x, out)
    if not loops_apply(x, out) or (out is not None and out.dtype != x.dtype):
        return np.exp(x, out=out)
    # imported here: the index-notation compiler is not loaded by ``import tadiff``
    from tadiff.index.compile.numba_backend import exp_loop

    if out is None:
        out = np.empty_like(x)
    _run(exp_loop(x.dtype), x, out)
    return out


def masked_array(keep: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``g`` where the boolean array ``keep`` holds, exactly 0 elsewhere (also where ``g`` is
    NaN, as torch's masked gradients are); ``keep`` of ``g``'s shape. A new array."""
    if keep.dtype != np.bool_ or not loops_apply(g, keep):
        return _masked_numpy(keep, g)
    out = np.empty_like(g)
    _run(_elementwise().masked, keep, g, out)
    return out


def _masked_numpy(keep: np.ndarray, g: np.ndarray) -> np.ndarray:
    # np.where branches per element, ~10x slower than a multiply on a random mask (ReLU's
    # backward): mask the bit pattern with all-ones/all-zeros words instead, branch-free
    bits = _SAME_WIDTH_INT.get(g.dtype)
    if bits is None or g.ndim == 0 or keep.ndim > g.ndim:
        return np.where(keep, g, 0)
    if g.shape != keep.shape:
        if g.size < _COPIED_MASK_FROM:
            return np.where(keep, g, 0)
        keep = broadcast_copy(keep, g.shape)  # a broadcast condition (where's): long runs
    # bool -> 0 / -1 (all bits set) of the float's width in one pass, then one AND
    ones = np.negative(np.asarray(keep).view(np.int8), dtype=bits)
    return np.bitwise_and(g.view(bits), ones, out=ones).view(g.dtype)


# From this many values a broadcast mask is copied to the gradient's shape first: two long
# passes and the copy cost less than np.where's runs of a short broadcast axis.
_COPIED_MASK_FROM = 1024

_SAME_WIDTH_INT = {
    np.dtype(np.float64): np.int64,
    np.dtype(np.float32): np.int32,
    np.dtype(np.float16): np.int16,
}


def relu_array(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` of a float array as torch computes it (NaN stays NaN, ``-0.0`` stays
    ``-0.0``), a new array: the compiled loop where it applies, else NumPy's ``clip`` (faster
    than ``maximum`` with a scalar 0)."""
    if x.size < FAST_LOOP_MIN_SIZE or not loops_apply(x):
        return x.clip(0, np.inf)
    out = np.empty_like(x)
    _run(_elementwise().relu, x, out)
    return out


def relu_grad_array(result: np.ndarray, g: np.ndarray) -> np.ndarray:
    """ReLU's gradient: ``g`` where ``result`` (the ReLU's output, ``g``'s shape) is not
    ``<= 0``, exactly 0 elsewhere, a new array. The gradient passes where the output is NaN
    (torch's ``threshold_backward`` does too) and stops at ``-0.0``.

    Example:
        >>> relu_grad_array(np.array([2.0, 0.0, np.nan]), np.array([1.0, 1.0, 1.0])).tolist()
        [1.0, 0.0, 1.0]
    """
    if result.dtype != g.dtype or not loops_apply(g, result):
        return masked_array(np.asarray(~(result <= 0)), g)
    out = np.empty_like(g)
    _run(_elementwise().relu_grad, result, g, out)
    return out


def put_array(values: np.ndarray, positions: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros of ``shape`` and ``values``' dtype with ``values`` written at the flat
    ``positions`` (an integer array of ``values``' shape, each position at most once). A new
    array."""
    out = np.zeros(shape, values.dtype)
    # a strided gradient (a padded convolution's input gradient, cropped) is copied first, as
    # the fancy assignment would: the copy and the loop take 67 µs where NumPy's assignment
    # takes 81 (16 384 float64 values from the interior of a (32, 8, 10, 10) array)
    values = np.ascontiguousarray(values)
    if positions.dtype == np.int64 and loops_apply(values, positions):
        _run(_elementwise().put, positions, values, out)
    else:
        out.reshape(-1)[positions.reshape(-1)] = values.reshape(-1)
    return out
