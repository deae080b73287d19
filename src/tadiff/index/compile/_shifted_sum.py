"""Product first, then a sum of shifted views: a convolution whose output side is the narrow one.

The general NumPy path (:mod:`~tadiff.index.compile.vectorized`) evaluates a convolution-like
sum ``out[b, c, r] = sum[o, k](dy[b, o, r - k] * w[o, c, k])`` by copying every window of the
large operand into a matrix (im2col: ``b * r`` rows of ``o * K`` values) and making one matrix
product. Where the output has fewer channels than the contracted side (an input gradient
``dx`` whose input has fewer channels than the output: ``c < o``), it is cheaper to contract
first and shift after:

* ``P[b, m, c, k] = sum[o](dy[b, o, m] * w[o, c, k])`` — one product of the operands (one
  BLAS product, the window offsets side by side), ``b * m * c * K`` values, fewer than
  im2col's copy when ``c < o``;
* ``out[b, c, r] = sum[k](P[b, r - k, c, k])`` — for each window offset ``k`` one addition of
  a shifted view of ``P`` into the output (the gather form of col2im: each output element reads
  what it needs, nothing is scattered).

:func:`plan_shifted_sum` recognizes the pattern in a definition (two accesses, index terms
``u ± v + c`` with unit coefficients), checks that the declared sum ranges are exactly the
positions where both accesses are in bounds (else the shifted views would add terms the
definition does not have), and takes it only where ``P`` is smaller than the im2col matrix.
Measured on a CNN's second convolution's input gradient (32 images of 8 x 8, 16 -> 8 channels,
3 x 3, float32, one thread): 0.85 ms through im2col, 0.4 ms this way.

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> f = define("y[b, o, h] = sum[c, k](x[b, c, h + k] * w[o, c, k])")
    >>> dx = f.grad("x")  # sum[o, h](dy[b, o, h] * w[o, c, p - h]) over the valid h
    >>> shapes = {"x": (2, 2, 10), "w": (6, 2, 3), "dy": (2, 6, 8)}
    >>> k = plan_shifted_sum(dx, shapes, np.float64, dx.output_shape(**shapes))
    >>> k.source.startswith("product first")
    True
    >>> k({n: np.ones(s) for n, s in shapes.items()})[0, 0].tolist()
    [6.0, 12.0, 18.0, 18.0, 18.0, 18.0, 18.0, 18.0, 12.0, 6.0]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tadiff.errors import InputError
from tadiff.index.compile._affine import integer_form
from tadiff.index.compile.rewrite import product_factors
from tadiff.index.compile.vectorized import Kernel
from tadiff.index.expr import Access, Sum

__all__ = ["plan_shifted_sum"]

PRODUCT_MIN_SIDE = 16
"""The narrowest side of ``P``'s matrix product for which this path beats loops: it writes ``P``,
window-size times the output, and adds it back in shifted passes, which pays only where the
product runs at BLAS speed. Measured on the input gradients of 3x3 convolutions of 32 images
of 16 x 16 (one thread): with 8 output channels (a contracted length of 8) Numba's loops take
0.2-0.4 of the time, in float32 and float64."""

_MAX_OFFSETS = 64
"""At most this many window offsets (each one NumPy addition): a 8 x 8 kernel."""

_LAYOUTS = ("auto", "flat", "exact")

FLAT_MARGIN_PASSES = {np.dtype(np.float64): 6.0, np.dtype(np.float32): 20.0}
"""The extra passes over the output that the flat layout's margin may cost, per dtype (see
:func:`_flat_shifts`). Measured on input gradients of eleven 2-d convolutions, 4 to 32 images
of 8 x 8 to 56 x 56, 3 x 3 to 7 x 7 kernels (one thread), flat against exact layout:

* float64: 5.1 extra passes or fewer gained 5-26% in six of seven (one lost 4%); 7.7 (a 5 x 5
  on 28 x 28) and more lost 3-26%;
* float32: 16 or fewer gained 2-41% in eight of nine (one lost 4%); 23 (a 7 x 7 on 28 x 28)
  lost 15%, 31 (a 5 x 5 on 8 x 8) 8%.

