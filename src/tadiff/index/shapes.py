"""Ranges of index variables from argument shapes, and static bounds checking.

One rule (documented in docs/index-notation.md): **an index runs over the largest range for
which every access is in bounds**, judged on the definition *as written* — an access that the
simplifier later drops (``0 * u[s, t]``, ``x[i] - x[i]``, ``x[i]**0``) still counts.

* An **output index** without explicit size runs over ``0 .. n-1`` for the largest ``n`` with
  every access in bounds: ``y[t] = x[t] + x[t+1]`` gives ``n = x.shape[0] - 1``; a strided
  convolution's ``t`` in ``x[b,c,2*t+k]`` gives ``floor((X - K)/2) + 1``. Where every access
  that mentions it reads it alone (``x[t]``, ``x[t+1]``, not under a condition or a sum that
  can be empty) and one reads it plainly, the range is symbolic (``x.shape[0] - 2``) and the
  derivation sees it; otherwise it is found at call time, exactly, over the integers.
* A **sum index** without a range runs over the largest range that keeps the accesses reading
  it alone in bounds: plain uses ``x[i, k]`` (the whole dimension), and other single-index
  accesses ``d[2*k+1]``, ``x[k+1]`` that no condition on it guards. With none, the range must
  be written (``sum[k=0:5]``).
* **Einsum semantics**: every dimension an index is used in plainly (``k`` in ``x[i, k]`` and
  ``w[k, j]``) must have the same size; a mismatch is a ShapeError naming both sizes.

:func:`check_bounds` proves, before anything is evaluated, that no access leaves its argument
and that every fractional index (``dy[p/2]`` under ``p % 2 == 0``) is an integer where it is
read — or raises a BoundsError naming the argument, the index expression, its exact range and
the shape. Interval arithmetic clears most accesses at once, Fourier–Motzkin over the rationals
most others, and what remains is decided over the integers (the Omega test,
:mod:`tadiff.intlinalg.omega`): floor and ceiling bounds, divisibility and ``!=`` are exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import product

from tadiff.errors import BoundsError, ShapeError
from tadiff.index import expr as ir
from tadiff.index.expr import Access, Affine, Cond, Node, Op, Sum, Where, is_param, size_param
from tadiff.index.printer import affine_text
from tadiff.intlinalg.omega import ProofBudgetExceeded, integer_feasible, integer_range

__all__ = [
    "AccessSite",
    "Range",
    "access_sites",
    "check_bounds",
    "check_sites",
    "close",
    "output_ranges",
    "output_shape",
    "sum_range",
]

Range = tuple[tuple[Affine, ...], tuple[Affine, ...]]
"""Inclusive integer range ``(lower, upper)``: ``max(ceil(lower)) <= v <= min(floor(upper))``."""

SumRanges = Mapping[Node, Range]

MAX_CASES = 64
"""Most alternatives one access's conditions are split into (``!=``, the else branch of a
``where`` with several conditions); beyond it those conditions are left out of the proof."""


@dataclass(frozen=True)
class AccessSite:
    """An argument access with what encloses it, outermost first.

    Attributes:
        access: the Access node.
        context: ``("sum", var, lower, upper)`` for an enclosing sum and
            ``("where", conds, holds)`` for an enclosing ``where`` branch (``holds`` False in
            the else branch: not every condition holds).
    """

    access: Access
    context: tuple[tuple, ...]

    @property
    def sums(self) -> tuple[tuple[str, tuple[Affine, ...], tuple[Affine, ...]], ...]:
        """The enclosing sums as ``(var, lower, upper)``, outermost first."""
        return tuple(item[1:] for item in self.context if item[0] == "sum")


def _sum_bounds(node: Sum, sum_ranges: SumRanges | None) -> Range:
    if node.lower:
        return node.lower, node.upper
    if sum_ranges is None or node not in sum_ranges:
        raise ShapeError(f"sum over {node.var!r} has no range")  # pragma: no cover - parser bug
    return sum_ranges[node]


def access_sites(body: Node, sum_ranges: SumRanges | None = None) -> list[AccessSite]:
    """Every access in ``body`` with its enclosing sums and ``where`` branches (a shared node
    once per distinct context), found without recursion.

    Args:
        body: the expression.
        sum_ranges: inferred ranges of the sums written without bounds (see :func:`close`).
    """
    seen: set[tuple] = set()
    out: list[AccessSite] = []
    stack: list[tuple[Node, tuple]] = [(body, ())]
    while stack:
        node, context = stack.pop()
        key = (id(node), context)
        if key in seen:
            continue
        seen.add(key)
        if isinstance(node, Access):
            out.append(AccessSite(node, context))
        elif isinstance(node, Op):
            stack.extend((arg, context) for arg in reversed(node.args))
        elif isinstance(node, Sum):
            stack.append((node.body, (*context, ("sum", node.var, *_sum_bounds(node, sum_ranges)))))
        elif isinstance(node, Where):
            stack.append((node.other, (*context, ("where", node.conds, False))))
            stack.append((node.then, (*context, ("where", node.conds, True))))
    return out


def _context_affines(item: tuple) -> list[Affine]:
    if item[0] == "sum":
        return [*item[2], *item[3]]
    return [c.expr for c in item[1]]


# -- define time: symbolic ranges ---------------------------------------------------------------


def _single_var(e: Affine, var: str) -> tuple[Fraction, Affine] | None:
    """``(a, rest)`` where ``e = a*var + rest`` and ``rest`` has no index variable, else None."""
    names = [v for v in e.variables if not is_param(v)]
    if names != [var]:
        return None
    a = e.coeff(var)
    return a, e - a * Affine.variable(var)


def _access_bounds(a: Fraction, rest: Affine, size: Affine) -> Range:
    """The range of ``v`` with ``0 <= a*v + rest <= size - 1``."""
    lo, hi = (-rest) / a, (size - 1 - rest) / a
    return ((hi,), (lo,)) if a < 0 else ((lo,), (hi,))


def _tightest(bounds: list[Affine], lower: bool) -> tuple[Affine, ...]:
    """Drop each bound that another with the same variable part beats by its constant."""
    best: dict[Affine, Affine] = {}
    for b in bounds:
        key = b - b.const
        if key not in best or (b.const > best[key].const if lower else b.const < best[key].const):
            best[key] = b
    return tuple(best.values())


def _plain_equalities(
    uses: list[tuple[str, int]], var: str
) -> tuple[Affine | None, list[tuple[str, str, str]]]:
    """The size of a plainly used index's dimensions and the pairs that must be equal."""
    uses = list(dict.fromkeys(uses))
    if not uses:
        return None, []
    canonical = size_param(*uses[0])
    return Affine.variable(canonical), [(canonical, size_param(*u), var) for u in uses[1:]]


