"""Fourier–Motzkin elimination: turn ``{z : c(z, params) >= 0}`` into a loop nest over z.

Each constraint is an :class:`Affine` ``c`` meaning ``c >= 0``; names that are not loop variables
are symbolic parameters (free indices, tensor sizes). Variables are eliminated innermost first:
the constraints that involve the variable become its lower/upper bounds, and every
lower-upper pair is added (scaled so the variable cancels) to give the constraints on the outer
variables. What is left over the parameters alone are the feasibility conditions.

Two integer-specific steps keep the nest small and tight:

- every row is scaled to coprime integer coefficients, and its constant is rounded down to a
  multiple of their gcd (``2x - 1 >= 0`` becomes ``x - 1 >= 0``) — valid because all variables
  and parameters are integers;
- redundant rows are removed at every step: exact duplicates, rows with the same linear part
  as a tighter one, always-true constants, and rows implied by a nonnegative combination of two
  others. (Chernikov's history rule is *not* used: combined with the integer rounding above it
  can drop a row that is still needed for tight outer bounds.)

Enumeration stays exact whatever is removed, because each original constraint is checked at the
loop of its innermost variable (or as a condition) or is implied by constraints that are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from tadiff.errors import InputError
from tadiff.intlinalg.affine import Affine


@dataclass(frozen=True)
class VarRange:
    """``max(ceil(l) for l in lower) <= variable <= min(floor(u) for u in upper)``.

    An empty ``lower`` (``upper``) means unbounded below (above). Bounds are Affines in the
    parameters and the outer loop variables, possibly with Fraction coefficients.
    """

    variable: str
    lower: tuple[Affine, ...]
    upper: tuple[Affine, ...]

    def __str__(self) -> str:
        lo = _combine_text("max", "ceil", self.lower)
        hi = _combine_text("min", "floor", self.upper)
        if lo and hi:
            return f"{lo} <= {self.variable} <= {hi}"
        if lo:
            return f"{self.variable} >= {lo}"
        if hi:
            return f"{self.variable} <= {hi}"
        return f"{self.variable} unbounded"


@dataclass(frozen=True)
class LoopNest:
    """Loop bounds for the integer points of a system of affine inequalities.

    Attributes:
        variables: loop variables, outermost first.
        ranges: one :class:`VarRange` per variable, same order.
        conditions: Affines over the parameters only, each ``>= 0``: necessary for the nest to
            be non-empty. An infeasible system has the single condition ``-1``.

    Example:
        >>> x, z = Affine.variable("x"), Affine.variable("z")
        >>> print(fourier_motzkin([z, 7 - z, x - 2 * z, 2 * z - x + 1], ["z"]))
        max(0, ceil((x - 1)/2)) <= z <= min(7, floor(x/2))
        if x <= 15, x >= 0
    """

    variables: tuple[str, ...]
    ranges: tuple[VarRange, ...]
    conditions: tuple[Affine, ...]
    parameters: frozenset[str] = field(default=frozenset())
    """Names in the bounds and conditions that are not loop variables."""

    def is_feasible(self, params: Mapping[str, int]) -> bool:
        """Whether every condition holds for these parameter values (necessary for points)."""
        return all(c.evaluate(params) >= 0 for c in self.conditions)

    def range_of(self, variable: str) -> VarRange:
        """The :class:`VarRange` of a loop variable (InputError if it is not one)."""
        for r in self.ranges:
            if r.variable == variable:
                return r
        raise InputError(f"{variable!r} is not a loop variable; variables are {self.variables}")

    def bounds(self, variable: str, values: Mapping[str, int]) -> tuple[int, int]:
        """Concrete inclusive ``(lo, hi)`` of ``variable`` (``lo > hi`` when empty).

        Args:
            variable: a loop variable.
            values: the parameters and every variable outside ``variable``.

        Raises:
            InputError: unbounded side, unknown variable, or a missing value.
        """
        r = self.range_of(variable)
        if not r.lower or not r.upper:
            side = "below" if not r.lower else "above"
            raise InputError(f"loop variable {variable!r} is unbounded {side}")
        lo = max(math.ceil(b.evaluate(values)) for b in r.lower)
        hi = min(math.floor(b.evaluate(values)) for b in r.upper)
        return lo, hi

    def __str__(self) -> str:
        lines = [str(r) for r in self.ranges]
        if any(c.is_constant and c.const < 0 for c in self.conditions):
            lines.append("infeasible: the system has no points")
        elif self.conditions:
            lines.append("if " + ", ".join(_inequality_text(c) for c in self.conditions))
        return "\n".join(lines)


def fourier_motzkin(constraints: Sequence[Affine], variables: Sequence[str]) -> LoopNest:
    """Loop bounds, outermost first, for the integer points of ``{c >= 0 for c in constraints}``.

    Args:
        constraints: Affines, each meaning ``c >= 0`` (ints are accepted as constants). Names
            that are not in ``variables`` are parameters.
        variables: loop order, outermost first; the bounds of ``variables[k]`` depend only on
            the parameters and ``variables[:k]``.

    Returns:
        :class:`LoopNest`. An infeasible system gives the condition ``-1``, never an error.

    Raises:
        InputError: a constraint that is not an Affine, or bad/duplicate variable names.

    Example:
        >>> i, j, n = (Affine.variable(v) for v in "ijn")
        >>> print(fourier_motzkin([i, j, n - 1 - i - j], ["i", "j"]))
        0 <= i <= n - 1
        0 <= j <= -i + n - 1
        if n >= 1
    """
    return _eliminate(constraints, variables, prune=True)


def _eliminate(constraints: Sequence[Affine], variables: Sequence[str], prune: bool) -> LoopNest:
    """Fourier–Motzkin; ``prune=False`` keeps every row (the textbook method, for tests)."""
    names = _check_variables(variables)
    affines = _check_constraints(constraints)
    params = sorted(set().union(*(a.variables for a in affines)) - set(names))
    symbols = [*names, *params]
    index = {s: k for k, s in enumerate(symbols)}
    rows = [_Row.from_affine(a, index, len(symbols), k) for k, a in enumerate(affines)]
    rows = _prune(rows, prune)
    ranges: list[VarRange] = []
    for k in range(len(names) - 1, -1, -1):
        lower = [r for r in rows if r.coeffs[k] > 0]
        upper = [r for r in rows if r.coeffs[k] < 0]
        rest = [r for r in rows if r.coeffs[k] == 0]
        ranges.append(
            VarRange(
                names[k],
                _sorted_bounds(r.bound(k, symbols) for r in lower),
                _sorted_bounds(r.bound(k, symbols) for r in upper),
            )
        )
        combined = [_combine(lo, up, k) for lo in lower for up in upper]
        rows = _prune(rest + combined, prune)
    if any(r.is_contradiction for r in rows):
        conditions: tuple[Affine, ...] = (Affine.constant(-1),)
    else:
        conditions = _sorted_bounds(r.to_affine(symbols) for r in rows)
    return LoopNest(tuple(names), tuple(reversed(ranges)), conditions, frozenset(params))


def enumerate_points(nest: LoopNest, params: Mapping[str, int]) -> Iterator[tuple[int, ...]]:
    """All integer points of the nest for concrete parameters, in lexicographic loop order.

    Args:
        nest: from :func:`fourier_motzkin`.
        params: a value for every parameter.

    Returns:
        An iterator of tuples (one entry per loop variable). Empty if the conditions fail.

    Raises:
        InputError: (eagerly) a missing parameter, or a loop variable unbounded on a side.

    Example:
        >>> i, j = Affine.variable("i"), Affine.variable("j")
        >>> list(enumerate_points(fourier_motzkin([i, j, 1 - i - j], ["i", "j"]), {}))
        [(0, 0), (0, 1), (1, 0)]
    """
    missing = sorted(nest.parameters - set(params))
    if missing:
        raise InputError(f"enumerate_points: no value for parameter(s) {', '.join(missing)}")
    if not nest.is_feasible(params):
        return iter(())
    for r in nest.ranges:
        if not r.lower or not r.upper:
            side = "below" if not r.lower else "above"
            raise InputError(f"enumerate_points: loop variable {r.variable!r} is unbounded {side}")
    compiled = [
        (_compile(r.lower, nest.variables, params), _compile(r.upper, nest.variables, params))
        for r in nest.ranges
    ]
    if not compiled:
        return iter([()])  # no loop variables: the single empty point
    return _walk(compiled, [])


# -- rows -----------------------------------------------------------------------------------------


class _Row:
    """``coeffs · symbols + const >= 0`` with coprime integer coeffs (or a constant row).

    ``history`` is the set of original constraints this row was combined from; rows built from
    many are tried first for removal, being the most likely to be redundant.
    """

    __slots__ = ("coeffs", "const", "history", "neg", "pos", "support")

    def __init__(self, coeffs: tuple[int, ...], const: int, history: frozenset[int]):
        g = math.gcd(*coeffs)
        if g > 1:
            coeffs = tuple(c // g for c in coeffs)
            const //= g  # floor: the integer left side can reach only multiples of g
        self.coeffs = coeffs
        self.const = const if g else (0 if const >= 0 else -1)
        self.history = history
        # Bit masks of the positive / negative coefficients, for a quick implication filter.
        self.pos = sum(1 << k for k, c in enumerate(coeffs) if c > 0)
        self.neg = sum(1 << k for k, c in enumerate(coeffs) if c < 0)
        self.support = self.pos | self.neg

    @classmethod
    def from_affine(cls, a: Affine, index: dict[str, int], size: int, k: int) -> _Row:
        scale = math.lcm(a.const.denominator, *(c.denominator for _, c in a.items()))
        coeffs = [0] * size
        for name, c in a.items():
            coeffs[index[name]] = int(c * scale)
        return cls(tuple(coeffs), int(a.const * scale), frozenset((k,)))

    @property
    def is_contradiction(self) -> bool:
        return not self.support and self.const < 0

    def bound(self, k: int, symbols: list[str]) -> Affine:
        """From ``a*v + rest >= 0``: the bound ``-rest / a`` on variable ``k``."""
        a = self.coeffs[k]
        coeffs = {
            s: Fraction(-c, a)
            for j, (s, c) in enumerate(zip(symbols, self.coeffs, strict=True))
            if j != k
        }
        return Affine._make(coeffs, Fraction(-self.const, a))

    def to_affine(self, symbols: list[str]) -> Affine:
        return Affine._make(
            {s: Fraction(c) for s, c in zip(symbols, self.coeffs, strict=True)},
            Fraction(self.const),
        )


def _combine(lo: _Row, up: _Row, k: int) -> _Row:
    a, b = lo.coeffs[k], -up.coeffs[k]  # both > 0
    ga = math.gcd(a, b)
    a, b = a // ga, b // ga
    coeffs = tuple(b * x + a * y for x, y in zip(lo.coeffs, up.coeffs, strict=True))
    return _Row(coeffs, b * lo.const + a * up.const, lo.history | up.history)


def _prune(rows: list[_Row], prune: bool = True) -> list[_Row]:
    """Drop redundant rows; what is kept implies every dropped row (see the module doc)."""
    if not prune:
        return rows
    best: dict[tuple[int, ...], _Row] = {}
    contradiction = None
    for r in rows:
        if not r.support:
            if r.const < 0 and contradiction is None:
                contradiction = r
            continue  # a constant row that always holds
        other = best.get(r.coeffs)
        if (
            other is None
            or r.const < other.const
            or (r.const == other.const and len(r.history) < len(other.history))
        ):
            best[r.coeffs] = r
    kept = _drop_pair_implied(list(best.values()))
    if contradiction is not None:
        kept.append(contradiction)
    return kept


def _drop_pair_implied(rows: list[_Row]) -> list[_Row]:
    """Remove rows R with ``R >= λ1 Q1 + λ2 Q2`` for kept rows Q1, Q2 and ``λ1, λ2 >= 0``."""
    # Try the most combined (most likely redundant) rows first; the order affects only size.
    order = sorted(rows, key=lambda r: (-len(r.history), -sum(map(abs, r.coeffs)), r.coeffs))
    alive = dict.fromkeys(order)
    minors: dict[tuple[int, int], tuple[int, int, int]] = {}
    for r in order:
        others = [q for q in alive if q is not r]
        if _implied_by_pair(r, others, minors):
            del alive[r]
    return [r for r in rows if r in alive]


def _implied_by_pair(r: _Row, others: list[_Row], minors: dict) -> bool:
    for a, q1 in enumerate(others):
        for q2 in others[a + 1 :]:
            # λ1, λ2 >= 0: each positive (negative) coefficient of r needs a positive
            # (negative) one in q1 or q2.
            if r.pos & ~(q1.pos | q2.pos) or r.neg & ~(q1.neg | q2.neg):
                continue
            key = (id(q1), id(q2))
            minor = minors.get(key)
            if minor is None:
                minor = minors[key] = _minor(q1.coeffs, q2.coeffs)
            if minor[2] and _pair_implies(q1, q2, r, minor):
                return True
    return False


def _minor(c1: tuple[int, ...], c2: tuple[int, ...]) -> tuple[int, int, int]:
    """Coordinates ``(i, j)`` and determinant of a nonsingular 2×2 minor; det 0 if parallel."""
    i = next(t for t, x in enumerate(c1) if x)
    for j in range(len(c1)):
        det = c1[i] * c2[j] - c1[j] * c2[i]
        if det:
            return i, j, det
    return i, i, 0


def _pair_implies(q1: _Row, q2: _Row, r: _Row, minor: tuple[int, int, int]) -> bool:
    c1, c2, cr = q1.coeffs, q2.coeffs, r.coeffs
    i, j, det = minor
    # Cramer's rule on the minor: λ1 = n1/det, λ2 = n2/det; then check every coordinate.
    n1 = cr[i] * c2[j] - cr[j] * c2[i]
    n2 = c1[i] * cr[j] - c1[j] * cr[i]
    if det < 0:
        det, n1, n2 = -det, -n1, -n2
    if n1 < 0 or n2 < 0:
        return False
    if any(det * z != n1 * x + n2 * y for x, y, z in zip(c1, c2, cr, strict=True)):
        return False
    return det * r.const >= n1 * q1.const + n2 * q2.const


# -- validation and printing --------------------------------------------------------------------


def _check_variables(variables: Sequence[str]) -> list[str]:
    if isinstance(variables, str) or not isinstance(variables, Sequence):
        raise InputError(f"variables must be a sequence of names, got {variables!r}")
    names = list(variables)
    for k, v in enumerate(names):
        if not isinstance(v, str) or not v:
            raise InputError(f"variables[{k}] must be a non-empty str, got {v!r}")
        if v in names[:k]:
            raise InputError(f"variables[{k}] = {v!r} repeats an earlier loop variable")
    return names


def _check_constraints(constraints: Sequence[Affine]) -> list[Affine]:
    if isinstance(constraints, str) or not isinstance(constraints, Sequence):
        raise InputError(f"constraints must be a sequence of Affine, got {constraints!r}")
    out = []
    for k, c in enumerate(constraints):
        if not isinstance(c, Affine):
            try:
                c = Affine.constant(c)
            except InputError:
                raise InputError(
                    f"constraints[{k}] must be an Affine (meaning >= 0), got {type(c).__name__}"
                ) from None
        out.append(c)
    return out


def _sorted_bounds(bounds: Iterator[Affine]) -> tuple[Affine, ...]:
    return tuple(sorted(set(bounds), key=lambda b: (not b.is_constant, str(b))))


def _fraction_text(b: Affine) -> tuple[str, bool]:
    """``b`` as ``(numerator)/d`` text; second item says whether it is an integer expression."""
    d = math.lcm(b.const.denominator, *(c.denominator for _, c in b.items()))
    if d == 1:
        return str(b), True
    num = b * d
    text = str(num)
    single = len(num.variables) + (num.const != 0) == 1 and " " not in text
    return (f"{text}/{d}" if single else f"({text})/{d}"), False


def _inequality_text(e: Affine) -> str:
    """``e >= 0`` written with positive coefficients on both sides: ``n >= i + 1``, ``x <= 15``."""
    pos = Affine({v: c for v, c in e.items() if c > 0})
    neg = Affine({v: -c for v, c in e.items() if c < 0})
    if pos.is_constant:
        return f"{neg} <= {e.const}"
    return f"{pos} >= {neg - e.const}"


def _combine_text(many: str, rounding: str, bounds: tuple[Affine, ...]) -> str:
    parts = []
    for b in bounds:
        text, integral = _fraction_text(b)
        parts.append(text if integral else f"{rounding}({text})")
    if len(parts) > 1:
        return f"{many}({', '.join(parts)})"
    return parts[0] if parts else ""


# -- enumeration --------------------------------------------------------------------------------

_Compiled = list[tuple[list[int], int, int]]  # (coeffs on outer variables, base numerator, den)


def _compile(bounds: tuple[Affine, ...], variables: tuple[str, ...], params: Mapping) -> _Compiled:
    # Integer form of each bound, parameters substituted, so the walk does only int arithmetic.
    # The coefficient list covers all variables; zip with the shorter prefix uses the outer ones.
    out = []
    for b in bounds:
        d = math.lcm(b.const.denominator, *(c.denominator for _, c in b.items()))
        base = b.const + sum(c * params[p] for p, c in b.items() if p not in variables)
        out.append(([int(b.coeff(v) * d) for v in variables], int(base * d), d))
    return out


def _walk(compiled: list[tuple[_Compiled, _Compiled]], prefix: list[int]):
    depth = len(prefix)
    lower, upper = compiled[depth]
    lo = max(
        -((-(base + sum(c * x for c, x in zip(cs, prefix, strict=False)))) // d)
        for cs, base, d in lower
    )
    hi = min(
        (base + sum(c * x for c, x in zip(cs, prefix, strict=False))) // d for cs, base, d in upper
    )
    last = depth + 1 == len(compiled)
    for value in range(lo, hi + 1):
        prefix.append(value)
        if last:
            yield tuple(prefix)
        else:
            yield from _walk(compiled, prefix)
        prefix.pop()