float32's additions move half the bytes, so its margin costs less against the exact layout's
fixed copies."""


@dataclass(frozen=True)
class _Pair:
    """An output index ``u`` tied to a window: ``u = m + offset(k)`` where ``m`` indexes axis
    ``m_dim`` of the shifted operand and ``k`` runs over the window."""

    u: str
    m_dim: int  # the shifted operand's axis
    k_range: int  # window values 0..k_range-1
    k_name: str  # the window variable's name in the product (a sum variable, or a fresh one)
    sign: int  # offset(k) = sign * k + const
    const: int


def _terms(expr, params) -> tuple[dict[str, int], int] | None:
    coeffs, const, den = integer_form(expr, params)
    if den != 1:
        return None
    return {v: c for v, c in coeffs.items() if c}, const


def plan_shifted_sum(
    fn,
    shapes: Mapping[str, tuple[int, ...]],
    dtype,
    out_shape,
    only_if_smaller: bool = True,
    layout: str = "auto",
) -> Kernel | None:
    """The product-first kernel of ``fn`` (see the module docstring), or None where the
    definition is not of that form or the im2col path copies less.

    Args:
        fn: a TensorFunction.
        shapes: argument name -> shape.
        dtype: the float dtype of arguments and result.
        out_shape: the output shape.
        only_if_smaller: decline where the product is not smaller than im2col's matrix
            (``False``: whenever the form fits — what the tests check it against).
        layout: ``"auto"`` (the flat layout where it applies and its margin is cheap, see
            :func:`_flat_shifts`), ``"flat"`` (wherever it applies) or ``"exact"`` (always the
            clipped views); the last two are what the tests and the benchmark compare.
    """
    if layout not in _LAYOUTS:
        raise InputError(
            f"plan_shifted_sum: layout={layout!r}; expected one of {', '.join(_LAYOUTS)}"
        )
    params = fn._params(shapes)
    scale, factors = product_factors(fn.body)
    if len(factors) != 1 or not isinstance(factors[0], Sum):
        return None
    sums, node = [], factors[0]
    while isinstance(node, Sum):
        sums.append(node)
        node = node.body
    inner_scale, inner = product_factors(node)
    scale *= inner_scale
    if len(inner) != 2 or not all(isinstance(a, Access) for a in inner):
        return None
    a, b = inner
    if a.name == b.name:
        return None
    out_vars = tuple(fn.out_vars)
    sum_vars = [s.var for s in sums]
    sizes = dict(zip(out_vars, out_shape, strict=True))
    forms = []
    for acc in (a, b):
        terms = [_terms(e, params) for e in acc.indices]
        if any(t is None for t in terms):
            return None
        forms.append(terms)
    found = _roles(forms, (a, b), shapes, out_vars, sum_vars)
    if found is None:
        return None
    shifted, plain, pairs, letters = found
    if not _ranges_are_natural(sums, (a, b), forms, shapes, params, sizes):
        return None
    x_shape, k_shape = shapes[shifted.name], shapes[plain.name]
    window = [p.k_range for p in pairs]
    if not pairs or math.prod(window) > _MAX_OFFSETS:
        return None
    # sizes of what each path writes: im2col copies every window of the shifted operand once
    # per contracted value; the product-first path writes P once and reads it once
    n_contracted = math.prod(_size_of(v, forms, (a, b), shapes) for v in letters["contracted"])
    outs_in_x = math.prod(sizes[v] for v in letters["x_out"])
    rows = outs_in_x * math.prod(sizes[p.u] for p in pairs)
    im2col = rows * n_contracted * math.prod(window)
    # P's matrix product: rows of the shifted operand's own axes, columns of the other's
    # times the window offsets, contracted over the shared axes
    p_rows = outs_in_x * math.prod(x_shape[p.m_dim] for p in pairs)
    p_cols = math.prod(sizes[v] for v in letters["k_out"]) * math.prod(window)
    p_size = p_rows * p_cols
    if only_if_smaller and p_size >= im2col:
        return None
    spec = letters["spec"]
    dtype = np.dtype(dtype)
    out_shape = tuple(out_shape)
    product = _batched_product(letters, x_shape, k_shape)
    # the work array: P's layout without the window, m axes read as the coupled output axes
    m_us = [name[len("~m_") :] for name in letters["m"]]
    work_vars = [*letters["shared"], *letters["cols"], *m_us, *letters["rows"]]
    work_shape = tuple(sizes[v] for v in work_vars)
    to_out = [work_vars.index(v) for v in out_vars]
    by_u = {p.u: p for p in pairs}
    batch = (slice(None),) * len(letters["shared"])
    whole_cols = (slice(None),) * len(letters["cols"])
    offsets = []
    for ks in itertools.product(*(range(n) for n in window)):
        at = dict(zip((p.u for p in pairs), ks, strict=True))
        work_index, p_index = [], []
        for u in m_us:
            p = by_u[u]
            t = p.sign * at[u] + p.const  # u = m + t
            lo, hi = max(0, t), min(sizes[u], x_shape[p.m_dim] + t)
            work_index.append(slice(lo, hi))
            p_index.append(slice(lo - t, hi - t))
        if all(sl.start < sl.stop for sl in work_index):
            offsets.append(
                ((*batch, *whole_cols, *work_index), (*batch, *ks, *whole_cols, *p_index))
            )

    def exact(x: np.ndarray, k: np.ndarray) -> np.ndarray:
        p = product(x, k)
        work = np.zeros(work_shape, dtype=dtype)
        for work_index, p_index in offsets:
            work[work_index] += p[p_index]
        if scale != 1.0:
            work *= dtype.type(scale)
        return np.ascontiguousarray(work.transpose(to_out))

    flat = None
    if layout != "exact":
        flat = _flat_shifts(
            letters, pairs, x_shape, k_shape, sizes, out_vars, dtype, scale, layout == "flat"
        )

    def run(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(arrays[shifted.name], dtype=dtype).reshape(x_shape)
        k = np.asarray(arrays[plain.name], dtype=dtype).reshape(k_shape)
        if flat is not None:
            got = flat(x, k)
            if got is not None:
                return got
        return exact(x, k)

    taken = "flat" if flat is not None else "exact"
    text = (
        f"product first, then {len(offsets)} shifted sums ({taken} layout): {fn}\n"
        f"  P = einsum('{spec}', {shifted.name}, {plain.name}), {p_size} values "
        f"(im2col would copy {im2col})"
    )
    kernel = Kernel("numpy", run, out_shape, dtype, text)
    kernel.narrow = min(p_rows, p_cols, n_contracted) < PRODUCT_MIN_SIDE
    return kernel


def _batched_product(letters, x_shape, k_shape):
    """``P`` (axes ``shared, window, cols, m, rows``) as one matrix product per value of the
    shared axes: the other operand laid out as ``(shared, window + cols, contracted)``, the
    shifted one as ``(shared, contracted, m + rows)``. The window joins the product's short
    side: one wide product instead of a narrow one per offset, 1.5x (float32) to 1.9x (float64)
    faster for the input gradient of a 3 x 3, 8 -> 16 channel convolution of 32 images of
    8 x 8, which pays for laying the shifted operand out with its rows last. Each offset's
    block of ``P`` is contiguous, as the shifted additions read it."""
    size = _axis_sizes(letters, x_shape, k_shape)
    window, shared, contracted = letters["window"], letters["shared"], letters["contracted"]
    rows, cols = [*letters["m"], *letters["rows"]], letters["cols"]

    def count(names):
        return math.prod(size[v] for v in names)

    s_perm = [letters["s_axes"].index(v) for v in (*shared, *contracted, *rows)]
    s_mat = (count(shared), count(contracted), count(rows))
    k_perm, k_mat = _weight_matrix(letters, size)
    p_shape = tuple(size[v] for v in (*shared, *window, *cols, *rows))
    multiply = not contracted  # an inner length of 1: a broadcast product, not BLAS calls

    def product(x: np.ndarray, k: np.ndarray) -> np.ndarray:
        sm = x.transpose(s_perm).reshape(s_mat)
        km = k.transpose(k_perm).reshape(k_mat)
        p = km * sm if multiply else np.matmul(km, sm)
        return p.reshape(p_shape)

    return product


def _axis_sizes(letters, x_shape, k_shape) -> dict[str, int]:
    """The length of every axis of the two operands, by name."""
    return {
        **dict(zip(letters["s_axes"], x_shape, strict=True)),
        **dict(zip(letters["k_axes"], k_shape, strict=True)),
    }


def _weight_matrix(letters, size) -> tuple[list[int], tuple[int, int, int]]:
    """The other operand's axis permutation and matrix shape in both layouts: a stack over the
    shared axes of ``(window + cols, contracted)`` matrices."""
    shared, window = letters["shared"], letters["window"]
    cols, contracted = letters["cols"], letters["contracted"]
    perm = [letters["k_axes"].index(v) for v in (*shared, *window, *cols, *contracted)]
    shape = tuple(
        math.prod(size[v] for v in group) for group in (shared, (*window, *cols), contracted)
    )
    return perm, shape


def _flat_shifts(letters, pairs, x_shape, k_shape, sizes, out_vars, dtype, scale, always=False):
    """The flat layout of the product-first kernel, or None where it does not apply or (unless
    ``always``) its margin costs more than it saves: a callable ``(x, k) -> out``, returning
    None for a call it cannot take (a non-finite ``k``).

    The exact layout adds each window offset's block of ``P`` through a view clipped in every
    window dimension; along a short axis (an 8-wide image) NumPy runs such a view in runs of a
    few elements, and laying the rows last to lengthen them costs a transposing copy of the
    shifted operand. Here ``P``'s window axes are laid out on the output's grid instead
    (``u = m + t``: ``m`` stored at the grid position ``m``, the rest zero), so that an offset
    moves every entry by one flat distance, ``sum(t_u * stride_u)``, and its block is added
    with one contiguous addition over every channel and image at once. Entries moved past
    their own row or image are the zeros of the grid's margin.

    The grid spans every position an offset moves a stored entry to: the output's size for a
    "full" correlation (an input gradient, ``0 <= t`` and ``t + extent <= size``), longer where
    an offset reaches before or past the output (the input gradient of a zero-padded
    convolution, ``t = -1`` for padding 1), the output then being a window of the grid, copied
    out at the end as the result is anyway. The shifted operand is zero-padded to the grid
    along all but its first window axis (whose extra rows are a suffix of each grid plane: ``P``
    leaves them zero without a product), and the product runs once per row of the shifted
    operand's own output axes, written straight into its place in ``P``. A non-finite ``k``
    would turn those padded zeros into NaN (``0 * inf``) and add it to real outputs: such calls
    take the exact layout.

    The margin is work the exact layout does not do: every offset's addition runs over the
    whole grid, ``offsets * (grid / image - 1)`` passes over the image more. It is taken where
    those are at most :data:`FLAT_MARGIN_PASSES` for the dtype. Measured with
    ``benchmarks/conv_input_gradients.py`` (one thread): the input gradient of a 3 x 3
    convolution, 16 -> 8 channels, 32 images of 8 x 8 (5.1 extra passes), takes 0.77-0.88 of
    the exact layout's time (float64 437 against 550 µs), and a 1-d one 0.74-0.83. The margin
    also costs memory: 1.6 times the exact layout's peak for the first.
    """
    by_u = {p.u: p for p in pairs}
    m_us = [name[len("~m_") :] for name in letters["m"]]
    extents = [x_shape[by_u[u].m_dim] for u in m_us]
    # the grid covers the output and every shifted entry: an offset reaching before the output
    # (t < 0) or past it starts the grid at the lowest shift and makes it longer; the output is
    # then a window of the grid (the input gradient of a zero-padded convolution)
    low, grid = [], []
    for u, extent in zip(m_us, extents, strict=True):
        p = by_u[u]
        shifts = [p.sign * k + p.const for k in range(p.k_range)]
        low.append(min(0, *shifts))
        grid.append(max(sizes[u], max(shifts) + extent) - low[-1])
    s_axes = letters["s_axes"]
    size = _axis_sizes(letters, x_shape, k_shape)
    shared, rows, contracted = letters["shared"], letters["rows"], letters["contracted"]
    window, cols = letters["window"], letters["cols"]

    def count(names):
        return math.prod(size[v] for v in names)

    n_shared, n_rows, n_contracted = count(shared), count(rows), count(contracted)
    plane = math.prod(grid)
    margin = math.prod(p.k_range for p in pairs) * (plane / math.prod(extents) - 1)
    if not always and margin > FLAT_MARGIN_PASSES.get(dtype, 0.0):
        return None
    strides = [math.prod(grid[d + 1 :]) for d in range(len(grid))]
    written = extents[0] * strides[0]  # the first window axis: a prefix of each plane
    pitch = _unaliased_pitch(plane, n_rows, dtype.itemsize)
    line = count(cols) * n_rows * pitch  # one window offset's block of P
    moves = [
        sum(
            (p.sign * k + p.const - low[m_us.index(p.u)]) * strides[m_us.index(p.u)]
            for p, k in zip(pairs, ks, strict=True)
        )
        for ks in itertools.product(*(range(p.k_range) for p in pairs))
    ]  # in P's window order: pairs' order, row-major
    tail = max(moves)
    # the shifted operand as (shared, rows, contracted, grid with the first axis cut to its
    # extent); the other as (shared, window + cols, contracted), as the exact layout lays it
    s_perm = [s_axes.index(v) for v in (*shared, *rows, *contracted, *letters["m"])]
    k_perm, (_, n_wc, _) = _weight_matrix(letters, size)
    padded = extents[1:] != grid[1:]
    s_full = (*(size[v] for v in (*shared, *rows, *contracted)), extents[0], *grid[1:])
    s_inner = (Ellipsis, *(slice(0, e) for e in extents[1:]))
    s_mat = (n_shared, n_rows, n_contracted, written)
    work_vars = [*shared, *cols, *rows, *m_us]
    work_shape = (*(sizes[v] for v in work_vars[: -len(grid)]), *grid)
    crop = (Ellipsis, *(slice(-lo, sizes[u] - lo) for u, lo in zip(m_us, low, strict=True)))
    to_out = [work_vars.index(v) for v in out_vars]
    out_shape = tuple(sizes[v] for v in out_vars)
    multiply = not contracted  # an inner length of 1: a broadcast product, not BLAS calls

    def run(x: np.ndarray, k: np.ndarray) -> np.ndarray | None:
        km = k.transpose(k_perm).reshape(n_shared, 1, n_wc, n_contracted)
        if padded and not np.isfinite(km).all():
            return None
        if padded:
            sm = np.zeros(s_full, dtype)
            sm[s_inner] = x.transpose(s_perm)
            sm = sm.reshape(s_mat)
        else:
            sm = x.transpose(s_perm).reshape(s_mat)
        p = np.empty((n_shared, n_wc, n_rows, pitch), dtype)
        if written < pitch:
            p[..., written:] = 0
        into = p[..., :written].transpose(0, 2, 1, 3)  # (shared, rows, window + cols, written)
        if multiply:
            np.multiply(km, sm, out=into)
        else:
            np.matmul(km, sm, out=into)
        blocks = p.reshape(n_shared, count(window), line)
        work = np.zeros(n_shared * line + tail, dtype)
        span = n_shared * line
        for w, move in enumerate(moves):
            target = work[move : move + span].reshape(n_shared, line)
            np.add(target, blocks[:, w], out=target)
        planes = work[:span].reshape(*work_shape[: -len(grid)], pitch)[..., :plane]
        result = planes.reshape(work_shape)[crop].transpose(to_out)
        out = np.empty(out_shape, dtype)
        if scale != 1.0:
            np.multiply(result, dtype.type(scale), out=out)
        else:
            np.copyto(out, result)
        return out

    return run


def _unaliased_pitch(plane: int, rows: int, itemsize: int) -> int:
    """The distance between consecutive planes of ``P``: ``plane``, or a few elements more
    where the product's row stride (``rows`` planes) would fall within 256 bytes of a multiple
    of 4 KiB.
    Rows of the product 4 KiB apart share the CPU caches' sets: with 8 images of 32 x 32 per
    row (64 KiB) one product took 2.0 ms instead of 1.3 (float64, one thread)."""
    for pitch in range(plane, plane + 4096 // itemsize):
        gap = rows * pitch * itemsize % 4096
        if 256 <= gap <= 4096 - 256:
            return pitch
    return plane


def _size_of(var: str, forms, accesses, shapes) -> int:
    """The extent of a plainly indexed variable: the size of an axis it indexes alone."""
    for terms, acc in zip(forms, accesses, strict=True):
        for d, (coeffs, const) in enumerate(terms):
            if coeffs == {var: 1} and const == 0:
                return shapes[acc.name][d]
    raise AssertionError(var)


def _roles(forms, accesses, shapes, out_vars, sum_vars):
    """Which access is shifted and which plain, the output/window pairs and the einsum spec.
    (Axis names made here start with ``~``, which no index variable can: no clash.)

    Every index must be a plain variable (coefficient 1, no constant) or ``u ± v + c`` with an
    output index ``u`` and a sum variable ``v`` (the window). Returns None otherwise.
    """
    kinds = []  # per access, per axis: ("plain", var) or ("coupled", u, v, sign_v, const)
    for terms in forms:
        row = []
        for coeffs, const in terms:
            if len(coeffs) == 1 and const == 0 and next(iter(coeffs.values())) == 1:
                row.append(("plain", next(iter(coeffs))))
                continue
            us = [v for v in coeffs if v in out_vars]
            vs = [v for v in coeffs if v in sum_vars]
            if len(coeffs) != 2 or len(us) != 1 or len(vs) != 1 or coeffs[us[0]] != 1:
                return None
            if abs(coeffs[vs[0]]) != 1:
                return None
            row.append(("coupled", us[0], vs[0], coeffs[vs[0]], const))
        kinds.append(row)
    coupled = [any(k[0] == "coupled" for k in row) for row in kinds]
    if coupled.count(True) != 1:
        return None
    xi = coupled.index(True)
    x_kinds, k_kinds = kinds[xi], kinds[1 - xi]
    for row in kinds:  # each variable once per access
        names = [k[1] for k in row if k[0] == "plain"] + [k[2] for k in row if k[0] == "coupled"]
        if len(names) != len(set(names)):
            return None
    k_plain = {k[1]: d for d, k in enumerate(k_kinds)}
    window_vars = [k[2] for k in x_kinds if k[0] == "coupled"]
    us = [k[1] for k in x_kinds if k[0] == "coupled"]
    if len(set(us)) != len(us) or not all(v in k_plain for v in window_vars):
        return None
    x_plain = {k[1] for k in x_kinds if k[0] == "plain"}
    if any(u in x_plain or u in k_plain for u in us):
        return None
    pairs_orig, pairs_flip = [], []
    for d, k in enumerate(x_kinds):
        if k[0] != "coupled":
            continue
        _, u, v, sign, const = k
        # the shifted operand's axis d holds m = u + sign*v + const: u = m - sign*v - const
        k_dim = k_plain[v]
        pairs_orig.append(_Pair(u, d, shapes[accesses[1 - xi].name][k_dim], v, -sign, -const))
        # flipped: the window is x's axis (k = m_x), the other operand's axis is shifted:
        # m = v = sign*(k - u - const), so u = k - const - sign*m: a unit slope needs sign -1
        pairs_flip.append(
            _Pair(u, k_dim, shapes[accesses[xi].name][d], f"~k_{u}", 1, -const) if sign == -1
            else None
        )  # fmt: skip
    windows_orig = math.prod(p.k_range for p in pairs_orig)
    flip = all(p is not None for p in pairs_flip) and (
        math.prod(p.k_range for p in pairs_flip) < windows_orig
    )
    outs = set(out_vars)
    sums = set(sum_vars)
    if flip:
        shifted, plain = accesses[1 - xi], accesses[xi]
        pairs = pairs_flip
        window_of = {p.m_dim: p for p in pairs}  # axes of the shifted operand that are m axes
        s_axes = [f"~m_{window_of[d].u}" if d in window_of else k[1] for d, k in enumerate(k_kinds)]
        coupled_x = {d: p for d, p in zip((d for d, k in enumerate(x_kinds) if k[0] == "coupled"),
                                          pairs, strict=True)}  # fmt: skip
        p_axes_plain = [coupled_x[d].k_name if d in coupled_x else k[1]
                        for d, k in enumerate(x_kinds)]  # fmt: skip
    else:
        shifted, plain = accesses[xi], accesses[1 - xi]
        pairs = pairs_orig
        s_axes = [f"~m_{k[1]}" if k[0] == "coupled" else k[1] for k in x_kinds]
        p_axes_plain = [k[1] for k in k_kinds]
    window_names = {p.k_name for p in pairs}
    contracted = (set(s_axes) & set(p_axes_plain)) - outs
    if not contracted <= sums or (sums - contracted - window_names - set(window_vars)):
        return None
    if any(v in sums for v in (set(s_axes) ^ set(p_axes_plain)) - window_names):
        return None  # a sum variable of one operand only: not this pattern
    x_out = [v for v in s_axes if v in outs]
    k_out = [v for v in p_axes_plain if v in outs and v not in s_axes]
    covered = set(x_out) | set(k_out) | {p.u for p in pairs}
    if covered != outs:
        return None
    # P's axes, the matrix product's own layout: the output axes of both operands (the
    # product's batch), the window and the other operand's output axes (one side of the
    # product: each window offset is then one block of P), the shifted operand's m axes and its
    # other output axes (the other side, the long one). The work array the shifted blocks are
    # added into has P's layout without the window, m axes read as the output's
    shared = [v for v in x_out if v in p_axes_plain]
    m_axes = [v for v in s_axes if v.startswith("~m_")]
    x_only = [v for v in x_out if v not in shared]
    p_axes = [*shared, *(p.k_name for p in pairs), *k_out, *m_axes, *x_only]
    symbols = {}
    for name in [*s_axes, *p_axes_plain, *p_axes]:
        if name not in symbols:
            if len(symbols) >= 52:
                return None
            symbols[name] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[len(symbols)]
    spec = (
        "".join(symbols[v] for v in s_axes)
        + ","
        + "".join(symbols[v] for v in p_axes_plain)
        + "->"
        + "".join(symbols[v] for v in p_axes)
    )
    groups = {
        "window": [p.k_name for p in pairs], "shared": shared, "m": m_axes, "rows": x_only,
        "cols": k_out, "contracted": sorted(contracted), "s_axes": s_axes, "k_axes": p_axes_plain,
    }  # fmt: skip
    return shifted, plain, pairs, {"spec": spec, "x_out": x_out, "k_out": k_out, **groups}


def _ranges_are_natural(sums, accesses, forms, shapes, params, sizes) -> bool:
    """Whether each sum runs over exactly the values where both accesses are in bounds, for
    every value of the output index its bounds depend on (the shifted views add all of them)."""
    for s in sums:
        lower = [_terms(e, params) for e in s.lower]
        upper = [_terms(e, params) for e in s.upper]
        if any(t is None for t in lower + upper):
            return False
        free = {v for t in lower + upper for v in t[0]}
        if len(free) > 1 or free - set(sizes):
            return False
        natural = []  # (coefficient of s.var, other terms, const, axis size)
        for terms, acc in zip(forms, accesses, strict=True):
            for d, (coeffs, const) in enumerate(terms):
                c = coeffs.get(s.var, 0)
                if c:
                    rest = {v: k for v, k in coeffs.items() if v != s.var}
                    if set(rest) - set(sizes) or len(rest) > 1:
                        return False
                    natural.append((c, rest, const, shapes[acc.name][d]))
        u = next(iter(free), None)
        if u is None:
            u = next((next(iter(r)) for _, r, _, _ in natural if r), None)
        for value in range(sizes[u]) if u is not None else [0]:
            at = {u: value} if u is not None else {}
            lo = max(sum(at.get(v, 0) * k for v, k in t.items()) + c for t, c in lower)
            hi = min(sum(at.get(v, 0) * k for v, k in t.items()) + c for t, c in upper)
            nlo, nhi = -(10**18), 10**18
            for c, rest, const, n in natural:
                base = sum(at.get(v, 0) * k for v, k in rest.items()) + const
                # 0 <= c * var + base <= n - 1 with c = +-1
                a, b = -base, n - 1 - base
                if c < 0:
                    a, b = -b, -a
                nlo, nhi = max(nlo, a), min(nhi, b)
            if lo > hi and nlo > nhi:
                continue  # both empty
            if (lo, hi) != (nlo, nhi):
                return False
    return True
