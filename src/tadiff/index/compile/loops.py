"""Loop nests: where each subexpression of a definition is computed, for one loop order.

A definition ``out[α] = body`` becomes a tree of loops and ``if`` blocks holding statements in
single-assignment form (:class:`Let`, accumulators, stores). :class:`NestBuilder` places every
subexpression at the outermost block where it can be computed:

* **by its free indices**: a value is computed in the block of the innermost loop that binds
  one of its indices, so ``exp(-sum[q](...))`` with indices ``(i, j)`` is computed once per
  ``(i, j)`` even where it is used inside a loop over ``q``; constants go to the top;
* **an inner sum** becomes an accumulator and a loop in that block — it is computed once per
  binding of its own free indices, not once per enclosing iteration;
* **safely**: a value that reads an argument is never moved out of an ``if`` (a ``where``
  branch, whose accesses may be valid only where its condition holds) or out of a loop that
  may run zero times (it would read where the definition never reads, past an edge).

The root may also be scheduled with output indices *inside* the outermost sums: with the order
``(i, j, q)`` the gradient ``da[i, q] = sum[j](w(i, j) * (a[i, q] - b[j, q]))`` computes
``w(i, j)`` once per pair and adds ``w * (a[i, :] - b[j, :])`` into the output row (the
pattern of KeOps), instead of recomputing ``w`` for every ``q``.

The builder also estimates the cost: every statement is counted once per iteration of its
block, with loop trip counts taken at the midpoint of the enclosing ranges. The Numba emitter
prints the tree as it is (:mod:`~tadiff.index.compile.numba_backend`); the scheduler
(:mod:`~tadiff.index.compile.schedule`) compares orders by this cost.

Example:
    >>> from tadiff.index import define
    >>> f = define("y[i, j] = x[i] * z[j]")
    >>> sizes = {"x.shape[0]": 3, "z.shape[0]": 4}
    >>> nest = build_nest(f.body, "y", ("i", "j"), (3, 4), ("i", "j"), sizes)
    >>> print(nest.text())
    for i in 0..y.shape[0] - 1 (parallel):
      t1 = load x[i]
      for j in 0..y.shape[1] - 1:
        t2 = load z[j]
        t3 = mul(t1, t2)
        y[i, j] = t3
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tadiff.errors import InputError
from tadiff.index import expr as ir
from tadiff.index.compile.rewrite import (
    has_access,
    interval,
    product_factors,
    provably_nonempty,
    sum_interval,
)
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
    free_indices,
    size_param,
)
from tadiff.index.printer import affine_text

__all__ = [
    "AddTo",
    "Assign",
    "If",
    "Init",
    "Let",
    "Loop",
    "Nest",
    "NestBuilder",
    "Part",
    "Store",
    "build_fused_nest",
    "build_nest",
    "build_scatter_nest",
    "defined_names",
    "loop_orders",
    "op_cost",
    "root_addend",
    "scatter_orders",
    "shared_prefix",
    "strip_mine",
]


# -- the tree -------------------------------------------------------------------------------------


@dataclass
class Let:
    """``name = kind(args)``: ``const`` (payload: float), ``index`` (payload: Affine),
    ``load`` (payload: (array, indices)) or an operation of the IR (``add``, ``exp``, ...)."""

    name: str
    kind: str
    payload: object
    args: tuple[str, ...] = ()


@dataclass
class Init:
    """``name = 0``: an accumulator."""

    name: str


@dataclass
class AddTo:
    """``name += value``."""

    name: str
    value: str


@dataclass
class Assign:
    """``name = value`` (the result of a ``where`` branch)."""

    name: str
    value: str


@dataclass
class Store:
    """``array[indices] = value`` (``+=`` when ``accumulate``)."""

    array: str
    indices: tuple[Affine, ...]
    value: str
    accumulate: bool = False


@dataclass
class Loop:
    """``for var in max(ceil(lower)) .. min(floor(upper))``, ``parallel`` for the outermost
    output loop; ``trip`` is the estimated iteration count.

    A loop split into *phases* (:func:`strip_mine`) runs its range in strips of ``width``
    values: each phase is a loop over the strip, and the values a later phase uses from an
    earlier one (``carried``) pass through a buffer of ``width`` elements.

    A parallel loop with ``private`` arrays sums over its variable into them: its range is cut
    into one contiguous chunk per thread, each chunk adds into its own copy of those arrays, and
    the copies are added up after the loop (no two threads write the same element).
    """

    var: str
    lower: tuple[Affine, ...]
    upper: tuple[Affine, ...]
    body: list = field(default_factory=list)
    parallel: bool = False
    trip: float = 0.0
    phases: list | None = None
    carried: tuple[str, ...] = ()
    width: int = 0
    private: tuple[str, ...] = ()


@dataclass
class If:
    """``if all(conds): then else: other``."""

    conds: tuple[Cond, ...]
    then: list = field(default_factory=list)
    other: list = field(default_factory=list)


# -- cost ---------------------------------------------------------------------------------------

_TRANSCENDENTAL = {"exp", "log", "sin", "cos", "tan", "tanh", "sigmoid"}


def op_cost(kind: str, payload: object = None) -> float:
    """Estimated cost of one statement, in units of a float add (a load counts 1)."""
    if kind in ("const", "index"):
        return 0.0
    if kind in _TRANSCENDENTAL:
        return 16.0
    if kind == "pow":
        return 20.0
    if kind == "powi":
        n = abs(int(payload))
        return max(1.0, n - 1.0) + (4.0 if int(payload) < 0 else 0.0)
    if kind in ("div", "sqrt"):
        return 4.0
    return 1.0


@dataclass
class Nest:
    """A loop nest for one array and its estimated cost.

    Attributes:
        body: the statements and blocks of the function body.
        out_name: the array it writes.
        accumulate: whether it adds into a zero-filled output (output loops inside sums).
        ops: estimated arithmetic operations (transcendentals weighted, see :func:`op_cost`).
        loads, stores: estimated element reads and writes.
        order: the loop order of the root, outermost first.
        placed: per placed subexpression ``(node, iterations, {index: (lo, hi)})``.
        peak: the most iterations of one block (what a vectorized evaluation materializes).
        zero_fill: whether the output must be zero-filled before the nest runs (it
            accumulates from zero, or a delta leaves most of it zero).
        private: the outputs summed over the parallel loop, one copy per thread (see
            :class:`Loop`).
        overhead: estimated cost of entering loops (bounds, set-up, the exit branch): what
            makes a short inner loop run many times dearer than one long loop.
        scatter: whether the nest runs over the forward's iteration space and adds into the
            derivative's elements (:func:`build_scatter_nest`).
        addend: what the output starts from before it accumulates inside the sums, where the
            body adds it to them (:func:`root_addend`); None: it starts from zero.
    """

    body: list
    out_name: str
    accumulate: bool
    ops: float
    loads: float
    stores: float
    order: tuple[str, ...]
    placed: list
    peak: float = 1.0
    zero_fill: bool = False
    private: tuple[str, ...] = ()
    overhead: float = 0.0
    scatter: bool = False
    addend: Node | None = None

    @property
    def cost(self) -> float:
        """Operations, element reads and writes, and loop entries (what orders are compared
        by)."""
        return self.ops + self.loads + self.stores + self.overhead

    def text(self) -> str:
        """The nest as indented pseudo-code."""
        lines: list[str] = []
        _text(self.body, "", lines)
        return "\n".join(lines)


def _bounds_text(bounds: tuple[Affine, ...], lower: bool) -> str:
    parts = [affine_text(b) for b in bounds]
    if len(parts) == 1:
        return parts[0]
    return ("max(" if lower else "min(") + ", ".join(parts) + ")"


def _cond_text(c: Cond) -> str:
    e = affine_text(c.expr)
    if c.kind == "mod":
        return f"{e} % {c.modulus} == 0"
    return f"{e} {({'ge': '>=', 'eq': '==', 'ne': '!='})[c.kind]} 0"


def _text(block: list, indent: str, lines: list[str]) -> None:
    for s in block:
        if isinstance(s, Loop):
            par = " (parallel)" if s.parallel else ""
            if s.private:
                par = f" (parallel; a copy of {', '.join(s.private)} per thread, added up after)"
            head = f"{indent}for {s.var} in {_bounds_text(s.lower, True)}.."
            head += f"{_bounds_text(s.upper, False)}{par}"
            if s.phases is None:
                lines.append(head + ":")
                _text(s.body, indent + "  ", lines)
                continue
            carried = ", ".join(s.carried)
            lines.append(f"{head}, in strips of {s.width} ({carried} carried between phases):")
            for k, phase in enumerate(s.phases, 1):
                lines.append(f"{indent}  phase {k}:")
                _text(phase, indent + "    ", lines)
        elif isinstance(s, If):
            lines.append(f"{indent}if {' and '.join(_cond_text(c) for c in s.conds)}:")
            _text(s.then, indent + "  ", lines)
            if s.other:
                lines.append(f"{indent}else:")
                _text(s.other, indent + "  ", lines)
        elif isinstance(s, Let):
            if s.kind == "const":
                lines.append(f"{indent}{s.name} = {s.payload!r}")
            elif s.kind == "index":
                lines.append(f"{indent}{s.name} = {affine_text(s.payload)}")
            elif s.kind == "load":
                name, idx = s.payload
                lines.append(f"{indent}{s.name} = load {name}[{', '.join(map(affine_text, idx))}]")
            else:
                lines.append(f"{indent}{s.name} = {s.kind}({', '.join(s.args)})")
        elif isinstance(s, Init):
            lines.append(f"{indent}{s.name} = 0")
        elif isinstance(s, AddTo):
            lines.append(f"{indent}{s.name} += {s.value}")
        elif isinstance(s, Assign):
            lines.append(f"{indent}{s.name} = {s.value}")
        elif isinstance(s, Store):
            op = "+=" if s.accumulate else "="
            idx = ", ".join(affine_text(a) for a in s.indices)
            lines.append(f"{indent}{s.array}[{idx}] {op} {s.value}")


_LOOP_ENTRY = 8.0
"""Cost of entering a loop, in units of a float add: its set-up and the mispredicted branch at
its exit. Measured on the depthwise convolution's input gradient (a gather of 3 or 4 terms per
element, whose bounds divide by the stride), the loop entries cost about as much as the terms."""


_UNROLLED = 16
"""A loop with constant bounds and at most this many iterations (``sum[k=0:2]``) is unrolled by
the compiler: no loop is left to enter."""


def _entry_cost(lower: tuple[Affine, ...], upper: tuple[Affine, ...]) -> float:
    """Cost of one entry into a loop with these bounds: :data:`_LOOP_ENTRY`, plus one ``max`` or
    ``min`` per bound beyond the first on each side and a rounding division per fractional one;
    nothing for a short loop of constant bounds (:data:`_UNROLLED`)."""
    bounds = (*lower, *upper)
    if not any(b.variables for b in bounds):
        first = max(math.ceil(b.const) for b in lower)
        if min(math.floor(b.const) for b in upper) - first + 1 <= _UNROLLED:
            return 0.0
    fractional = sum(1 for b in bounds if not b.is_integral)
    return _LOOP_ENTRY + 2.0 * (len(bounds) - 2) + 2.0 * fractional


# -- the builder ----------------------------------------------------------------------------------


class _Frame:
    """An open block: statements go in at ``ins`` (before the open child block, if any)."""

    __slots__ = ("block", "cache", "hoist_ok", "ins", "iters", "var")

    def __init__(self, block: list, iters: float, hoist_ok: bool, var: str | None = None):
        self.var = var  # the loop variable, for a loop's block
        self.block = block
        self.ins = len(block)
        self.iters = iters
        self.hoist_ok = hoist_ok
        self.cache: dict = {}

    def insert(self, stmt: object) -> None:
        self.block.insert(self.ins, stmt)
        self.ins += 1

    def open(self, child: object) -> None:
        """Put a block at the insertion point; statements added later go before it."""
        self.block.insert(self.ins, child)

    def close(self, child: object) -> None:
        """The child block is complete: statements added later go after it."""
        for k, s in enumerate(self.block):
            if s is child:
                self.ins = k + 1
                return


class NestBuilder:
    """Places the subexpressions of a body into loop nests (see the module docstring).

    Args:
        params: size parameters (``x.shape[1]``) and the output sizes (``y.shape[0]``).
    """

    def __init__(self, params: Mapping[str, int]):
        self.params = dict(params)
        self.root: list = []
        self.chain = [_Frame(self.root, 1.0, True)]
        self.env: dict[str, str] = {}  # IR index -> loop variable
        self.level: dict[str, int] = {}  # IR index -> chain position of its loop
        self.box: dict[str, tuple[int, int]] = {}  # loop variable -> integer range
        self.mid: dict[str, float] = {}  # loop variable -> midpoint (for trip estimates)
        self.names = 0
        self.ops = self.loads = self.stores = self.overhead = 0.0
        self.peak = 1.0  # most iterations of one block: the size a vectorized evaluation needs
        self.placed: list = []

    # -- names and translation ------------------------------------------------------------------
    def fresh(self, prefix: str = "t") -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def translate(self, e: Affine) -> Affine:
        mapping = {v: Affine.variable(self.env[v]) for v in e.variables if v in self.env}
        return e.substitute(mapping) if mapping else e

    def _charge(self, frame: _Frame, kind: str, payload: object = None) -> None:
        if kind == "load":
            self.loads += frame.iters
        elif kind == "store":
            self.stores += frame.iters
        else:
            self.ops += op_cost(kind, payload) * frame.iters

    # -- blocks ---------------------------------------------------------------------------------
    def _trip(self, lower: tuple[Affine, ...], upper: tuple[Affine, ...]) -> tuple[float, int, int]:
        mid = {**self.mid, **self.params}
        lo = max(math.ceil(_at(b, mid)) for b in lower)
        hi = min(math.floor(_at(b, mid)) for b in upper)
        box_lo, box_hi = sum_interval(lower, upper, self.box, self.params)
        return max(0.0, hi - lo + 1.0), box_lo, box_hi

    def open_loop(
        self,
        var: str,
        lower: tuple[Affine, ...],
        upper: tuple[Affine, ...],
        at: int,
        parallel=False,
    ) -> tuple[Loop, list[_Frame], dict, dict]:
        """Open a loop over IR index ``var`` as a child of chain position ``at``; returns what
        :meth:`close_loop` needs to restore."""
        lower = tuple(self.translate(b) for b in lower)
        upper = tuple(self.translate(b) for b in upper)
        name = self.fresh(f"{var}_") if var in self.env or var in self.box else var
        while name in self.box:
            name = self.fresh(f"{var}_")
        trip, lo, hi = self._trip(lower, upper)
        loop = Loop(name, lower, upper, parallel=parallel, trip=trip)
        parent = self.chain[at]
        parent.open(loop)
        self.overhead += parent.iters * _entry_cost(lower, upper)
        nonempty = provably_nonempty(lower, upper, self.box, self.params)
        saved = (self.chain, dict(self.env), dict(self.level))
        self.chain = [*self.chain[: at + 1], _Frame(loop.body, parent.iters * trip, nonempty, name)]
        self.peak = max(self.peak, parent.iters * trip)
        self.env[var] = name
        self.level[var] = len(self.chain) - 1
        self.box[name] = (lo, hi)
        self.mid[name] = (lo + hi) / 2 if hi >= lo else float(lo)
        return loop, *saved

    def close_loop(self, loop: Loop, chain, env, level) -> None:
        self.chain, self.env, self.level = chain, env, level
        for frame in self.chain:
            if any(s is loop for s in frame.block):
                frame.close(loop)
                return

    # -- placement ------------------------------------------------------------------------------
    def _position(self, node: Node) -> int:
        """The outermost chain position where ``node`` may be computed."""
        k = max((self.level.get(v, 0) for v in free_indices(node)), default=0)
        if has_access(node):
            for j in range(len(self.chain) - 1, k, -1):
                if not self.chain[j].hoist_ok:
                    return j
        return k

    def value(self, node: Node) -> str:
        """The name holding ``node``'s value, emitting its statements where they belong."""
        k = self._position(node)
        frame = self.chain[k]
        key = (id(node), tuple(self.env.get(v, v) for v in sorted(free_indices(node))))
        hit = frame.cache.get(key)
        if hit is not None:
            return hit[1]
        name = self._emit(node, k)
        frame.cache[key] = (node, name)  # the node is kept so its id stays unique
        if isinstance(node, Sum | Op):
            box = {v: self.box.get(self.env.get(v, ""), (0, 0)) for v in free_indices(node)}
            self.placed.append((node, self.chain[k].iters, box))
        return name

    def _let(self, k: int, kind: str, payload: object = None, args: tuple[str, ...] = ()) -> str:
        name = self.fresh()
        frame = self.chain[k]
        frame.insert(Let(name, kind, payload, args))
        self._charge(frame, kind, payload)
        if kind == "load":
            self.loads += self._stride_penalty(k, payload[1]) * frame.iters
        return name

    def _stride_penalty(self, k: int, indices: tuple[Affine, ...]) -> float:
        """Extra loads charged for an access made at chain position ``k`` that does not step
        through memory one element at a time, forwards, along the innermost loop around it: 1 for a
        stride of 2 along the last axis (no SIMD load, but every element of each cache line is
        used), else 2 (a new cache line per step as well). Orders that read along rows win; a
        stride-2 loop (a strided convolution's gradient) is still preferred to a short one."""
        loop = next((f for f in reversed(self.chain[: k + 1]) if f.var is not None), None)
        if loop is None or not indices:
            return 0.0
        inner = [d for d, e in enumerate(indices) if e.coeff(loop.var) != 0]
        if not inner:
            return 0.0
        if inner == [len(indices) - 1]:
            step = indices[-1].coeff(loop.var)
            if step == 1:
                return 0.0
            if abs(step) == 2:
                return 1.0
        return 2.0

    def _emit(self, node: Node, k: int) -> str:
        if isinstance(node, Const):
            return self._let(k, "const", float(node.value))
        if isinstance(node, Index):
            return self._let(k, "index", self.translate(node.expr))
        if isinstance(node, Access):
            indices = tuple(self.translate(e) for e in node.indices)
            return self._let(k, "load", (node.name, indices))
        if isinstance(node, Op):
            if node.op in ("mul", "neg"):
                regrouped = self._regroup(node)
                if regrouped is not node:
                    return self.value(regrouped)
            if node.op == "pow" and isinstance(node.args[1], Const):
                exponent = node.args[1].value
                if exponent == int(exponent) and abs(exponent) <= 8:
                    return self._let(k, "powi", int(exponent), (self.value(node.args[0]),))
                if exponent == 0.5:
                    return self._let(k, "sqrt", None, (self.value(node.args[0]),))
            args = tuple(self.value(a) for a in node.args)
            return self._let(k, node.op, None, args)
        if isinstance(node, Where):
            return self._where(node, k)
        if isinstance(node, Sum):
            return self._sum(node, k)
        raise TypeError(f"not an index-notation node: {node!r}")  # pragma: no cover

    def _regroup(self, node: Node) -> Node:
        """A product with its factors ordered by the loop level they are computed at, so that
        each partial product is computed once at its own level (``-2 * dy[i]`` outside the
        loops over ``j`` and ``q``, not multiplied in at every ``(i, j, q)``)."""
        scale, factors = product_factors(node)
        if len(factors) < 2:
            return node
        ranked = sorted(factors, key=self._position)
        out: Node = ir.const(scale)
        for f in ranked:
            out = ir.mul(out, f)
        return out

    def _sum(self, node: Sum, k: int) -> str:
        acc = self.fresh("acc")
        self.chain[k].insert(Init(acc))
        loop, *saved = self.open_loop(node.var, node.lower, node.upper, k)
        inner = self.chain[-1]
        body = self.value(node.body)
        inner.insert(AddTo(acc, body))
        self.ops += inner.iters
        self.close_loop(loop, *saved)
        return acc

    def _where(self, node: Where, k: int) -> str:
        result = self.fresh()
        conds = tuple(Cond(c.kind, self.translate(c.expr), c.modulus) for c in node.conds)
        block = If(conds)
        parent = self.chain[k]
        parent.open(block)
        self.ops += len(conds) * parent.iters
        saved = (self.chain, dict(self.env), dict(self.level))
        share = self._selectivity(conds)
        for branch, weight in ((block.then, share), (block.other, 1.0 - share)):
            self.chain = [*saved[0][: k + 1], _Frame(branch, parent.iters * weight, False)]
            value = self.value(node.then if branch is block.then else node.other)
            self.chain[-1].insert(Assign(result, value))
        self.chain, self.env, self.level = saved
        parent.close(block)
        return result

    def _selectivity(self, conds: tuple[Cond, ...]) -> float:
        share = 1.0
        for c in conds:
            if c.kind == "eq":
                lo, hi = interval(c.expr, self.box, self.params)
                share /= max(1.0, hi - lo + 1.0)
            elif c.kind == "mod":
                share /= c.modulus
        return share

    def add_where(self, conds: tuple[Cond, ...], array: str, indices, node: Node) -> None:
        """``array[indices] += node`` where every condition holds, in the innermost block; the
        value and the store stay inside the ``if`` (they may be valid only where it holds)."""
        if not conds:
            self.store(array, indices, self.value(node), accumulate=True)
            return
        conds = tuple(Cond(c.kind, self.translate(c.expr), c.modulus) for c in conds)
        block = If(conds)
        parent = self.chain[-1]
        parent.open(block)
        self.ops += len(conds) * parent.iters
        saved = (self.chain, dict(self.env), dict(self.level))
        self.chain = [*saved[0], _Frame(block.then, parent.iters * self._selectivity(conds), False)]
        self.store(array, indices, self.value(node), accumulate=True)
        self.chain, self.env, self.level = saved
        parent.close(block)

    def store(self, array: str, indices: tuple[Affine, ...], value: str, accumulate: bool) -> None:
        frame = self.chain[-1]
        indices = tuple(self.translate(e) for e in indices)
        frame.insert(Store(array, indices, value, accumulate))
        self._charge(frame, "store")
        self.stores += self._stride_penalty(len(self.chain) - 1, indices) * frame.iters
        if accumulate:
            self.loads += frame.iters


