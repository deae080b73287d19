"""NumPy kernels: pure contractions through ``einsum``, everything else vectorized over index grids.

Two lowerings, chosen per definition by :func:`lower_numpy`:

* **einsum** — a body that is, after simplification, a (sum of) product of argument accesses
  whose indices are plain variables running over whole dimensions (matmul, batched matmul,
  transpose, trace, diagonal) becomes one ``np.einsum`` with a contraction order found once by
  ``np.einsum_path`` at compile time (BLAS where the order allows).
* **vectorized** — every other body is evaluated for all output elements at once. Each index
  variable is an integer grid on its own axis; an affine access is a gather through such grids;
  a ``where`` is a mask; a sum gets a new axis. Where a sum's bounds differ per element (the
  window ``max(0, ceil((p-K+1)/2)) <= t <= min(T-1, floor(p/2))`` of a strided convolution's input
  gradient) the axis runs over ``t = lower(p) + j`` for ``j < max(upper - lower) + 1`` and a mask
  drops the ``j`` past each element's own upper bound, so the work is the widest window, not
  the whole range. A sum of a product of two accesses that couple long and short variables
  (a convolution) is window-unrolled into BLAS products of strided views without an im2col
  copy (:mod:`~tadiff.index.compile._window_gemm`); any other sum of a product of accesses goes
  through one batched contraction over all its axes at once (mask included): an im2col gather
  plus BLAS.

Everything that depends on shapes only (grids, bounds, masks, gather indices) is computed in
the compile step, once per shape; a call only gathers and does arithmetic. Gather indices are
clipped into range, so elements a mask drops read a real (finite) element instead of failing:
input values are assumed finite, as everywhere in the index language (``0 * x = 0``).

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> f = define("y[t] = sum[k](x[2*t+k] * w[k])")
    >>> kernel = lower_numpy(f, {"x": (7,), "w": (3,)}, np.float64)
    >>> kernel.backend, kernel({"x": np.arange(7.0), "w": np.ones(3)}).tolist()
    ('numpy', [3.0, 9.0, 15.0])
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Mapping
from math import gcd, lcm, prod

import numpy as np

from tadiff._array import pad_constant, strided_view
from tadiff._sums import fast_sum
from tadiff.index.compile._affine import integer_form
from tadiff.index.compile._window_gemm import (
    WINDOW_MIN_SIDE,
    describe,
    plan_classes,
    plan_window_gemm,
    product_sides,
    write_into,
)
from tadiff.index.compile.rewrite import product_factors
from tadiff.index.expr import (
    Access,
    Affine,
    Cond,
    Const,
    Index,
    Node,
    Op,
    Sum,
    Where,
    index_exprs,
    is_param,
    substitute,
    walk,
)

__all__ = ["Kernel", "lower_einsum", "lower_numpy", "with_addend"]

Arrays = Mapping[str, np.ndarray]


LAYOUTS_KEPT = 1024
"""Operand layouts (shapes and strides) whose derived steps a kernel remembers — a matrix
product's transposes, a window view's strides — a few small tuples each; all are forgotten at
once beyond it."""


class Kernel:
    """A compiled evaluation of one definition for fixed argument shapes and dtype.

    Call it with a mapping of argument name -> array (already of the kernel's dtype); it
    returns a new array of ``out_shape``.

    Attributes:
        backend: ``"einsum"``, ``"numpy"`` or ``"numba"``.
        out_shape: shape of the result.
        dtype: dtype of the result.
        source: generated source text (numba), or a short description of the plan.
    """

    def __init__(
        self,
        backend: str,
        run: Callable[[Arrays], np.ndarray],
        out_shape: tuple[int, ...],
        dtype: np.dtype,
        source: str,
    ):
        self.backend = backend
        self._run = run
        self.out_shape = out_shape
        self.dtype = np.dtype(dtype)
        self.source = source
        # whether the BLAS products the plan makes are too narrow to beat loops (None: it makes
        # none of the kinds that know): the automatic backend choice runs those as loops
        self.narrow: bool | None = None

    def __call__(self, arrays: Arrays) -> np.ndarray:
        return self._run(arrays)

    def __repr__(self) -> str:
        return f"<Kernel {self.backend} -> {self.out_shape} {self.dtype}>"


# -- the einsum lowering ------------------------------------------------------------------------


def _plain_var(a: Affine) -> str | None:
    items = list(a.items())
    if a.const == 0 and len(items) == 1 and items[0][1] == 1 and not is_param(items[0][0]):
        return items[0][0]
    return None


def _constant_bound(
    bounds: tuple[Affine, ...], params: Mapping[str, int], lower: bool
) -> int | None:
    values = []
    for b in bounds:
        coeffs, const, den = integer_form(b, params)
        if coeffs:
            return None
        values.append(-((-const) // den) if lower else const // den)
    return max(values) if lower else min(values)


def lower_einsum(fn, params: Mapping[str, int], shapes: Mapping, out_shape, dtype) -> Kernel | None:
    """The einsum kernel of ``fn`` for these sizes, or None when the body is not a pure
    contraction over whole dimensions (see the module docstring)."""
    body, sums = fn.body, []
    while isinstance(body, Sum):
        lo = _constant_bound(body.lower, params, True)
        hi = _constant_bound(body.upper, params, False)
        if lo is None or hi is None or lo != 0:
            return None
        sums.append((body.var, hi + 1))
        body = body.body
    scale, factors = product_factors(body)
    if not factors or not all(isinstance(f, Access) for f in factors):
        return None
    ranges = dict(zip(fn.out_vars, out_shape, strict=True))
    for var, n in sums:
        if var in ranges:
            return None  # a sum variable shadowing an output variable: not a plain contraction
        ranges[var] = n
    letters: dict[str, str] = {}
    operands: list[tuple[str, str]] = []
    for f in factors:
        subs = ""
        for dim, a in enumerate(f.indices):
            var = _plain_var(a)
            if var is None or var not in ranges or ranges[var] != shapes[f.name][dim]:
                return None
            if var not in letters:
                if len(letters) == len(string.ascii_letters):
                    return None
                letters[var] = string.ascii_letters[len(letters)]
            subs += letters[var]
        operands.append((f.name, subs))
    # variables in no factor: an unused output index broadcasts, an unused sum index counts
    for var, n in sums:
        if var not in letters:
            scale *= n
    kept = [v for v in fn.out_vars if v in letters]
    spec = ",".join(s for _, s in operands) + "->" + "".join(letters[v] for v in kept)
    view = tuple(n if v in letters else 1 for v, n in zip(fn.out_vars, out_shape, strict=True))
    typed_scale = dtype.type(scale)
    names = [name for name, _ in operands]
    axes = _summed_axes(operands, "".join(letters[v] for v in kept))
    if axes is not None:  # one array summed over some of its axes: BLAS sums, no einsum
        (name,) = names

        def reduce(arrays: Arrays) -> np.ndarray:
            result = fast_sum(arrays[name], axes, False)
            if scale != 1.0:
                result = result * typed_scale
            result = np.asarray(result, dtype=dtype).reshape(view)
            return result if view == out_shape else np.array(np.broadcast_to(result, out_shape))

        return Kernel(
            "einsum", reduce, tuple(out_shape), dtype, f"a sum of {name} over axes {axes}"
        )
    dummies = [np.empty(shapes[name], dtype=dtype) for name, _ in operands]
    path = np.einsum_path(spec, *dummies, optimize="optimal" if len(operands) <= 4 else "greedy")[0]

    def run(arrays: Arrays) -> np.ndarray:
        result = np.einsum(spec, *(arrays[n] for n in names), optimize=path)
        if scale != 1.0:
            result = result * typed_scale
        result = np.asarray(result, dtype=dtype).reshape(view)
        return np.array(np.broadcast_to(result, out_shape), dtype=dtype)

    return Kernel(
        "einsum", run, tuple(out_shape), dtype, f"np.einsum({spec!r}, {', '.join(names)})"
    )


def _summed_axes(operands: list[tuple[str, str]], kept: str) -> tuple[int, ...] | None:
    """The axes summed away when the contraction is one array summed over some of its axes,
    the others kept in order (``"boij->o"``: ``(0, 2, 3)``); else None (several operands, a
    diagonal, a transposition, or nothing summed)."""
    if len(operands) != 1:
        return None
    subs = operands[0][1]
    if len(set(subs)) != len(subs) or len(kept) == len(subs):
        return None
    if "".join(c for c in subs if c in kept) != kept:
        return None
    return tuple(d for d, c in enumerate(subs) if c not in kept)


# -- the vectorized lowering --------------------------------------------------------------------


def _max_depth(node: Node, memo: dict[int, int]) -> int:
    hit = memo.get(id(node))
    if hit is None:
        inner = [_max_depth(c, memo) for c in node.children()]
        hit = (1 if isinstance(node, Sum) else 0) + max(inner, default=0)
        memo[id(node)] = hit
    return hit


_UNARY = {
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "sign": np.sign,
}
_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # the two branches keep exp from overflowing for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


class _Planner:
    """Turns the IR into a tree of closures for fixed sizes (see the module docstring).

    ``env`` maps an index variable to its integer grid: an int64 array with ``ndim`` axes,
    of full length on the variable's own axis and 1 elsewhere (broadcasting does the rest).
    """

    def __init__(self, fn, params, shapes, out_shape, dtype, body: Node | None = None):
        self.params = params
        self.shapes = shapes
        self.dtype = np.dtype(dtype)
        self.ndim = len(out_shape) + _max_depth(fn.body if body is None else body, {})
        self.memo: dict[tuple, Callable[[Arrays], np.ndarray]] = {}
        self.env: dict[str, np.ndarray] = {}
        self.depth = len(out_shape)
        self._keep: list[np.ndarray] = []  # grids stay alive: their ids key the memo
        self._inside: dict[int, np.ndarray] = {}  # padded access plan -> where it reads data
        self.env_affine: dict[str, tuple[dict[int, int], int] | None] = {}
        self.axis_len: dict[int, int] = {}
        self.notes: list[str] = []  # lowerings chosen, for the kernel's description
        self.sides: list[tuple[int, int, int]] = []  # of the window-unrolled BLAS products
        # plans whose result is a view of a buffer of their own, made per call: as the kernel's
        # result it needs no copy (a strided view is fine, the caller gets the only reference)
        self.fresh: set[int] = set()
        for axis, (var, n) in enumerate(zip(fn.out_vars, out_shape, strict=True)):
            self.env[var] = self._grid(np.arange(n), axis)
            self.env_affine[var] = ({axis: 1}, 0)
            self.axis_len[axis] = n

    def _grid(self, values: np.ndarray, axis: int) -> np.ndarray:
        shape = [1] * self.ndim
        shape[axis] = values.size
        return values.astype(np.int64).reshape(shape)

    def _scalar(self, value: float) -> np.ndarray:
        return np.full((1,) * self.ndim, value, dtype=self.dtype)

    def affine(self, expr: Affine) -> tuple[np.ndarray | int, int]:
        """Numerator grid (or int) and denominator of ``expr`` under the current grids."""
        coeffs, const, den = integer_form(expr, self.params)
        num: np.ndarray | int = const
        for var, c in coeffs.items():
            num = num + c * self.env[var]
        return num, den

    def cond(self, c: Cond) -> np.ndarray | bool:
        num, den = self.affine(c.expr)
        if c.kind == "ge":
            return num >= 0
        if c.kind == "eq":
            return num == 0
        if c.kind == "ne":
            return num != 0
        return num % (den * c.modulus) == 0

    def plan(self, node: Node) -> Callable[[Arrays], np.ndarray]:
        from tadiff.index.expr import free_indices

        key = (id(node), tuple(id(self.env[v]) for v in sorted(free_indices(node))))
        hit = self.memo.get(key)
        if hit is None:
            hit = self._plan(node)
            self.memo[key] = hit
        return hit

    def _plan(self, node: Node) -> Callable[[Arrays], np.ndarray]:
        if isinstance(node, Const):
            value = self._scalar(node.value)
            return lambda arrays: value
        if isinstance(node, Index):
            num, den = self.affine(node.expr)
            value = (
                (np.asarray(num) / den)
                .astype(self.dtype)
                .reshape(np.shape(num) if np.ndim(num) else (1,) * self.ndim)
            )
            return lambda arrays: value
        if isinstance(node, Access):
            return self._access(node)
        if isinstance(node, Op):
            args = [self.plan(a) for a in node.args]
            if node.op == "sigmoid":
                (a,) = args
                return lambda arrays: _sigmoid(a(arrays))
            if node.op in _UNARY:
                f, (a,) = _UNARY[node.op], args
                return lambda arrays: f(a(arrays))
            f, (a, b) = _BINARY[node.op], args
            return lambda arrays: f(a(arrays), b(arrays))
        if isinstance(node, Where):
            mask = np.ones((1,) * self.ndim, dtype=bool)
            for c in node.conds:
                mask = mask & self.cond(c)
            then, other = self.plan(node.then), self.plan(node.other)
            return lambda arrays: np.where(mask, then(arrays), other(arrays))
        if isinstance(node, Sum):
            return self._sum(node)
        raise TypeError(f"not an index-notation node: {node!r}")  # pragma: no cover

    def _access(self, node: Access) -> Callable[[Arrays], np.ndarray]:
        """A gather as a strided view: dimensions indexed affinely in the axes become strides,
        the others (rational or clamped indices) one ``np.take`` through a flat index grid."""
        name, shape, ndim = node.name, self.shapes[node.name], self.ndim
        if not node.indices:
            return lambda arrays: np.asarray(arrays[name]).reshape((1,) * ndim)
        forms = [self._compose(expr) for expr in node.indices]
        for d, form in enumerate(forms):
            if form is not None and self._padding(form, shape[d]) > 4 * shape[d] + 4096:
                # a huge padding (x[10**12*(i - j) + i] under i == j): clamp instead
                forms[d] = None
        regular = [d for d, f in enumerate(forms) if f is not None]
        irregular = [d for d, f in enumerate(forms) if f is None]
        flat: np.ndarray | int = 0
        for d in irregular:
            num, den = self.affine(node.indices[d])
            # masked-out elements may compute an index outside the array: read a real element
            flat = flat * shape[d] + np.clip(np.asarray(num) // den, 0, shape[d] - 1)
        flat = np.asarray(flat).reshape(np.shape(flat) or (1,) * ndim)
        g_axes = [a for a in range(ndim) if flat.shape[a] != 1]
        take = flat.reshape([flat.shape[a] for a in g_axes]) if irregular else None
        pads, start = [(0, 0)] * len(shape), []
        view_shape = [1] * ndim
        for d in regular:
            coeffs, const = forms[d]
            low = const + sum(min(0, k * (self.axis_len[a] - 1)) for a, k in coeffs.items())
            high = const + sum(max(0, k * (self.axis_len[a] - 1)) for a, k in coeffs.items())
            pads[d] = (max(0, -low), max(0, high - (shape[d] - 1)))
            start.append(const + pads[d][0])
            for a in coeffs:
                view_shape[a] = self.axis_len[a]
        for a in g_axes:
            view_shape[a] = self.axis_len[a]
        padded = any(lo or hi for lo, hi in pads)
        view_shape_t = tuple(view_shape)
        steps = [
            [forms[d][0].get(a, 0) if view_shape[a] > 1 else 0 for d in regular]
            for a in range(ndim)
        ]
        g_pos = {a: len(regular) + k for k, a in enumerate(g_axes)}
        origin = tuple(start)
        # the axes of the gathered irregular indices follow the regular ones
        origin_taken = (*origin, *(0,) * (0 if take is None else take.ndim))
        n_irr = int(np.prod([shape[d] for d in irregular], dtype=np.int64))

        known_strides: dict[tuple[int, ...], tuple[int, ...]] = {}

        def view_strides(array_strides: tuple[int, ...]) -> tuple[int, ...]:
            strides = []
            for a in range(ndim):
                st = sum(k * array_strides[i] for i, k in enumerate(steps[a]))
                if a in g_pos:
                    st += array_strides[g_pos[a]]
                strides.append(st)
            return tuple(strides)

        def view(arrays: Arrays) -> np.ndarray:
            array = arrays[name]
            if padded:
                # zeros where masked-out elements index past the array (never read unmasked)
                array = pad_constant(array, pads)
            if take is not None:
                moved = np.moveaxis(
                    array, irregular, range(len(shape) - len(irregular), len(shape))
                )
                moved = moved.reshape([array.shape[d] for d in regular] + [n_irr])
                array = np.take(moved, take, axis=-1)
            # the view's strides follow from the array's: worked out once per layout
            strides = known_strides.get(array.strides)
            if strides is None:
                if len(known_strides) >= LAYOUTS_KEPT:
                    known_strides.clear()
                strides = known_strides[array.strides] = view_strides(array.strides)
            start = origin if take is None else origin_taken
            return strided_view(array, view_shape_t, strides, start)

        if padded and not irregular:
            # where this access reads padding it contributes a zero factor: a sum mask that
            # only excludes such elements is redundant (see _reduce_body)
            inside = np.ones((1,) * ndim, dtype=bool)
            for d in regular:
                coeffs, const = forms[d]
                index = const
                for a, k in coeffs.items():
                    index = index + k * self._grid(np.arange(self.axis_len[a]), a)
                inside = inside & (index >= 0) & (index <= shape[d] - 1)
            self._inside[id(view)] = inside
        return view

    def _padding(self, form: tuple[dict[int, int], int], size: int) -> int:
        """Elements a strided view of ``size`` would need on both sides for this index."""
        coeffs, const = form
        low = const + sum(min(0, k * (self.axis_len[a] - 1)) for a, k in coeffs.items())
        high = const + sum(max(0, k * (self.axis_len[a] - 1)) for a, k in coeffs.items())
        return max(0, -low) + max(0, high - (size - 1))

    def _sum(self, node: Sum) -> Callable[[Arrays], np.ndarray]:
        saved, saved_affine, depth = dict(self.env), dict(self.env_affine), self.depth
        mask, empty = None, False
        widths: dict[int, int] = {}
        body: Node = node
        while isinstance(body, Sum):
            axis = self.depth
            self.depth += 1
            lows = [(b, *self.affine(b)) for b in body.lower]
            highs = [(b, *self.affine(b)) for b in body.upper]
            lo_all = _reduce(np.maximum, [-((-n) // d) for _, n, d in lows])
            hi_all = _reduce(np.minimum, [n // d for _, n, d in highs])
            # run from the one lower bound that gives the narrowest window (the affine p-K+1 of
            # a convolution's input gradient rather than its clamp 0); the others become a mask
            best = None
            for b, n, d in lows:
                start = -((-n) // d)
                w = int(np.max(hi_all - start)) + 1 if np.size(hi_all - start) else 0
                if best is None or w < best[0]:
                    best = (w, b, start)
            width, chosen, start = best
            if width <= 0:
                empty, width = True, 1
            offsets = self._grid(np.arange(width), axis)
            grid = np.asarray(start + offsets, dtype=np.int64)
            inside = (grid >= lo_all) & (grid <= hi_all)
            if not inside.all():
                mask = inside if mask is None else mask & inside
            self._keep.append(grid)
            self.env[body.var] = grid
            self.axis_len[axis] = width
            form = self._compose(chosen, ceil=True)
            if form is not None:
                form[0][axis] = form[0].get(axis, 0) + 1
            self.env_affine[body.var] = form
            widths[axis] = width
            body = body.body
        if mask is not None and not mask.any():
            empty = True
        result = None if empty else self._reduce_body(body, widths, mask)
        self.env, self.env_affine, self.depth = saved, saved_affine, depth
        if result is None:
            zero = self._scalar(0.0)
            return lambda arrays: zero
        return result

    def _compose(self, expr: Affine, ceil: bool = False) -> tuple[dict[int, int], int] | None:
        """``floor(expr)`` (``ceil`` if asked) as an integer affine function of the axes, or
        None (a rational or clamped index somewhere in it)."""
        coeffs, const, den = integer_form(expr, self.params)
        if den != 1:
            if any(c % den for c in coeffs.values()):
                return None
            # integer variables: floor(sum(c v) + k) = sum(c v) + floor(k) exactly
            coeffs = {v: c // den for v, c in coeffs.items()}
            const, den = (-((-const) // den) if ceil else const // den), 1
        out: dict[int, int] = {}
        for var, c in coeffs.items():
            form = self.env_affine.get(var)
            if form is None:
                return None
            for axis, k in form[0].items():
                out[axis] = out.get(axis, 0) + c * k
            const += c * form[1]
        return {a: k for a, k in out.items() if k}, const

    def _reduce_body(
        self, body: Node, widths: dict[int, int], mask
    ) -> Callable[[Arrays], np.ndarray]:
        axes = list(widths)
        scale, factors = product_factors(body)
        typed_scale = self.dtype.type(scale)
        if factors and all(isinstance(f, Access | Index) for f in factors):
            plans = [self.plan(f) for f in factors]
            if mask is not None:
                reads_zero = np.zeros((1,) * self.ndim, dtype=bool)
                for p in plans:
                    if id(p) in self._inside:
                        reads_zero = reads_zero | ~self._inside[id(p)]
                if (mask | reads_zero).all():
                    mask = None  # the zero padding already drops every masked-out term
            if mask is None and len(factors) == 2 and all(isinstance(f, Access) for f in factors):
                gemm = self._window_gemm(factors, widths, scale)
                if gemm is not None:
                    return gemm
            mask_f = None if mask is None else mask.astype(self.dtype)
            ndim, dtype = self.ndim, self.dtype
            summed = frozenset(widths)
            scales: dict[tuple, object] = {}  # per operand shapes: the scale times the
            # terms of sums no operand spans (worked out once, not per call)

            def contract(arrays: Arrays) -> np.ndarray:
                ops = [p(arrays) for p in plans]
                if mask_f is not None:
                    ops = _fold_mask(ops, mask_f)
                shapes = tuple(op.shape for op in ops)
                scale = scales.get(shapes)
                if scale is None:
                    scale = scales[shapes] = typed_scale * _uncovered(widths, shapes, dtype)
                return _einsum_reduce(ops, widths, summed, ndim, scale)

            return contract
        inner = self.plan(body)
        axes_t = tuple(axes)

        def reduce(arrays: Arrays) -> np.ndarray:
            value = inner(arrays)
            if mask is not None:
                value = np.where(mask, value, 0)
            total = np.sum(value, axis=axes_t, keepdims=True, dtype=self.dtype)
            return total * _uncovered(widths, [value.shape], self.dtype)

        return reduce

    def _window_gemm(self, factors, widths, scale) -> Callable[[Arrays], np.ndarray] | None:
        """The window-unrolled BLAS plan of a two-factor sum (see ``_window_gemm``), if any."""
        forms = [[self._compose(e) for e in f.indices] for f in factors]
        if any(form is None for fm in forms for form in fm):
            return None
        plan = plan_window_gemm(
            factors,
            forms,
            self.shapes,
            lambda a: self.axis_len.get(a, 1),
            set(widths),
            self.ndim,
            self.dtype,
            scale,
        )
        if plan is not None:
            names = " * ".join(f.name for f in factors)
            self.notes.append(f"window-unrolled BLAS products for {names}{describe(plan)}")
            self.fresh.add(id(plan))
            sides = product_sides(plan)
            if sides is not None:
                self.sides.append(sides)
        return plan


def _reduce(f, values):
    out = values[0]
    for v in values[1:]:
        out = f(out, v)
    return out


def _uncovered(widths: dict[int, int], shapes: list[tuple[int, ...]], dtype) -> object:
    """The number of terms of sum axes that no operand spans (a body constant along them)."""
    count = 1
    for axis, width in widths.items():
        if all(shape[axis] == 1 for shape in shapes):
            count *= width
    return dtype.type(count)


def _einsum_reduce(
    ops: list[np.ndarray], widths: dict[int, int], summed: frozenset[int], ndim: int, scale
) -> np.ndarray:
    """``scale`` times the sum over the ``summed`` axes (``widths``' keys) of the broadcast
    product of ``ops`` (each with ``ndim`` axes), keeping the reduced axes as size 1; einsum
    picks a contraction order (BLAS where it can). The scale counts the terms of sums that no
    operand spans (:func:`_uncovered`)."""
    axes = list(widths)
    if len(ops) == 2:
        result = _pair_contract(ops[0], ops[1], summed, ndim)
        return result * scale if scale != 1 else result
    if len(ops) == 1:
        result = _window_sum(ops[0], axes)
        return result * scale if scale != 1 else result
    letters = string.ascii_letters[:ndim]
    subs, squeezed = [], []
    used: set[int] = set()
    for op in ops:
        keep = [a for a in range(ndim) if op.shape[a] != 1]
        used.update(keep)
        squeezed.append(op.reshape([op.shape[a] for a in keep]))
        subs.append("".join(letters[a] for a in keep))
    out_axes = [a for a in sorted(used) if a not in axes]
    spec = ",".join(subs) + "->" + "".join(letters[a] for a in out_axes)
    result = np.einsum(spec, *squeezed, optimize=len(ops) > 2 or None)
    shape = [1] * ndim
    for a in out_axes:
        shape[a] = result.shape[out_axes.index(a)]
    result = np.asarray(result).reshape(shape)
    return result * scale if scale != 1 else result


def _window_sum(op: np.ndarray, axes: list[int], small: int = 32) -> np.ndarray:
    """Sum of ``op`` over ``axes`` (kept as size 1). A small window (pooling's 2x2) is added
    slice by slice, which streams the strided view far faster than a reduction over it."""
    spans = [a for a in axes if op.shape[a] > 1]
    count = int(np.prod([op.shape[a] for a in spans], dtype=np.int64))
    if count > small or not spans:
        return op.sum(axis=tuple(axes), keepdims=True)
    total = None
    for point in np.ndindex(*(op.shape[a] for a in spans)):
        index = [slice(None)] * op.ndim
        for a, i in zip(spans, point, strict=True):
            index[a] = slice(i, i + 1)
        part = op[tuple(index)]
        total = part.copy() if total is None else np.add(total, part, out=total)
    return total.sum(axis=tuple(a for a in axes if a not in spans), keepdims=True)


def _fold_mask(ops: list[np.ndarray], mask: np.ndarray) -> list[np.ndarray]:
    """Multiply the mask into the operand that already spans its axes (no new, bigger array)."""
    spans = [a for a in range(mask.ndim) if mask.shape[a] != 1]
    for k, op in enumerate(ops):
        if all(op.shape[a] != 1 for a in spans):
            return [*ops[:k], op * mask, *ops[k + 1 :]]
    return [*ops, mask]


def _pair_contract(a: np.ndarray, b: np.ndarray, summed: frozenset[int], ndim: int) -> np.ndarray:
    """``sum over summed axes of a * b`` as one batched matrix product (BLAS).

    Axes in both operands and kept are the batch, in both and summed are contracted, in one only
    are that operand's rows/columns (summed first if they are summed axes). How to lay the
    operands out depends only on their shapes and strides: it is worked out once per layout
    (:func:`_plan_pair`) and kept, since a small convolution's kernel spends more time deciding
    than multiplying.
    """
    key = (a.shape, a.strides, b.shape, b.strides, summed, ndim)
    plan = _PAIR_PLANS.get(key)
    if plan is None:
        if len(_PAIR_PLANS) >= LAYOUTS_KEPT:
            _PAIR_PLANS.clear()
        plan = _PAIR_PLANS[key] = _plan_pair(a, b, summed, ndim)
    return plan(a, b)


_PAIR_PLANS: dict[tuple, Callable] = {}


def _plan_pair(
    a: np.ndarray, b: np.ndarray, summed: set[int], ndim: int, through_gaps: bool = True
) -> Callable:
    """The steps of :func:`_pair_contract` for operands with the layouts of ``a`` and ``b``
    (``through_gaps=False``: without reading a contracted pair through its gap). The plan keeps
    no array: it is cached, and an operand's memory must not outlive the call."""
    a_axes = {x for x in range(ndim) if a.shape[x] != 1}
    b_axes = {x for x in range(ndim) if b.shape[x] != 1}
    only_a_summed = tuple(sorted((a_axes - b_axes) & summed))
    only_b_summed = tuple(sorted((b_axes - a_axes) & summed))
    if only_a_summed:
        a = a.sum(axis=only_a_summed, keepdims=True)
    if only_b_summed:
        b = b.sum(axis=only_b_summed, keepdims=True)
    a_axes -= set(only_a_summed)
    b_axes -= set(only_b_summed)
    big = a if a.size >= b.size else b
    batch = _by_stride(big, (a_axes & b_axes) - summed)
    contracted = _by_stride(big, a_axes & b_axes & summed)
    rows = _by_stride(a, a_axes - b_axes)
    cols = _by_stride(b, b_axes - a_axes)
    # each operand is copied with the group that gives the longest contiguous runs innermost
    # (a transposed matrix is fine for BLAS): the im2col copy of a strided view then runs along
    # memory instead of across it
    a_flip = _inner_last(a, batch, contracted, rows)
    b_flip = bool(cols and contracted) and not _inner_last(b, batch, contracted, cols)
    # a kept group copied innermost may step over a gap (a window's rows j inside the padded
    # width): read it as one longer axis, gap included (see _gap_merge)
    a_merge = _gap_merge(a, rows) if a_flip else None
    b_merge = _gap_merge(b, cols) if not b_flip else None
    if a_merge is not None:
        a = a_merge.view(a)
    if b_merge is not None:
        b = b_merge.view(b)
    # a contracted pair copied innermost may step over a gap too (a weight gradient's window
    # rows): one operand is read through it, the other spaced out with zeros there
    k_merge, k_reads_a = None, False
    if through_gaps:
        for reads_a in (a is big, a is not big):
            reader, innermost = (a, not a_flip) if reads_a else (b, b_flip)
            if innermost:
                k_merge = _gap_merge(reader, _by_stride(reader, set(contracted)))
                if k_merge is not None:
                    k_reads_a = reads_a
                    break
    if k_merge is not None:
        a, b = k_merge.contract(a, b, k_reads_a)
    nb, nk = _size(batch, a), _size(contracted, a)
    na, nc = _size(rows, a), _size(cols, b)
    if a_flip:
        a_perm, a_mat = _squeezing(a, batch + contracted + rows), (nb, nk, na)
    else:
        a_perm, a_mat = _squeezing(a, batch + rows + contracted), (nb, na, nk)
    if b_flip:
        b_perm, b_mat = _squeezing(b, batch + cols + contracted), (nb, nc, nk)
    else:
        b_perm, b_mat = _squeezing(b, batch + contracted + cols), (nb, nk, nc)
    # the product as rows x columns, or transposed (columns x rows) where the rows hold the
    # result's innermost axis: the result is then copied out along runs of that axis
    swap = bool(rows and cols) and max(rows) > max(cols)
    order = batch + cols + rows if swap else batch + rows + cols
    dims = [a.shape[x] if x in a_axes else b.shape[x] for x in order]
    # back to ndim axes, in axis order, with size 1 where nothing depends on the axis
    back = tuple(int(x) for x in np.argsort(order)) if order else None
    shape = [1] * ndim
    for x in order:
        shape[x] = a.shape[x] if x in a_axes else b.shape[x]

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a_pair, b_pair = a, b
        if only_a_summed:
            a = a.sum(axis=only_a_summed, keepdims=True)
        if only_b_summed:
            b = b.sum(axis=only_b_summed, keepdims=True)
        if a_merge is not None:
            a = a_merge.view(a)
        if b_merge is not None:
            b = b_merge.view(b)
        if k_merge is not None:
            a, b = k_merge.contract(a, b, k_reads_a)
        am = a.transpose(a_perm).reshape(a_mat)  # methods: np.transpose's dispatch costs more
        bm = b.transpose(b_perm).reshape(b_mat)
        am = am.transpose(0, 2, 1) if a_flip else am  # (batch, rows, contracted)
        bm = bm.transpose(0, 2, 1) if b_flip else bm  # (batch, contracted, columns)
        if swap:
            owner = np.matmul(bm.transpose(0, 2, 1), am.transpose(0, 2, 1))
        else:
            owner = np.matmul(am, bm)
        product = owner.reshape(dims)
        if back is not None:
            product = product.transpose(back)
        product = product.reshape(shape)
        for merge in (a_merge, b_merge):
            if merge is not None:
                product = merge.split(product, owner)
        if k_merge is not None and not np.isfinite(product).all():
            # a gap element that is inf or NaN turns its zero partner into NaN: the sum
            # without the gap decides (it may be non-finite on its own)
            nonlocal exact
            if exact is None:
                exact = _plan_pair(a_pair, b_pair, summed, ndim, through_gaps=False)
            return exact(a_pair, b_pair)
        return product

    exact = None
    return run


def _contiguous_run(array: np.ndarray, axes: list[int]) -> int:
    """Elements that a copy of ``array``, axes in the order ``axes``, moves in one run."""
    run, step = 1, array.itemsize
    for x in reversed(axes):
        if array.shape[x] == 1:
            continue
        if array.strides[x] != step:
            break
        run *= array.shape[x]
        step *= array.shape[x]
    return run


def _inner_last(array: np.ndarray, batch: list[int], contracted: list[int], own: list[int]) -> bool:
    """Whether ``array``'s own axes (its rows or columns) go innermost in its matrix copy,
    after the contracted ones: where that copy has longer contiguous runs, or, on a tie, where
    the own axes have the smaller stride."""
    if not (own and contracted):
        return False
    own_last = _contiguous_run(array, batch + contracted + own)
    contracted_last = _contiguous_run(array, batch + own + contracted)
    if own_last != contracted_last:
        return own_last > contracted_last
    return _fastest(array, own) < _fastest(array, contracted)


class _GapMerge:
    """Two axes ``outer, inner`` of an operand read as one axis, the gap between rows
    included: an index ``i`` of ``outer`` steps ``n`` elements of ``inner``, ``n > size``.

    ``x[b, c, i + p, j + q]`` over a padded width ``W`` steps ``W`` per row ``i`` and reads
    ``W - 2`` of them: merged, row ``u = i W + j`` reads ``W`` positions per ``i``, in one
    contiguous run per window offset where the copy had one per ``i``. Each merged position
    reads memory between two elements the operand reads (so inside its array).

    * Kept axes (an output's rows): a gap position only reaches the result's gap rows, which
      :meth:`split` leaves out, since a matrix product's row depends on its operand's row alone.
    * Contracted axes (a weight gradient's rows): the other operand is spaced out with zeros in
      the gap (:meth:`spread`), so each gap term is ``0 * (what the gap holds)``; the caller
      checks that the result is finite, which rules out a gap holding inf or NaN.
    """

    def __init__(self, outer: int, inner: int, step: int, sizes: tuple[int, int], ndim: int):
        self.outer, self.inner, self.step, self.sizes = outer, inner, step, sizes
        self.length = (sizes[0] - 1) * step + sizes[1]
        # spread's layout: the pair innermost (outer, then inner), the other axes before it
        others = tuple(x for x in range(ndim) if x not in (outer, inner))
        self.order = (*others, outer, inner)
        self.back = tuple(self.order.index(x) for x in range(ndim))
        self.gap_index = tuple(
            slice(0, sizes[1]) if x == inner else slice(None) for x in range(ndim)
        )

    def view(self, array: np.ndarray) -> np.ndarray:
        shape, strides = list(array.shape), list(array.strides)
        shape[self.outer], shape[self.inner] = self.length, 1
        strides[self.outer] = array.strides[self.inner]
        return strided_view(array, tuple(shape), tuple(strides))

    def spread(self, array: np.ndarray) -> np.ndarray:
        """The other operand of a merged contracted pair: a copy spaced ``step`` apart along the
        pair, zeros in the gap, merged as :meth:`view` merges the operand read through it. Each
        gap term is then ``0 * (what the gap holds)``: zero wherever that is finite."""
        shape = list(array.shape)
        shape[self.inner] = self.step
        spaced = np.zeros([shape[x] for x in self.order], array.dtype).transpose(self.back)
        spaced[self.gap_index] = array
        return self.view(spaced)

    def contract(self, a: np.ndarray, b: np.ndarray, reads_a: bool) -> tuple:
        """The operands of a merged contracted pair: ``a`` read through the gap and ``b``
        spaced out with zeros (``reads_a``), or the other way round."""
        if reads_a:
            return self.view(a), self.spread(b)
        return self.spread(a), self.view(b)

    def split(self, product: np.ndarray, owner: np.ndarray) -> np.ndarray:
        shape, strides = list(product.shape), list(product.strides)
        shape[self.outer], shape[self.inner] = self.sizes
        stride = product.strides[self.outer]
        strides[self.outer], strides[self.inner] = stride * self.step, stride
        # a view of the product's own contiguous array (same first element): the fast path
        return strided_view(owner, tuple(shape), tuple(strides), writeable=True)


_GAP_MERGE_WASTE = 2  # the merged axis may be at most this many times the positions kept


def _gap_merge(array: np.ndarray, axes: list[int]) -> _GapMerge | None:
    """The merge of the last two of ``axes`` (in decreasing stride, copied innermost) if they
    step over a gap that is small beside the rows they keep (see :class:`_GapMerge`)."""
    if len(axes) < 2:
        return None
    outer, inner = axes[-2], axes[-1]
    (rows, size), (s_outer, s_inner) = (
        (array.shape[outer], array.shape[inner]),
        (array.strides[outer], array.strides[inner]),
    )
    if rows < 2 or size < 2 or s_inner <= 0 or s_outer <= 0 or s_outer % s_inner:
        return None
    step = s_outer // s_inner
    if not size < step <= _GAP_MERGE_WASTE * size:
        return None
    return _GapMerge(outer, inner, step, (rows, size), array.ndim)


def _size(axes: list[int], array: np.ndarray) -> int:
    return prod(array.shape[x] for x in axes)


def _squeezing(array: np.ndarray, axes: list[int]) -> tuple[int, ...]:
    """The transposition that puts ``axes`` first (in that order) and the others, all of size 1,
    after: reshaped, the operand has only ``axes``."""
    return tuple(axes) + tuple(x for x in range(array.ndim) if x not in axes)


def _by_stride(array: np.ndarray, axes: set[int]) -> list[int]:
    return sorted(axes, key=lambda x: (-abs(array.strides[x]), array.shape[x], x))


def _fastest(array: np.ndarray, axes: list[int]) -> tuple[int, int]:
    """Smallest stride among ``axes`` (on a tie, the longer axis is the better innermost)."""
    return min((abs(array.strides[x]), -array.shape[x]) for x in axes)


def lower_numpy(
    fn, shapes: Mapping[str, tuple[int, ...]], dtype, params=None, out_shape=None
) -> Kernel:
    """The vectorized NumPy kernel of ``fn`` for argument ``shapes`` and ``dtype``.

    Args:
        fn: a TensorFunction.
        shapes: argument name -> shape.
        dtype: float dtype of arguments and result.
        params, out_shape: the sizes and output shape, when the caller has them already.

    Returns:
        A :class:`Kernel` (backend ``"numpy"``).
    """
    dtype = np.dtype(dtype)
    if params is None:
        params = fn._params(shapes)
    if out_shape is None:
        out_shape = fn.output_shape(**shapes)
    out_shape = tuple(out_shape)
    parts, notes, sides = [], [], []
    classes = list(_residue_classes(fn, out_shape))
    if len(classes) > 1 and 0 not in out_shape:
        # a dilated convolution's input gradient divides p by 2 only in its sum bounds: whole,
        # it is a window-unrolled product of views (with zero padding for the bounds), split
        # by residue its reads become strided; keep it whole when the window lowering takes it
        planner = _Planner(fn, params, shapes, out_shape, dtype)
        with np.errstate(all="ignore"):
            root = planner.plan(fn.body)
        if planner.notes:
            classes, notes, sides = [], planner.notes, planner.sides
            parts = [((), out_shape, root, id(root) in planner.fresh)]
    for mapping, slices, sub_shape in classes:
        if 0 in sub_shape:
            continue
        body = substitute(fn.body, mapping) if mapping else fn.body
        planner = _Planner(fn, params, shapes, sub_shape, dtype, body)
        with np.errstate(all="ignore"):
            root = planner.plan(body)
            parts.append((slices, sub_shape, root, id(root) in planner.fresh))
        notes += [n for n in planner.notes if n not in notes]
        sides += planner.sides
    n_out = len(out_shape)
    # residue classes that share their window views run as one plan (see plan_classes)
    shared, together = None, set()
    if len(parts) > 1:
        fresh_parts = [i for i, part in enumerate(parts) if part[3]]
        found = plan_classes([(parts[i][2], parts[i][0]) for i in fresh_parts], out_shape)
        if found is not None:
            shared, taken = found
            together = {fresh_parts[i] for i in taken}
            notes.append("residue classes share their window views")
    rest = [part for i, part in enumerate(parts) if i not in together]

    def run(arrays: Arrays) -> np.ndarray:
        out = np.empty(out_shape, dtype=dtype) if len(parts) > 1 else None
        with np.errstate(all="ignore"):
            if shared is not None:
                shared(arrays, out)
            for slices, sub_shape, root, fresh in rest:
                # a residue class's window product writes its slice block by block
                if out is not None and fresh and write_into(root, arrays, out[slices]):
                    continue
                value = root(arrays)
                value = value.reshape(value.shape[:n_out]) if value.ndim > n_out else value
                if out is None:
                    if fresh and value.shape == sub_shape and value.dtype == dtype:
                        return value
                    if value.shape != sub_shape:
                        value = np.broadcast_to(value, sub_shape)
                    return np.array(value, dtype=dtype, order="C")
                out[slices] = value
        return out if out is not None else np.zeros(out_shape, dtype=dtype)

    plan = "; ".join([f"vectorized plan of {fn}", *notes])
    kernel = Kernel("numpy", run, out_shape, dtype, plan)
    if sides:
        kernel.narrow = any(min(s) < WINDOW_MIN_SIDE for s in sides)
    return kernel


def with_addend(inner: Kernel, fn, addend: Node, shapes, dtype, out_shape) -> Kernel:
    """``inner``'s result plus ``addend``: the kernel of a body ``addend + term`` (a bias added
    to a contraction, see :func:`~tadiff.index.compile.loops.root_addend`) from the kernel of
    ``term``. The addend is evaluated broadcast (``c[o]`` stays a vector) and added in one pass,
    into ``inner``'s result where that is a C-ordered array of the kernel's own, else into a
    copy of it (a strided window product's view).

    Example:
        >>> import numpy as np
        >>> from tadiff.index import define
        >>> f = define("y[i, j] = c[j] + sum[k](a[i, k] * b[k, j])")
        >>> term = define("y[i, j] = sum[k](a[i, k] * b[k, j])")
        >>> shapes = {"a": (2, 3), "b": (3, 4), "c": (4,)}
        >>> inner = lower_numpy(term, {"a": (2, 3), "b": (3, 4)}, np.float64)
        >>> k = with_addend(inner, f, f.body.args[0], shapes, np.float64, (2, 4))
        >>> k({"a": np.ones((2, 3)), "b": np.ones((3, 4)), "c": np.arange(4.0)})[0].tolist()
        [3.0, 4.0, 5.0, 6.0]
    """
    dtype = np.dtype(dtype)
    out_shape = tuple(out_shape)
    planner = _Planner(fn, fn._params(shapes), shapes, out_shape, dtype, addend)
    with np.errstate(all="ignore"):
        plan = planner.plan(addend)
    n_out = len(out_shape)

    def run(arrays: Arrays) -> np.ndarray:
        value = inner(arrays)
        with np.errstate(all="ignore"):
            extra = plan(arrays)
            extra = extra.reshape(extra.shape[:n_out]) if extra.ndim > n_out else extra
            own = (
                value.flags.c_contiguous
                and value.flags.writeable
                and value.shape == out_shape
                and value.dtype == dtype
                and not any(np.may_share_memory(value, a) for a in arrays.values())
            )
            if not own:
                # copied first, then added in place: NumPy's broadcast addition runs in short
                # strided pieces when reading a product's layout, slower than both passes
                value = np.array(np.broadcast_to(value, out_shape), dtype=dtype, order="C")
            return np.add(value, extra, out=value)

    kernel = Kernel("numpy", run, out_shape, dtype, f"{inner.source}; then {addend} added")
    kernel.narrow = inner.narrow
    return kernel


def _residue_classes(fn, out_shape: tuple[int, ...], limit: int = 16):
    """Split output indices by residue where the body divides them: ``p = 2*q + r``.

    A strided convolution's input gradient reads ``dy[p/2]`` under ``p % 2 == 0`` and sums
    from ``ceil((p - K + 1)/2)``; for each residue ``r`` of ``p`` those become affine in ``q``
    (the condition constant), so the gathers are strided views instead of index grids.
    Yields ``(mapping, output slices, sub-shape)``; one class with no mapping if nothing divides.
    """
    modulus = dict.fromkeys(fn.out_vars, 1)
    for node in walk(fn.body):
        exprs = list(index_exprs(node))
        mods = [c for c in node.conds if c.kind == "mod"] if isinstance(node, Where) else []
        for a in exprs:
            for v, c in a.items():
                if v in modulus:
                    modulus[v] = lcm(modulus[v], c.denominator)
        for cond in mods:
            for v, c in cond.expr.items():
                if v in modulus and c.denominator == 1:
                    modulus[v] = lcm(modulus[v], cond.modulus // gcd(int(c), cond.modulus))
    total = 1
    for d in modulus.values():
        total *= d
    if total == 1 or total > limit:
        yield {}, (), out_shape
        return
    split = [v for v in fn.out_vars if modulus[v] > 1]
    for residues in itertools.product(*(range(modulus[v]) for v in split)):
        r = dict(zip(split, residues, strict=True))
        mapping = {v: modulus[v] * Affine.variable(v) + r[v] for v in split}
        slices = tuple(
            slice(r[v], None, modulus[v]) if v in r else slice(None) for v in fn.out_vars
        )
        sub_shape = tuple(
            -(-(n - r[v]) // modulus[v]) if v in r else n
            for v, n in zip(fn.out_vars, out_shape, strict=True)
        )
        yield mapping, slices, sub_shape