def sum_range(
    var: str, body: Node, sum_ranges: SumRanges
) -> tuple[Range, list[tuple[str, str, str]]] | None:
    """The inferred range of ``sum[var](body)`` and the sizes its plain uses make equal, or
    None when no access decides it (see the module docstring).

    Example:
        >>> from tadiff.index.parse import parse
        >>> d = parse("s[] = sum[k](x[k] + x[k+1])")
        >>> (r,) = d.sum_ranges.values()
        >>> [str(b) for b in r[1]]
        ['x.shape[0] - 2']
    """
    lower: list[Affine] = []
    upper: list[Affine] = []
    plain: list[tuple[str, int]] = []
    for site in access_sites(body, sum_ranges):
        guarded = any(
            var in a.variables for item in site.context for a in _context_affines(item)
        ) or any(item[0] == "sum" and _surely_empty(item[2], item[3]) for item in site.context)
        for dim, e in enumerate(site.access.indices):
            found = _single_var(e, var)
            if found is None:
                continue
            if e == Affine.variable(var):
                plain.append((site.access.name, dim))  # bounded by the one plain size below
                continue
            if guarded:
                continue
            a, rest = found
            lo, hi = _access_bounds(a, rest, Affine.variable(size_param(site.access.name, dim)))
            lower += lo
            upper += hi
    if not lower and not plain:
        return None
    size, equal = _plain_equalities(plain, var)
    if size is not None:
        lower, upper = [Affine.constant(0), *lower], [size - 1, *upper]
    return (_tightest(lower, True), _tightest(upper, False)), equal


