"""Max pooling over windows that tile the input, as compiled loops (Numba).

Imported only through :mod:`tadiff.nn.pooling` when Numba is installed. NumPy needs a pass per
window position for the maxima and five more per position to find where each first maximum is;
a loop reads every input value once and writes each window's maximum and its position together.

Both loops take the input flat, C-contiguous, as rows of windows: ``x`` holds ``T`` window rows
of ``kh`` image rows of ``width = out_w * kw`` values each (``T = N * C * H / kh``), and ``best``
and ``first`` hold ``T * out_w`` values, row-major. A 1-d pooling is one image row (``kh = 1``).

The maximum is read at the position found: ``-0.0`` and ``0.0`` tie, as in the comparisons,
and the first one's sign is kept, as torch keeps it. The comparisons are selects, not
branches: after a ReLU, which value of a window wins is random, and a 2 x 2 loop that branched
took 4-6x the time, a mispredicted branch costing more than the reads. NaN, the maximum of its
window at its first place as in NumPy's ``argmax``, is looked up by a second, branching pass
over the few windows that hold one. No ``fastmath``: comparisons keep NaN's meaning.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)


@_jit
def tiled_max(x, kh, kw, out_w, best, first):
    """Any ``kh x kw`` window: the maximum of each window into ``best`` and the flat position
    in ``x`` of its first maximum into ``first`` (see the module for the layout)."""
    width = out_w * kw
    for t in range(best.size // out_w):
        base = t * kh * width
        for j in range(out_w):
            origin = base + j * kw
            m = x[origin]
            at = origin
            nan = m != m
            for di in range(kh):
                row = origin + di * width
                for dj in range(kw):
                    v = x[row + dj]
                    later = np.int64(v > m)  # strictly greater: ties keep the first
                    m = max(m, v)
                    at += later * (row + dj - at)
                    nan |= v != v
            if nan:
                at = _first_nan(x, origin, kh, kw, width)
            best[t * out_w + j] = x[at]
            first[t * out_w + j] = at


@_jit
def tiled_max_2x2(x, out_w, best, first):
    """:func:`tiled_max` for ``2 x 2`` windows, unrolled (the loop over a window's four values
    costs more than reading them)."""
    width = out_w * 2
    for t in range(best.size // out_w):
        base = t * 2 * width
        for j in range(out_w):
            p = base + 2 * j
            a, b, c, d = x[p], x[p + 1], x[p + width], x[p + width + 1]
            at = p + np.int64(b > a)
            m = max(a, b)
            at += np.int64(c > m) * (p + width - at)
            m = max(m, c)
            at += np.int64(d > m) * (p + width + 1 - at)
            if (a != a) | (b != b) | (c != c) | (d != d):
                at = _first_nan(x, p, 2, 2, width)
            best[t * out_w + j] = x[at]
            first[t * out_w + j] = at


@_jit
def _first_nan(x, origin, kh, kw, width):
    """The position of the first NaN (row-major) of the window at ``origin``, which holds one."""
    for di in range(kh):
        for dj in range(kw):
            p = origin + di * width + dj
            if x[p] != x[p]:
                return p
    return origin
