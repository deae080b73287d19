"""The schedule of a definition: a short program of stages, each one fused loop nest.

:func:`plan_program` turns a definition (a forward or a derivative) and concrete shapes into a
:class:`Program`, the one plan every backend follows:

1. **Reuse of the forward.** Given values already computed (the forward's output ``y``, saved
   by the engine), a subexpression equal to one of them is replaced by a read of it: the RBF
   kernel's gradient reads ``K[i, j]`` instead of recomputing ``exp(-sum[q](...))``.
2. **Factoring.** Factors that do not depend on a sum's variable move out of the sum
   (:func:`~tadiff.index.compile.rewrite.factor_sums`).
3. **Loop order.** Candidate orders of the root (:func:`~tadiff.index.compile.loops.root_orders`:
   output indices in order, the outermost sums moved inside after a prefix of them) are built
   as loop nests with every subexpression at the loop level of its own indices, and the
   cheapest by the cost estimate is kept.
4. **Temporaries.** A subexpression computed more often than it has distinct values (a value of
   ``i`` alone inside a window loop over ``(p, i)``) becomes a stage of its own, computed once
   per binding of its indices into a temporary array, when that array fits the memory budget
   (:func:`set_memory_budget`) and the estimate drops by a fifth.

Every rewritten stage is checked by the static bounds check; where a rewrite would read out of
bounds the stage keeps the body as written. The Numba backend emits each stage's loop nest as
planned; the NumPy and Triton backends evaluate each stage's definition with their own
vectorization (NumPy in chunks of outer indices, under the same memory budget).

Example:
    >>> import numpy as np
    >>> from tadiff.index import define
    >>> f = define("y[p] = sum[i=max(0, p-3):min(4, p+1)](sum[j](a[i, j]) * z[p])")
    >>> program = plan_program(f, {"a": (4, 5), "z": (7,)}, np.float64)
    >>> for stage in program.stages:
    ...     print(stage.fn)
    t1[i:4] = sum[j=0:a.shape[1]](a[i, j])
    y[p:7] = z[p] * sum[i=max(0, p - 3):min(4, p + 1)](t1[i])
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tadiff.errors import BoundsError, InputError
from tadiff.index import expr as ir
from tadiff.index import shapes as _shapes
from tadiff.index.compile.loops import (
    Nest,
    build_nest,
    build_scatter_nest,
    root_orders,
    scatter_orders,
)
from tadiff.index.compile.rewrite import (
    Known,
    accessed,
    factor_sums,
    replace_node,
    reuse_known,
    sum_swaps,
    window_offsets,
)
from tadiff.index.expr import Affine, Node, Sum, free_indices, index_exprs, is_param, walk

__all__ = [
    "Gradients",
    "Program",
    "Stage",
    "definition",
    "memory_budget",
    "plan_gradients",
    "plan_program",
    "set_memory_budget",
]


def _budget_from_environment() -> int:
    text = os.environ.get("TADIFF_MEMORY_BUDGET", str(64 * 2**20))
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"TADIFF_MEMORY_BUDGET={text!r}; expected a number of bytes") from None
    if value < 2**16:
        raise InputError(f"TADIFF_MEMORY_BUDGET={value}; expected at least 65536 bytes")
    return value


_BUDGET = [_budget_from_environment()]


def memory_budget() -> int:
    """Bytes a kernel may use for temporaries (stages' arrays, NumPy chunks): 64 MiB by
    default, or ``$TADIFF_MEMORY_BUDGET``."""
    return _BUDGET[0]


def set_memory_budget(nbytes: int) -> int:
    """Set the temporaries budget of kernels compiled from now on; returns the previous one.

    Args:
        nbytes: at least 65536.

    Example:
        >>> previous = set_memory_budget(2**24)
        >>> memory_budget(), set_memory_budget(previous) == 2**24
        (16777216, True)
    """
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 2**16:
        raise InputError(f"set_memory_budget({nbytes!r}): expected an int of at least 65536 bytes")
    previous, _BUDGET[0] = _BUDGET[0], nbytes
    return previous


@dataclass
class Stage:
    """One array of a program and the loop nest that computes it.

    Attributes:
        fn: its definition (a :class:`~tadiff.index.TensorFunction` with explicit output sizes;
            its arguments are the caller's arrays, saved values and earlier stages).
        out_shape: the array's shape.
        nest: the planned loop nest (order, placement, cost estimate).
        temporary: False for the last stage, whose array is the result.
    """

    fn: object
    out_shape: tuple[int, ...]
    nest: Nest
    temporary: bool


@dataclass
class Program:
    """The plan of one definition for fixed shapes (see the module docstring).

    Attributes:
        fn: the definition computed.
        stages: stages in order; the last one's array is the result.
        shapes: every array's shape (arguments, saved values, temporaries).
        dtype: the compute dtype.
        saved: names of saved values the program reads (e.g. the forward's output).
        notes: what the planner did, for :meth:`explain`.
        scatter: for a derivative, one stage computing it in scatter form
            (:func:`~tadiff.index.compile.loops.build_scatter_nest`) where that is cheaper: the
            loop backend runs it in place of ``stages``; NumPy and Triton evaluate ``stages``.
        windowed: where there is no ``scatter``, one stage computing it with its window sums
            counted from the window's start (:func:`_windowed_stage`) where that is cheaper:
            the loop backend runs it in place of ``stages``.
    """

    fn: object
    stages: list[Stage]
    shapes: dict[str, tuple[int, ...]]
    dtype: np.dtype
    saved: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    scatter: Stage | None = None
    windowed: Stage | None = None

    @property
    def alternative(self) -> Stage | None:
        """The one stage the loop backend runs in place of ``stages``: the scatter form, else
        the windowed one; None where there is neither."""
        return self.scatter if self.scatter is not None else self.windowed

    @property
    def loops(self) -> list[Stage]:
        """The stages the loop backend (Numba) runs: :attr:`alternative`, or ``stages``."""
        return [self.alternative] if self.alternative is not None else self.stages

    @property
    def ops(self) -> float:
        """Estimated arithmetic operations of the loop backend's stages (transcendentals
        weighted)."""
        return sum(s.nest.ops for s in self.loops)

    @property
    def cost(self) -> float:
        """Estimated operations, element reads and writes and loop entries of the loop
        backend's stages."""
        return sum(s.nest.cost for s in self.loops)

    @property
    def temp_bytes(self) -> int:
        return sum(math.prod(s.out_shape) * self.dtype.itemsize for s in self.stages if s.temporary)

    @property
    def io_bytes(self) -> int:
        """Bytes of the arrays read from the caller and of the result."""
        temps = {s.fn.out_name for s in self.stages if s.temporary}
        names = {a for s in self.stages for a in s.fn.args} - temps
        read = sum(math.prod(self.shapes[n]) for n in names)
        return (read + math.prod(self.stages[-1].out_shape)) * self.dtype.itemsize

    def explain(self, loops: bool = True) -> str:
        """The stages, loop orders, saved values read and the estimated cost, as text."""
        lines = [f"{self.fn}"]
        shapes = ", ".join(f"{k}{tuple(v)}" for k, v in self.shapes.items())
        lines.append(f"  for {shapes}, {self.dtype.name}")
        if self.saved:
            lines.append(f"  reads the saved forward value {', '.join(self.saved)}")
        for note in self.notes:
            lines.append(f"  {note}")
        for k, s in enumerate(self.stages, 1):
            role = "temporary" if s.temporary else "result"
            lines.append(f"  stage {k} ({role}): {s.fn}")
            self._explain_nest(s.nest, loops, lines)
        if self.scatter is not None:
            lines.append(
                f"  on Numba instead, in scatter form: the loops of {self.fn.parent[0].out_name}, "
                f"each iteration adding into {self.fn.out_name}"
            )
            self._explain_nest(self.scatter.nest, loops, lines)
        if self.windowed is not None:
            lines.append(
                "  on Numba instead, its window sums counted from the window's start: "
                f"{self.windowed.fn}"
            )
            self._explain_nest(self.windowed.nest, loops, lines)
        lines.append(
            f"  total: {_human(self.ops)} operations; memory: {_bytes(self.io_bytes)} "
            f"arguments and result, {_bytes(self.temp_bytes)} temporaries"
        )
        return "\n".join(lines)

    @staticmethod
    def _explain_nest(nest: Nest, loops: bool, lines: list[str]) -> None:
        order = ", ".join(nest.order) or "(scalar)"
        how = ""
        if nest.accumulate and not nest.scatter:
            start = "" if nest.addend is None else f" set to {nest.addend}, then"
            how = f"; output{start} accumulated inside the sums"
        lines.append(f"    loops {order}{how}")
        lines.append(
            f"    estimated {_human(nest.ops)} operations, {_human(nest.loads)} loads, "
            f"{_human(nest.stores)} stores, {_human(nest.overhead)} in loop entries"
        )
        if loops:
            lines += ["    | " + line for line in nest.text().splitlines()]


def _human(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


# -- planning -----------------------------------------------------------------------------------


def _size_args(body: Node) -> set[str]:
    """Arrays whose sizes ``body`` refers to (``x.shape[1]``)."""
    names = set()
    for n in walk(body):
        for a in index_exprs(n):
            names.update(v.split(".shape[")[0] for v in a.variables if is_param(v))
    return names


def definition(name, out_vars, out_shape, body, shapes, order_hint=()):
    """A TensorFunction ``name[out_vars] = body`` with explicit output sizes ``out_shape``;
    its arguments are the arrays ``body`` reads or takes sizes of (``order_hint`` first)."""
    from tadiff.index.function import TensorFunction

    used = accessed(body) | _size_args(body)
    args = tuple([a for a in order_hint if a in used] + sorted(used - set(order_hint)))
    return TensorFunction(
        out_name=name,
        out_vars=tuple(out_vars),
        out_ranges=tuple(((Affine.constant(0),), (Affine.constant(n - 1),)) for n in out_shape),
        args=args,
        arg_ranks={a: len(shapes[a]) for a in args},
        body=body,
    )


def _in_bounds(body, out_vars, out_shape, shapes) -> bool:
    params = {
        ir.size_param(name, d): n for name, shape in shapes.items() for d, n in enumerate(shape)
    }
    try:
        _shapes.check_bounds(body, tuple(out_vars), tuple(out_shape), params, shapes)
    except BoundsError:
        return False
    return True


def _best_nest(body, name, out_vars, out_shape, params) -> Nest:
    best = None
    sizes = {**params, **dict(zip(out_vars, out_shape, strict=True))}
    orders = root_orders(body, tuple(out_vars), interchange=sizes)
    # the natural order first: another order must be clearly cheaper to be taken
    for order in [orders[-1], *orders[:-1]]:
        nest = build_nest(body, name, tuple(out_vars), tuple(out_shape), order, params)
        if best is None or nest.cost < 0.9 * best.cost:
            best = nest
    return best


_MAX_TEMPORARIES = 8  # per stage: each is a planning round, tried only where it pays off

_COSTLY = ("exp", "log", "pow", "tanh", "sigmoid", "sin", "cos", "tan")


class _Planner:
    def __init__(self, shapes, params, itemsize, budget, taken):
        self.shapes = dict(shapes)
        self.params = dict(params)
        self.itemsize = itemsize
        self.budget = budget
        self.taken = set(taken)

    def fresh(self) -> str:
        name = ir.fresh_name("t1", self.taken)
        k = 1
        while name in self.taken:
            k += 1
            name = f"t{k}"
        self.taken.add(name)
        return name

    def stages(self, name, out_vars, out_shape, body, hint, depth=0) -> list[Stage]:
        nest = _best_nest(body, name, out_vars, out_shape, self.params)
        before: list[Stage] = []
        for _ in range(_MAX_TEMPORARIES if depth < 2 else 0):
            found = self._temporary(name, out_vars, out_shape, body, nest, hint, depth)
            if found is None:
                break
            body, nest, extra = found
            before += extra
        fn = definition(name, out_vars, out_shape, body, self.shapes, hint)
        return [*before, Stage(fn, tuple(out_shape), nest, temporary=depth > 0)]

    def _temporary(self, name, out_vars, out_shape, body, nest, hint, depth):
        """The best subexpression to compute into a temporary, with the new body and nest."""
        candidates = []
        for node, iters, box in nest.placed:
            # a sum, or an elementary function: worth an array of its own if recomputed
            costly = any(isinstance(n, Sum) for n in walk(node)) or node.op in _COSTLY
            if not costly:
                continue
            size = math.prod(max(0, hi - lo + 1) for lo, hi in box.values())
            if size == 0 or iters < 2 * size or size * self.itemsize > self.budget:
                continue
            candidates.append((iters / size, node, box))
        candidates.sort(key=lambda c: -c[0])
        base = nest.cost
        for _, node, box in candidates[:4]:
            variables = sorted(
                box, key=lambda v: (v not in out_vars, out_vars.index(v) if v in out_vars else 0, v)
            )
            lows = {v: box[v][0] for v in variables}
            tshape = tuple(box[v][1] - box[v][0] + 1 for v in variables)
            tbody = ir.substitute(
                node, {v: Affine.variable(v) + lo for v, lo in lows.items() if lo}
            )
            if not _in_bounds(tbody, variables, tshape, self.shapes):
                continue
            tname = self.fresh()
            self.shapes[tname] = tshape
            for d, n in enumerate(tshape):
                self.params[ir.size_param(tname, d)] = n
            read = ir.access(tname, tuple(Affine.variable(v) - lows[v] for v in variables))
            new_body = replace_node(body, node, read)
            if _in_bounds(new_body, out_vars, out_shape, self.shapes):
                sub = self.stages(tname, variables, tshape, tbody, hint, depth + 1)
                new_nest = _best_nest(new_body, name, out_vars, out_shape, self.params)
                if new_nest.cost + sum(s.nest.cost for s in sub) < 0.8 * base:
                    return new_body, new_nest, sub
            del self.shapes[tname]  # not taken: forget it
            for d in range(len(tshape)):
                del self.params[ir.size_param(tname, d)]
        return None


def plan_program(
    fn,
    shapes: Mapping[str, tuple[int, ...]],
    dtype: object = np.float64,
    known: Mapping[str, tuple[object, tuple[int, ...]]] | None = None,
    reserved: set[str] | frozenset[str] = frozenset(),
) -> Program:
    """The program computing ``fn`` for these shapes (see the module docstring).

    Args:
        fn: a TensorFunction (a definition or a derivative).
        shapes: argument name -> shape.
        dtype: compute dtype (sizes temporaries against the budget).
        known: values the caller can pass besides the arguments, as
            ``name -> (TensorFunction, shape)``: the array ``name`` holds that function's
            output for the same arguments (a forward's output for its derivatives).
        reserved: names the temporaries must not take (those of other programs run with it).

    Returns:
        A :class:`Program`; its stages' definitions read ``fn``'s arguments, the known values
        listed in :attr:`Program.saved` and earlier stages.

    Raises:
        ShapeError, BoundsError: shapes that do not fit the definition.
    """
    dtype = np.dtype(dtype)
    shapes = {n: tuple(int(d) for d in s) for n, s in shapes.items()}
    params = fn._params(shapes)
    out_shape = tuple(fn.output_shape(**shapes))
    _shapes.check_bounds(fn.body, fn.out_vars, out_shape, params, shapes)
    body = fn.body
    notes: list[str] = []
    all_shapes = dict(shapes)
    saved: tuple[str, ...] = ()
    if known:
        values = []
        for name, (source, shape) in known.items():
            values.append(Known(name, tuple(source.out_vars), source.body))
            all_shapes[name] = tuple(shape)
            for d, n in enumerate(shape):
                params[ir.size_param(name, d)] = n
        reused = reuse_known(body, values)
        if reused is not body and _in_bounds(reused, fn.out_vars, out_shape, all_shapes):
            body = reused
            saved = tuple(sorted(accessed(body) & set(known)))
    box = {v: (0, n - 1) for v, n in zip(fn.out_vars, out_shape, strict=True)}
    factored = factor_sums(body, box, params)
    if factored is not body and _in_bounds(factored, fn.out_vars, out_shape, all_shapes):
        body = factored
        notes.append(
            "factors independent of a sum's index moved out of the sum "
            "(and terms on fewer indices split off)"
        )
    taken = set(all_shapes) | {fn.out_name} | {v for n in walk(body) for v in free_indices(n)}
    taken |= set(reserved)
    best = None
    # the body as written (factored), and with one pair of nested sums exchanged: the order
    # in which a product of sums is contracted; the cheapest plan is kept
    variants = [body]
    for swapped in sum_swaps(body):
        swapped = factor_sums(swapped, box, params)
        if _in_bounds(swapped, fn.out_vars, out_shape, all_shapes):
            variants.append(swapped)
    for variant in variants:
        planner = _Planner(all_shapes, params, dtype.itemsize, memory_budget(), taken)
        found = planner.stages(fn.out_name, fn.out_vars, out_shape, variant, tuple(fn.args))
        cost = sum(s.nest.cost for s in found)
        if best is None or cost < 0.9 * best[0]:
            best = (cost, planner, found, variant is not body)
    cost, planner, stages, swapped = best
    if swapped:
        notes.append("two nested sums exchanged (a cheaper contraction order)")
    for s in stages[:-1]:
        notes.append(f"{s.fn.out_name} is computed once per binding of its indices")
    scatter = _scatter_stage(fn, shapes, params, out_shape)
    if scatter is not None and scatter.nest.cost >= 0.9 * cost:
        scatter = None
    windowed = None
    if len(stages) == 1 and scatter is None:
        # where a scatter form exists (an unpadded convolution's input gradient) it is kept:
        # measured, the windowed loops of such gradients ran up to 2x slower than it (float32,
        # 8 x 32 x 28 x 28, 3 x 3), though the estimate had them cheaper
        windowed = _windowed_stage(stages[0], params, taken, all_shapes)
        if windowed is not None and windowed.nest.cost >= 0.9 * cost:
            windowed = None
    return Program(fn, stages, planner.shapes, dtype, saved, notes, scatter, windowed)


def _windowed_stage(stage: Stage, params, taken, shapes) -> Stage | None:
    """The stage with its window sums counted from the window's start
    (:func:`~tadiff.index.compile.rewrite.window_offsets`), in its cheapest loop order; None
    where it has no window sum. Its offsets can run outside the output index they slide with
    (an input gradient's innermost loop along the row instead of over the window); the offsets
    no longer index arguments plainly, which the NumPy lowering's BLAS plans need, so only the
    loop backend runs it."""
    fn = stage.fn
    shifted = window_offsets(fn.body, set(taken) | set(shapes))
    if shifted is fn.body or not _in_bounds(shifted, fn.out_vars, stage.out_shape, shapes):
        return None
    nest = _best_nest(shifted, fn.out_name, fn.out_vars, stage.out_shape, params)
    shifted_fn = definition(fn.out_name, fn.out_vars, stage.out_shape, shifted, shapes, fn.args)
    return Stage(shifted_fn, stage.out_shape, nest, temporary=False)


def _scatter_stage(fn, shapes, params, out_shape) -> Stage | None:
    """The derivative ``fn`` computed in scatter form, in its cheapest loop order (see
    :func:`~tadiff.index.compile.loops.build_scatter_nest`), or None where ``fn`` is no
    derivative or no order runs in parallel."""
    from tadiff.index.derive import occurrences, output_ranges

    if fn.parent is None:
        return None
    forward, wrt = fn.parent
    grad = forward.grad_name
    terms = occurrences(forward, wrt)
    if grad not in shapes or not terms:
        return None
    fwd_shapes = {a: shapes[a] for a in forward.args}
    try:  # every point of the forward's iteration space reads in bounds (as the forward does)
        _shapes.check_bounds(forward.body, forward.out_vars, shapes[grad], params, fwd_shapes)
    except BoundsError:
        return None
    ranges = dict(zip(forward.out_vars, output_ranges(forward), strict=True))
    ranges.update({var: (lower, upper) for var, lower, upper in terms[0].sums})
    orders = scatter_orders(terms, forward.out_vars, ranges, params)
    if not orders:  # terms in different sums, or no loop the threads can split
        return None
    nests = [build_scatter_nest(terms, fn.out_name, out_shape, ranges, o, params) for o in orders]
    return Stage(fn, tuple(out_shape), min(nests, key=lambda n: n.cost), temporary=False)


# -- the derivatives of one op, fused where they share loops ---------------------------------------


@dataclass
class Gradients:
    """The programs of several derivatives of one function, with the stages that run as one
    loop nest because they share their outer loops.

    Attributes:
        programs: argument name -> the program of the derivative with respect to it.
        fused: groups of ``(argument, stage index)`` with the nest computing them together.
    """

    programs: dict[str, Program]
    fused: list[tuple[list[tuple[str, int]], Nest]]

    def explain(self) -> str:
        lines = []
        for members, nest in self.fused:
            names = ", ".join(self.programs[w].stages[k].fn.out_name for w, k in members)
            apart = sum(self.programs[w].stages[k].nest.cost for w, k in members)
            lines.append(f"fused: {names} in one nest (loops {', '.join(nest.order)})")
            lines.append(
                f"  estimated {_human(nest.ops)} operations, {_human(nest.loads)} loads, "
                f"{_human(nest.stores)} stores"
                + (f" ({nest.cost / apart:.0%} of the stages apart)" if apart else "")
            )
            lines += ["  | " + line for line in nest.text().splitlines()]
        return "\n".join(lines)


def plan_gradients(
    fn,
    wrts: tuple[str, ...],
    shapes: Mapping[str, tuple[int, ...]],
    dtype: object = np.float64,
    known: Mapping[str, tuple[object, tuple[int, ...]]] | None = None,
) -> Gradients:
    """The programs of ``fn``'s derivatives with respect to ``wrts`` (each reading ``known``),
    and the groups of their stages that share outer loops, planned as one nest each where the
    estimate drops by a sixth: the RBF kernel sum's ``da``, ``db`` and ``dv`` all need each
    pair's exponential, so one pass over the pairs computes all three (``da`` row by row,
    ``db`` and ``dv`` summed over the rows into a copy per thread) instead of three passes.

    Only stages that read no temporary are fused (they can run first, in any order), and none of
    a derivative planned in scatter form; the nests are for the loop backends (Numba), the
    others run the programs as they are.
    """
    dtype = np.dtype(dtype)
    reserved: set[str] = set()
    programs = {}
    for name in wrts:
        program = plan_program(fn.grad(name), shapes, dtype, known, reserved)
        reserved |= {st.fn.out_name for st in program.stages}
        programs[name] = program
    temps = {st.fn.out_name for p in programs.values() for st in p.stages[:-1]}
    candidates = [  # a derivative in scatter form runs on its own (the forward's loops)
        (w, k)
        for w, p in programs.items()
        for k, st in enumerate(p.stages)
        if not set(st.fn.args) & temps and st.fn.out_vars and p.scatter is None
    ]
    fused: list[tuple[list[tuple[str, int]], Nest]] = []
    used: set[tuple[str, int]] = set()
    for a in candidates:
        if a in used:
            continue
        group: list[tuple[str, int]] = [a]
        chosen: list | None = None  # the group's parts and nest so far
        while True:  # grow the group by the stage that gains most, while one gains
            best = None
            for b in candidates:
                if b in used or b in group:
                    continue
                found = _fuse(programs, group, b, chosen)
                if found is not None and (best is None or found[1].cost < best[1][1].cost):
                    best = (b, found)
            if best is None:
                break
            group.append(best[0])
            chosen = best[1]
        if chosen is None:
            continue
        used.update(group)
        fused.append((group, chosen[1]))
    return Gradients(programs, fused)


def _copies_fit(parts, private: tuple[str, ...], dtype) -> bool:
    """Whether the runner will make a copy of the private outputs per thread (as many as
    ``td.get_num_threads()``, at least two): see ``numba_backend.private_copies``."""
    from tadiff.index.compile.numba_backend import private_copies
    from tadiff.parallel import get_num_threads

    nbytes = sum(math.prod(p.out_shape) for p in parts if p.out_name in private)
    threads = max(2, get_num_threads())
    return private_copies(threads, nbytes * np.dtype(dtype).itemsize) == threads


def _fuse(programs: Mapping[str, Program], group: list, new: tuple[str, int], chosen):
    """The cheapest nest computing the stages of ``group`` and stage ``new`` together, as
    ``(parts, nest)``, if it beats computing ``new`` apart by a sixth of the total. ``chosen``
    is the group's own ``(parts, nest)`` when it is already fused: its loop orders stay, only
    the new stage's are tried (the first pair tries every pair of orders)."""
    from tadiff.index.compile.loops import Part, build_fused_nest, loop_orders, shared_prefix

    members = [*group, new]
    stages = [programs[w].stages[k] for w, k in members]
    params: dict[str, int] = {}
    for (w, _), st in zip(members, stages, strict=True):
        params.update(st.fn._params({a: programs[w].shapes[a] for a in st.fn.args}))

    def parts_of(st):
        return [
            Part(st.fn.body, st.fn.out_name, st.fn.out_vars, st.out_shape, o)
            for o in loop_orders(st.fn.body, st.fn.out_vars)
        ]

    if chosen is None:
        apart = sum(st.nest.cost for st in stages)
        options = [parts_of(st) for st in stages]
    else:
        apart = chosen[1].cost + stages[-1].nest.cost
        options = [[p] for p in chosen[0]] + [parts_of(stages[-1])]
    best = None
    for parts in itertools.product(*options):
        if shared_prefix(parts, params) < 2:  # one shared output loop: nothing but the row to share
            continue
        nest = build_fused_nest(parts, params)
        if nest.private and not _copies_fit(parts, nest.private, programs[new[0]].dtype):
            continue  # too few copies: the threads would share one chunk, the nest run on one
        if nest.cost < apart * 5 / 6 and (best is None or nest.cost < best[1].cost):
            best = (list(parts), nest)
    return best