def _surely_empty(lower: tuple[Affine, ...], upper: tuple[Affine, ...]) -> bool:
    if not all(b.is_constant for b in (*lower, *upper)):
        return False
    return max(math.ceil(b.const) for b in lower) > min(math.floor(b.const) for b in upper)


def _surely_nonempty(lower: tuple[Affine, ...], upper: tuple[Affine, ...]) -> bool:
    if all(b.is_constant for b in (*lower, *upper)):
        return not _surely_empty(lower, upper)
    # 0 .. size - 1: sizes are at least 1
    (lo,), (hi,) = (lower, upper) if len(lower) == len(upper) == 1 else ((None,), (None,))
    return (
        lo is not None
        and lo == Affine.constant(0)
        and len(hi.variables) == 1
        and is_param(next(iter(hi.variables)))
        and hi.coeff(next(iter(hi.variables))) == 1
        and hi.const == -1
    )


def output_ranges(
    body: Node,
    sum_ranges: SumRanges,
    out_vars: tuple[str, ...],
    out_sizes: tuple[Affine | None, ...],
    sure: bool = True,
) -> tuple[tuple[Range | None, ...], list[tuple[str, str, str]]]:
    """The range of every output index, symbolic where the accesses decide it alone.

    Args:
        body: the definition as written (open sums keyed in ``sum_ranges``).
        out_vars, out_sizes: output indices and their explicit sizes (None: infer).
        sure: require the accesses that decide a symbolic range to be evaluated for every
            value of the other indices (outside conditions and sums that may be empty). With
            False the range is what those accesses allow if they are evaluated at all (what a
            printer may rely on for shapes that fit together).

    Returns:
        ``(ranges, equal)``: per output index its range, or None when it is found at call time
        (:func:`output_shape`); and the ``(size, size, index)`` pairs its plain uses make equal.
    """
    sites = access_sites(body, sum_ranges)
    ranges: list[Range | None] = []
    equal: list[tuple[str, str, str]] = []
    # output indices without explicit size never pass the sizes they are used plainly in
    capped = tuple(v for v, n in zip(out_vars, out_sizes, strict=True) if n is None)
    for var, size in zip(out_vars, out_sizes, strict=True):
        if size is not None:
            ranges.append(((Affine.constant(0),), (size - 1,)))
            continue
        plain = [
            (s.access.name, d)
            for s in sites
            for d, e in enumerate(s.access.indices)
            if e == Affine.variable(var)
        ]
        canonical, pairs = _plain_equalities(plain, var)
        equal += pairs
        ranges.append(
            None if canonical is None else _symbolic_range(var, canonical, sites, capped, sure)
        )
    return tuple(ranges), equal


def _symbolic_range(
    var: str, size: Affine, sites: list[AccessSite], capped: tuple[str, ...], sure: bool = True
) -> Range | None:
    """``0 .. min(size - 1, upper bounds)`` of a plainly used output index where the accesses
    decide it alone, else None (decided at call time).

    An access decides its part when ``var`` is not in its context (sums, conditions) and
    reads ``var`` alone (``x[t + 1]``): its bound counts if it is surely evaluated for every
    value of ``var`` (outside conditions and sums that can be empty; ``sure=False`` assumes it
    is). An access whose every index is a plain output index (``dy[i, p]``) can never leave
    its argument below the plain sizes, whatever its context (``capped``: the output indices
    without explicit size, which never pass them). Any other access that mentions ``var``
    needs the call-time search.
    """
    plain_out = {Affine.variable(v) for v in capped}
    upper: list[Affine] = []
    for site in sites:
        in_context = any(
            var in a.variables for item in site.context for a in _context_affines(item)
        )
        mentions = [e for e in site.access.indices if var in e.variables]
        if not in_context and not mentions:
            continue
        if all(e in plain_out for e in site.access.indices):
            continue  # only plain output indices: in bounds below their caps
        if in_context:
            return None
        bounds = []
        for dim, e in enumerate(site.access.indices):
            if var not in e.variables or e == Affine.variable(var):
                continue
            found = _single_var(e, var)
            if found is None:
                return None
            bounds += _access_bounds(*found, Affine.variable(size_param(site.access.name, dim)))[1]
        if (
            bounds
            and sure
            and not all(
                item[0] == "sum" and _surely_nonempty(item[2], item[3]) for item in site.context
            )
        ):
            return None
        upper += bounds
    return (Affine.constant(0),), _tightest([size - 1, *upper], False)