def _at(e: Affine, values: Mapping[str, float]) -> float:
    return float(e.const) + sum(float(c) * values[v] for v, c in e.items())


def _root_chain(body: Node) -> tuple[float, list[Node], list[Sum], Node] | None:
    """``body`` as ``scale * prod(rest) * sum[s1](sum[s2](... inner))``, or None when it is not
    a product with exactly one sum factor."""
    scale, factors = product_factors(body)
    sums = [f for f in factors if isinstance(f, Sum)]
    if len(sums) != 1:
        return None
    rest = [f for f in factors if f is not sums[0]]
    chain = [sums[0]]
    while isinstance(chain[-1].body, Sum):
        chain.append(chain[-1].body)
    return scale, rest, chain, chain[-1].body


def _signed_terms(node: Node, negative: bool, out: list[tuple[bool, Node]]) -> None:
    if isinstance(node, Op) and node.op in ("add", "sub"):
        _signed_terms(node.args[0], negative, out)
        _signed_terms(node.args[1], negative != (node.op == "sub"), out)
    else:
        out.append((negative, node))


def root_addend(body: Node) -> tuple[Node, Node] | None:
    """``body`` as ``addend + term``, where ``term`` is a product with one sum factor (see
    :func:`_root_chain`) and ``addend`` is every other term of the body's sum: a bias added to
    a contraction, ``c[o] + sum[k](x[b, k] * w[o, k])``. None when ``body`` is not a sum of
    terms, or none of its terms has a sum factor.

    An order that accumulates the output inside the term's sums (:func:`root_orders`) then
    starts each output element from the addend instead of from zero.

    Example:
        >>> from tadiff.index import define
        >>> addend, term = root_addend(define("y[o] = c[o] - sum[k](w[o, k])").body)
        >>> str(addend), str(term)
        ('c[o]', '-sum[k=0:w.shape[1]](w[o, k])')
    """
    terms: list[tuple[bool, Node]] = []
    _signed_terms(body, False, terms)
    if len(terms) < 2:
        return None
    for k, (negative, node) in enumerate(terms):
        if _root_chain(node) is None:
            continue
        rest = terms[:k] + terms[k + 1 :]
        if rest[0][0]:  # the addend's first term keeps its sign
            rest[0] = (False, ir.neg(rest[0][1]))
        return ir.associate(rest, ir.add, ir.sub), ir.neg(node) if negative else node
    return None


