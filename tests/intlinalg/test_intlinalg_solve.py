"""IntegerSolver: pseudo-inverse, kernel, cokernel and solve against exact oracles."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from intlinalg_oracles import int_matrices, matmul_shape, rank

from tadiff.errors import InputError, ShapeError
from tadiff.intlinalg import Affine, IntegerSolver

SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(int_matrices())
def test_pinv_kernel_cokernel_identities(case):
    A, m, n = case
    solver = IntegerSolver(A, ncols=n)
    r = rank(A)
    I, K, C = solver.pinv, solver.kernel, solver.cokernel
    assert solver.shape == (m, n)
    assert solver.rank == r
    assert matmul_shape(matmul_shape(A, I, m, n, m), A, m, m, n) == A
    assert all(isinstance(x, Fraction) for row in I for x in row)
    assert len(K) == n and all(len(row) == n - r for row in K)
    assert len(C) == m - r and all(len(row) == m for row in C)
    assert matmul_shape(A, K, m, n, n - r) == [[0] * (n - r) for _ in range(m)]
    assert matmul_shape(C, A, m - r, m, n) == [[0] * n for _ in range(m - r)]
    # Full rank bases: dim ker A = n - r and dim coker A = m - r.
    assert rank(K) == n - r
    assert rank(C) == m - r


def _in_integer_span(K, x):
    """Is x = K z for an integer z? (K has full column rank: solve over Q, check integrality.)"""
    n, k = len(K), len(K[0]) if K else 0
    M = [[Fraction(v) for v in K[i]] + [Fraction(x[i])] for i in range(n)]
    row = 0
    pivots = []
    for c in range(k):
        p = next((i for i in range(row, n) if M[i][c]), None)
        assert p is not None, "kernel columns are dependent"
        M[row], M[p] = M[p], M[row]
        M[row] = [v / M[row][c] for v in M[row]]
        for i in range(n):
            if i != row and M[i][c]:
                M[i] = [a - M[i][c] * b for a, b in zip(M[i], M[row], strict=True)]
        pivots.append(row)
        row += 1
    if any(M[i][k] for i in range(row, n)):
        return False
    return all(M[i][k].denominator == 1 for i in pivots)


@settings(max_examples=60, deadline=None)
@given(int_matrices(max_dim=3, small=4))
def test_kernel_spans_every_integer_kernel_vector_in_a_box(case):
    # A sublattice of full rank would pass A K = 0; saturation needs this brute-force check.
    A, _, n = case
    solver = IntegerSolver(A, ncols=n)
    for x in itertools.product(range(-3, 4), repeat=n):
        if all(sum(a * v for a, v in zip(row, x, strict=True)) == 0 for row in A):
            assert _in_integer_span(solver.kernel, x), x


def _unsolvable_certificate(solver, b):
    """A rational y with y A integral and y b not: proof that A x = b has no integer x."""
    U, diag, r = solver.smith.U, solver.smith.diagonal, solver.rank
    c = [sum(u * v for u, v in zip(row, b, strict=True)) for row in U]
    for i in range(len(U)):
        if i >= r and c[i]:
            return [Fraction(u, 2 * abs(c[i])) for u in U[i]]
        if i < r and c[i] % diag[i]:
            return [Fraction(u, diag[i]) for u in U[i]]
    return None


@SETTINGS
@given(int_matrices(max_dim=5, small=8), st.data())
def test_solve_returns_a_solution_or_a_proof_of_none_exists(case, data):
    A, m, n = case
    solver = IntegerSolver(A, ncols=n)
    if data.draw(st.booleans()):
        x_true = data.draw(st.lists(st.integers(-9, 9), min_size=n, max_size=n))
        b = [sum(a * v for a, v in zip(row, x_true, strict=True)) for row in A]
    else:
        b = data.draw(st.lists(st.integers(-20, 20), min_size=m, max_size=m))
    x = solver.solve(b)
    if x is not None:
        assert [sum(a * v for a, v in zip(row, x, strict=True)) for row in A] == b
    else:
        y = _unsolvable_certificate(solver, b)
        assert y is not None
        yA = [sum(y[i] * A[i][j] for i in range(m)) for j in range(n)]
        assert all(v.denominator == 1 for v in yA)
        assert sum(yi * bi for yi, bi in zip(y, b, strict=True)).denominator != 1


@settings(max_examples=80, deadline=None)
@given(int_matrices(max_dim=4, small=6), st.data())
def test_solve_affine_agrees_with_solve_for_every_parameter_value(case, data):
    A, m, n = case
    solver = IntegerSolver(A, ncols=n)
    # b_i = sum_j P[i][j] * p_j + q_i with random integer P, q: two parameters p0, p1.
    P = data.draw(
        st.lists(st.lists(st.integers(-3, 3), min_size=2, max_size=2), min_size=m, max_size=m)
    )
    q = data.draw(st.lists(st.integers(-5, 5), min_size=m, max_size=m))
    b = [Affine({"p0": P[i][0], "p1": P[i][1]}, q[i]) for i in range(m)]
    sol = solver.solve_affine(b)
    assert sol.kernel == solver.kernel
    assert all(e.is_integral for e, _ in sol.congruences)
    assert all(d >= 2 for _, d in sol.congruences)
    for p0, p1 in itertools.product(range(-4, 5), repeat=2):
        values = {"p0": p0, "p1": p1}
        concrete = [int(e.evaluate(values)) for e in b]
        x = solver.solve(concrete)
        assert sol.is_solvable(values) == (x is not None), values
        if x is not None:
            z = [0] * (n - solver.rank)
            x0 = sol.point(values, z)
            assert [sum(a * v for a, v in zip(row, x0, strict=True)) for row in A] == concrete
            assert all(e.evaluate(values).denominator == 1 for e in sol.particular)


def test_demo_system_solution_and_kernel():
    solver = IntegerSolver([[1, -2, -2]])
    x = solver.solve([3])
    assert x[0] - 2 * x[1] - 2 * x[2] == 3
    sol = solver.solve_affine([Affine.variable("b")])
    assert sol.equalities == () and sol.congruences == ()
    x = sol.point({"b": 5}, [1, 2])
    assert x[0] - 2 * x[1] - 2 * x[2] == 5


def test_conditions_of_an_even_and_a_dependent_system():
    # 2x = p needs p even; rows (1, 1) and (2, 2) need p1 = 2 p0.
    sol = IntegerSolver([[2]]).solve_affine([Affine.variable("p")])
    assert [(str(e), d) for e, d in sol.congruences] == [("p", 2)]
    sol = IntegerSolver([[1, 1], [2, 2]]).solve_affine(
        [Affine.variable("p0"), Affine.variable("p1")]
    )
    assert len(sol.equalities) == 1
    e = sol.equalities[0]
    assert e.evaluate({"p0": 3, "p1": 6}) == 0 and e.evaluate({"p0": 3, "p1": 5}) != 0
    never = IntegerSolver([[0]]).solve_affine([1])
    assert never.equalities == (Affine.constant(-1),) or never.equalities == (Affine.constant(1),)
    assert not never.is_solvable({})


def test_bad_right_hand_sides():
    solver = IntegerSolver([[1, 2], [3, 4]])
    with pytest.raises(ShapeError, match=r"b has 3 entries, expected m = 2"):
        solver.solve([1, 2, 3])
    with pytest.raises(InputError, match=r"solve: b\[1\] must be an int, got float"):
        solver.solve([1, 2.5])
    with pytest.raises(InputError, match=r"solve_affine: b\[0\] must be an Affine.*str"):
        solver.solve_affine(["x", 1])
    with pytest.raises(ShapeError, match=r"z has 1 entries, expected n - rank = 0"):
        solver.solve_affine([1, 2]).point({}, [0])
    with pytest.raises(InputError, match=r"no integer solution"):
        IntegerSolver([[2]]).solve_affine([Affine.variable("p")]).point({"p": 1}, [])
    with pytest.raises(InputError, match=r"row 0, column 1.*float"):
        IntegerSolver([[1, 0.5]])
