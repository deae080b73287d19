"""Exact integer feasibility of affine systems: Pugh's Omega test.

Fourier–Motzkin (:mod:`~tadiff.intlinalg.fourier_motzkin`) decides a system over the
*rationals*: its shadow of a variable can contain points with no integer preimage. The bounds
checker needs the integer answer — ``0 <= c <= floor((l + 1)/2)`` never lets ``2*l - 2*c``
reach ``-1`` at ``l = 0``, although ``c = 1/2`` does — so it asks this module:

* :func:`integer_feasible` — does ``{v : ineqs >= 0, eqs == 0}`` contain an integer point?
* :func:`integer_range` — the smallest and largest integer value of an expression on it.

Every name is an integer variable (substitute concrete sizes first). The method (W. Pugh, *The
Omega test: a fast and practical integer programming algorithm for dependence analysis*, 1991):

1. Rows are kept with coprime integer coefficients; an inequality's constant is rounded down to
   a multiple of their gcd (``2x - 1 >= 0`` is ``x - 1 >= 0``), an equality whose constant is
   not such a multiple has no integer point.
2. Equalities are eliminated: a unit coefficient is solved for directly; otherwise Pugh's
   "mod hat" substitution brings in a new variable and shrinks the coefficients, until one is
   a unit.
3. A variable bounded on one side only is dropped with its rows. A variable whose lower (or
   upper) bounds all have coefficient 1 is eliminated exactly by Fourier–Motzkin. Otherwise
   the *dark shadow* (combinations tightened by ``(a-1)(b-1)``) having a point proves a point,
   the *real shadow* having none proves there is none, and in between the *splinters* — the
   equalities ``a x = lower + j`` for the few ``j`` that remain — are tried one by one.

Each call has a budget of steps (:data:`BUDGET`); a system that needs more raises
:class:`ProofBudgetExceeded` rather than running for long (never seen on index systems, which
have few variables and small coefficients).

Example:
    >>> from tadiff.intlinalg.affine import Affine
    >>> l, c = Affine.variable("l"), Affine.variable("c")
    >>> domain = [l, 1 - l, c, (l + 1) / 2 - c]          # 0 <= l <= 1, 0 <= c <= (l + 1)/2
    >>> integer_feasible([*domain, -(2 * l - 2 * c) - 1])  # can 2*l - 2*c be <= -1?
    False
    >>> integer_range(2 * l - 2 * c, domain)
    (0, 2)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tadiff.errors import TadiffError
from tadiff.intlinalg.affine import Affine

__all__ = ["BUDGET", "ProofBudgetExceeded", "integer_feasible", "integer_range"]

BUDGET = 20_000
"""Steps (rows built, systems split) one question may take before giving up."""


class ProofBudgetExceeded(TadiffError, RuntimeError):
    """The integer question needed more than :data:`BUDGET` steps."""


# a row is (coeffs, const): sum(coeffs[v] * v) + const >= 0 (or == 0), integer coefficients
_Row = tuple[dict[str, int], int]


def _rows(affines: Sequence[Affine]) -> list[_Row]:
    rows = []
    for a in affines:
        scale = math.lcm(a.const.denominator, *(c.denominator for _, c in a.items()))
        rows.append(({v: int(c * scale) for v, c in a.items()}, int(a.const * scale)))
    return rows


class _Search:
    def __init__(self, budget: int):
        self.steps = budget
        self.fresh = 0

    def spend(self, n: int = 1) -> None:
        self.steps -= n
        if self.steps < 0:
            raise ProofBudgetExceeded(
                f"the integer bounds proof needed more than {BUDGET} steps and gave up"
            )

    def new_variable(self) -> str:
        self.fresh += 1
        return f"_omega{self.fresh}"

    # -- equalities -------------------------------------------------------------------------
    def solve(self, eqs: list[_Row], ineqs: list[_Row]) -> bool:
        self.spend()
        eqs, ineqs = list(eqs), list(ineqs)
        while eqs:
            coeffs, const = eqs.pop()
            coeffs = {v: c for v, c in coeffs.items() if c}
            if not coeffs:
                if const:
                    return False
                continue
            g = math.gcd(*coeffs.values())
            if const % g:
                return False
            coeffs, const = {v: c // g for v, c in coeffs.items()}, const // g
            var = min(coeffs, key=lambda v: (abs(coeffs[v]), v))
            a = coeffs[var]
            if abs(a) == 1:
                # var = -(rest + const) / a, substituted everywhere
                rest = {v: -c * a for v, c in coeffs.items() if v != var}
                value = (rest, -const * a)
            else:
                # Pugh's mod hat: m = |a| + 1 and a new variable s with
                # m*s = sum(mh(c) v) + mh(const); mh(a) = -sign(a) solves for var with smaller
                # coefficients everywhere else
                m = abs(a) + 1
                s = self.new_variable()
                sign = 1 if a > 0 else -1
                rest = {v: sign * _mod_hat(c, m) for v, c in coeffs.items() if v != var}
                rest[s] = -sign * m
                value = (rest, sign * _mod_hat(const, m))
            eqs = [_substitute(r, var, value) for r in eqs]
            eqs.append(_substitute((coeffs, const), var, value))
            ineqs = [_substitute(r, var, value) for r in ineqs]
            self.spend(len(ineqs))
        return self.inequalities(ineqs)

    # -- inequalities -----------------------------------------------------------------------
    def inequalities(self, ineqs: list[_Row]) -> bool:
        while True:
            tight: dict[tuple, tuple[dict[str, int], int]] = {}
            for coeffs, const in ineqs:
                coeffs = {v: c for v, c in coeffs.items() if c}
                if not coeffs:
                    if const < 0:
                        return False
                    continue
                g = math.gcd(*coeffs.values())
                coeffs, const = {v: c // g for v, c in coeffs.items()}, const // g
                key = tuple(sorted(coeffs.items()))
                if key not in tight or const < tight[key][1]:
                    tight[key] = (coeffs, const)
            for key, (coeffs, const) in tight.items():
                opposite = tight.get(tuple(sorted((v, -c) for v, c in coeffs.items())))
                if opposite is not None:
                    if const + opposite[1] < 0:
                        return False
                    if const + opposite[1] == 0:  # two opposite rows meet: an equality
                        rows = [r for k, r in tight.items() if r is not opposite and k != key]
                        return self.solve([(coeffs, const)], rows)
            ineqs = list(tight.values())
            if not ineqs:
                return True
            variables = sorted({v for coeffs, _ in ineqs for v in coeffs})
            best = None
            for v in variables:
                lower = [r for r in ineqs if r[0].get(v, 0) > 0]
                upper = [r for r in ineqs if r[0].get(v, 0) < 0]
                if not lower or not upper:  # unbounded on one side: v can satisfy its rows
                    best = ((-1,), v, lower, upper, None)
                    break
                exact = all(r[0][v] == 1 for r in lower) or all(r[0][v] == -1 for r in upper)
                # splinters needed on either side (few where that side's coefficients are small)
                sides = [(_splinters(lower, upper, v), lower), (_splinters(upper, lower, v), upper)]
                count, side = min(sides, key=lambda t: t[0])
                score = (0 if exact else 1, 0 if exact else count, len(lower) * len(upper))
                if best is None or score < best[0]:
                    best = (score, v, lower, upper, None if exact else side)
            _, v, lower, upper, side = best
            rest = [r for r in ineqs if v not in r[0]]
            if not lower or not upper:
                ineqs = rest
                continue
            real = [_combine(lo, up, v, 0) for lo in lower for up in upper]
            self.spend(len(real))
            if side is None:  # exact: the real shadow is the integer projection
                ineqs = rest + real
                continue
            dark = [
                _combine(lo, up, v, (lo[0][v] - 1) * (-up[0][v] - 1))
                for lo in lower
                for up in upper
            ]
            if self.inequalities(rest + dark):
                return True
            if not self.inequalities(rest + real):
                return False
            # splinters: a point in the real shadow but not the dark one lies close to a bound
            # of one side, |a|*v = bound + j with 0 <= j <= (m*|a| - |a| - m)/m (m: the largest
            # coefficient of the other side)
            other = upper if side is lower else lower
            m = max(abs(r[0][v]) for r in other)
            self.spend(_splinters(side, other, v))
            for coeffs, const in side:
                a = abs(coeffs[v])
                for j in range((m * a - a - m) // m + 1):
                    if self.solve([(coeffs, const - j)], ineqs):
                        return True
            return False


def _splinters(side: list[_Row], other: list[_Row], var: str) -> int:
    """How many equalities the splinters of ``side`` try."""
    m = max(abs(r[0][var]) for r in other)
    return sum(max(0, (m * abs(r[0][var]) - abs(r[0][var]) - m) // m + 1) for r in side)


def _mod_hat(a: int, m: int) -> int:
    """``a - m * floor(a/m + 1/2)``: the residue of ``a`` modulo ``m`` closest to zero."""
    return a - m * ((2 * a + m) // (2 * m))


def _substitute(row: _Row, var: str, value: _Row) -> _Row:
    coeffs, const = row
    c = coeffs.get(var, 0)
    if not c:
        return row
    out = {v: k for v, k in coeffs.items() if v != var}
    for v, k in value[0].items():
        out[v] = out.get(v, 0) + c * k
    return out, const + c * value[1]


def _combine(lower: _Row, upper: _Row, var: str, tighten: int) -> _Row:
    a, b = lower[0][var], -upper[0][var]
    coeffs = dict.fromkeys({*lower[0], *upper[0]} - {var}, 0)
    for v in coeffs:
        coeffs[v] = b * lower[0].get(v, 0) + a * upper[0].get(v, 0)
    return coeffs, b * lower[1] + a * upper[1] - tighten


def integer_feasible(
    inequalities: Sequence[Affine], equalities: Sequence[Affine] = (), budget: int = BUDGET
) -> bool:
    """Whether some integer point satisfies every ``a >= 0`` and every ``e == 0``.

    Args:
        inequalities: Affines meaning ``a >= 0`` (rational coefficients are scaled to integers).
        equalities: Affines meaning ``e == 0``.
        budget: steps before :class:`ProofBudgetExceeded` is raised.

    Example:
        >>> x = Affine.variable("x")
        >>> integer_feasible([2 * x - 1, 1 - 2 * x + 1])   # 1/2 <= x <= 1: x = 1
        True
        >>> integer_feasible([3 * x - 1, 2 - 3 * x])       # 1/3 <= x <= 2/3: none
        False
    """
    return _Search(budget).solve(_rows(equalities), _rows(inequalities))


def integer_range(
    expr: Affine,
    inequalities: Sequence[Affine],
    equalities: Sequence[Affine] = (),
    budget: int = BUDGET,
) -> tuple[int, int] | None:
    """The smallest and largest integer value of ``expr`` at integer points of the system, or
    None if it takes none (``expr`` may have rational coefficients: points where it is not an
    integer are left out, as an index must be one to be read).

    Found by bisection on :func:`integer_feasible` between the rational extremes.

    Example:
        >>> i = Affine.variable("i")
        >>> integer_range(2 * i + 1, [i, 3 - i])
        (1, 7)
    """
    from tadiff.intlinalg.fourier_motzkin import fourier_motzkin

    probe = "_omega_value"
    value = Affine.variable(probe)
    if not integer_feasible([*inequalities, value - expr, expr - value], equalities, budget):
        return None
    rows = [*inequalities, *equalities, *(-e for e in equalities), value - expr, expr - value]
    names = sorted(set().union(*(r.variables for r in rows)) - {probe})
    nest = fourier_motzkin(rows, [probe, *names])
    first = nest.ranges[0]
    if not first.lower or not first.upper:
        raise ProofBudgetExceeded(f"the values of {expr} are unbounded on this system")
    # rational extremes bracket the integer ones
    lo = max(math.ceil(b.evaluate({})) for b in first.lower)
    hi = min(math.floor(b.evaluate({})) for b in first.upper)

    def reaches(bound: int, above: bool) -> bool:
        limit = value - bound if above else bound - value
        extra = [*inequalities, limit, value - expr, expr - value]
        return integer_feasible(extra, equalities, budget)

    def extreme(above: bool) -> int:
        good, bad = (lo, hi + 1) if above else (hi, lo - 1)
        while abs(bad - good) > 1:
            mid = (good + bad) // 2
            if reaches(mid, above):
                good = mid
            else:
                bad = mid
        return good

    return extreme(False), extreme(True)
