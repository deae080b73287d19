"""Rewrites of a body that the scheduler applies before choosing loops (shape-specific).

* :func:`factor_sums` drops ``where`` conditions that hold everywhere in the output's box (the
  range guards of a derivative whose shapes agree), and pulls the factors of a sum's body that
  do not depend on the sum variable
  out of the sum: ``sum[j](f(i) * g(i, j)) = f(i) * sum[j](g(i, j))``, and splits a sum of terms
  that depend on different indices: ``sum[k](x(i, j, k) + y(i, k)) = sum[k](x) + sum[k](y)``,
  the second a value of ``i`` alone. The derivation builds
  every term as *adjoint times local derivative*, so a derivative's sums carry factors of the
  outer indices (``dy[p]``, ``d[p]**2``) that would otherwise be multiplied in once per term,
  and that hide an inner sum over the remaining indices (a value the scheduler can then compute
  once per binding of its own indices).
* :func:`reuse_known` replaces a subexpression that is the body of a value already computed —
  the forward's output ``y[α] = body(α)``, read by its derivatives — by an access to that value
  (``exp(-sum[q](...))`` in an RBF kernel's gradient becomes ``K[i, j]``).
* :func:`alpha_equal` compares two bodies up to the names of their sum variables.

Safety: a factor that reads an argument is only moved out of a sum whose range is provably
non-empty for every binding of the enclosing indices (else it would be read where the
original never reads it: past an edge). The scheduler also re-runs the static bounds check on
every rewritten body and keeps the original where it fails.

Example:
    >>> from tadiff.index import define
    >>> f = define("y[p] = sum[i=0:4](x[i] * z[p])")
    >>> str(factor_sums(f.body, {"p": (0, 2)}, {"x.shape[0]": 4, "z.shape[0]": 3}))
    'z[p] * sum[i=0:4](x[i])'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from tadiff.index import expr as ir
from tadiff.index.expr import (
    Access,
    Affine,
    Const,
    Index,
    Node,
    Op,
    Sum,
    Where,
    free_indices,
    substitute,
    walk,
)

__all__ = [
    "Known",
    "alpha_equal",
    "factor_sums",
    "has_access",
    "interval",
    "product_factors",
    "provably_nonempty",
    "replace_node",
    "reuse_known",
    "sum_swaps",
    "window_offsets",
]

Box = Mapping[str, tuple[int, int]]


def product_factors(node: Node) -> tuple[float, list[Node]]:
    """``node`` as ``scale * prod(factors)`` through mul/neg/constant nodes.

    Example:
        >>> x = ir.access("x", ())
        >>> product_factors(ir.neg(ir.mul(ir.const(2.0), x)))
        (-2.0, [<Access x[]>])
    """
    if isinstance(node, Const):
        return node.value, []
    if isinstance(node, Op) and node.op == "mul":
        sa, fa = product_factors(node.args[0])
        sb, fb = product_factors(node.args[1])
        return sa * sb, fa + fb
    if isinstance(node, Op) and node.op == "neg":
        s, f = product_factors(node.args[0])
        return -s, f
    return 1.0, [node]


def quotient_factors(node: Node) -> tuple[float, list[Node], list[Node]]:
    """``node`` as ``scale * prod(factors) / prod(divisors)`` through mul/neg/div/constants.

    Example:
        >>> x, y = ir.access("x", ()), ir.access("y", ())
        >>> quotient_factors(ir.div(ir.mul(ir.const(3.0), x), y))
        (3.0, [<Access x[]>], [<Access y[]>])
    """
    if isinstance(node, Op) and node.op == "div":
        sa, fa, da = quotient_factors(node.args[0])
        sb, fb, db = quotient_factors(node.args[1])
        if sb == 0.0:
            return 1.0, [node], []
        return sa / sb, fa + db, da + fb
    if isinstance(node, Op) and node.op == "mul":
        sa, fa, da = quotient_factors(node.args[0])
        sb, fb, db = quotient_factors(node.args[1])
        return sa * sb, fa + fb, da + db
    if isinstance(node, Op) and node.op == "neg":
        s, f, d = quotient_factors(node.args[0])
        return -s, f, d
    if isinstance(node, Const):
        return node.value, [], []
    return 1.0, [node], []


def _quotient(scale: float, factors: list[Node], divisors: list[Node]) -> Node:
    top = product(scale, factors)
    return ir.div(top, product(1.0, divisors)) if divisors else top


def product(scale: float, factors: list[Node]) -> Node:
    """``scale * factors[0] * factors[1] * ...`` through the simplifying constructors."""
    out: Node = ir.const(scale)
    for f in factors:
        out = ir.mul(out, f)
    return out


_ACCESS: dict[int, tuple[Node, bool]] = {}


def has_access(node: Node) -> bool:
    """Whether ``node`` reads an argument anywhere below it."""
    hit = _ACCESS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    value = isinstance(node, Access) or any(has_access(c) for c in node.children())
    _ACCESS[id(node)] = (node, value)
    return value


def interval(e: Affine, box: Box, params: Mapping[str, int]) -> tuple[float, float]:
    """Smallest and largest value of ``e`` over the integer box (interval arithmetic)."""
    lo = hi = float(e.const)
    for name, c in e.items():
        if name in params:
            lo += float(c) * params[name]
            hi += float(c) * params[name]
            continue
        a, b = box[name]
        lo += min(float(c) * a, float(c) * b)
        hi += max(float(c) * a, float(c) * b)
    return lo, hi


def sum_interval(
    lower: tuple[Affine, ...], upper: tuple[Affine, ...], box: Box, params: Mapping[str, int]
) -> tuple[int, int]:
    """An integer interval that contains every value the sum variable takes over ``box``."""
    lo = max(math.ceil(interval(b, box, params)[0]) for b in lower)
    hi = min(math.floor(interval(b, box, params)[1]) for b in upper)
    return lo, hi


def provably_nonempty(
    lower: tuple[Affine, ...], upper: tuple[Affine, ...], box: Box, params: Mapping[str, int]
) -> bool:
    """True when ``max(ceil(lower)) <= min(floor(upper))`` for every point of ``box``.

    Each pair of bounds is checked by interval arithmetic on their difference, with the slack
    that rounding a rational bound inwards can cost (conservative: False means "not proven").
    """
    for lo in lower:
        for hi in upper:
            slack = (1 - 1 / lo.const.denominator if not lo.is_integral else 0) + (
                1 - 1 / hi.const.denominator if not hi.is_integral else 0
            )
            den = math.lcm(*(c.denominator for _, c in (hi - lo).items()), 1)
            if den > 1:
                slack = 2.0  # rational coefficients in the variables: round either way
            try:
                smallest = interval(hi - lo, box, params)[0]
            except KeyError:
                return False
            if smallest < slack:
                return False
    return True


def factor_sums(node: Node, box: Box, params: Mapping[str, int]) -> Node:
    """Pull the factors that do not depend on a sum's variable out of the sum (module docstring).

    Args:
        node: a body.
        box: integer ranges of the free indices of ``node`` (the output indices).
        params: size parameters.

    Returns:
        The rewritten body (the same object when nothing moves).
    """
    memo: dict[tuple, Node] = {}

    def go(n: Node, box: dict[str, tuple[int, int]]) -> Node:
        if not n.children():
            return n
        key = (id(n), tuple(sorted((v, box[v]) for v in free_indices(n) if v in box)))
        hit = memo.get(key)
        if hit is not None:
            return hit
        if isinstance(n, Op):
            out = ir.apply(n.op, *(go(a, box) for a in n.args))
        elif isinstance(n, Where):
            # a condition that holds (or fails) at every point of the box is no condition: a
            # derivative's guard ``i + 1 <= dy.shape[0]`` where the shapes agree would otherwise
            # hide the sum under it from the loop orders that accumulate inside it
            truth = _truth(n.conds, box, params)
            if truth is None:
                out = ir.where(n.conds, go(n.then, box), go(n.other, box))
            else:
                out = go(n.then if truth else n.other, box)
        else:
            assert isinstance(n, Sum)
            inner_box = dict(box)
            try:
                inner_box[n.var] = sum_interval(n.lower, n.upper, box, params)
                nonempty = provably_nonempty(n.lower, n.upper, box, params)
            except KeyError:  # a bound on an index the box does not know: move nothing
                inner_box[n.var], nonempty = (0, 0), False
            body = go(n.body, inner_box)
            groups = _terms_by_indices(body, n.var)
            if len(groups) > 1:
                # sum(x(i, j, k) + y(i, k)) = sum(x) + sum(y): the second is a value of i
                out = ir.ZERO
                for sign, term in groups:
                    part = _factored_sum(n, term, nonempty)
                    out = ir.add(out, part) if sign > 0 else ir.sub(out, part)
            else:
                out = _factored_sum(n, body, nonempty)
        memo[key] = out
        return out

    return go(node, dict(box))


def _truth(conds, box: Box, params: Mapping[str, int]) -> bool | None:
    """True when every condition holds over the whole box, False when one fails everywhere,
    else None (by interval arithmetic; congruences are not decided)."""
    every = True
    for c in conds:
        if c.kind == "mod":
            return None
        try:
            lo, hi = interval(c.expr, box, params)
        except KeyError:  # an index the box does not know
            return None
        holds = {
            "ge": (lo >= 0, hi < 0),
            "eq": (lo == hi == 0, lo > 0 or hi < 0),
            "ne": (lo > 0 or hi < 0, lo == hi == 0),
        }[c.kind]
        if holds[1]:
            return False
        every = every and holds[0]
    return True if every else None


def _factored_sum(n: Sum, body: Node, nonempty: bool) -> Node:
    """``sum[n.var](body)`` with the factors and divisors of ``body`` that do not depend on the
    sum's index outside it (a factor that reads an argument only where the range is non-empty)."""
    scale, factors, divisors = quotient_factors(body)

    def movable(f: Node) -> bool:
        return n.var not in free_indices(f) and (nonempty or not has_access(f))

    out_num = [f for f in factors if movable(f)]
    out_den = [f for f in divisors if movable(f)]
    if not out_num and not out_den and scale == 1.0:
        return ir.sum_over(n.var, n.lower, n.upper, body)
    in_num = [f for f in factors if all(f is not g for g in out_num)]
    in_den = [f for f in divisors if all(f is not g for g in out_den)]
    total = ir.sum_over(n.var, n.lower, n.upper, _quotient(1.0, in_num, in_den))
    return _quotient(scale, [*out_num, total], out_den)