def _accumulated(body: Node) -> tuple[Node | None, tuple] | None:
    """The addend (None if there is none) and :func:`_root_chain` of the term whose sums an
    accumulating order loops over; None when the body has no such term."""
    chain = _root_chain(body)
    if chain is not None:
        return None, chain
    split = root_addend(body)
    if split is None:
        return None
    return split[0], _root_chain(split[1])


def root_orders(
    body: Node, out_vars: tuple[str, ...], interchange: Mapping[str, int] | None = None
) -> list[tuple[str, ...]]:
    """Candidate loop orders of the root: the output indices in order, with the outermost sums
    of the body (or of its term with a sum, see :func:`root_addend`) moved inside after each
    prefix of them (the last one is the natural order).

    A sum whose bounds use a later output index goes before it only with ``interchange`` (the
    sizes: parameters and output sizes by name), and only where each bound uses one later
    output index, with coefficient ±1, and the index keeps a long range
    (:func:`_interchangeable`): :func:`build_nest` then runs the sum over its bounds' range for
    every value of that index and bounds the index by the sum instead (``p=max(0, 1 - i)`` of
    a zero-padded convolution becomes ``p`` over ``0..K-1`` and ``i`` from ``max(0, 1 - p)``),
    so that the innermost loop runs along the output row."""
    natural = [tuple(out_vars)]
    found = _accumulated(body)
    if found is None or not out_vars:
        return natural
    chain = found[1][2]
    names = [s.var for s in chain]
    if set(names) & set(out_vars) or len(set(names)) != len(names):
        return natural
    orders = []
    for p in range(1, len(out_vars)):
        later = set(out_vars[p:])
        # a sum whose bounds use a later output index cannot go before it, unless interchanged
        ok = all(
            not {v for b in (*s.lower, *s.upper) for v in b.variables} & later
            or (interchange is not None and _interchangeable(s, later, interchange))
            for s in chain
        )
        if ok:
            orders.append((*out_vars[:p], *names, *out_vars[p:]))
    return orders + natural