def close(body: Node, sum_ranges: SumRanges) -> Node:
    """``body`` with every sum written without bounds given its inferred range."""

    def closed(node: Node) -> Node | None:
        if not isinstance(node, Sum):
            return None
        return ir.sum_over(node.var, *_sum_bounds(node, sum_ranges), close(node.body, sum_ranges))

    return ir.rebuild(body, closed)


# -- call time: concrete systems ----------------------------------------------------------------


@dataclass
class _System:
    """An access site for concrete sizes: its loop variables under unique names, the
    constraints that hold wherever it is evaluated, and its index expressions."""

    ineqs: list[Affine]  # definite constraints, each >= 0
    eqs: list[Affine]  # each == 0
    cases: list[tuple[list[Affine], list[Affine]]]  # alternatives (ineqs, eqs)
    indices: tuple[Affine, ...]
    box: dict[str, tuple[int, int]] | None  # interval box of every loop variable
    order: list[str]  # loop variables in scope order, for printing


class _Fresh:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> Affine:
        self.count += 1
        return Affine.variable(f"_w{self.count}")


def _alternatives(cond: Cond, holds: bool, fresh: _Fresh) -> list[tuple[list, list]]:
    """The condition (or its negation) as alternatives of conjunctions over the integers."""
    e = cond.expr
    if cond.kind == "mod":
        den = math.lcm(e.const.denominator, *(c.denominator for _, c in e.items()))
        step = den * cond.modulus
        w = fresh()
        if holds:  # e * den = step * w
            return [([], [e * den - step * w])]
        r = e * den - step * w  # 1 <= r <= step - 1
        return [([r - 1, step - 1 - r], [])]
    kind = cond.kind if holds else {"ge": "lt", "eq": "ne", "ne": "eq"}[cond.kind]
    return {
        "ge": lambda: [([e], [])],
        "lt": lambda: [([-e - 1], [])],
        "eq": lambda: [([], [e])],
        "ne": lambda: [([e - 1], []), ([-e - 1], [])],
    }[kind]()


def _conjoin(parts: list[list[tuple[list, list]]]) -> list[tuple[list, list]] | None:
    count = math.prod(len(p) for p in parts)
    if count > MAX_CASES:
        return None
    return [
        ([a for c in combo for a in c[0]], [a for c in combo for a in c[1]])
        for combo in product(*parts)
    ]


def _interval(
    e: Affine, box: Mapping[str, tuple[int, int]], params: Mapping[str, int]
) -> tuple[Fraction, Fraction]:
    lo = hi = Fraction(e.const)
    for name, coeff in e.items():
        if name in params:
            lo += coeff * params[name]
            hi += coeff * params[name]
            continue
        a, b = box[name]
        lo += min(coeff * a, coeff * b)
        hi += max(coeff * a, coeff * b)
    return lo, hi