def _terms_by_indices(body: Node, var: str) -> list[tuple[int, Node]]:
    """The terms of a sum's body (through ``+``, ``-`` and negation), grouped by the indices
    they depend on besides the sum's own: ``[(sign, group sum), ...]``, one entry per group."""
    terms: list[tuple[int, Node]] = []
    stack = [(1, body)]
    while stack:
        sign, t = stack.pop()
        if isinstance(t, Op) and t.op in ("add", "sub"):
            stack.append((sign if t.op == "add" else -sign, t.args[1]))
            stack.append((sign, t.args[0]))
        elif isinstance(t, Op) and t.op == "neg":
            stack.append((-sign, t.args[0]))
        else:
            terms.append((sign, t))
    groups: dict[frozenset, Node] = {}
    for sign, t in terms:
        key = free_indices(t) - {var}
        signed = t if sign > 0 else ir.neg(t)
        groups[key] = ir.add(groups[key], signed) if key in groups else signed
    if len(groups) == 1:
        return [(1, body)]
    return [(1, g) for g in groups.values()]


# -- alpha equivalence and reuse of known values --------------------------------------------------


def alpha_equal(a: Node, b: Node) -> bool:
    """Whether ``a`` and ``b`` are the same expression up to the names of sum variables.

    Example:
        >>> from tadiff.index import define
        >>> a, b = define("y[i] = sum[k](x[i, k])"), define("y[i] = sum[j](x[i, j])")
        >>> alpha_equal(a.body, b.body)
        True
    """
    return a is b or _alpha(a, b, {}, {})


