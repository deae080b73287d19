"""The Omega test: integer feasibility and ranges against brute-force enumeration of a box."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.intlinalg.affine import Affine
from tadiff.intlinalg.omega import ProofBudgetExceeded, integer_feasible, integer_range

NAMES = ["x", "y", "z"]
BOX = 6  # every system below includes -BOX <= v <= BOX, so enumeration is exhaustive


def _box(names):
    return [c for v in names for c in (Affine.variable(v) + BOX, BOX - Affine.variable(v))]


def _points(ineqs, eqs, names):
    for values in itertools.product(range(-BOX, BOX + 1), repeat=len(names)):
        point = dict(zip(names, values, strict=True))
        if all(a.evaluate(point) >= 0 for a in ineqs) and all(e.evaluate(point) == 0 for e in eqs):
            yield point


@st.composite
def systems(draw):
    names = NAMES[: draw(st.integers(1, 3))]

    def row():
        coeffs = {v: draw(st.integers(-5, 5)) for v in names}
        return Affine(coeffs, draw(st.integers(-12, 12)))

    ineqs = [row() for _ in range(draw(st.integers(0, 4)))]
    eqs = [row() for _ in range(draw(st.integers(0, 2)))]
    return names, [*_box(names), *ineqs], eqs


@settings(max_examples=120, deadline=timedelta(seconds=10), derandomize=True, database=None)
@given(systems())
def test_feasibility_matches_enumeration(system):
    names, ineqs, eqs = system
    expected = next(_points(ineqs, eqs, names), None) is not None
    assert integer_feasible(ineqs, eqs) == expected


@settings(max_examples=60, deadline=timedelta(seconds=10), derandomize=True, database=None)
@given(systems(), st.lists(st.integers(-3, 3), min_size=3, max_size=3), st.integers(1, 3))
def test_range_matches_enumeration(system, coeffs, den):
    names, ineqs, eqs = system
    expr = Affine(dict(zip(names, coeffs, strict=False)), 1) / den
    values = [expr.evaluate(p) for p in _points(ineqs, eqs, names)]
    whole = [int(v) for v in values if v.denominator == 1]  # positions at an integer
    expected = (min(whole), max(whole)) if whole else None
    assert integer_range(expr, ineqs, eqs) == expected


def test_rational_shadow_is_not_an_integer_point():
    # 1/3 <= x <= 2/3 is a rational interval without integers; Fourier-Motzkin alone says yes
    x, y = Affine.variable("x"), Affine.variable("y")
    assert not integer_feasible([3 * x - 1, 2 - 3 * x])
    # the classic dark-shadow case: 27 <= 11x + 13y <= 45, -10 <= 7x - 9y <= 4 has no point
    assert not integer_feasible(
        [11 * x + 13 * y - 27, 45 - 11 * x - 13 * y, 7 * x - 9 * y + 10, 4 - 7 * x + 9 * y]
    )
    # equalities with no unit coefficient: 6x + 10y = 8 has integer solutions, 6x + 10y = 7 not
    assert integer_feasible([], [6 * x + 10 * y - 8])
    assert not integer_feasible([], [6 * x + 10 * y - 7])


def test_huge_coefficients_stay_exact():
    # 10**12 * i - 10**12 * j + i over 0 <= i, j <= 2 with i == j reaches only 0..2
    i, j = Affine.variable("i"), Affine.variable("j")
    big = 10**12
    domain = [i, 2 - i, j, 2 - j]
    assert integer_range(big * i - big * j + i, domain, [i - j]) == (0, 2)
    assert integer_range(big * i - big * j + i, domain) == (-2 * big, 2 * big + 2)


def test_budget_is_reported():
    x = Affine.variable("x")
    with pytest.raises(ProofBudgetExceeded, match="gave up"):
        integer_feasible([x, 10 - x, 3 * x - 1], budget=0)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(systems(), st.lists(st.integers(-3, 3), min_size=3, max_size=3), st.integers(1, 3))
def test_omega_against_enumeration_stress(system, coeffs, den):
    """Both properties above on many more systems (``pytest -m slow``, about two minutes)."""
    test_feasibility_matches_enumeration.hypothesis.inner_test(system)
    test_range_matches_enumeration.hypothesis.inner_test(system, coeffs, den)
