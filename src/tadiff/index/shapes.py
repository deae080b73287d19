"""Ranges of index variables from argument shapes, and static bounds checking.

Rules (documented in docs/index-notation.md):

* An index variable used *plainly* somewhere (the whole index of a dimension is the variable,
  as ``k`` in ``x[i,k]``) runs over that dimension: ``0 .. x.shape[1] - 1``. Every plain use must
  name a dimension of the same size (einsum semantics); a mismatch is a ShapeError at call time.
* A sum index without plain uses runs over the largest range that keeps its single-variable
  accesses in bounds (``d[2*k+1]`` gives ``0 <= 2*k + 1 <= d.shape[0] - 1``); with none it must be
  written explicitly, ``sum[k=0:5]``.
* An output index without plain uses and without explicit size (``f[s, t:10]``) gets, at call
  time, the largest size that keeps every access in bounds for every value of the other indices
  (a strided convolution's ``t`` in ``x[b,c,2*t+k]``).

Ranges are affine in size parameters (``x.shape[1]``), so they are derived once for all shapes.
:func:`check_bounds` then proves, before anything is evaluated, that no access leaves its
argument for the given shapes, or raises a BoundsError naming the argument, the index expression
and its exact range.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from tadiff.errors import BoundsError, DerivationError, ShapeError
from tadiff.index import expr as ir
from tadiff.index.expr import Access, Affine, Cond, Node, Op, Sum, Where, is_param, size_param
from tadiff.index.printer import affine_text

__all__ = ["AccessSite", "Range", "access_sites", "check_bounds", "infer_ranges", "output_shape"]

Range = tuple[tuple[Affine, ...], tuple[Affine, ...]]
"""Inclusive integer range ``(lower, upper)``: ``max(ceil(lower)) <= v <= min(floor(upper))``."""


@dataclass(frozen=True)
class AccessSite:
    """An argument access with what holds wherever it is evaluated.

    Attributes:
        access: the Access node.
        sums: enclosing sums, outermost first, as ``(var, lower, upper)``.
        conds: conditions of enclosing ``where`` branches (negated for the else branch).
    """

    access: Access
    sums: tuple[tuple[str, tuple[Affine, ...], tuple[Affine, ...]], ...]
    conds: tuple[Cond, ...]


def access_sites(body: Node) -> Iterator[AccessSite]:
    """Every access in ``body`` with its enclosing sums and conditions (a shared node once per
    distinct context)."""
    seen: set[tuple] = set()

    def visit(node: Node, sums: tuple, conds: tuple) -> Iterator[AccessSite]:
        key = (id(node), sums, conds)
        if key in seen:
            return
        seen.add(key)
        if isinstance(node, Access):
            yield AccessSite(node, sums, conds)
        elif isinstance(node, Op):
            for arg in node.args:
                yield from visit(arg, sums, conds)
        elif isinstance(node, Sum):
            yield from visit(node.body, (*sums, (node.var, node.lower, node.upper)), conds)
        elif isinstance(node, Where):
            yield from visit(node.then, sums, (*conds, *node.conds))
            if len(node.conds) == 1 and node.conds[0].negated() is not None:
                yield from visit(node.other, sums, (*conds, node.conds[0].negated()))
            else:
                yield from visit(node.other, sums, conds)

    yield from visit(body, (), ())


# -- define time: symbolic ranges ---------------------------------------------------------------


def _plain_uses(body: Node, var: str) -> list[tuple[str, int]]:
    uses = []
    target = Affine.variable(var)
    for node in ir.walk(body):
        if isinstance(node, Access):
            uses.extend((node.name, d) for d, e in enumerate(node.indices) if e == target)
    return list(dict.fromkeys(uses))


def _single_var_bounds(body: Node, var: str) -> Range:
    lower: list[Affine] = []
    upper: list[Affine] = []
    for node in ir.walk(body):
        if not isinstance(node, Access):
            continue
        for d, e in enumerate(node.indices):
            names = [v for v in e.variables if not is_param(v)]
            if names != [var]:
                continue
            a = e.coeff(var)
            rest = e - a * Affine.variable(var)
            top = Affine.variable(size_param(node.name, d)) - 1
            lo, hi = (-rest) / a, (top - rest) / a
            if a < 0:
                lo, hi = hi, lo
            lower.append(lo)
            upper.append(hi)
    return tuple(dict.fromkeys(lower)), tuple(dict.fromkeys(upper))


def infer_ranges(
    body: Node, out_vars: tuple[str, ...], out_sizes: tuple[int | None, ...]
) -> tuple[Node, tuple[Range | None, ...], tuple[tuple[str, str, str], ...]]:
    """Give every open sum its range and every output index its range where shapes decide it.

    Args:
        body: parsed body; sums written without bounds have empty bound tuples.
        out_vars, out_sizes: output indices and their explicit sizes (None: infer).

    Returns:
        ``(body, out_ranges, equal_sizes)``: the body with every sum bounded; per output index
        its symbolic range or None (decided at call time); and the pairs of sizes that must be
        equal, as ``(canonical parameter, other parameter, index variable)``.

    Raises:
        DerivationError: a sum index whose range cannot be inferred.
    """
    equal: list[tuple[str, str, str]] = []
    alias: dict[str, str] = {}

    def plain_range(var: str, scope: Node) -> Range | None:
        uses = _plain_uses(scope, var)
        if not uses:
            return None
        canonical = size_param(*uses[0])
        for use in uses[1:]:
            other = size_param(*use)
            alias.setdefault(other, canonical)
            equal.append((canonical, other, var))
        return (Affine.constant(0),), (Affine.variable(canonical) - 1,)

    out_ranges: list[Range | None] = []
    for var, size in zip(out_vars, out_sizes, strict=True):
        if size is not None:
            out_ranges.append(((Affine.constant(0),), (Affine.constant(size - 1),)))
        else:
            out_ranges.append(plain_range(var, body))

    def close(node: Node) -> Node:
        if isinstance(node, Sum):
            inner = close(node.body)
            if node.lower:
                return ir.sum_over(node.var, node.lower, node.upper, inner)
            bounds = plain_range(node.var, node.body)  # two sums may both be called k
            if bounds is None:
                bounds = _single_var_bounds(node.body, node.var)
                if not bounds[0]:
                    raise DerivationError(
                        f"cannot infer the range of sum index {node.var!r}: it is not alone in any "
                        f"index of an argument; give it explicitly, e.g. sum[{node.var}=0:5](...)"
                    )
            return ir.sum_over(node.var, *bounds, inner)
        if isinstance(node, Op):
            return ir.apply(node.op, *(close(a) for a in node.args))
        if isinstance(node, Where):
            return ir.where(node.conds, close(node.then), close(node.other))
        return node

    body = close(body)
    # sizes that must be equal are used under one name, so the derivation sees them as one
    if alias:
        body = _rename_params(body, alias)
        out_ranges = [
            None
            if r is None
            else tuple(tuple(_rename_affine(a, alias) for a in side) for side in r)
            for r in out_ranges
        ]
    return body, tuple(out_ranges), tuple(equal)


def _rename_affine(a: Affine, alias: Mapping[str, str]) -> Affine:
    hit = {k: Affine.variable(v) for k, v in alias.items() if k in a.variables}
    return a.substitute(hit) if hit else a


def _rename_params(node: Node, alias: Mapping[str, str]) -> Node:
    def go(n: Node) -> Node:
        if isinstance(n, ir.Index):
            return ir.index_value(_rename_affine(n.expr, alias))
        if isinstance(n, Access):
            return ir.access(n.name, tuple(_rename_affine(a, alias) for a in n.indices))
        if isinstance(n, Op):
            return ir.apply(n.op, *(go(a) for a in n.args))
        if isinstance(n, Where):
            conds = [Cond(c.kind, _rename_affine(c.expr, alias), c.modulus) for c in n.conds]
            return ir.where(conds, go(n.then), go(n.other))
        if isinstance(n, Sum):
            return ir.sum_over(
                n.var,
                tuple(_rename_affine(a, alias) for a in n.lower),
                tuple(_rename_affine(a, alias) for a in n.upper),
                go(n.body),
            )
        return n

    return go(node)


# -- call time: concrete sizes --------------------------------------------------------------------


def _interval(
    e: Affine, box: Mapping[str, tuple[int, int]], params: Mapping[str, int]
) -> tuple[Fraction, Fraction]:
    lo = hi = e.const
    for name, coeff in e.items():
        if name in params:
            lo += coeff * params[name]
            hi += coeff * params[name]
            continue
        a, b = box[name]
        lo += min(coeff * a, coeff * b)
        hi += max(coeff * a, coeff * b)
    return lo, hi


def _sum_box(
    site: AccessSite, box: dict[str, tuple[int, int]], params: Mapping[str, int]
) -> dict[str, tuple[int, int]] | None:
    """Interval boxes of the enclosing sum variables (None if one depends on an unknown)."""
    box = dict(box)
    for var, lower, upper in site.sums:
        try:
            lo = max(math.ceil(_interval(b, box, params)[0]) for b in lower)
            hi = min(math.floor(_interval(b, box, params)[1]) for b in upper)
        except KeyError:
            return None
        box[var] = (lo, hi)
    return box


def output_shape(
    body: Node,
    out_vars: tuple[str, ...],
    out_ranges: tuple[Range | None, ...],
    params: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    out_name: str = "out",
) -> tuple[int, ...]:
    """The output shape for concrete sizes ``params``.

    Raises:
        ShapeError: an output index whose size cannot be inferred, or is not positive.
    """
    sizes: dict[str, int] = {}
    for var, r in zip(out_vars, out_ranges, strict=True):
        if r is not None:
            sizes[var] = min(math.floor(b.evaluate(params)) for b in r[1]) + 1
    pending = [v for v in out_vars if v not in sizes]
    sites = list(access_sites(body)) if pending else []
    while pending:
        progress = False
        for var in list(pending):
            box = {v: (0, n - 1) for v, n in sizes.items()}
            limit: Fraction | None = None
            for site in sites:
                full = _sum_box(site, box, params)
                if full is None:
                    continue
                for dim, e in enumerate(site.access.indices):
                    names = {v for v in e.variables if not is_param(v)}
                    if var not in names or names - {var} - set(full):
                        continue
                    a = e.coeff(var)
                    rest_lo, rest_hi = _interval(e - a * Affine.variable(var), full, params)
                    top = shapes[site.access.name][dim] - 1
                    # var >= 0 and 0 <= a*var + rest <= top for every rest: largest var allowed
                    bound = (top - rest_hi) / a if a > 0 else rest_lo / (-a)
                    limit = bound if limit is None else min(limit, bound)
            if limit is not None:
                sizes[var] = math.floor(limit) + 1
                if sizes[var] < 1:
                    raise ShapeError(
                        f"output index {var!r} of {out_name} would have size {sizes[var]}: the "
                        f"argument shapes {_shapes_text(shapes)} leave no valid value"
                    )
                pending.remove(var)
                progress = True
        if not progress:
            raise ShapeError(
                f"cannot infer the size of output index {pending[0]!r} of {out_name} from the "
                f"argument shapes: give it explicitly, e.g. {out_name}[..., {pending[0]}:10]"
            )
    return tuple(sizes[v] for v in out_vars)


def _shapes_text(shapes: Mapping[str, tuple[int, ...]]) -> str:
    return ", ".join(f"{k}: {tuple(v)}" for k, v in shapes.items())


def _site_constraints(
    site: AccessSite,
    out_vars: tuple[str, ...],
    out_shape: tuple[int, ...],
    params: Mapping[str, int],
) -> tuple[list[Affine], list[str]]:
    constraints: list[Affine] = []
    for var, n in zip(out_vars, out_shape, strict=True):
        constraints += [Affine.variable(var), Affine.constant(n - 1) - Affine.variable(var)]
    variables = list(out_vars)
    for var, lower, upper in site.sums:
        v = Affine.variable(var)
        constraints += [v - b.substitute(params) for b in lower]
        constraints += [b.substitute(params) - v for b in upper]
        variables.append(var)
    box = _sum_box(site, {v: (0, n - 1) for v, n in zip(out_vars, out_shape, strict=True)}, params)
    for cond in site.conds:
        e = cond.expr.substitute(params)
        if cond.kind == "ge":
            constraints.append(e)
        elif cond.kind == "eq":
            constraints += [e, -e]
        elif cond.kind == "mod":
            constraints += _congruence_bounds(e, cond.modulus, box or {})
    return constraints, variables


def _congruence_bounds(e: Affine, modulus: int, box: Mapping[str, tuple[int, int]]) -> list[Affine]:
    """``a*v + b ≡ 0 (mod m)`` on an index ``v`` known to lie in ``lo..hi``: the first and last
    values of ``v`` in that range and class, as bounds (a rational polytope cannot express
    divisibility)."""
    names = list(e.variables)
    if len(names) != 1 or names[0] not in box or not e.is_integral:
        return []
    v = names[0]
    a, b = int(e.coeff(v)), int(e.const)
    if math.gcd(a, modulus) != 1:
        return []
    lo, hi = box[v]
    residue = (-b * pow(a, -1, modulus)) % modulus  # a*v + b ≡ 0  <=>  v ≡ residue
    first = lo + (residue - lo) % modulus
    last = first + (hi - first) // modulus * modulus
    return [Affine.variable(v) - first, last - Affine.variable(v)]


def exact_range(
    e: Affine, constraints: list[Affine], variables: list[str]
) -> tuple[int, int] | None:
    """Smallest and largest value of ``e`` over the rational polytope ``constraints >= 0``
    (rounded inwards to integers), or None if the polytope is empty."""
    from tadiff.intlinalg.fourier_motzkin import fourier_motzkin

    probe = "_value"
    rows = [*constraints, Affine.variable(probe) - e, e - Affine.variable(probe)]
    nest = fourier_motzkin(rows, [probe, *variables])
    if not nest.is_feasible({}):
        return None
    first = nest.ranges[0]
    lo = max(math.ceil(b.evaluate({})) for b in first.lower)
    hi = min(math.floor(b.evaluate({})) for b in first.upper)
    return (lo, hi) if lo <= hi else None


def check_bounds(
    body: Node,
    out_vars: tuple[str, ...],
    out_shape: tuple[int, ...],
    params: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
) -> None:
    """Prove that every access stays inside its argument for these shapes, before evaluating.

    Interval arithmetic over the loop bounds decides most accesses at once; an access it cannot
    clear is decided exactly by Fourier–Motzkin over the polytope of its enclosing output range,
    sum ranges and conditions.

    Raises:
        BoundsError: naming the argument, the index expression, its range and the shape.
    """
    box0 = {v: (0, n - 1) for v, n in zip(out_vars, out_shape, strict=True)}
    for site in access_sites(body):
        node = site.access
        box = _sum_box(site, box0, params)
        for dim, e in enumerate(node.indices):
            size = shapes[node.name][dim]
            if box is not None:
                lo, hi = _interval(e, box, params)
                if lo >= 0 and hi <= size - 1:
                    continue
            constraints, variables = _site_constraints(site, out_vars, out_shape, params)
            span = exact_range(e.substitute(params), constraints, variables)
            if span is None or (span[0] >= 0 and span[1] <= size - 1):
                continue
            order = [*out_vars, *(s[0] for s in site.sums)]
            text = f"{node.name}[{', '.join(affine_text(a, order) for a in node.indices)}]"
            raise BoundsError(
                f"access {text} is out of bounds: index {affine_text(e, order)} of dimension "
                f"{dim} takes values "
                f"{span[0]}..{span[1]}, but {node.name} has shape {tuple(shapes[node.name])} "
                f"(valid 0..{size - 1})"
            )