def _interchangeable(s: Sum, later: set[str], sizes: Mapping[str, int]) -> bool:
    """Whether each bound of ``s`` uses at most one of the ``later`` output indices, with an
    integer coefficient ±1 and integer coefficients elsewhere (an exact interchange, see
    :func:`_interchanged_bounds`), and no index would be left with a short range: a sum over a
    window around the index (``j`` from ``s - 1`` to ``s + 1`` in an input gradient) would
    bound it by the same window, making the innermost loop three long. An index bounded on
    both sides by the sum must keep at least half its length, ``sizes`` giving the values."""
    bounds: dict[str, list[list[Affine]]] = {}
    for side, terms in enumerate((s.lower, s.upper)):
        for bound in terms:
            used = bound.variables & set(later)
            if not used:
                continue
            v = next(iter(used))
            if len(used) > 1 or abs(bound.coeff(v)) != 1 or not bound.is_integral:
                return False
            bounds.setdefault(v, [[], []])[side].append(bound)
    for v, (lowers, uppers) in bounds.items():
        for low in lowers:
            for high in uppers:
                if low.coeff(v) != high.coeff(v):
                    continue  # bounds that tighten in opposite directions: a triangle
                try:
                    length = (high - low).evaluate(sizes) + 1
                except InputError:
                    return False  # the length depends on other loops: not known to be long
                if length < sizes[v] / 2:
                    return False
    return True