def _system(
    site: AccessSite,
    box0: Mapping[str, tuple[int, int | None]],
    params: Mapping[str, int],
) -> _System:
    """Constraints of ``site`` with output indices in ``box0`` (an upper end of None: unbounded)
    and sizes ``params``; sum indices that repeat a bound name are renamed."""
    fresh = _Fresh()
    rename: dict[str, Affine] = {}
    used = set(box0)
    ineqs: list[Affine] = []
    for var, (lo, hi) in box0.items():
        v = Affine.variable(var)
        ineqs.append(v - lo)
        if hi is not None:
            ineqs.append(hi - v)
    box: dict[str, tuple[int, int]] | None = (
        None if any(hi is None for _, hi in box0.values()) else dict(box0)
    )
    order = list(box0)

    def sub(a: Affine) -> Affine:
        return a.substitute({**params, **rename}) if a.variables else a

    eqs: list[Affine] = []
    parts: list[list[tuple[list, list]]] = []
    for item in site.context:
        if item[0] == "sum":
            _, var, lower, upper = item
            lower, upper = [sub(b) for b in lower], [sub(b) for b in upper]
            name = var
            n = 0
            while name in used:
                n += 1
                name = f"{var}'{n}"
            used.add(name)
            order.append(name)
            v = Affine.variable(name)
            rename[var] = v
            ineqs += [v - b for b in lower] + [b - v for b in upper]
            if box is not None:
                lo = max(math.ceil(_interval(b, box, {})[0]) for b in lower)
                hi = min(math.floor(_interval(b, box, {})[1]) for b in upper)
                box[name] = (lo, hi)
        else:
            _, conds, holds = item
            conds = [c.substitute({**params, **rename}) for c in conds]
            alts = [_alternatives(c, holds, fresh) for c in conds]
            if holds:
                for alt in alts:
                    if len(alt) == 1:  # definite: one conjunction
                        ineqs += alt[0][0]
                        eqs += alt[0][1]
                    else:
                        parts.append(alt)
            elif len(alts) == 1 and len(alts[0]) == 1:
                ineqs += alts[0][0][0]
                eqs += alts[0][0][1]
            else:  # not all hold: one of them fails
                parts.append([a for alt in alts for a in alt])
    cases = _conjoin(parts)
    if cases is None:  # too many: leave these conditions out (a wider, still sound domain)
        cases = [([], [])]
    indices = tuple(sub(e) for e in site.access.indices)
    return _System(ineqs, eqs, cases, indices, box, order)


def _rational_range(e: Affine, system: _System) -> tuple[Fraction, Fraction] | None:
    """Smallest and largest value of ``e`` over the rational relaxation of the definite
    constraints (a superset of where the access is evaluated), None if it is empty."""
    from tadiff.intlinalg.fourier_motzkin import fourier_motzkin

    probe = Affine.variable("_value")
    rows = [*system.ineqs, *system.eqs, *(-q for q in system.eqs), probe - e, e - probe]
    names = sorted(set().union(*(r.variables for r in rows)) - {"_value"})
    nest = fourier_motzkin(rows, ["_value", *names])
    if not nest.is_feasible({}):
        return None
    first = nest.ranges[0]
    lo = max((b.evaluate({}) for b in first.lower), default=None)
    hi = min((b.evaluate({}) for b in first.upper), default=None)
    return lo, hi


def _violations(e: Affine, size: int, system: _System) -> list[tuple[str, list, list]]:
    """The ways the index ``e`` can fail at integer points of the system: ``(kind, ineqs,
    eqs)`` with kind "fraction" (not an integer), "below" (< 0) or "above" (> size - 1)."""
    span = _rational_range(e, system)
    if span is None:
        return []
    integral = e.is_integral
    if (
        integral
        and (span[0] is not None and span[0] >= 0)
        and (span[1] is not None and span[1] <= size - 1)
    ):
        return []
    den = math.lcm(e.const.denominator, *(c.denominator for _, c in e.items()))
    out = []
    for ineqs, eqs in system.cases:
        base_i, base_e = [*system.ineqs, *ineqs], [*system.eqs, *eqs]
        if not integral:
            r = e * den - den * _Fresh()()
            out.append(("fraction", [*base_i, r - 1, den - 1 - r], base_e))
        out.append(("below", [*base_i, -e - 1], base_e))
        out.append(("above", [*base_i, e - size], base_e))
    return out


def _first_violation(e: Affine, size: int, system: _System) -> str | None:
    for kind, ineqs, eqs in _violations(e, size, system):
        if integer_feasible(ineqs, eqs):
            return kind
    return None


def _values(e: Affine, system: _System) -> tuple[int, int]:
    """The integer values the index takes where it is evaluated (for the message)."""
    spans = [integer_range(e, [*system.ineqs, *i], [*system.eqs, *q]) for i, q in system.cases]
    spans = [s for s in spans if s is not None]
    return min(s[0] for s in spans), max(s[1] for s in spans)


def _site_text(site: AccessSite, out_vars: Sequence[str]) -> str:
    order = [*out_vars, *(s[0] for s in site.sums)]
    node = site.access
    return f"{node.name}[{', '.join(affine_text(a, order) for a in node.indices)}]"


