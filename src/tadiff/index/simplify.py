"""Simplification of index-notation IR.

Most simplification happens as nodes are built (:mod:`tadiff.index.expr` constructors fold
constants, drop ``x*1``, ``x*0``, ``x+0``, ``x**1``, merge conditions, and hash-consing is CSE).
This module adds the rewrites that need a whole subtree:

* a sum over a range that is empty for constant bounds is 0;
* a sum over a single point ``e <= v <= e`` is its body at ``v = e``;
* a sum whose body is a delta on its index, ``where(v == e, a, 0)``, is ``a`` at ``v = e``
  under the condition that ``e`` lies in the range;
* ``where`` conditions that repeat an enclosing ``where``'s or a given fact are dropped;
* the tree is rebuilt through the constructors, so every local rule applies bottom-up.

Example:
    >>> from tadiff.index.parse import parse
    >>> str(simplify(parse("y[i] = sum[k=2:3](x[i, k] * 1)").body))
    'x[i, 2]'
"""

from __future__ import annotations

import math

from tadiff.index import expr as ir
from tadiff.index.expr import Affine, Cond, Node, Op, Sum, Where

__all__ = ["simplify", "sum_or_point"]


def sum_or_point(
    var: str, lower: tuple[Affine, ...], upper: tuple[Affine, ...], body: Node
) -> Node:
    """``sum[var=lower:upper+1](body)`` with empty and one-point ranges removed.

    Example:
        >>> i = Affine.variable("i")
        >>> str(sum_or_point("k", (i,), (i,), ir.access("x", (Affine.variable("k"),))))
        'x[i]'
    """
    if not ir._SIMPLIFY[-1]:  # raw_construction(): keep every sum as written
        return ir.sum_over(var, lower, upper, body)
    if all(b.is_constant for b in (*lower, *upper)):
        lo = max(math.ceil(b.const) for b in lower)
        hi = min(math.floor(b.const) for b in upper)
        if lo > hi:
            return ir.ZERO
        if lo == hi:
            return ir.substitute(body, {var: Affine.constant(lo)})
    if len(lower) == 1 and len(upper) == 1 and lower[0] == upper[0] and lower[0].is_integral:
        return ir.substitute(body, {var: lower[0]})
    if isinstance(body, Where) and body.other is ir.ZERO:
        # a delta on the sum index: sum[v](where(v == e, a)) = where(e in range, a at v = e)
        for cond in body.conds:
            coeff = cond.expr.coeff(var)
            if cond.kind == "eq" and abs(coeff) == 1:
                value = -(cond.expr - coeff * Affine.variable(var)) * coeff
                rest = [c.substitute({var: value}) for c in body.conds if c is not cond]
                rest += [Cond.ge(value - b) for b in lower] + [Cond.ge(b - value) for b in upper]
                return ir.where(rest, ir.substitute(body.then, {var: value}))
    return ir.sum_over(var, lower, upper, body)


def simplify(node: Node, facts: tuple[Cond, ...] = ()) -> Node:
    """Rebuild ``node`` bottom-up through the simplifying constructors and the rules above.

    Args:
        node: the expression.
        facts: conditions known to hold everywhere (e.g. the output ranges); a ``where``
            condition equal to one of them is dropped.

    Returns:
        An equivalent expression, never larger.
    """
    if not ir._SIMPLIFY[-1]:  # raw_construction(): leave the tree as built
        return node
    cache: dict[tuple[int, frozenset[Cond]], Node] = {}

    def go(n: Node, known: frozenset[Cond]) -> Node:
        key = (id(n), known)
        hit = cache.get(key)
        if hit is not None:
            return hit
        if isinstance(n, Op):
            out = ir.apply(n.op, *(go(a, known) for a in n.args))
        elif isinstance(n, Where):
            conds = [c for c in n.conds if c not in known]
            then = go(n.then, known | frozenset(conds))
            out = ir.where(conds, then, go(n.other, known))
        elif isinstance(n, Sum):
            # conditions mentioning the sum index do not hold inside for every value of it
            inner = frozenset(c for c in known if n.var not in c.expr.variables)
            out = sum_or_point(n.var, n.lower, n.upper, go(n.body, inner))
            if isinstance(out, Where):  # a delta removed the sum: its range became conditions
                out = ir.where([c for c in out.conds if c not in known], out.then, out.other)
        else:
            out = n
        cache[key] = out
        return out

    return go(node, frozenset(facts))