def _interchanged_bounds(
    s: Sum, later: Mapping[str, Affine], limits: dict[str, tuple[list, list]]
) -> tuple[tuple[Affine, ...], tuple[Affine, ...]]:
    """The bounds of sum ``s`` opened before the output indices ``later`` (index -> its largest
    value) that its bounds use: each bound ``c*v + r`` (``c = ±1``) becomes its extreme over
    ``v``'s range, and the condition it stood for bounds ``v`` instead, added to ``limits[v]``
    (``(lower, upper)`` lists). Every term of the sum is visited once: ``s`` over the union of
    its ranges, ``v`` over the values whose range holds ``s``."""
    var = Affine.variable(s.var)
    lower, upper = [], []
    for bounds, out, is_lower in ((s.lower, lower, True), (s.upper, upper, False)):
        for bound in bounds:
            used = bound.variables & set(later)
            if not used:
                out.append(bound)
                continue
            v = next(iter(used))
            c = bound.coeff(v)
            rest = bound - c * Affine.variable(v)
            # s >= c*v + r over v in 0..n: smallest at v = 0 (c = 1) or n (c = -1); s <= ...:
            # largest at v = n (c = 1) or 0 (c = -1)
            at_n = (c < 0) if is_lower else (c > 0)
            out.append(rest + c * later[v] if at_n else rest)
            # s >= v + r: v <= s - r; s >= -v + r: v >= r - s (and mirrored for s <= ...)
            v_upper = (c > 0) == is_lower
            limits[v][1 if v_upper else 0].append(var - rest if c > 0 else rest - var)
    return tuple(lower), tuple(upper)


def build_nest(
    body: Node,
    out_name: str,
    out_vars: tuple[str, ...],
    out_shape: tuple[int, ...],
    order: Sequence[str],
    params: Mapping[str, int],
) -> Nest:
    """The loop nest computing ``out_name[out_vars] = body`` with root loops in ``order``.

    Args:
        body: the expression (free indices among ``out_vars``).
        out_name: the array written.
        out_vars, out_shape: output indices and sizes.
        order: a loop order from :func:`root_orders`.
        params: size parameters of the arguments.

    Returns:
        The :class:`Nest` with its cost estimate.
    """
    sizes = {size_param(out_name, d): n for d, n in enumerate(out_shape)}
    b = NestBuilder({**params, **sizes})
    order = tuple(order)
    accumulate = order != tuple(out_vars)
    addend, chain = _accumulated(body) if accumulate else (None, None)
    start = addend
    sums = {s.var: s for s in chain[2]} if accumulate else {}
    body, pinned = (body, {}) if accumulate else _pin_deltas(body, order)
    opened = []
    # bounds of output indices opened inside sums whose bounds used them (interchanged)
    limits: dict[str, tuple[list, list]] = {v: ([], []) for v in out_vars}
    for position, var in enumerate(order):
        if addend is not None and var in sums:
            # the output loops opened so far fix a block of the output: it starts from the
            # addend, just before the sums add into it (while the block is still in cache)
            _store_addend(b, addend, out_name, out_vars, [v for v in out_vars if v not in b.env])
            addend = None
        if var in sums:
            s = sums[var]
            later = {
                v: Affine.variable(size_param(out_name, d)) - 1
                for d, v in enumerate(out_vars)
                if v not in b.env
            }
            lower, upper = _interchanged_bounds(s, later, limits)
        else:
            d = out_vars.index(var)
            lower = (Affine.constant(0), *limits[var][0])
            upper = (Affine.variable(size_param(out_name, d)) - 1, *limits[var][1])
            if var in pinned:  # a delta fixes it: one value, where it is in range
                lower, upper = (*lower, pinned[var]), (*upper, pinned[var])
        opened.append(
            b.open_loop(
                var, lower, upper, len(b.chain) - 1, parallel=position == 0 and not sums.get(var)
            )
        )
    if accumulate:
        scale, rest, _, inner = chain
        value = b.value(ir.mul(ir.const(scale), _product(rest, inner)))
    else:
        value = b.value(body)
    b.store(out_name, tuple(Affine.variable(v) for v in out_vars), value, accumulate)
    for loop, *saved in reversed(opened):
        b.close_loop(loop, *saved)
    if pinned:  # the zeros the delta leaves are written once, by the fill
        b.stores += math.prod(out_shape)
    strip_mine(b.root)
    return Nest(
        b.root,
        out_name,
        accumulate,
        b.ops,
        b.loads,
        b.stores,
        order,
        b.placed,
        b.peak,
        zero_fill=(accumulate and start is None) or bool(pinned),
        overhead=b.overhead,
        addend=start,
    )