def _bounds_error(site, dim, kind, system, out_vars, shapes) -> BoundsError:
    node = site.access
    order = [*out_vars, *(s[0] for s in site.sums)]
    index = affine_text(node.indices[dim], order)
    shape = tuple(shapes[node.name])
    if kind == "fraction":
        return BoundsError(
            f"access {_site_text(site, out_vars)} reads a fractional index: {index} of "
            f"dimension {dim} is not an integer everywhere it is read (a divisibility "
            f"condition such as where(... % ... == 0, ...) must guard it)"
        )
    try:
        lo, hi = _values(system.indices[dim], system)
        values = f"takes values {lo}..{hi}"
    except ProofBudgetExceeded:
        values = "leaves the valid range"
    return BoundsError(
        f"access {_site_text(site, out_vars)} is out of bounds: index {index} of dimension "
        f"{dim} {values}, but {node.name} has shape {shape} (valid 0..{shape[dim] - 1})"
    )


def check_sites(
    sites: Sequence[AccessSite],
    out_vars: tuple[str, ...],
    out_shape: tuple[int, ...],
    params: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
) -> None:
    """Prove that every access of ``sites`` stays inside its argument, at integer positions,
    wherever it is evaluated for these shapes (see :func:`check_bounds`).

    Raises:
        BoundsError: naming the argument, the index expression, its range and the shape.
    """
    box0 = {v: (0, n - 1) for v, n in zip(out_vars, out_shape, strict=True)}
    if any(n < 1 for n in out_shape):
        return  # nothing is evaluated
    for site in sites:
        system = None
        node = site.access
        for dim, e in enumerate(node.indices):
            size = shapes[node.name][dim]
            if system is None:
                system = _system(site, box0, params)
            if system.box is not None and e.is_integral:
                if any(lo > hi for lo, hi in system.box.values()):
                    break  # an empty sum: never evaluated
                lo, hi = _interval(system.indices[dim], system.box, {})
                if lo >= 0 and hi <= size - 1:
                    continue
            try:
                kind = _first_violation(system.indices[dim], size, system)
            except ProofBudgetExceeded as exc:
                raise BoundsError(
                    f"access {_site_text(site, out_vars)} could not be proved in bounds for "
                    f"shapes {_shapes_text(shapes)}: {exc}"
                ) from None
            if kind is not None:
                raise _bounds_error(site, dim, kind, system, out_vars, shapes)


def check_bounds(
    body: Node,
    out_vars: tuple[str, ...],
    out_shape: tuple[int, ...],
    params: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
) -> None:
    """Prove that every access of ``body`` stays inside its argument for these shapes, before
    evaluating: interval arithmetic over the loop bounds first, then Fourier–Motzkin over the
    rationals, then — for what those cannot clear — an exact decision over the integers
    (floor/ceil bounds, divisibility and ``!=`` included).

    Raises:
        BoundsError: naming the argument, the index expression, its range and the shape.
    """
    check_sites(access_sites(body), out_vars, out_shape, params, shapes)


def _shapes_text(shapes: Mapping[str, tuple[int, ...]]) -> str:
    return ", ".join(f"{k}: {tuple(v)}" for k, v in shapes.items())


def _smallest_violation(
    var: str,
    sites: Sequence[AccessSite],
    box0: Mapping[str, tuple[int, int | None]],
    params: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
) -> tuple[int, AccessSite] | None:
    """The least value of output index ``var`` (unbounded above in ``box0``) at which some
    access that depends on it fails, with that access; None if none ever does."""
    best: tuple[int, AccessSite] | None = None
    v = Affine.variable(var)
    for site in sites:
        mentioned = any(var in e.variables for e in site.access.indices) or any(
            var in a.variables for item in site.context for a in _context_affines(item)
        )
        if not mentioned:
            continue
        system = _system(site, box0, params)
        for dim, e in enumerate(system.indices):
            for _, ineqs, eqs in _violations(e, shapes[site.access.name][dim], system):
                if best is not None:
                    ineqs = [*ineqs, best[0] - 1 - v]
                if not integer_feasible(ineqs, eqs):
                    continue
                low = _integer_min(v, ineqs, eqs)
                if best is None or low < best[0]:
                    best = (low, site)
    return best


