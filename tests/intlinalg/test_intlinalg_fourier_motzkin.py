"""Fourier–Motzkin loop nests against brute-force enumeration of integer points."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from intlinalg_oracles import box_points

from tadiff.errors import InputError
from tadiff.intlinalg import Affine, IntegerSolver, enumerate_points, fourier_motzkin
from tadiff.intlinalg.fourier_motzkin import _eliminate


def _walk_with_bounds(nest, params):
    """Points of the nest through the public ``bounds`` (an independent walker), checking that
    every reached prefix leaves a non-empty *rational* range for the next variable: the nest is
    tight, not just correct."""
    out = []

    def visit(depth, values):
        if depth == len(nest.variables):
            out.append(tuple(values[v] for v in nest.variables))
            return
        r = nest.ranges[depth]
        assert max(b.evaluate(values) for b in r.lower) <= min(b.evaluate(values) for b in r.upper)
        lo, hi = nest.bounds(r.variable, values)
        for v in range(lo, hi + 1):
            visit(depth + 1, {**values, r.variable: v})

    if nest.is_feasible(params):
        visit(0, dict(params))
    return out


# -- the derivation's use: x = I b + K z inside a box ------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_box_solutions_through_kernel_and_loop_bounds_match_brute_force(data):
    m = data.draw(st.integers(1, 4), "equations")
    n = data.draw(st.integers(1, 5), "unknowns")
    A = data.draw(
        st.lists(st.lists(st.integers(-6, 6), min_size=n, max_size=n), min_size=m, max_size=m)
    )
    sizes = data.draw(st.lists(st.integers(1, 8), min_size=n, max_size=n), "box")
    seed = data.draw(st.integers(0, 2**32))

    # One symbolic solve for all b, as the derivation does.
    params = [f"b{i}" for i in range(m)]
    solver = IntegerSolver(A)
    sol = solver.solve_affine([Affine.variable(p) for p in params])
    zs = [f"z{k}" for k in range(n - solver.rank)]
    x = [
        x0 + sum((Affine({z: K_ik}) for z, K_ik in zip(zs, row, strict=True)), Affine())
        for x0, row in zip(sol.particular, sol.kernel, strict=True)
    ]
    constraints = [x_i for x_i in x] + [size - 1 - x_i for x_i, size in zip(x, sizes, strict=True)]
    nest = fourier_motzkin(constraints, zs)

    brute: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for point in box_points(sizes):
        b = tuple(sum(a * v for a, v in zip(row, point, strict=True)) for row in A)
        brute.setdefault(b, []).append(point)

    # The grid: every b of a small bounding box around A·box, else a sample of it plus
    # a sample of the attained b (so both solvable and unsolvable b are checked).
    spans = [range(min(b[i] for b in brute) - 1, max(b[i] for b in brute) + 2) for i in range(m)]
    rng = random.Random(seed)
    if math.prod(len(s) for s in spans) <= 150:
        grid = list(itertools.product(*spans))
    else:
        grid = [tuple(rng.choice(s) for s in spans) for _ in range(60)]
        grid += rng.sample(sorted(brute), min(60, len(brute)))
    for b in grid:
        values = dict(zip(params, b, strict=True))
        expected = sorted(brute.get(b, []))
        if not sol.is_solvable(values):
            assert expected == [], b
            continue
        got = [tuple(sol.point(values, z)) for z in enumerate_points(nest, values)]
        assert sorted(got) == expected, b
        assert len(got) == len(set(got))


# -- symbolic parameters ------------------------------------------------------------------------


@st.composite
def parametric_systems(draw):
    """Random ``c >= 0`` rows over 1-3 variables and 1-2 parameters, inside a constant box."""
    nv = draw(st.integers(1, 3))
    np_ = draw(st.integers(1, 2))
    names = [f"v{k}" for k in range(nv)]
    pars = ["n", "p"][:np_]
    half = draw(st.integers(1, 4))
    rows = []
    for v in names:  # the box, so that brute force over it is complete
        rows += [Affine({v: 1}, half), Affine({v: -1}, half)]
    coeff = st.integers(-3, 3)
    for _ in range(draw(st.integers(1, 5))):
        coeffs = {s: draw(coeff) for s in names + pars}
        rows.append(Affine(coeffs, draw(st.integers(-6, 6))))
    order = draw(st.permutations(names))
    return rows, list(order), pars, half


@settings(max_examples=300, deadline=None)
@given(parametric_systems())
def test_parametric_nest_enumerates_exactly_the_integer_points(system):
    rows, order, pars, half = system
    nest = fourier_motzkin(rows, order)
    plain = _eliminate(rows, order, prune=False)
    assert set(nest.parameters) <= set(pars)
    for count, pv in enumerate(itertools.product(range(-3, 4), repeat=len(pars))):
        params = dict(zip(pars, pv, strict=True))
        # Brute force with plain integer rows (all coefficients here are integers).
        int_rows = [
            (
                [int(r.coeff(v)) for v in order],
                int(r.evaluate({**dict.fromkeys(order, 0), **params})),
            )
            for r in rows
        ]
        brute = [
            point
            for point in itertools.product(range(-half, half + 1), repeat=len(order))
            if all(
                sum(c * x for c, x in zip(cs, point, strict=True)) + k >= 0 for cs, k in int_rows
            )
        ]
        got = list(enumerate_points(nest, params))
        assert got == brute, params  # same points, lexicographic order
        if count % 4 == 0:  # the slower checks on a quarter of the parameter values
            assert _walk_with_bounds(nest, params) == brute
            assert sorted(enumerate_points(plain, params)) == brute  # the textbook nest agrees
        if not nest.is_feasible(params):
            assert brute == []
    # Pruning only ever shrinks the bound lists.
    size = sum(len(r.lower) + len(r.upper) for r in nest.ranges) + len(nest.conditions)
    plain_size = sum(len(r.lower) + len(r.upper) for r in plain.ranges) + len(plain.conditions)
    assert size <= plain_size


@settings(max_examples=150, deadline=None)
@given(parametric_systems(), st.data())
def test_systems_made_empty_by_a_contradicting_row_are_infeasible(system, data):
    # Adding -(R1 + R2) - 1 >= 0 to rows R1, R2 makes the system empty even over the rationals
    # (the three rows sum to -1 >= 0), for every parameter value: FM must say so, not raise.
    rows, order, pars, _ = system
    r1, r2 = data.draw(st.lists(st.sampled_from(rows), min_size=2, max_size=2))
    rows = [*rows, -(r1 + r2) - 1]
    data.draw(st.randoms()).shuffle(rows)
    nest = fourier_motzkin(rows, order)
    for pv in itertools.product(range(-3, 4), repeat=len(pars)):
        params = dict(zip(pars, pv, strict=True))
        assert not nest.is_feasible(params)
        assert list(enumerate_points(nest, params)) == []


def test_empty_systems_have_a_false_condition_and_no_points():
    z, n = Affine.variable("z"), Affine.variable("n")
    never = fourier_motzkin([z - n, n - 1 - z], ["z"])  # n <= z <= n - 1
    assert never.conditions == (Affine.constant(-1),)
    assert not never.is_feasible({"n": 0})
    assert list(enumerate_points(never, {"n": 4})) == []
    assert "infeasible" in str(never)
    odd = fourier_motzkin([2 * z - 1, 1 - 2 * z], ["z"])  # 2z = 1 has no integer solution
    assert not odd.is_feasible({})
    assert list(enumerate_points(odd, {})) == []
    sometimes = fourier_motzkin([z, n - z], ["z"])  # 0 <= z <= n: empty for n < 0
    assert not sometimes.is_feasible({"n": -1}) and sometimes.is_feasible({"n": 0})
    assert list(enumerate_points(sometimes, {"n": -1})) == []
    assert list(enumerate_points(sometimes, {"n": 2})) == [(0,), (1,), (2,)]


# -- redundancy removal ---------------------------------------------------------------------------


def test_duplicate_dominated_and_constant_rows_are_removed():
    z = Affine.variable("z")
    rows = [z, 2 * z, z - 1, 7 - z, 14 - 2 * z, 9 - z, 3 * z + 1, Affine.constant(3)]
    nest = fourier_motzkin(rows, ["z"])
    # By hand: z >= 0 (twice), z >= 1, z >= -1/3 -> z >= 1; z <= 7 (twice), z <= 9 -> z <= 7.
    assert nest.ranges[0].lower == (Affine.constant(1),)
    assert nest.ranges[0].upper == (Affine.constant(7),)
    assert nest.conditions == ()
    assert str(nest) == "1 <= z <= 7"


def test_rows_implied_by_a_pair_are_removed():
    x, y = Affine.variable("x"), Affine.variable("y")
    rows = [x, y, x + y, 5 - x, 5 - y, 10 - x - y, 2 * x + 3 * y + 1]
    nest = fourier_motzkin(rows, ["x", "y"])
    # x + y, 2x + 3y + 1 follow from x, y >= 0; 10 - x - y from x, y <= 5.
    assert [(r.lower, r.upper) for r in nest.ranges] == [
        ((Affine.constant(0),), (Affine.constant(5),)),
        ((Affine.constant(0),), (Affine.constant(5),)),
    ]
    plain = _eliminate(rows, ["x", "y"], prune=False)
    assert len(plain.ranges[1].lower) == 3
    assert list(enumerate_points(plain, {})) == list(enumerate_points(nest, {}))


def test_bounds_that_depend_on_parameters_are_kept():
    z, n = Affine.variable("z"), Affine.variable("n")
    nest = fourier_motzkin([z, z - n, 10 - z], ["z"])
    assert set(nest.ranges[0].lower) == {Affine.constant(0), n}
    assert str(nest) == "max(0, n) <= z <= 10\nif n <= 10"


def test_readable_text_with_fractional_bounds():
    x, z = Affine.variable("x"), Affine.variable("z")
    nest = fourier_motzkin([z, 7 - z, x - 2 * z, 2 * z - x + 1], ["z"])
    assert str(nest) == "max(0, ceil((x - 1)/2)) <= z <= min(7, floor(x/2))\nif x <= 15, x >= 0"
    assert nest.bounds("z", {"x": 5}) == (2, 2)
    assert nest.ranges[0].upper[1].coeff("x") == Fraction(1, 2)


def test_loop_order_decides_which_bounds_depend_on_which():
    i, j, n = (Affine.variable(v) for v in "ijn")
    rows = [i, j, n - 1 - i - j]
    assert (
        str(fourier_motzkin(rows, ["i", "j"])) == "0 <= i <= n - 1\n0 <= j <= -i + n - 1\nif n >= 1"
    )
    assert (
        str(fourier_motzkin(rows, ["j", "i"])) == "0 <= j <= n - 1\n0 <= i <= -j + n - 1\nif n >= 1"
    )


# -- errors ---------------------------------------------------------------------------------------


def test_bad_input_and_unbounded_variables():
    z, w = Affine.variable("z"), Affine.variable("w")
    half_line = fourier_motzkin([z], ["z"])
    assert str(half_line) == "z >= 0"
    with pytest.raises(InputError, match=r"loop variable 'z' is unbounded above"):
        enumerate_points(half_line, {})
    with pytest.raises(InputError, match=r"'z' is unbounded above"):
        half_line.bounds("z", {})
    with pytest.raises(InputError, match=r"'w' is unbounded below"):
        enumerate_points(fourier_motzkin([z, 3 - z, 3 - w], ["z", "w"]), {})
    with pytest.raises(InputError, match=r"no value for parameter\(s\) n"):
        enumerate_points(fourier_motzkin([z, Affine.variable("n") - z], ["z"]), {})
    with pytest.raises(InputError, match=r"'q' is not a loop variable"):
        half_line.bounds("q", {})
    with pytest.raises(InputError, match=r"constraints\[1\] must be an Affine.*str"):
        fourier_motzkin([z, "z <= 3"], ["z"])
    with pytest.raises(InputError, match=r"variables\[1\] = 'z' repeats"):
        fourier_motzkin([z], ["z", "z"])
    with pytest.raises(InputError, match=r"variables must be a sequence of names"):
        fourier_motzkin([z], "z")
    with pytest.raises(InputError, match=r"no value for variable\(s\) n"):
        fourier_motzkin([z, Affine.variable("n") - z], ["z"]).is_feasible({})


def test_no_loop_variables_gives_the_single_empty_point():
    n = Affine.variable("n")
    nest = fourier_motzkin([n - 2], [])
    assert list(enumerate_points(nest, {"n": 3})) == [()]
    assert list(enumerate_points(nest, {"n": 1})) == []