def _store_addend(
    b: NestBuilder, addend: Node, out_name: str, out_vars: tuple[str, ...], remaining: list[str]
) -> None:
    """``out_name[out_vars] = addend`` over the output indices in ``remaining`` (in order),
    inside the loops already open for the others."""
    opened = []
    for var in remaining:
        d = out_vars.index(var)
        lower = (Affine.constant(0),)
        upper = (Affine.variable(size_param(out_name, d)) - 1,)
        opened.append(b.open_loop(var, lower, upper, len(b.chain) - 1, parallel=not b.env))
    b.store(out_name, tuple(Affine.variable(v) for v in out_vars), b.value(addend), False)
    for loop, *saved in reversed(opened):
        b.close_loop(loop, *saved)


def _pin_deltas(body: Node, order: tuple[str, ...]) -> tuple[Node, dict[str, Affine]]:
    """A root ``where(v == e, value, 0)`` over output indices: the loop over ``v`` runs over
    the single value ``e`` (an affine function of indices before it in ``order``) and the
    output is zero-filled first, instead of testing every element (a diagonal's gradient
    writes ``n`` values into an ``n x n`` zero matrix, not ``n**2`` comparisons)."""
    if not isinstance(body, Where) or body.other is not ir.ZERO:
        return body, {}
    pinned: dict[str, Affine] = {}
    kept = []
    for c in body.conds:
        target = None
        if c.kind == "eq" and c.expr.is_integral:
            used = [v for v in c.expr.variables if v in order]
            if used and len(used) == len(c.expr.variables):
                last = max(used, key=order.index)
                coeff = c.expr.coeff(last)
                if abs(coeff) == 1 and last not in pinned:
                    target = last
                    pinned[last] = -(c.expr - coeff * Affine.variable(last)) * coeff
        if target is None:
            kept.append(c)
    if not pinned:
        return body, {}
    return ir.where(kept, body.then), pinned


# -- a derivative in scatter form -----------------------------------------------------------------


def scatter_orders(
    terms: Sequence,
    out_vars: tuple[str, ...],
    ranges: Mapping[str, tuple[tuple[Affine, ...], tuple[Affine, ...]]],
    params: Mapping[str, int],
) -> list[tuple[str, ...]]:
    """Loop orders for the scatter form of a derivative (:func:`build_scatter_nest`): the
    forward's output indices in order, its sums moved inside after each prefix of them (as in
    :func:`root_orders`), where each sum's bounds use only loops outside it and the first loop
    can run in parallel (:func:`_writes_apart`). Empty where the terms sit in different sums.

    ``ranges`` gives the bounds of every loop (output indices and sums), ``params`` the sizes.
    """
    if not terms or any(t.sums != terms[0].sums for t in terms):
        return []
    sums = terms[0].sums
    box: dict[str, tuple[int, int]] = {}
    for var in (*out_vars, *(s[0] for s in sums)):  # sums' bounds use only loops before them
        box[var] = sum_interval(*ranges[var], box, params)
    orders = []
    for p in range(len(out_vars) + 1):
        order = (*out_vars[:p], *(s[0] for s in sums), *out_vars[p:])
        ok = all(
            {v for b in (*lower, *upper) for v in b.variables if not ir.is_param(v)}
            <= set(order[: order.index(var)])
            for var, lower, upper in sums
        )
        if ok and _writes_apart(order[0], terms, box, params):
            orders.append(order)
    return orders


def _writes_apart(var: str, terms: Sequence, box, params: Mapping[str, int]) -> bool:
    """Whether two values of loop ``var`` never add into the same element: every term writes
    ``var`` into the same axis, as ``a * var + rest``, and the values ``rest`` takes across all
    terms (the other loops over ``box``) span less than ``|a|``. A flattening's ``dx[10*s + t]``
    (``t`` below 10) and a batch index ``dx[b, ...]`` pass; a strided window ``dx[2*t + k]`` and a
    stencil's ``dx[i + 1]`` and ``dx[i]`` (which meet across values of ``i``) do not."""
    axis = coeff = None
    lo, hi = math.inf, -math.inf
    for t in terms:
        axes = [d for d, e in enumerate(t.access.indices) if e.coeff(var) != 0]
        if len(axes) != 1:
            return False
        e = t.access.indices[axes[0]]
        if axis is None:
            axis, coeff = axes[0], e.coeff(var)
        if axes[0] != axis or e.coeff(var) != coeff:
            return False
        r_lo, r_hi = interval(e - coeff * Affine.variable(var), box, params)
        lo, hi = min(lo, r_lo), max(hi, r_hi)
    return hi - lo < abs(coeff)


