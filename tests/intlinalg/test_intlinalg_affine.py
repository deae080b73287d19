"""Affine: arithmetic checked by evaluation at random points, printing, and input errors."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.errors import InputError
from tadiff.intlinalg import Affine

NAMES = ["i", "j", "n"]
scalars = st.one_of(st.integers(-9, 9), st.fractions(min_value=-9, max_value=9, max_denominator=6))
affines = st.builds(Affine, st.dictionaries(st.sampled_from(NAMES), scalars), scalars)
points = st.fixed_dictionaries({v: st.integers(-20, 20) for v in NAMES})


@settings(max_examples=150, deadline=None)
@given(affines, affines, scalars, points)
def test_arithmetic_matches_evaluation(a, b, c, at):
    va, vb = a.evaluate(at), b.evaluate(at)
    assert (a + b).evaluate(at) == va + vb
    assert (a - b).evaluate(at) == va - vb
    assert (c - a).evaluate(at) == c - va
    assert (a + c).evaluate(at) == (c + a).evaluate(at) == va + c
    assert (-a).evaluate(at) == -va
    assert (a * c).evaluate(at) == (c * a).evaluate(at) == va * c
    if c:
        assert (a / c).evaluate(at) == va / c
    # substitute i -> b, then evaluate == evaluate with i = b(at)
    assert a.substitute({"i": b}).evaluate(at) == a.evaluate({**at, "i": vb})
    assert a == Affine(dict(a.coeffs), a.const) and hash(a) == hash(Affine(dict(a.coeffs), a.const))
    assert a.is_integral == all(x.denominator == 1 for x in [a.const, *a.coeffs.values()])


def test_printing_is_readable_and_sorted():
    i, n = Affine.variable("i"), Affine.variable("n")
    assert str(2 * i - n + 1) == "2*i - n + 1"
    assert str(i / 2 - Fraction(3, 2)) == "(1/2)*i - 3/2"
    assert str(Affine()) == "0"
    assert str(-n - i) == "-i - n"
    assert str(Affine.constant(Fraction(-3, 2))) == "-3/2"
    assert str(-i / 2) == "-(1/2)*i"


def test_views_and_equality_with_numbers():
    e = Affine({"j": 0, "i": 3}, 2)
    assert e.variables == frozenset({"i"}) and e.coeff("j") == 0 and e.coeff("i") == 3
    assert Affine.constant(3) == 3 and hash(Affine.constant(3)) == hash(3)
    assert Affine.constant(3).is_constant and not e.is_constant
    assert (e * Affine.constant(2)).coeff("i") == 6


def test_bad_inputs():
    i = Affine.variable("i")
    with pytest.raises(InputError, match=r"product of two non-constant affine functions"):
        i * (i + 1)
    with pytest.raises(InputError, match=r"coefficient of 'i' must be an int or fractions"):
        Affine({"i": 0.5})
    with pytest.raises(InputError, match=r"coefficient of 'i' .* got bool"):
        Affine({"i": True})
    with pytest.raises(InputError, match=r"Affine constant must be"):
        Affine({}, "1")
    with pytest.raises(InputError, match=r"names must be non-empty str"):
        Affine({3: 1})
    with pytest.raises(InputError, match=r"no value for variable\(s\) i, n"):
        (i + Affine.variable("n")).evaluate({"j": 1})
    with pytest.raises(InputError, match=r"division of \(i\) by zero"):
        i / 0
    with pytest.raises(InputError, match=r"division by the non-constant"):
        i / i
    with pytest.raises(TypeError):
        i + 0.5
