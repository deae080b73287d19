"""Window-unrolled contractions: a convolution as BLAS products of views, without im2col.

The general path of :mod:`~tadiff.index.compile.vectorized` copies a strided view with every
window position as an axis (im2col), then makes one matrix product: the copy costs as much as
the product. This lowering avoids it for a sum of a product of two accesses whose index
dimensions couple a long variable with short ones (``x[b, c, h + i, v + j]``: ``h`` runs over
the image, ``i`` over a 3-wide window).

* **Unrolled windows.** In each such dimension every variable but the longest is a *window*
  variable (at most :data:`_MAX_TERMS` combinations). The compile step enumerates their values;
  for one value every access is a plain strided view of its prepared argument, and the term is
  a matrix product of two views. Terms of a summed window add up, terms of an output window
  (``dw[o, c, i, j]``) fill their own output slice.
* **Merged axes, over-computed.** A matrix dimension must be one strided axis. Two axes merge
  when the outer stride is a multiple of the inner one covering its span: ``h`` (stride ``W``)
  and ``v`` (stride 1, ``OW < W`` values) become ``p = h*W + v`` with ``(OH - 1) * W + OW``
  values; the ``W - OW`` extra columns per row read real input elements and are dropped by a
  strided view of the result. Where merged axes are *summed* (the weight gradient sums over
  ``h, v``) the extra positions must add nothing: the operand that does not depend on the
  window is copied once per call into a zero-filled buffer of the merged layout.
* **Prepared arguments.** An argument is zero-padded where an index leaves it (the input
  gradient's ``dy[p - 2 + i]``) and split into phases along a dimension whose non-window
  coefficients share a factor ``g`` (stride 2: ``x[2*q + r] -> phase[r, q]``), so that every
  non-window axis has a plain stride and a window value only picks a phase and an offset.
* **BLAS or nothing.** NumPy's matmul calls BLAS only for views with one unit stride and a
  leading dimension at least that axis's length; otherwise it silently runs a slow loop. Views
  are built to satisfy this, a small operand (a weight slice) is copied contiguous per call,
  and anything else (a large operand that would need a copy, a sum variable in one factor only)
  returns ``None``: the caller keeps its general path.
* **Blocks.** Output axes left outside the matrix dimensions are batch axes of the product; the
  outermost (the batch) is looped over in Python so each product stays in cache. Where summed
  window values change a large operand and a small one, each block copies the large operand's
  views into one buffer (contiguous rows, thanks to the merged layout) and makes a single
  product with the concatenated small matrices: ``K = 9 * C`` instead of nine products with
  ``K = C`` and eight additions. Summed axes left outside the matrices (the weight gradient's
  batch) are batch axes of the product, reduced after it.
* **Block copies, the second plan.** Preparing an argument can cost a whole-array pass per
  call: a stride-2 forward reads every phase of ``x`` (the split copies all of it), an input
  gradient pads ``dy``, a weight gradient relays ``dy`` out. :class:`_BlockPlan` skips it: per
  block (batch element) it copies each window term's view of the large operand, read with the
  argument's own strides (a stride-2 read is a strided copy, no phase split), into one buffer
  of ``terms * K`` rows, writing only the box of positions inside the argument; the zeros
  around the box, written once per call, are the padding. Positions are exact (nothing
  over-computed, nothing to crop), and a residue class of a strided input gradient writes its
  slice of the output block by block (:func:`write_into`) instead of handing a whole
  intermediate to the caller. :func:`_copies_whole` picks it where the views plan would make
  such a whole-array copy; otherwise the views plan stays (a stride-1 forward reads its views
  with no copy at all, a stride-2 dilation-2 forward splits off one phase, a quarter of ``x``).
* **Shared residue classes.** A strided input gradient's classes read overlapping shifted
  views of ``dy`` (stride 2, 3x3: nine terms, four views). :func:`plan_classes` copies each
  distinct view once per block and lets every class multiply its consecutive run of them.
* **Threads.** The block plans' loops over batch elements, and the shared classes', run on
  several threads (:func:`tadiff.parallel.run_blocks`): a thread copies a block into its
  own buffer and multiplies it with one BLAS thread. Sums over blocks (weight gradients) go
  through :func:`sum_over_blocks`, in block order whichever thread took a block. The views
  plan's loops stay in one thread (their buffers outgrow a core's cache).

Example (a 2-D convolution's forward: one product per batch element, no im2col of ``x``):
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> from tadiff.index.compile.vectorized import lower_numpy
    >>> f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])")
    >>> x, w = np.ones((2, 16, 20, 20)), np.ones((16, 16, 3, 3))
    >>> k = lower_numpy(f, {"x": x.shape, "w": w.shape}, np.float64)
    >>> "window-unrolled" in k.source, k({"x": x, "w": w})[0, 0, 0, :3].tolist()
    (True, [144.0, 144.0, 144.0])
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from math import gcd

import numpy as np

from tadiff._array import pad_constant, strided_view
from tadiff.parallel import blas_threads_for, run_blocks

Arrays = Mapping[str, np.ndarray]
Form = tuple[dict[int, int], int]  # one index dimension: {axis: coefficient}, constant

_MAX_TERMS = 64
"""At most this many unrolled window combinations (a 8x8 kernel)."""
_MAX_WINDOW = 16
"""A window variable has at most this many values."""
_SMALL = 1 << 16
"""Elements of a view that may be copied per call to make it BLAS-compatible (weights)."""
_MIN_FLOPS_PER_CALL = 1 << 16
"""Below this much arithmetic per NumPy call the Python loop over blocks and window values
costs more than im2col's one copy (a batch of 512 single-channel 12x12 images: 12x slower)."""
_BLOCKS = True
_SCRATCH = 1 << 23
"""Elements of a temporary product over looped sum axes, or of a stacked block, at most."""


