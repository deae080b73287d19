"""Element-wise loops compiled with Numba, for :mod:`tadiff.ops.fast_loops` (imported only
when Numba is installed). Each reads and writes 1-d C-contiguous arrays once; ``fastmath``
allows contraction and reassociation only, so comparisons keep NaN's meaning."""

from __future__ import annotations

import numba

_jit = numba.njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy", nogil=True)


@_jit
def masked(keep, values, out):
    """``out = values`` where ``keep`` (bool) holds, exactly 0 elsewhere (also NaN)."""
    zero = values.dtype.type(0)
    for i in range(values.size):
        out[i] = values[i] if keep[i] else zero


@_jit
def relu(x, out):
    """``out = max(x, 0)`` as torch's ReLU: NaN stays NaN, ``-0.0`` stays ``-0.0``."""
    zero = x.dtype.type(0)
    for i in range(x.size):
        v = x[i]
        out[i] = zero if v < zero else v


@_jit
def relu_grad(result, g, out):
    """``out = g`` where ``result`` (ReLU's output) is not ``<= 0``, exactly 0 elsewhere: the
    gradient passes where the output is positive or NaN, as torch's ``threshold_backward``."""
    zero = g.dtype.type(0)
    for i in range(g.size):
        out[i] = zero if result[i] <= zero else g[i]


@_jit
def put(positions, values, out):
    """``out[positions[i]] = values[i]`` for every ``i`` (positions outside ``out`` skipped)."""
    n = out.size
    for i in range(values.size):
        p = positions[i]
        if 0 <= p < n:
            out[p] = values[i]