def _alpha(a: Node, b: Node, ra: dict[str, Affine], rb: dict[str, Affine]) -> bool:
    # ra / rb rename the sum variables bound so far on each side to one shared fresh name
    if not ra and not rb and a is b:
        return True
    if type(a) is not type(b):
        return False

    def same(e: Affine, f: Affine) -> bool:
        return e.substitute(ra) == f.substitute(rb)

    if isinstance(a, Const):
        return a.value == b.value
    if isinstance(a, Index):
        return same(a.expr, b.expr)
    if isinstance(a, Access):
        return (
            a.name == b.name
            and len(a.indices) == len(b.indices)
            and all(same(e, f) for e, f in zip(a.indices, b.indices, strict=True))
        )
    if isinstance(a, Op):
        return a.op == b.op and all(
            _alpha(x, y, ra, rb) for x, y in zip(a.args, b.args, strict=True)
        )
    if isinstance(a, Where):
        return (
            len(a.conds) == len(b.conds)
            and all(
                c.kind == d.kind and c.modulus == d.modulus and same(c.expr, d.expr)
                for c, d in zip(a.conds, b.conds, strict=True)
            )
            and _alpha(a.then, b.then, ra, rb)
            and _alpha(a.other, b.other, ra, rb)
        )
    assert isinstance(a, Sum)
    if len(a.lower) != len(b.lower) or len(a.upper) != len(b.upper):
        return False
    if not all(same(e, f) for e, f in zip(a.lower, b.lower, strict=True)):
        return False
    if not all(same(e, f) for e, f in zip(a.upper, b.upper, strict=True)):
        return False
    fresh = Affine.variable(f"%{len(ra)}")  # '%' never occurs in a user's name
    return _alpha(a.body, b.body, {**ra, a.var: fresh}, {**rb, b.var: fresh})


