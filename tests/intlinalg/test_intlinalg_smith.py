"""Smith normal form and xgcd against exact oracles (products, Bareiss determinants, rank)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from intlinalg_oracles import det, int_matrices, matmul_shape, rank

from tadiff.errors import InputError, ShapeError
from tadiff.intlinalg import smith_normal_form, xgcd

SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(st.integers(-(10**15), 10**15), st.integers(-(10**15), 10**15))
def test_xgcd_gives_gcd_and_bezout_coefficients(a, b):
    g, s, t = xgcd(a, b)
    assert g == math.gcd(a, b)
    assert s * a + t * b == g


@SETTINGS
@given(int_matrices())
def test_smith_form_is_U_A_V_diagonal_with_divisibility_chain(case):
    A, m, n = case
    snf = smith_normal_form(A, ncols=n)
    S, U, V, r = snf.S, snf.U, snf.V, snf.rank
    assert matmul_shape(matmul_shape(U, A, m, m, n), V, m, n, n) == S
    assert abs(det(U)) == 1
    assert abs(det(V)) == 1
    assert r == rank(A)
    for i in range(m):
        for j in range(n):
            if i != j or i >= r:
                assert S[i][j] == 0, (i, j)
    diag = [S[i][i] for i in range(r)]
    assert all(d > 0 for d in diag)
    assert all(diag[k + 1] % diag[k] == 0 for k in range(r - 1))
    assert snf.diagonal == diag


def test_smith_form_invariants_of_a_known_matrix():
    # Invariant factors by determinantal divisors: d1 = gcd of entries = 2, d1*d2 = |det| = 12.
    A = [[2, 4, 4], [-6, 6, 12], [10, -4, -16]]
    snf = smith_normal_form(A)
    entries_gcd = math.gcd(*(x for row in A for x in row))
    minors_gcd = math.gcd(
        *(
            A[i][k] * A[j][l] - A[i][l] * A[j][k]
            for i in range(3)
            for j in range(i + 1, 3)
            for k in range(3)
            for l in range(k + 1, 3)
        )
    )
    assert snf.diagonal == [entries_gcd, minors_gcd // entries_gcd, abs(det(A)) // minors_gcd]


def test_huge_entries_stay_exact():
    big = 10**12
    A = [[big, big + 1, 3], [-big, 7, big - 1], [2 * big, 0, -big]]
    snf = smith_normal_form(A)
    assert matmul_shape(matmul_shape(snf.U, A, 3, 3, 3), snf.V, 3, 3, 3) == snf.S
    assert snf.diagonal[0] * snf.diagonal[1] * snf.diagonal[2] == abs(det(A))


def test_empty_matrices():
    assert smith_normal_form([]).rank == 0
    snf = smith_normal_form([], ncols=3)
    assert (snf.S, snf.U, snf.V) == ([], [], [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    snf = smith_normal_form([[], []])
    assert (snf.S, snf.U, snf.V, snf.rank) == ([[], []], [[1, 0], [0, 1]], [], 0)


def test_numpy_integer_arrays_are_accepted():
    snf = smith_normal_form(np.array([[2, 4], [6, 8]], dtype=np.int64))
    assert snf.S == [[2, 0], [0, 4]]
    assert smith_normal_form(np.zeros((0, 2), dtype=int)).V == [[1, 0], [0, 1]]


@pytest.mark.parametrize(
    ("A", "error", "pattern"),
    [
        ([[1, 2], [3]], ShapeError, r"row 1 has 1 entries, expected 2"),
        ([[1, 2.0]], InputError, r"row 0, column 1.*float"),
        ([[1, 2], [3, Fraction(1, 2)]], InputError, r"row 1, column 1.*Fraction"),
        ([[True, 2]], InputError, r"row 0, column 0.*bool"),
        ([[1, "2"]], InputError, r"row 0, column 1.*str"),
        ([1, 2], ShapeError, r"row 0 must be a list of ints"),
        ("12", InputError, r"A must be a list of rows"),
        (np.ones((2, 2, 2), dtype=int), ShapeError, r"2-D matrix.*\(2, 2, 2\)"),
        (np.array([[1.5, 2.0]]), InputError, r"row 0, column 0.*float"),
    ],
)
def test_bad_matrices_are_rejected_with_position(A, error, pattern):
    with pytest.raises(error, match=pattern):
        smith_normal_form(A)


def test_ncols_must_agree_with_rows():
    with pytest.raises(ShapeError, match=r"row 0 has 2 entries, expected 3"):
        smith_normal_form([[1, 2]], ncols=3)
    with pytest.raises(InputError, match=r"ncols must be a non-negative int"):
        smith_normal_form([], ncols=-1)


def test_xgcd_rejects_non_integers():
    with pytest.raises(InputError, match=r"xgcd: b must be an int, got float"):
        xgcd(4, 2.0)