def _integer_min(v: Affine, ineqs: list, eqs: list) -> int:
    """The least integer value of the variable ``v`` (bounded below by 0) on a feasible system:
    from the rational minimum up, by doubling steps, then bisection."""
    from tadiff.intlinalg.fourier_motzkin import fourier_motzkin

    names = sorted(set().union(*(r.variables for r in [*ineqs, *eqs])) - set(v.variables))
    rows = [*ineqs, *eqs, *(-q for q in eqs)]
    first = fourier_motzkin(rows, [*v.variables, *names]).ranges[0]
    lo, step = max([0, *(math.ceil(b.evaluate({})) for b in first.lower)]), 1
    while not integer_feasible([*ineqs, lo + step - 1 - v], eqs):
        lo, step = lo + step, step * 2
    hi = lo + step - 1  # feasible with v <= hi, not with v <= lo - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if integer_feasible([*ineqs, mid - v], eqs):
            hi = mid
        else:
            lo = mid + 1
    return lo


def output_shape(
    sites: Sequence[AccessSite],
    out_vars: tuple[str, ...],
    out_ranges: tuple[Range | None, ...],
    params: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    out_name: str = "out",
) -> tuple[int, ...]:
    """The output shape for concrete sizes, with every access checked (see the module doc).

    Output indices with a symbolic range take its size; each other one gets the largest size
    for which every access depending on it is in bounds (the least failing value, found over
    the integers with the other undecided indices at 0). The result is then checked whole.

    Raises:
        ShapeError: an output index whose size no access decides, one that would have size
            0, or undecided sizes that cannot all take their largest value together.
        BoundsError: an access out of bounds for sizes that are given.
    """
    sizes: dict[str, int] = {}
    for var, r in zip(out_vars, out_ranges, strict=True):
        if r is not None:
            size = min(math.floor(b.evaluate(params)) for b in r[1]) + 1
            if size < 1:
                raise ShapeError(
                    f"output index {var!r} of {out_name} would have size {size}: the "
                    f"argument shapes {_shapes_text(shapes)} leave no valid value"
                )
            sizes[var] = size
    pending = [v for v in out_vars if v not in sizes]
    found: dict[str, int] = {}
    for var in pending:
        # a plain use caps the range at its dimension (einsum semantics), used or not
        plain = [
            shapes[s.access.name][d]
            for s in sites
            for d, e in enumerate(s.access.indices)
            if e == Affine.variable(var)
        ]
        box0 = {v: (0, n - 1) for v, n in sizes.items()}
        box0.update({v: (0, 0) for v in pending})
        box0[var] = (0, None)
        try:
            first = _smallest_violation(var, sites, box0, params, shapes)
        except ProofBudgetExceeded as exc:
            raise ShapeError(
                f"cannot infer the size of output index {var!r} of {out_name}: {exc}; give it "
                f"explicitly, e.g. {out_name}[..., {var}:10]"
            ) from None
        if first is None and not plain:
            raise ShapeError(
                f"cannot infer the size of output index {var!r} of {out_name} from the "
                f"argument shapes: no access bounds it; give it explicitly, e.g. "
                f"{out_name}[..., {var}:10]"
            )
        if first is not None and first[0] < 1:
            raise ShapeError(
                f"output index {var!r} of {out_name} would have size 0: the argument shapes "
                f"{_shapes_text(shapes)} leave no valid value ({_site_text(first[1], out_vars)} "
                f"is out of bounds at {var} = 0)"
            )
        found[var] = min([*plain, *([first[0]] if first else [])])
    shape = tuple({**sizes, **found}[v] for v in out_vars)
    try:
        check_sites(sites, out_vars, shape, params, shapes)
    except BoundsError:
        if len(found) < 2:
            raise
        small = tuple(1 if v in found else n for v, n in zip(out_vars, shape, strict=True))
        check_sites(sites, out_vars, small, params, shapes)  # a real failure raises here
        named = ", ".join(f"{v} up to {n}" for v, n in found.items())
        raise ShapeError(
            f"cannot infer the sizes of output indices {', '.join(found)} of {out_name}: each "
            f"alone can reach its size ({named}) but not all together; give one explicitly"
        ) from None
    return shape