@dataclass(frozen=True)
class Known:
    """A value available as an array: ``name[variables] = body`` (a forward's output).

    Attributes:
        name: the array's name in the program.
        variables: its index variables, in order.
        body: what each element equals.
    """

    name: str
    variables: tuple[str, ...]
    body: Node


def _bind(pattern: Node, target: Node, variables: tuple[str, ...], phi: dict, bound: dict) -> bool:
    """Walk ``pattern`` and ``target`` together, solving the pattern's free ``variables`` from
    index expressions where one of them appears with coefficient ±1 (the rest is verified by
    :func:`alpha_equal` after substitution)."""
    if type(pattern) is not type(target):
        return False
    if isinstance(pattern, Access):
        if pattern.name != target.name or len(pattern.indices) != len(target.indices):
            return False
        for e, f in zip(pattern.indices, target.indices, strict=True):
            e = e.substitute({k: Affine.variable(v) for k, v in bound.items()})
            e = e.substitute(phi)
            open_vars = [v for v in variables if v not in phi and e.coeff(v) != 0]
            if len(open_vars) == 1 and abs(e.coeff(open_vars[0])) == 1:
                v = open_vars[0]
                c = e.coeff(v)
                phi[v] = (f - (e - c * Affine.variable(v))) * c
        return True
    if isinstance(pattern, Op):
        return pattern.op == target.op and all(
            _bind(p, t, variables, phi, bound)
            for p, t in zip(pattern.args, target.args, strict=True)
        )
    if isinstance(pattern, Where):
        return _bind(pattern.then, target.then, variables, phi, bound) and _bind(
            pattern.other, target.other, variables, phi, bound
        )
    if isinstance(pattern, Sum):
        return _bind(pattern.body, target.body, variables, phi, {**bound, pattern.var: target.var})
    return True


def _match(known: Known, target: Node) -> tuple[Affine, ...] | None:
    """The indices at which ``target`` equals ``known``'s body, or None."""
    pattern = known.body
    if type(pattern) is not type(target):
        return None
    if isinstance(pattern, Op) and pattern.op != target.op:
        return None
    phi: dict[str, Affine] = {}
    if not _bind(pattern, target, known.variables, phi, {}):
        return None
    if any(v not in phi for v in known.variables):
        return None
    if any(not e.is_integral for e in phi.values()):
        return None
    if not alpha_equal(substitute(pattern, phi), target):
        return None
    return tuple(phi[v] for v in known.variables)


def reuse_known(body: Node, known: list[Known]) -> Node:
    """``body`` with every subexpression equal to a known value's body (at some indices)
    replaced by an access to that value.

    Example:
        >>> from tadiff.index import define
        >>> f = define("K[i,j] = exp(-sum[q]((a[i,q] - b[j,q])**2))")
        >>> print(reuse_known(f.grad("a").body, [Known("K", f.out_vars, f.body)]))
        sum[j=0:b.shape[0]](-(2 * dK[i, j] * K[i, j] * (a[i, q] - b[j, q])))
    """
    candidates = [k for k in known if k.body.children()]  # a bare access is not worth a read
    if not candidates:
        return body

    def read(n: Node) -> Node | None:
        for k in candidates:
            where = _match(k, n)
            if where is not None:
                return ir.access(k.name, where)
        return None

    return ir.rebuild(body, read)


def accessed(node: Node) -> set[str]:
    """Names of the arrays ``node`` reads."""
    return {n.name for n in walk(node) if isinstance(n, Access)}


def replace_node(body: Node, old: Node, new: Node) -> Node:
    """``body`` with every occurrence of the node ``old`` (by identity) replaced by ``new``."""
    return ir.rebuild(body, lambda n: new if n is old else None)