def build_scatter_nest(
    terms: Sequence,
    out_name: str,
    out_shape: tuple[int, ...],
    ranges: Mapping[str, tuple[tuple[Affine, ...], tuple[Affine, ...]]],
    order: Sequence[str],
    params: Mapping[str, int],
) -> Nest:
    """The loop nest of a derivative in *scatter* form: loops over the forward's iteration space
    in ``order`` adding each term's adjoint into the zero-filled ``out_name`` at the term's
    access (:func:`~tadiff.index.derive.occurrences`).

    The gather form computes each element of ``dx`` on its own; where the forward reads ``x``
    with a stride (``x[2*t + k]``), each element sums over a few ``t`` in a short loop whose
    bounds divide by the stride, entered once per element. The scatter form has the forward's
    long loops instead. The first loop runs in parallel: its values write disjoint elements
    (:func:`scatter_orders` keeps only such orders), so no element is added to by two threads.

    Args:
        terms: the occurrences (``access``, ``adjoint``, ``sums``, ``conds``), all in the same
            sums.
        out_name, out_shape: the derivative's array and shape.
        ranges: bounds of each loop: the forward's output indices and its sums.
        order: a loop order from :func:`scatter_orders`.
        params: size parameters of the arguments.

    Example:
        >>> from tadiff.index import define
        >>> from tadiff.index.derive import occurrences
        >>> f = define("y[b, t] = sum[k](x[b, 2*t + k] * w[k])")
        >>> terms = occurrences(f, "x")
        >>> zero = (Affine.constant(0),)
        >>> ranges = {v: (zero, (Affine.constant(n - 1),)) for v, n in zip("btk", (4, 10, 3))}
        >>> sizes = {"dy.shape[0]": 4, "dy.shape[1]": 10, "w.shape[0]": 3}
        >>> orders = scatter_orders(terms, f.out_vars, ranges, sizes)
        >>> orders
        [('b', 'k', 't'), ('b', 't', 'k')]
        >>> nest = build_scatter_nest(terms, "dx", (4, 22), ranges, orders[0], sizes)
        >>> print(nest.text())
        for b in 0..3 (parallel):
          for k in 0..2:
            t1 = load w[k]
            for t in 0..9:
              t2 = load dy[b, t]
              t3 = mul(t1, t2)
              dx[b, k + 2*t] += t3
    """
    sizes = {size_param(out_name, d): n for d, n in enumerate(out_shape)}
    b = NestBuilder({**params, **sizes})
    opened = [
        b.open_loop(var, *ranges[var], len(b.chain) - 1, parallel=position == 0)
        for position, var in enumerate(order)
    ]
    for t in terms:
        b.add_where(t.conds, out_name, t.access.indices, t.adjoint)
    for loop, *saved in reversed(opened):
        b.close_loop(loop, *saved)
    b.stores += math.prod(out_shape)  # the zero fill
    strip_mine(b.root)
    return Nest(
        b.root,
        out_name,
        True,
        b.ops,
        b.loads,
        b.stores,
        tuple(order),
        b.placed,
        b.peak,
        zero_fill=True,
        overhead=b.overhead,
        scatter=True,
    )


def _product(rest: list[Node], inner: Node) -> Node:
    out = inner
    for f in reversed(rest):
        out = ir.mul(f, out)
    return out