class _Operand:
    """One access as element strides over the planner's axes, in its prepared argument.

    The argument is zero-padded where indices leave it, and split into phases along every
    dimension whose non-window coefficients share a factor ``g > 1`` (a stride-2 access
    ``x[2*h + i]`` reads ``phase[(i % 2), h + i // 2]``): in the phase array every non-window
    axis has a plain stride, and a window value only picks the phase and an offset.

    Attributes:
        name: argument name.
        pads: ``np.pad`` widths, or None when nothing reads past the array.
        phases: per dimension its factor ``g`` (1: not split), or None when nothing is split.
        stride: non-window axis -> element stride in the prepared array.
        relayout: set when the operand is copied per call into a zero-filled buffer:
            (native base, buffer shape, view shape, native strides, buffer strides), the view
            axes in ``relayout_axes``.
        used: per dimension, the phases some window value reads (only those are split off).
        copy: the operand's matrices are made contiguous per call (a small, non-BLAS view).
    """

    def __init__(self, name: str, shape, forms: list[Form], length, window: set[int]):
        self.name, self.forms = name, forms
        pads, phases = [], []
        self.used: list[list[int]] = []
        for n, (coeffs, const) in zip(shape, forms, strict=True):
            low = const + sum(min(0, k * (length(a) - 1)) for a, k in coeffs.items())
            high = const + sum(max(0, k * (length(a) - 1)) for a, k in coeffs.items())
            g = gcd(*(abs(k) for a, k in coeffs.items() if a not in window and length(a) > 1))
            g = max(g, 1)
            lo, hi = max(0, -low), max(0, high - (n - 1))
            hi += -(n + lo + hi) % g  # whole phases
            pads.append((lo, hi))
            phases.append(g)
            # the phases the window values reach (x[2*h + 2*i] reads only phase 0)
            axes = [a for a in coeffs if a in window]
            values = itertools.product(*(range(length(a)) for a in axes))
            reached = {
                (const + lo + sum(coeffs[a] * v for a, v in zip(axes, vs, strict=True))) % g
                for vs in values
            }
            self.used.append(sorted(reached))
        padded = [n + lo + hi for n, (lo, hi) in zip(shape, pads, strict=True)]
        self.pads = pads if any(lo or hi for lo, hi in pads) else None
        self.phases = phases if any(g > 1 for g in phases) else None
        self.pad_low = [lo for lo, _ in pads]
        # prepared layout: the reached phases first, then every dimension divided by its phases
        dims = [len(r) for g, r in zip(phases, self.used, strict=True) if g > 1]
        dims += [n // g for n, g in zip(padded, phases, strict=True)]
        steps = [int(np.prod(dims[k + 1 :], dtype=np.int64)) for k in range(len(dims))]
        n_ph = len(dims) - len(shape)
        phase_step = iter(steps[:n_ph])
        self.dim_steps = [
            (next(phase_step) if g > 1 else 0, steps[n_ph + d]) for d, g in enumerate(phases)
        ]
        self.coeffs: dict[int, int] = {}  # any axis -> 1 if the access depends on it
        stride: dict[int, int] = {}
        for (coeffs, _), g, (_, q) in zip(forms, phases, self.dim_steps, strict=True):
            for a, k in coeffs.items():
                if length(a) > 1:
                    self.coeffs[a] = 1
                    if a not in window:
                        stride[a] = stride.get(a, 0) + (k // g) * q
        self.stride = {a: s for a, s in stride.items() if s}
        self.relayout: tuple | None = None
        self.relayout_axes: list[int] = []  # buffer order of the relaid-out axes
        self.copy = False
        self.base = self.offset({})

    def offset(self, at: Mapping[int, int]) -> int:
        """Element offset of index 0 on the non-window axes, window axes at ``at``."""
        if self.relayout is not None:
            return 0
        total = 0
        for (coeffs, const), lo, g, used, (ph, q) in zip(
            self.forms,
            self.pad_low,
            self.phases or [1] * len(self.forms),
            self.used,
            self.dim_steps,
            strict=True,
        ):
            u = const + lo + sum(k * at.get(a, 0) for a, k in coeffs.items() if a in at)
            total += (used.index(u % g) if g > 1 else 0) * ph + (u // g) * q
        return total

    def depends(self, window: set[int]) -> bool:
        return any(a in self.coeffs for a in window)

    def size(self, skip: set[int], length) -> int:
        """Elements of one view over the axes not in ``skip``."""
        return int(np.prod([length(a) for a in self.stride if a not in skip], dtype=np.int64))


def _span(op: _Operand, chain: list[int], length) -> int:
    """Values of the merged axis of ``chain`` (innermost first), over-computation included."""
    if not chain:
        return 1
    unit = op.stride[chain[0]]
    return 1 + sum((length(a) - 1) * (op.stride[a] // unit) for a in chain)


def _ratios(op: _Operand, chain: list[int]) -> list[int] | None:
    """Strides of ``chain`` in units of its innermost stride, or None if they do not divide."""
    if not chain or op.stride.get(chain[0], 0) <= 0:
        return None
    unit = op.stride[chain[0]]
    if any(op.stride.get(a, 0) % unit for a in chain):
        return None
    return [op.stride.get(a, 0) // unit for a in chain]


def _chain(op: _Operand, axes, length) -> list[int]:
    """The longest run of ``axes`` that merges into one strided axis of ``op``, innermost
    first: each next stride is a multiple of the innermost one covering the span so far."""
    order = sorted(axes, key=lambda a: op.stride[a])
    if not order or op.stride[order[0]] <= 0:
        return []
    chain = [order[0]]
    for a in order[1:]:
        unit = op.stride[chain[0]]
        if op.stride[a] % unit or op.stride[a] // unit < _span(op, chain, length):
            break
        chain.append(a)
    return chain


def _exact(op: _Operand, chain: list[int], length) -> bool:
    """The merged axis has no over-computed positions."""
    return _span(op, chain, length) == int(np.prod([length(a) for a in chain], dtype=np.int64))


def _unit(op: _Operand, chain: list[int]) -> int:
    return op.stride[chain[0]] if chain else 0


def _fit(op: _Operand, own: list[int], k_chain: list[int], length) -> None:
    """Shorten the unit-stride chain of ``op``'s matrix (own chain x contracted chain) until
    its span fits under the other chain's stride, the leading dimension BLAS needs."""
    for inner, outer in ((own, k_chain), (k_chain, own)):
        if inner and outer and _unit(op, inner) == 1:
            while len(inner) > 1 and _span(op, inner, length) > _unit(op, outer):
                inner.pop()
            return


def _is_blas(op: _Operand, own: list[int], k_chain: list[int], length) -> bool:
    """NumPy's own test: one unit stride, the other at least that axis's span."""
    spans = (_span(op, own, length), _span(op, k_chain, length))
    units = (_unit(op, own), _unit(op, k_chain))
    for i, j in ((0, 1), (1, 0)):
        if (units[i] == 1 or spans[i] == 1) and (spans[j] == 1 or units[j] >= spans[i]):
            return True
    return False


def _relayout(op: _Operand, chain: list[int], ratios: list[int], span: int, length) -> None:
    """Plan ``op``'s zero-filled buffer: its other axes outermost (in their stride order), then
    the contracted ``chain`` merged with the leader's ``ratios`` over ``span`` values."""
    others = sorted((a for a in op.stride if a not in chain), key=lambda a: -op.stride[a])
    new = dict(zip(chain, ratios, strict=True))
    step = span
    for a in reversed(others):
        new[a] = step
        step *= length(a)
    axes = others + chain
    op.relayout_axes = axes
    op.relayout = (
        op.base,
        (*(length(a) for a in others), span),
        tuple(length(a) for a in axes),
        tuple(op.stride[a] for a in axes),
        tuple(new[a] for a in axes),
    )
    op.stride, op.base = new, 0


def plan_window_gemm(
    factors, forms: list[list[Form]], shapes, length, summed: set[int], ndim: int, dtype, scale
) -> Callable[[Arrays], np.ndarray] | None:
    """The window-unrolled evaluation of ``scale * sum over summed axes of a * b``.

    Args:
        factors: the two Access nodes.
        forms: per factor, per index dimension, ``({axis: coeff}, const)`` (integer, affine).
        shapes: argument name -> shape.
        length: axis -> number of values.
        summed: the axes this sum reduces.
        ndim: number of axes of the planner's grids.
        dtype: computation dtype.
        scale: constant factor of the product.

    Returns:
        A closure ``arrays -> array`` with ``ndim`` axes (size 1 on summed axes and on axes no
        factor depends on), or None where this lowering does not apply (see the module
        docstring).
    """
    # window axes: all but the longest variable of a dimension that couples several, and any
    # negatively strided axis (BLAS takes positive strides only)
    window: set[int] = set()
    for fm in forms:
        for coeffs, _ in fm:
            active = [a for a in coeffs if length(a) > 1]
            if len(active) > 1:
                window.update(sorted(active, key=lambda a: (length(a), a))[:-1])
    while True:
        ops = [
            _Operand(f.name, tuple(shapes[f.name]), fm, length, window)
            for f, fm in zip(factors, forms, strict=True)
        ]
        negative = {a for op in ops for a, s in op.stride.items() if s < 0}
        if not negative:
            break
        window |= negative
    if _BLOCKS and not window:
        blocks = _plan_blocks(factors, forms, shapes, length, summed, window, ndim, dtype, scale)
        return _no_more_work(blocks, length, ndim)
    terms = int(np.prod([length(a) for a in window], dtype=np.int64))
    if not window or terms > _MAX_TERMS or any(length(a) > _MAX_WINDOW for a in window):
        return None
    blocks = None
    if _BLOCKS:
        blocks = _plan_blocks(factors, forms, shapes, length, summed, window, ndim, dtype, scale)
    views = _plan_views(ops, window, summed, length, ndim, dtype, scale)
    if blocks is not None and (views is None or _copies_whole(views)):
        return _no_more_work(blocks, length, ndim)
    return None if views is None else _no_more_work(views.run, length, ndim)


def _no_more_work(run, length, ndim: int):
    """``run``, unless its products do asymptotically more work than the definition: a
    depthwise convolution's channel index is in both factors and in the output, and a product
    over it would multiply every channel with every other (c**2 for a c-wide function)."""
    if run is None:
        return None
    natural = 2 * int(np.prod([length(a) for a in range(ndim)], dtype=np.int64))
    return None if run.__self__.flops > 4 * natural else run


def _copies_whole(plan: _Plan) -> bool:
    """The views plan copies an argument whole per call before its products: a padded copy,
    a phase split that reads every phase, or a zero-filled relayout of an unsplit argument.
    Block copies then cost less: they read each term's elements once, in cache, with no
    whole-array pass first (a stride-2 convolution's forward, any input gradient)."""
    ops = plan.ops
    if any(op.pads is not None for op in ops):
        return True
    split = [op for op in ops if op.phases is not None]
    if any(all(len(u) == g for u, g in zip(op.used, op.phases, strict=True)) for op in split):
        return True
    return not split and any(op.relayout is not None for op in ops)


def _plan_views(ops, window, summed, length, ndim, dtype, scale) -> _Plan | None:
    """The products of strided views of the prepared arguments (see the module docstring)."""
    in_a, in_b = (set(op.stride) - window for op in ops)
    if (in_a ^ in_b) & summed:
        return None  # a sum variable in one factor only: not a matrix product
    # the factor with the innermost output axis gives the columns, so the result view comes out
    # in (nearly) output order: what reads it next reads along memory
    if max((in_a | in_b) - summed, default=-1) in in_a - in_b:
        ops, in_a, in_b = ops[::-1], in_b, in_a
    a_op, b_op = ops
    m_chain = _chain(a_op, (in_a - in_b) - summed, length)
    n_chain = _chain(b_op, (in_b - in_a) - summed, length)
    contracted = in_a & in_b & summed
    k_chain = _contracted_chain(a_op, b_op, m_chain, n_chain, contracted, window, length)
    for op, own in ((a_op, m_chain), (b_op, n_chain)):
        if not _is_blas(op, own, k_chain, length):
            if op.relayout is not None or op.size(window, length) > _SMALL:
                return None  # a large operand would need a copy: im2col does it better
            op.copy = True
    for a in summed:
        if length(a) > 1 and all(a not in op.coeffs for op in ops):
            scale *= length(a)  # a sum variable the product does not depend on counts terms
    k_loop = sorted(contracted - set(k_chain))
    out_loop = sorted(((in_a | in_b) - summed) - set(m_chain) - set(n_chain))
    product = _span(a_op, m_chain, length) * _span(b_op, n_chain, length)
    for a in k_loop + out_loop:
        product *= length(a)
    if k_loop and product > _SCRATCH:
        return None  # the looped sum would keep too large a product before reducing it
    plan = _Plan(
        a_op,
        b_op,
        sorted(window),
        summed,
        (m_chain, n_chain, k_chain, k_loop, out_loop),
        length,
        ndim,
        np.dtype(dtype),
        scale,
    )
    if plan.flops < _MIN_FLOPS_PER_CALL * plan.calls:
        return None  # many small blocks (a large batch of tiny images): Python calls dominate
    return plan


def _contracted_chain(a_op, b_op, m_chain, n_chain, contracted, window, length) -> list[int]:
    """The contracted axes merged into the matrices' shared dimension (the rest are looped).

    The operand that depends on the window (the larger, if both do) leads: its strides are
    fixed. If the follower's strides disagree, or the leader's merge over-computes, a follower
    independent of the window is copied into a zero-filled buffer of the leader's layout;
    otherwise the chain is cut back to what both share exactly.
    """
    if not contracted:
        return []
    deps = [op.depends(window) for op in (a_op, b_op)]
    sizes = [op.size(window, length) for op in (a_op, b_op)]
    lead_a = deps[0] and (not deps[1] or sizes[0] >= sizes[1])
    lead, follow = (a_op, b_op) if lead_a else (b_op, a_op)
    lead_own, follow_own = (m_chain, n_chain) if lead_a else (n_chain, m_chain)
    chain = _chain(lead, contracted, length)
    _fit(lead, lead_own, chain, length)
    ratios = _ratios(lead, chain)
    shared = _ratios(follow, chain) == ratios and _exact(lead, chain, length)
    if chain and not shared and not (deps[1] if lead_a else deps[0]):
        _relayout(follow, chain, ratios, _span(lead, chain, length), length)
        follow_own[:] = _chain(follow, follow_own, length)
        return chain
    while chain and not (
        _ratios(follow, chain) == _ratios(lead, chain) and _exact(lead, chain, length)
    ):
        chain.pop()
    _fit(follow, follow_own, chain, length)
    return chain


def _matrix_strides(span_r: int, unit_r: int, span_c: int, unit_c: int) -> list[int]:
    """Strides of a (rows, columns) view; a length-1 axis gets the stride NumPy's BLAS test
    accepts (any stride is right for it, but NumPy would fall back to its slow loop)."""
    if span_c == 1:
        unit_c = 1 if unit_r != 1 or span_r == 1 else span_r
    if span_r == 1:
        unit_r = 1 if unit_c != 1 else span_c
    return [unit_r, unit_c]


class _Plan:
    """The compiled evaluation: per call, the operands' flat arrays, then one matrix product
    per window value (accumulated over summed windows) into a buffer laid out as
    ``[output windows..., looped output axes..., rows span, columns span]``. The result is a
    strided view of that buffer, new on every call (writeable: no two elements share memory)."""

    def __init__(self, a_op, b_op, window, summed, chains, length, ndim, dtype, scale):
        m_chain, n_chain, k_chain, k_loop, out_loop = chains
        self.ops, self.dtype = (a_op, b_op), dtype
        self.scale = dtype.type(scale)
        self.n_out, self.n_k = len(out_loop), len(k_loop)
        kept_w = [a for a in window if a not in summed]
        sum_w = [a for a in window if a in summed]
        spans = [_span(a_op, m_chain, length), _span(b_op, n_chain, length)]
        k_span = _span(a_op, k_chain, length)
        self.sides = (spans[0], spans[1], k_span)  # rows, columns, contracted of each product
        self.buffer = (
            *(length(a) for a in kept_w),
            *(length(a) for a in out_loop),
            spans[0],
            spans[1],
        )
        # matrix views: [looped output axes..., looped sum axes..., rows, contracted] for a,
        # [..., contracted, columns] for b (a loop axis an operand ignores has length 1)
        self.views = []
        for op, mat in ((a_op, [(m_chain, spans[0]), (k_chain, k_span)]), (b_op, None)):
            if mat is None:
                mat = [(k_chain, k_span), (n_chain, spans[1])]
            shape, strides = [], []
            for a in out_loop + k_loop:
                s = op.stride.get(a, 0)
                shape.append(length(a) if s else 1)
                strides.append(s)
            (rows, span_r), (cols, span_c) = mat
            shape += [span_r, span_c]
            strides += _matrix_strides(span_r, _unit(op, rows), span_c, _unit(op, cols))
            self.views.append((tuple(shape), tuple(strides)))
        # the terms: for each output window value its buffer index and the summed windows'
        # offsets into both operands
        self.terms = []
        for kept in itertools.product(*(range(length(a)) for a in kept_w)):
            offsets = []
            for summ in itertools.product(*(range(length(a)) for a in sum_w)):
                at = dict(zip(kept_w + sum_w, kept + summ, strict=True))
                offsets.append(tuple(op.offset(at) for op in (a_op, b_op)))
            self.terms.append((kept, offsets))
        # stacked terms (im2col of the views alone): where the summed window values change a
        # large operand and a small copied one, each block copies the large one's views into
        # one buffer (memory-order copies) and makes one product with the concatenated small
        # matrices, instead of one product and one addition per window value
        self.big = None
        sizes = [int(np.prod(shape, dtype=np.int64)) for shape, _ in self.views]
        small = 0 if sizes[0] <= sizes[1] else 1
        if sum_w and not k_loop and len(out_loop) <= 1 and sizes[small] <= _SMALL:
            block = len(self.terms[0][1]) * k_span * (spans[1] if small == 0 else spans[0])
            if block <= _SCRATCH and all(n == 1 for n in self.views[small][0][:-2]):
                self.big = 1 - small
        # stacked output windows (the weight gradient): where only one operand depends on the
        # window, its views for all output window values go into one buffer per block of the
        # looped sum axis, and one product fills every window's slice at once
        self.out_big = None
        deps = [op.depends(set(window)) for op in (a_op, b_op)]
        if kept_w and not sum_w and not out_loop and len(k_loop) <= 1 and sum(deps) == 1:
            big = deps.index(True)
            block = len(self.terms) * k_span * spans[big]
            if block <= _SCRATCH and not (a_op, b_op)[big].copy:
                self.out_big = big
        self.k_span, self.spans = k_span, spans
        # the cost model: arithmetic against NumPy calls made from Python per evaluation
        n_terms = sum(len(offsets) for _, offsets in self.terms)
        loops = int(np.prod([length(a) for a in out_loop + k_loop], dtype=np.int64))
        self.flops = 2 * spans[0] * spans[1] * k_span * n_terms * loops
        blocks = length(out_loop[0]) if out_loop else 1
        if self.big is not None:
            self.calls = blocks * len(self.terms) * (len(self.terms[0][1]) + 1)
        elif self.out_big is not None:
            self.calls = (length(k_loop[0]) if k_loop else 1) * (len(self.terms) + 2)
        else:
            self.calls = 2 * n_terms * (1 if k_loop else blocks)
        # the result: a strided view of the buffer with the planner's ndim axes
        step = [int(np.prod(self.buffer[i + 1 :], dtype=np.int64)) for i in range(len(self.buffer))]
        where: dict[int, int] = {}
        for i, a in enumerate(kept_w + out_loop):
            where[a] = step[i]
        for op, chain, s in ((a_op, m_chain, step[-2]), (b_op, n_chain, 1)):
            for a in chain:
                where[a] = op.stride[a] // _unit(op, chain) * s
        item = dtype.itemsize
        self.result_shape = tuple(length(a) if a in where else 1 for a in range(ndim))
        self.result_strides = tuple(where.get(a, 0) * item for a in range(ndim))

    def _flat(self, op: _Operand, arrays: Arrays) -> np.ndarray:
        """The operand's array, padded or relaid out, as one flat contiguous array."""
        array = np.asarray(arrays[op.name], dtype=self.dtype)
        if op.relayout is not None and op.pads is None and op.phases is None:
            # read straight from the argument, whatever its strides (a gradient of ones is a
            # broadcast): one copy, into the zero-filled buffer
            return self._relayout(op, array)
        if op.pads is not None:
            array = pad_constant(array, op.pads)  # new and contiguous, whatever the input's layout
        array = np.ascontiguousarray(array)
        if op.phases is not None:
            # x[g*q + r] -> phase[r, q]: one copy, phase axes first
            split = []
            for n, g in zip(array.shape, op.phases, strict=True):
                split += [n // g, g] if g > 1 else [n]
            array = array.reshape(split)
            at = list(itertools.accumulate(2 if g > 1 else 1 for g in op.phases))
            firsts = [at[d] - 1 for d, g in enumerate(op.phases) if g > 1]
            for d, g in enumerate(op.phases):
                if g > 1 and len(op.used[d]) < g:  # only the phases some window value reads
                    used, axis = op.used[d], at[d] - 1
                    pick = slice(used[0], used[0] + 1) if len(used) == 1 else used
                    array = array[(slice(None),) * axis + (pick,)]
            rest = [k for k in range(len(split)) if k not in firsts]
            array = np.ascontiguousarray(array.transpose(firsts + rest))
        flat = array.reshape(-1)
        if op.relayout is None:
            return flat
        # copied into zeros: the over-computed positions of the merged sum contribute nothing
        base, shape, view, native, new = op.relayout
        item = self.dtype.itemsize
        buffer = np.zeros(shape, dtype=self.dtype)
        target = strided_view(buffer, view, tuple(s * item for s in new), writeable=True)
        target[...] = strided_view(flat, view, tuple(s * item for s in native), start=(base,))
        return buffer.reshape(-1)

    def _relayout(self, op: _Operand, array: np.ndarray) -> np.ndarray:
        """``op``'s zero-filled buffer filled from its unpadded, unsplit argument."""
        _, shape, view, _, new = op.relayout
        strides = []
        for a in op.relayout_axes:
            strides.append(
                sum(
                    k * array.strides[d]
                    for d, (co, _) in enumerate(op.forms)
                    for b, k in co.items()
                    if b == a
                )
            )
        start = tuple(c for _, c in op.forms)
        item = self.dtype.itemsize
        buffer = np.zeros(shape, dtype=self.dtype)
        target = strided_view(buffer, view, tuple(s * item for s in new), writeable=True)
        target[...] = strided_view(array, view, tuple(strides), start=start)
        return buffer.reshape(-1)

    def _matrices(self, flats, offsets) -> list[np.ndarray]:
        out = []
        for op, flat, offset, (shape, strides) in zip(
            self.ops, flats, offsets, self.views, strict=True
        ):
            item = self.dtype.itemsize
            m = strided_view(flat, shape, tuple(s * item for s in strides), start=(offset,))
            out.append(np.ascontiguousarray(m) if op.copy else m)
        return out

    def _run_stacked(self, flats, buffer) -> None:
        big = self.big
        for kept, offsets in self.terms:
            dest = buffer[kept]
            mats = [self._matrices(flats, term) for term in offsets]
            n_terms = len(mats)
            if big == 1:
                small = np.concatenate([m[0].reshape(m[0].shape[-2:]) for m in mats], axis=1)
            else:
                small = np.concatenate([m[1].reshape(m[1].shape[-2:]) for m in mats], axis=0)
            width = dest.shape[-1] if big == 1 else dest.shape[-2]
            cols = np.empty((n_terms, self.k_span, width), dtype=self.dtype)
            flat = cols.reshape(n_terms * self.k_span, width)
            for t in range(dest.shape[0]) if self.n_out else [None]:
                for s, m in enumerate(mats):
                    view = m[big] if t is None else m[big][min(t, m[big].shape[0] - 1)]
                    cols[s] = view if big == 1 else view.T
                out = dest if t is None else dest[t]
                if big == 1:
                    np.matmul(small, flat, out=out)
                else:
                    np.matmul(flat.T, small, out=out)

    def _run_stacked_out(self, flats, buffer) -> None:
        big, n_terms = self.out_big, len(self.terms)
        mats = [self._matrices(flats, offsets[0]) for _, offsets in self.terms]
        other = mats[0][1 - big]
        width = self.spans[big]
        cols = np.empty((n_terms, width, self.k_span), dtype=self.dtype)
        flat = cols.reshape(n_terms * width, self.k_span)
        total = None
        for t in range(other.shape[0]) if self.n_k else [None]:
            for s, m in enumerate(mats):
                view = m[big] if t is None else m[big][min(t, m[big].shape[0] - 1)]
                cols[s] = view if big == 0 else view.T
            rest = other if t is None else other[min(t, other.shape[0] - 1)]
            part = np.matmul(flat, rest) if big == 0 else np.matmul(rest, flat.T)
            total = part if total is None else np.add(total, part, out=total)
        m, n = self.spans
        if big == 0:  # (windows * rows, columns)
            buffer[...] = total.reshape(buffer.shape)
        else:  # (rows, windows * columns)
            stacked = total.reshape(m, n_terms, n).transpose(1, 0, 2)
            buffer[...] = stacked.reshape(buffer.shape)

    def run(self, arrays: Arrays) -> np.ndarray:
        with blas_threads_for(self.flops / self.calls):  # many small products: one BLAS thread
            return self._run(arrays)

    def _run(self, arrays: Arrays) -> np.ndarray:
        flats = [self._flat(op, arrays) for op in self.ops]
        if self.big is not None or self.out_big is not None:
            buffer = np.empty(self.buffer, dtype=self.dtype)
            if self.big is not None:
                self._run_stacked(flats, buffer)
            else:
                self._run_stacked_out(flats, buffer)
            if self.scale != 1:
                buffer *= self.scale
            return strided_view(buffer, self.result_shape, self.result_strides, writeable=True)
        buffer = np.empty(self.buffer, dtype=self.dtype)
        tmp = None
        n_out, n_k = self.n_out, self.n_k
        for kept, offsets in self.terms:
            dest = buffer[kept]
            for n, term in enumerate(offsets):
                a, b = self._matrices(flats, term)
                if n_k:
                    # looped sum axes are batch axes of the product, reduced after it
                    part = np.matmul(a, b).sum(axis=tuple(range(n_out, n_out + n_k)))
                    if n:
                        dest += part
                    else:
                        dest[...] = part
                elif n_out and dest.shape[0] > 1:
                    # one product per value of the outermost loop axis: the product and its
                    # accumulation stay in cache
                    if tmp is None:
                        tmp = np.empty(dest.shape[1:], dtype=self.dtype)
                    for t in range(dest.shape[0]):
                        at, bt = a[min(t, a.shape[0] - 1)], b[min(t, b.shape[0] - 1)]
                        if n:
                            np.matmul(at, bt, out=tmp)
                            dest[t] += tmp
                        else:
                            np.matmul(at, bt, out=dest[t])
                elif n:
                    dest += np.matmul(a, b)
                else:
                    np.matmul(a, b, out=dest)
        if self.scale != 1:
            buffer *= self.scale
        return strided_view(buffer, self.result_shape, self.result_strides, writeable=True)


def _pads(shape, forms: list[Form], length) -> list[tuple[int, int]]:
    """``np.pad`` widths that keep every index of ``forms`` inside an array of ``shape``."""
    pads = []
    for n, (coeffs, const) in zip(shape, forms, strict=True):
        low = const + sum(min(0, k * (length(a) - 1)) for a, k in coeffs.items())
        high = const + sum(max(0, k * (length(a) - 1)) for a, k in coeffs.items())
        pads.append((max(0, -low), max(0, high - (n - 1))))
    return pads


def _logical_stride(shape, forms: list[Form], axis: int) -> int:
    """Element stride of ``axis`` in a C-ordered array of ``shape`` (to order the copies)."""
    steps = [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(len(shape))]
    return sum(co.get(axis, 0) * s for (co, _), s in zip(forms, steps, strict=True))


def _box(shape, forms: list[Form], at: Mapping[int, int], axes: list[int], length):
    """The values ``{axis: (lo, hi)}`` of ``axes`` for which the access with the window axes
    at ``at`` stays inside the array: None where it reads nothing, False where the in-range
    part is not a box (a clipped dimension indexed by several axes)."""
    box = {a: (0, length(a)) for a in axes}
    for n, (coeffs, const) in zip(shape, forms, strict=True):
        c = const + sum(k * at.get(a, 0) for a, k in coeffs.items() if a not in box)
        free = [(a, k) for a, k in coeffs.items() if a in box and k and length(a) > 1]
        low = c + sum(min(0, k * (length(a) - 1)) for a, k in free)
        high = c + sum(max(0, k * (length(a) - 1)) for a, k in free)
        if low >= 0 and high <= n - 1:
            continue
        if not free:
            return None
        if len(free) > 1 or free[0][1] < 0:
            return False
        (a, k), (lo, hi) = free[0], box[free[0][0]]
        lo, hi = max(lo, -(c // k)), min(hi, (n - 1 - c) // k + 1)  # 0 <= c + k*a <= n-1
        if hi <= lo:
            return None
        box[a] = (lo, hi)
    return box


def _view(array: np.ndarray, forms: list[Form], at: Mapping[int, int], axes: list[int], shape):
    """The strided view of ``array`` over ``axes`` (with ``shape``), starting where every
    index variable has its value in ``at`` (0 if absent); reads any strides, even 0."""
    start = tuple(const + sum(k * at.get(a, 0) for a, k in co.items()) for co, const in forms)
    strides = [
        sum(co.get(a, 0) * s for (co, _), s in zip(forms, array.strides, strict=True)) for a in axes
    ]
    return strided_view(array, tuple(shape), tuple(strides), start=start)


class _BlockPlan:
    """Window terms copied per block into one contiguous buffer, then one matrix product.

    ``big`` is the large access that depends on the window axes, ``small`` the other. Per
    value of the block axis (the batch) each window term's view of ``big`` is copied, read
    with the argument's own strides (a stride-2 access needs no phase split), into
    ``cols[term, ...]``; only the part inside the argument is written, and the zeros around
    it, written once per call, are the padding (no padded copy of the argument). Output
    positions are exact: no over-computed columns.

    * summed windows (a convolution's forward): ``cols`` is ``(terms * K, N)`` and the small
      operand's ``(M, terms * K)`` matrix is built once per call; one product per block
      writes that block's ``(M, N)`` output;
    * output windows (the weight gradient): ``cols`` is ``(terms * N, K)``; times the
      transpose of the small operand's ``(M, K)`` block it gives ``(terms * N, M)``, added up
      over the blocks when the block axis is summed;
    * no window (one term) where ``big`` reads past its array: the zero box replaces a padded
      copy of the whole argument.

    :meth:`run_into` writes the summed-window result straight into a strided slice of the
    caller's output (a residue class of a strided input gradient).

    Attributes:
        roles: block axis (or None) and the axis lists ``m`` (small only), ``k``
            (contracted), ``n`` (big only), ``windows`` (the window axes, term order).
        boxes: per term, the in-range values of the block and copied axes (None: all zero).
    """

    def __init__(self, big, small, roles, outputs, length, ndim, dtype, scale):
        self.big, self.small = big, small  # (name, shape, forms)
        self.block, self.m, self.k, self.n, self.windows = roles
        self.out_windows = bool(self.windows) and self.windows[0] in outputs
        self.length, self.dtype, self.scale = length, dtype, dtype.type(scale)
        values = itertools.product(*(range(length(a)) for a in self.windows))
        self.terms = [dict(zip(self.windows, v, strict=True)) for v in values]
        self.mt, self.kt, self.nt = (
            int(np.prod(self._lengths(axes), dtype=np.int64)) for axes in (self.m, self.k, self.n)
        )
        self.sides = (self.mt, self.nt, self.kt)  # rows, columns, contracted of each product
        self.t = len(self.terms)
        self.nb = length(self.block) if self.block is not None else 1
        self.block_out = self.block is not None and self.block in outputs
        self.inner = self.n + self.k if self.out_windows else self.k + self.n
        blocked = [self.block] if self.block is not None else []
        self.boxes = [_box(big[1], big[2], at, blocked + self.inner, length) for at in self.terms]
        self.ok = all(
            box is None or (box is not False and box.get(self.block, (0, self.nb)) == (0, self.nb))
            for box in self.boxes
        )
        # the result: a strided view of the buffer, with the planner's ndim axes
        if self.out_windows:
            # (terms * N, M): cols times the small block's transpose, the long dimension as
            # the product's rows (about 20% faster than (M, terms * N) with M = 64)
            self.buffer = (self.nb if self.block_out else 1, self.t * self.nt, self.mt)
            where = self._row_major(self.m, 1) | self._row_major(self.windows, self.nt * self.mt)
            where |= self._row_major(self.n, self.mt)
            if self.block_out:
                where[self.block] = self.mt * self.t * self.nt
        else:
            self.buffer = (self.nb, self.mt, self.nt)
            where = self._row_major(self.m, self.nt) | self._row_major(self.n, 1)
            if self.block is not None:
                where[self.block] = self.mt * self.nt
        item = dtype.itemsize
        self.result_shape = tuple(length(a) if a in where else 1 for a in range(ndim))
        self.result_strides = tuple(where.get(a, 0) * item for a in range(ndim))
        self.flops = 2 * self.mt * self.nt * self.kt * self.t * self.nb
        self.calls = self.nb * (self.t + 1)
        self.scratch = self.t * self.kt * self.nt

    def _row_major(self, axes: list[int], unit: int) -> dict[int, int]:
        out, step = {}, unit
        for a in reversed(axes):
            out[a] = step
            step *= self.length(a)
        return out

    def _lengths(self, axes) -> list[int]:
        return [self.length(a) for a in axes]

    def _small_matrix(self, small: np.ndarray) -> np.ndarray:
        """Summed windows: the small operand as ``(M, terms * K)``, padded if it must be."""
        _, shape, forms = self.small
        pads = _pads(shape, forms, self.length)
        if any(lo or hi for lo, hi in pads):
            small = pad_constant(small, pads)
            forms = [(co, const + lo) for (co, const), (lo, _) in zip(forms, pads, strict=True)]
        axes = self.m + self.windows + self.k
        view = _view(small, forms, {}, axes, self._lengths(axes))
        return np.ascontiguousarray(view).reshape(self.mt, self.t * self.kt)

    def _fill(self, big: np.ndarray) -> tuple[np.ndarray, Callable[[int], None]]:
        """The zero-filled ``cols`` matrix and ``fill(b)``, which copies block ``b``'s terms."""
        cols, fill = _term_copies(big, [(self, s) for s in range(self.t)])
        rows = self.t * (self.nt if self.out_windows else self.kt)
        return cols.reshape(rows, -1), fill

    def _copy_of(self, big: np.ndarray, s: int, dst: np.ndarray):
        """Term ``s``'s view of ``big`` with the block axis first, and where it goes in ``dst``
        (the term's slot of a ``cols`` buffer); None where the term reads only padding."""
        box = self.boxes[s]
        if box is None:
            return None
        start = {**self.terms[s], **{a: lo for a, (lo, _) in box.items()}}
        blocked = [self.block] if self.block is not None else []
        lengths = [self.nb] + [box[a][1] - box[a][0] for a in self.inner]
        src = _view(big, self.big[2], start, blocked + self.inner, lengths[0 if blocked else 1 :])
        return (src if blocked else src[None]), dst[(*(slice(*box[a]) for a in self.inner), ...)]

    def view_key(self, s: int):
        """What term ``s`` copies, comparable between plans whose inner axes have the same
        lengths (the residue classes of one gradient): per dimension of the large argument
        its offset and its coefficients on the block and inner axes (in order), and the box;
        None where the term reads only padding."""
        box = self.boxes[s]
        if box is None:
            return None
        axes = ([self.block] if self.block is not None else []) + self.inner
        at = self.terms[s]
        dims = tuple(
            (const + sum(co.get(a, 0) * v for a, v in at.items()), *(co.get(a, 0) for a in axes))
            for co, const in self.big[2]
        )
        return dims, tuple(box[a] for a in self.inner)

    def destination(self, into: np.ndarray):
        """``into`` (a residue class's slice of the whole output, any strides) as a
        ``(blocks, *output block shape)`` view the products write to, or None where the roles
        do not allow writing there."""
        axes = ([self.block] if self.block is not None else []) + self.m + self.n
        others = [a for a in range(into.ndim) if a not in axes]
        if (
            self.out_windows
            or into.dtype != self.dtype
            or any(a >= into.ndim for a in axes)
            or any(into.shape[a] != 1 for a in others)
            or any(into.shape[a] != self.length(a) for a in axes)
        ):
            return None
        dst = into.transpose(axes + others)[(Ellipsis, *(0,) * len(others))]
        return dst if self.block is not None else dst[None]

    def run(self, arrays: Arrays) -> np.ndarray:
        dtype = self.dtype
        big = np.asarray(arrays[self.big[0]], dtype=dtype)
        small = np.asarray(arrays[self.small[0]], dtype=dtype)
        buffer = np.empty(self.buffer, dtype=dtype)
        if self.out_windows:
            self._run_out_windows(big, small, buffer)
        else:
            sm = self._small_matrix(small)

            def make_worker():  # each thread copies into its own buffer, then multiplies
                flat, fill = self._fill(big)

                def work(b: int) -> None:
                    fill(b)
                    np.matmul(sm, flat, out=buffer[b])

                return work

            run_blocks(self.nb, make_worker, flops=self.flops // self.nb)
        if self.scale != 1:
            buffer *= self.scale
        return strided_view(buffer, self.result_shape, self.result_strides, writeable=True)

    def _run_out_windows(self, big: np.ndarray, small: np.ndarray, buffer: np.ndarray) -> None:
        """The weight gradient: per block ``cols`` times the small block's transpose, into the
        block's own output slice, or added up over a summed block axis."""
        axes = ([self.block] if self.block is not None else []) + self.m + self.k
        other = _view(small, self.small[2], {}, axes, self._lengths(axes))
        if self.block is None:
            other = other[None]
        shape = (self.mt, self.kt)

        def make_product():
            flat, fill = self._fill(big)

            def product(b: int, into: np.ndarray) -> None:
                fill(b)
                np.matmul(flat, other[b].reshape(shape).T, out=into)  # a copy only if it must be

            return product

        if not self.block_out:
            sum_over_blocks(self.nb, buffer[0], make_product, flops=self.flops // self.nb)
            return

        def make_worker():  # each block's product is its own output slice
            product = make_product()
            return lambda b: product(b, buffer[b])

        run_blocks(self.nb, make_worker, flops=self.flops // self.nb)

    def run_into(self, arrays: Arrays, into: np.ndarray) -> bool:
        """Write the result into ``into`` (the output axes only, any strides: a residue
        class's slice of the whole output) block by block, through a product-sized buffer
        that stays in cache; False (nothing written) where the roles do not allow it."""
        dst = self.destination(into)
        if dst is None:
            return False
        dtype = self.dtype
        big = np.asarray(arrays[self.big[0]], dtype=dtype)
        sm = self._small_matrix(np.asarray(arrays[self.small[0]], dtype=dtype))
        if self.scale != 1:
            sm = sm * self.scale
        shape = self._lengths(self.m + self.n)

        def make_worker():
            flat, fill = self._fill(big)
            tmp = np.empty((self.mt, self.nt), dtype=dtype)

            def work(b: int) -> None:
                fill(b)
                np.matmul(sm, flat, out=tmp)
                dst[b] = tmp.reshape(shape)

            return work

        run_blocks(self.nb, make_worker, flops=self.flops // self.nb)
        return True


def _term_copies(big: np.ndarray, terms: list) -> tuple[np.ndarray, Callable[[int], None]]:
    """A ``cols`` buffer of one slot per ``(plan, term)`` and ``fill(b)``, which copies every
    term's view of block ``b`` into its slot. The buffer is zero-filled once where some term's
    box leaves positions unwritten: those zeros are the padding."""
    first = terms[0][0]
    full = all(
        p.boxes[s] is not None and all(p.boxes[s][a] == (0, p.length(a)) for a in p.inner)
        for p, s in terms
    )
    make = np.empty if full else np.zeros
    cols = make((len(terms), *first._lengths(first.inner)), dtype=first.dtype)
    # cols[slot, ...] stays a view even when the terms have no inner axes (cols[slot] would
    # then be a scalar copy)
    copies = [p._copy_of(big, s, cols[slot, ...]) for slot, (p, s) in enumerate(terms)]
    copies = [c for c in copies if c is not None]

    def fill(b: int) -> None:
        for src, dst in copies:
            dst[...] = src[b]

    return cols, fill


def _consecutive_order(sets: list[frozenset], limit: int = 8) -> list | None:
    """An order of the union of ``sets`` in which every set is a contiguous run, or None.

    Elements that lie in the same sets are interchangeable, so only the order of those groups
    is searched (at most ``limit`` groups, every permutation)."""
    groups: dict[tuple, list] = {}
    for e in sorted(set().union(*sets), key=repr):
        groups.setdefault(tuple(e in st for st in sets), []).append(e)
    if len(groups) > limit:
        return None
    for perm in itertools.permutations(groups):
        order = [e for g in perm for e in groups[g]]
        where = {e: i for i, e in enumerate(order)}
        if all(max(where[e] for e in st) - min(where[e] for e in st) + 1 == len(st) for st in sets):
            return order
    return None


def plan_classes(
    parts: list[tuple[Callable, tuple]], out_shape: tuple[int, ...]
) -> tuple[Callable, list[int]] | None:
    """The residue classes of a strided input gradient, evaluated together per block.

    ``parts`` are ``(plan, output slices)`` of the classes, ``out_shape`` the whole output's
    shape. A stride-2 convolution's input gradient splits into four classes whose nine window
    terms read only four distinct shifted views of ``dy``. Where the classes are block plans
    over the same blocks and operands, and the distinct views can be ordered so that each
    class's are consecutive, one buffer of the distinct views is filled per block (4 copies
    instead of 9) and each class makes its product with its run of rows, writing its slice of
    the output. One block loop does every class of a block, so the block's part of the output,
    which the classes interleave, stays in one cache. Terms of a class that read the same view
    add their weights. Parts that are not block plans (a class read in place) are left to the
    caller; a class whose terms read only padding keeps every class apart.

    Returns:
        ``(write, taken)``: ``write(arrays, out)`` fills the slices of ``out`` of the parts at
        the indices ``taken``; None where fewer than two classes fit together (the caller
        evaluates them one by one).
    """
    taken = [
        i
        for i, (plan, _) in enumerate(parts)
        if isinstance(getattr(plan, "__self__", None), _BlockPlan)
    ]
    parts = [parts[i] for i in taken]
    owners = [plan.__self__ for plan, _ in parts]
    if len(owners) < 2:
        return None
    first = owners[0]

    def same(o: _BlockPlan) -> bool:
        return (
            not o.out_windows
            and (o.big[0], o.small[0], o.nb, o.mt, o.kt, o.dtype)
            == (first.big[0], first.small[0], first.nb, first.mt, first.kt, first.dtype)
            and (o.block is None) == (first.block is None)
            and o._lengths(o.inner) == first._lengths(first.inner)
            and o._lengths(o.m + o.n) == first._lengths(first.m + first.n)
        )

    # the destination check needs only shapes: a zero-strided stand-in for the output
    stand_in = np.broadcast_to(np.empty((), dtype=first.dtype), out_shape)
    fits = [
        same(o) and o.destination(stand_in[sl]) is not None
        for o, (_, sl) in zip(owners, parts, strict=True)
    ]
    if not all(fits):
        return None
    keys = [[o.view_key(s) for s in range(o.t)] for o in owners]
    sets = [frozenset(k for k in ks if k is not None) for ks in keys]
    if not all(sets) or len(set().union(*sets)) >= sum(len(ks) for ks in keys):
        return None  # a class reading only padding, or nothing shared: keep them apart
    order = _consecutive_order(sets)
    if order is None:
        return None
    slot = {k: i for i, k in enumerate(order)}
    # one representative (plan, term) per distinct view
    rep = {}
    for o, ks in zip(owners, keys, strict=True):
        for s, k in enumerate(ks):
            if k is not None:
                rep.setdefault(k, (o, s))
    runs = [(min(slot[k] for k in st), max(slot[k] for k in st) + 1) for st in sets]
    mt, kt, nt = first.mt, first.kt, first.nt
    flops = sum(2 * mt * nt * kt * (hi - lo) for lo, hi in runs)

    def write(arrays: Arrays, out: np.ndarray) -> None:
        dtype = first.dtype
        big = np.asarray(arrays[first.big[0]], dtype=dtype)
        small = np.asarray(arrays[first.small[0]], dtype=dtype)
        classes = []
        for o, ks, (lo, hi), (_, slices) in zip(owners, keys, runs, parts, strict=True):
            # the class's weights in the order of its run of views, terms of one view added
            full = o._small_matrix(small).reshape(mt, o.t, kt)
            sm = np.zeros((mt, hi - lo, kt), dtype=dtype)
            for s, k in enumerate(ks):
                if k is not None:
                    sm[:, slot[k] - lo] += full[:, s]
            sm = sm.reshape(mt, (hi - lo) * kt) * o.scale
            classes.append((sm, lo * kt, hi * kt, o.destination(out[slices])))
        shape = first._lengths(first.m + first.n)

        def make_worker():
            cols, fill = _term_copies(big, [rep[k] for k in order])
            flat = cols.reshape(len(order) * kt, nt)
            tmp = np.empty((mt, nt), dtype=dtype)

            def work(b: int) -> None:
                fill(b)
                for sm, r0, r1, dst in classes:
                    np.matmul(sm, flat[r0:r1], out=tmp)
                    dst[b] = tmp.reshape(shape)

            return work

        run_blocks(first.nb, make_worker, flops=flops)

    return write, taken


def sum_over_blocks(
    count: int,
    out: np.ndarray,
    make_product: Callable[[], Callable[[int, np.ndarray], None]],
    flops: float = math.inf,
) -> None:
    """``out[...] = Σ_{i < count} product_i``, the blocks spread over threads.

    ``make_product()`` builds one thread's ``product(i, into)``, which writes block ``i``'s
    product into ``into`` (an array of ``out``'s shape). Each group of consecutive blocks sums
    into a slot of its own and the slots are then added in order: the order of the additions
    does not depend on which thread took which group, nor on how many threads there are (the
    products' own rounding can, where BLAS splits them differently). The slots take at most
    :data:`_SCRATCH` elements (fewer, larger groups for a large ``out``). ``flops`` is the
    arithmetic of one block's product (see :func:`~tadiff.parallel.run_blocks`).
    """
    per = -(-count // max(1, min(count, _SCRATCH // max(out.size, 1))))
    groups = -(-count // per)
    slots = out[None] if groups == 1 else np.empty((groups, *out.shape), dtype=out.dtype)

    def make_worker():
        product = make_product()
        tmp = np.empty(out.shape, dtype=out.dtype) if per > 1 else None

        def work(g: int) -> None:
            first = g * per
            product(first, slots[g])
            for i in range(first + 1, min(count, first + per)):
                product(i, tmp)
                slots[g] += tmp

        return work

    run_blocks(groups, make_worker, flops=flops * per)
    if groups > 1:
        np.add(slots[0], slots[1], out=out)
        for slot in slots[2:]:
            out += slot


def write_into(plan: Callable, arrays: Arrays, into: np.ndarray) -> bool:
    """Evaluate a plan of :func:`plan_window_gemm` straight into ``into`` where it can (see
    :meth:`_BlockPlan.run_into`); False where the caller must assign its result itself."""
    owner = getattr(plan, "__self__", None)
    return isinstance(owner, _BlockPlan) and owner.run_into(arrays, into)


WINDOW_MIN_SIDE = 2
"""The narrowest side (rows, columns, contracted length) for which window-unrolled products beat
loops. A side of 1 makes each product an outer product or a matrix-vector product, one
memory-bound pass per window offset: a 3x3 convolution of 32 single-channel 16 x 16 images
takes 0.25-0.5 ms that way and 0.15-0.2 ms as Numba's loops (forward and weight gradient,
float32 and float64, one thread). From 4 channels up the products are as fast or faster
(4 -> 32 channels: 0.9-1.7 ms against 1.5-1.6; 8 -> 32: 1.3-2.2 ms against 2.6-5.0)."""


def product_sides(plan: Callable) -> tuple[int, int, int] | None:
    """Rows, columns and contracted length of each matrix product of a plan of
    :func:`plan_window_gemm` (what says whether BLAS pays off against loops)."""
    return getattr(getattr(plan, "__self__", None), "sides", None)


def describe(plan: Callable) -> str:
    """How a plan of :func:`plan_window_gemm` evaluates (appended to the kernel's notes)."""
    if isinstance(getattr(plan, "__self__", None), _BlockPlan):
        return " (window terms copied per block)"
    return ""


def _plan_blocks(factors, forms, shapes, length, summed, window, ndim, dtype, scale):
    """The :class:`_BlockPlan` of ``scale * sum of a * b``, or None where its roles do not fit.

    The large factor that depends on the window (``x``, or ``dy`` in an input gradient) is
    copied per block; the other is the small one. Summed windows: the small factor (at most
    :data:`_SMALL` elements, a weight) may depend only on its own output axes, the contracted
    axes and the window; the block is the large factor's outermost output axis. Output windows:
    the other factor must not depend on the window and stay inside its array; the block is the
    one output axis both share, else the outermost contracted axis (summed over the blocks).
    No window at all is taken only where the large factor reads past its array (padding).
    Arguments as for :func:`plan_window_gemm`, plus the ``window`` axes.
    """
    live = lambda fm: {a for co, _ in fm for a, k in co.items() if k and length(a) > 1}  # noqa: E731
    axes = [live(fm) for fm in forms]
    deps = [bool(ax & window) for ax in axes]
    sizes = [int(np.prod(shapes[f.name], dtype=np.int64)) for f in factors]
    kept_w, sum_w = window - summed, window & summed
    if kept_w and sum_w:
        return None
    if not window:
        # no window (a strided input gradient's last residue class): only worth it where
        # the large factor reads past its array, which would otherwise be padded whole
        g = 0 if sizes[0] >= sizes[1] else 1
        name = factors[g].name
        if not any(lo or hi for lo, hi in _pads(shapes[name], forms[g], length)):
            return None
    elif sum_w:
        g = 0 if deps[0] and (not deps[1] or sizes[0] >= sizes[1]) else 1
    else:
        if deps[0] == deps[1]:
            return None
        g = deps.index(True)
    f = 1 - g
    outputs = set(range(ndim)) - summed
    a_g, a_f = axes[g] - window, axes[f] - window
    only_g, only_f, shared = a_g - a_f, a_f - a_g, a_g & a_f
    if (only_g | only_f) & summed:
        return None  # a sum variable in one factor only

    def order(ax, i):  # outermost in memory first: the copies run along memory
        shape = shapes[factors[i].name]
        return sorted(ax, key=lambda a: -_logical_stride(shape, forms[i], a))

    if not kept_w:  # summed windows (or none): the small operand is the weight
        if sizes[f] > _SMALL or shared & outputs or only_f & summed:
            return None
        n = order(only_g, g)
        block = n.pop(0) if len(n) > 1 else None
        roles = (block, order(only_f, f), order(shared, g), n, sorted(sum_w))
    else:  # output windows: the weight gradient
        if len(shared & outputs) > 1:
            return None
        k = order(shared & summed, g)
        block = next(iter(shared & outputs), None)
        if block is None and len(k) > 1:
            block = k.pop(0)
        elif block is not None and len(k) == 0:
            return None
        roles = (block, order(only_f, f), k, order(only_g, g), sorted(kept_w))
    for a in summed:
        if length(a) > 1 and all(a not in ax for ax in axes):
            scale *= length(a)  # a sum variable the product does not depend on counts terms
    big = (factors[g].name, tuple(shapes[factors[g].name]), forms[g])
    small = (factors[f].name, tuple(shapes[factors[f].name]), forms[f])
    if kept_w and any(lo or hi for lo, hi in _pads(small[1], small[2], length)):
        return None
    plan = _BlockPlan(big, small, roles, outputs, length, ndim, np.dtype(dtype), scale)
    if not plan.ok or plan.scratch > _SCRATCH:
        return None
    if plan.flops < _MIN_FLOPS_PER_CALL * plan.calls:
        return None
    return plan.run