def sum_swaps(body: Node, limit: int = 4) -> list[Node]:
    """Bodies with one pair of nested sums exchanged: ``sum[d](a(d) * sum[j](b(d, j)))``
    becomes ``sum[j](sum[d](a(d) * b(d, j)))`` (the inner range must not depend on ``d``).

    After :func:`factor_sums` this can turn a sum recomputed for every ``(i, e)`` into one over
    fewer indices (``sum[d](dy[i, d] * v[j, d])``, a value of ``(i, j)``): the contraction order
    of a product of sums. The scheduler plans each and keeps the cheapest.

    Example:
        >>> from tadiff.index import define
        >>> f = define("y[i] = sum[d](a[i, d] * sum[j](b[d, j]))")
        >>> print(sum_swaps(f.body)[0])
        sum[j=0:b.shape[1], d=0:a.shape[1]](a[i, d] * b[d, j])
    """
    out = []
    for node in walk(body):
        if not isinstance(node, Sum):
            continue
        scale, factors = product_factors(node.body)
        inner = [f for f in factors if isinstance(f, Sum)]
        if len(inner) != 1:
            continue
        t = inner[0]
        if any(node.var in b.variables for b in (*t.lower, *t.upper)) or t.var == node.var:
            continue
        if t.var in free_indices(node):
            continue  # the inner index would capture a free index of the outer sum
        rest = [f for f in factors if f is not t]
        swapped = ir.sum_over(
            t.var,
            t.lower,
            t.upper,
            ir.sum_over(node.var, node.lower, node.upper, product(scale, [*rest, t.body])),
        )
        out.append(replace_node(body, node, swapped))
        if len(out) == limit:
            break
    return out


def window_offsets(body: Node, taken: set[str]) -> Node:
    """``body`` with every sum over a window around another index re-indexed by its offset:
    ``sum[j=max(0, s - 1):min(M, s + 2)](f(j))`` (a lower bound ``v + a`` and an upper bound
    ``v + b`` with the same index ``v``, coefficient 1) becomes
    ``sum[t=max(1 - s, 0):min(M - s + 1, 3)](f(s - 1 + t))``: the same terms, counted from the
    window's start. The offset's range is then short and clipped by ``s`` on both sides with
    the same constant gap, so the loop planner can run it outside ``s`` (an input gradient's
    innermost loop along the row instead of over the window). ``taken`` names the indices in
    use; new sum variables avoid them (and are added to it). Returns ``body`` itself where no
    sum is such a window.

    Example:
        >>> from tadiff.index import define
        >>> f = define("y[b, o, h] = sum[c, k](x[b, c, h + k] * w[o, c, k])").grad("x")
        >>> f.body.body.var, [str(b) for b in f.body.body.lower]  # h: a window around p
        ('h', ['0', 'p - w.shape[2] + 1'])
        >>> offset = window_offsets(f.body, {"b", "c", "p"}).body
        >>> offset.var, [str(b) for b in offset.lower]
        ('h_off', ['-p + w.shape[2] - 1', '0'])
        >>> [str(b) for b in offset.upper]  # inclusive
        ['dy.shape[2] - p + w.shape[2] - 2', 'w.shape[2] - 1']
        >>> print(offset.body)
        dy[b, o, h_off + p - w.shape[2] + 1] * w[o, c, -h_off + w.shape[2] - 1]
    """
    changed = False

    def replace(node: Node) -> Node | None:
        nonlocal changed
        if not isinstance(node, Sum):
            return None
        inner = ir.rebuild(node.body, replace)
        start = _window_start(node)
        if start is None:
            return ir.sum_over(node.var, node.lower, node.upper, inner)
        changed = True
        offset = ir.fresh_name(f"{node.var}_off", taken | ir.index_names(inner))
        taken.add(offset)
        moved = substitute(inner, {node.var: Affine.variable(offset) + start})
        return ir.sum_over(
            offset,
            tuple(b - start for b in node.lower),
            tuple(b - start for b in node.upper),
            moved,
        )

    out = ir.rebuild(body, replace)
    return out if changed else body


def _window_start(s: Sum) -> Affine | None:
    """The lower bound ``v + a`` of a sum that also has an upper bound ``v + b`` (the same index
    ``v`` with coefficient 1, ``b - a`` made of sizes and constants): where its window starts;
    None otherwise."""
    for low in s.lower:
        for v in low.variables:
            if low.coeff(v) != 1 or v == s.var or ir.is_param(v):
                continue  # a window slides with an index, not with a size
            for high in s.upper:
                gap = high - low
                sizes_only = all(ir.is_param(u) for u in gap.variables)
                if high.coeff(v) == 1 and sizes_only and gap.is_integral:
                    return low
    return None