# -- several outputs in one nest ------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One output of a fused nest: ``out_name[out_vars] = body``, its loops in ``order``
    (output indices and the body's outermost sums, see :func:`loop_orders`)."""

    body: Node
    out_name: str
    out_vars: tuple[str, ...]
    out_shape: tuple[int, ...]
    order: tuple[str, ...]


def loop_orders(body: Node, out_vars: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The root orders of :func:`root_orders` and, where the body is a sum, two more that let
    another output share the sum's loops (see :func:`build_fused_nest`): every output index
    first and the sums after them, and the sums first, before every output index (the order of
    a scatter: ``db[j, q] += ...`` inside a loop over ``i``, so that ``da[i, q]``, summed over
    ``j``, can come from the same pairs)."""
    found = _root_chain(body)
    if found is None:  # an addend's orders (root_addend) are single nests' only
        return [tuple(out_vars)]
    orders = root_orders(body, out_vars)
    if out_vars:
        chain = found[2]
        names = tuple(s.var for s in chain)
        if not set(names) & set(out_vars) and len(set(names)) == len(names):
            orders.append((*out_vars, *names))
            bound_vars = {v for s in chain for b in (*s.lower, *s.upper) for v in b.variables}
            if not bound_vars & set(out_vars):
                orders.append((*names, *out_vars))
    return orders


def _loop_key(part: Part, var: str, params: Mapping[str, int]) -> tuple:
    """What a loop of ``part`` iterates over: the integer range of an output index or of a sum
    whose bounds are sizes, else the sum's bounds as written."""
    if var in part.out_vars:
        return ("range", 0, part.out_shape[part.out_vars.index(var)] - 1)
    chain = _root_chain(part.body)
    s = next(s for s in chain[2] if s.var == var)
    bounds = (*s.lower, *s.upper)
    if len(s.lower) == len(s.upper) == 1 and all(v in params for b in bounds for v in b.variables):
        lo, hi = (_at(b, params) for b in bounds)
        if lo == int(lo) and hi == int(hi):
            return ("range", int(lo), int(hi))
    return ("sum", s.lower, s.upper)


def shared_prefix(parts: Sequence[Part], params: Mapping[str, int]) -> int:
    """How many outer loops the parts share (same variable, same range). The first must be an
    output index of at least one part: the threads split it, and a part that sums over it adds
    into a copy of its own per thread (``private`` in :class:`Loop`)."""
    n = 0
    first = parts[0]
    while all(n < len(p.order) for p in parts):
        var = first.order[n]
        if any(p.order[n] != var for p in parts):
            break
        if n == 0 and all(var not in p.out_vars for p in parts):
            break
        key = _loop_key(first, var, params)
        if any(_loop_key(p, var, params) != key for p in parts[1:]):
            break
        n += 1
    return n


def build_fused_nest(parts: Sequence[Part], params: Mapping[str, int]) -> Nest:
    """One loop nest computing several outputs that share their outer loops (:func:`shared_prefix`
    of them, at least one): a value they have in common — the exponential of a kernel's pair,
    with the same indices — is computed once for all of them.

    An output whose indices and sums all lie in the shared loops adds into an accumulator
    written after its sums; any other adds into its (zero-filled) array inside its own remaining
    loops. An output that sums over the outermost (parallel) loop is private to each thread.
    """
    sizes = {size_param(p.out_name, d): n for p in parts for d, n in enumerate(p.out_shape)}
    b = NestBuilder({**params, **sizes})
    first = parts[0]
    shared = first.order[: shared_prefix(parts, params)]
    chain0 = _root_chain(first.body)
    opened = []
    for position, var in enumerate(shared):
        bounds = _bounds(first, chain0, var)
        opened.append(b.open_loop(var, *bounds, len(b.chain) - 1, parallel=position == 0))
    private = tuple(p.out_name for p in parts if shared and shared[0] not in p.out_vars)
    if private:
        opened[0][0].private = private
        # each thread's copy is zero-filled, then read once more when the copies are added
        b.stores += _PRIVATE_COPIES * sum(
            math.prod(p.out_shape) for p in parts if p.out_name in private
        )
    pending: dict[int, list[Store]] = {}
    zero = False
    later: dict[tuple, list] = {}  # (first remaining loop, its range) -> the parts with it
    for p in parts:
        chain = _root_chain(p.body)
        if chain and not all(s.var in p.order for s in chain[2]):
            chain = None  # its order leaves the sums inside the value: no loops of the nest
        scale, rest, _, inner = chain if chain else (1.0, [], [], p.body)
        term = ir.mul(ir.const(scale), _product(rest, inner)) if chain else p.body
        rest_order = p.order[len(shared) :]
        indices = tuple(Affine.variable(v) for v in p.out_vars)
        if not rest_order:
            k_out = max((b.level[v] for v in p.out_vars), default=0)
            sums_after = all(b.level[s.var] > k_out for s in (chain[2] if chain else []))
            if chain and sums_after:
                acc = b.fresh("acc")
                b.chain[k_out].insert(Init(acc))
                b.chain[-1].insert(AddTo(acc, b.value(term)))
                b.ops += b.chain[-1].iters
                stored = Store(p.out_name, tuple(b.translate(e) for e in indices), acc)
                pending.setdefault(k_out, []).append(stored)
                b.stores += b.chain[k_out].iters
                continue
            b.store(p.out_name, indices, b.value(term), accumulate=bool(chain))
            zero |= bool(chain)
            continue
        key = (rest_order[0], _loop_key(p, rest_order[0], b.params))
        later.setdefault(key, []).append((p, chain, term, rest_order, indices))
    for members in later.values():
        # parts whose remaining loops start alike share that loop too: a value they both need
        # (a kernel's difference a[i, q] - b[j, q], in da and in db) is computed once
        common = []
        if len(members) > 1:
            p, chain, _, rest_order, _ = members[0]
            common.append(
                b.open_loop(rest_order[0], *_bounds(p, chain, rest_order[0]), len(b.chain) - 1)
            )
        for p, chain, term, rest_order, indices in members:
            own = [
                b.open_loop(var, *_bounds(p, chain, var), len(b.chain) - 1)
                for var in rest_order[len(common) :]
            ]
            b.store(p.out_name, indices, b.value(term), accumulate=bool(chain))
            zero |= bool(chain)
            for loop, *saved in reversed(own):
                b.close_loop(loop, *saved)
        for loop, *saved in common:
            b.close_loop(loop, *saved)
    for depth in range(len(opened), 0, -1):
        loop, *saved = opened[depth - 1]
        b.close_loop(loop, *saved)
        for stored in pending.pop(depth - 1, []):
            b.chain[depth - 1].insert(stored)
    strip_mine(b.root)
    return Nest(
        b.root,
        ",".join(p.out_name for p in parts),
        zero,
        b.ops,
        b.loads,
        b.stores,
        tuple(shared),
        b.placed,
        b.peak,
        zero_fill=zero,
        private=private,
        overhead=b.overhead,
    )


def _bounds(part: Part, chain, var: str) -> tuple[tuple[Affine, ...], tuple[Affine, ...]]:
    """The bounds of ``part``'s loop over ``var``: a sum's, or its output axis'."""
    for s in chain[2] if chain else ():
        if s.var == var:
            return s.lower, s.upper
    d = part.out_vars.index(var)
    return (Affine.constant(0),), (Affine.variable(size_param(part.out_name, d)) - 1,)


_PRIVATE_COPIES = 2
"""Thread copies of a private output the cost estimate charges for (its zero fill and the sum
after the loop): the machines this is tuned on run two to a few threads."""


# -- strips: a transcendental function after an inner sum, vectorized across the outer loop -------

_VECTORIZED = frozenset({"exp", "sigmoid"})  # functions the Numba backend computes inline
STRIP_WIDTH = 256
"""Values of a split loop per strip: the buffers of one strip stay in the first-level cache."""


def strip_mine(block: list, width: int = STRIP_WIDTH) -> None:
    """Split loops where an exponential follows an inner sum (in place).

    In ``for j: (acc = sum over q); e = exp(-acc); out += e * v[j]`` the exponential is computed
    one ``j`` at a time, after each inner loop: nothing vectorizes it. Split into phases over
    strips of ``j`` — the inner sums of a strip into a buffer, then the exponentials and what
    follows for the whole strip — the second phase is a loop without inner loops, which LLVM
    vectorizes (with the backend's inline exponential), so several pairs' exponentials are
    computed at once. Loops that run only a few times (estimated under 64) stay as they are.
    """
    for s in block:
        if isinstance(s, Loop):
            strip_mine(s.body, width)
            if s.phases is None and not s.parallel and s.trip >= 64:
                _split(s, width)
        elif isinstance(s, If):
            strip_mine(s.then, width)
            strip_mine(s.other, width)


def defined_names(stmts: list) -> set[str]:
    """Names the statements (and the blocks inside them) assign."""
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, Let | Init | Assign):
            names.add(s.name)
        elif isinstance(s, Loop):
            names |= defined_names(s.body)
        elif isinstance(s, If):
            names |= defined_names(s.then) | defined_names(s.other)
    return names


def _used(stmts: list) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, Let):
            names.update(s.args)
        elif isinstance(s, AddTo | Assign | Store):
            names.add(s.value)
        elif isinstance(s, Loop):
            names |= _used(s.body)
        elif isinstance(s, If):
            names |= _used(s.then) | _used(s.other)
    return names


def _split(loop: Loop, width: int) -> None:
    body = loop.body
    summed: set[str] = set()  # values that come out of an inner loop of this body
    first = None
    for k, s in enumerate(body):
        if isinstance(s, Loop | If):
            summed |= defined_names([s]) | {t.name for t in _walk_stmts(s) if isinstance(t, AddTo)}
        elif isinstance(s, Let) and set(s.args) & summed:
            summed.add(s.name)
            if s.kind in _VECTORIZED:
                first = k
                break
    if first is None:
        return
    stop = next((k for k in range(first, len(body)) if isinstance(body[k], Loop | If)), len(body))
    phases = [p for p in (body[:first], body[first:stop], body[stop:]) if p]
    carried: list[str] = []
    for k in range(1, len(phases)):
        before = defined_names([s for p in phases[:k] for s in p])
        carried += sorted((before & _used(phases[k])) - set(carried))
    loop.phases, loop.carried, loop.width = phases, tuple(carried), width


def _walk_stmts(s) -> list:
    out = [s]
    if isinstance(s, Loop):
        for t in s.body:
            out += _walk_stmts(t)
    elif isinstance(s, If):
        for t in (*s.then, *s.other):
            out += _walk_stmts(t)
    return out
