"""Exact oracles for the intlinalg tests: matrix product, rank, determinant, brute force.

Written without using tadiff.intlinalg, so that the tests compare against something else.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from hypothesis import strategies as st


def matmul(A, B, inner=None):
    """Exact product of list-of-rows matrices; ``inner`` gives the inner size when it is 0."""
    k = len(B) if inner is None else inner
    cols = len(B[0]) if B else 0
    return [[sum(A[i][t] * B[t][j] for t in range(k)) for j in range(cols)] for i in range(len(A))]


def matmul_shape(A, B, m, k, n):
    """Product of an m×k and a k×n matrix, valid also when some size is 0."""
    return [[sum(A[i][t] * B[t][j] for t in range(k)) for j in range(n)] for i in range(m)]


def rank(A) -> int:
    """Rank by Gaussian elimination over the rationals."""
    M = [[Fraction(x) for x in row] for row in A]
    r = 0
    cols = len(M[0]) if M else 0
    for c in range(cols):
        p = next((i for i in range(r, len(M)) if M[i][c]), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        for i in range(len(M)):
            if i != r and M[i][c]:
                f = M[i][c] / M[r][c]
                M[i] = [x - f * y for x, y in zip(M[i], M[r], strict=True)]
        r += 1
    return r


def det(A) -> int:
    """Exact determinant by fraction-free Bareiss elimination (1 for the 0×0 matrix)."""
    M = [row[:] for row in A]
    n = len(M)
    sign, prev = 1, 1
    for k in range(n - 1):
        if M[k][k] == 0:
            p = next((i for i in range(k + 1, n) if M[i][k]), None)
            if p is None:
                return 0
            M[k], M[p] = M[p], M[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                M[i][j] = (M[i][j] * M[k][k] - M[i][k] * M[k][j]) // prev
        prev = M[k][k]
    return sign * M[n - 1][n - 1] if n else 1


def box_points(sizes):
    """All integer points of ``0 <= x_i < sizes[i]``."""
    return itertools.product(*(range(s) for s in sizes))


@st.composite
def int_matrices(draw, max_dim=6, small=30, huge=10**12):
    """m×n integer matrices (m, n in 0..max_dim) of several kinds, with zero rows/columns.

    Kinds: small entries; huge entries (±10^12 mixed with small ones); rank-deficient products
    of thin matrices; and any of them with some rows and columns set to zero.
    """
    m = draw(st.integers(0, max_dim))
    n = draw(st.integers(0, max_dim))
    kind = draw(st.sampled_from(["small", "huge", "product"]))
    entry = st.integers(-small, small)
    if kind == "huge":
        entry = st.one_of(st.integers(-huge, huge), st.sampled_from([huge, -huge]), entry)
    if kind == "product" and min(m, n) > 0:
        k = draw(st.integers(0, min(m, n) - 1))
        f = st.integers(-3, 3)
        B = [[draw(f) for _ in range(k)] for _ in range(m)]
        C = [[draw(f) for _ in range(n)] for _ in range(k)]
        A = matmul_shape(B, C, m, k, n)
    else:
        A = [[draw(entry) for _ in range(n)] for _ in range(m)]
    for i in draw(st.sets(st.integers(0, max(m - 1, 0)), max_size=2)):
        if i < m:
            A[i] = [0] * n
    for j in draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=2)):
        for row in A:
            if j < n:
                row[j] = 0
    return A, m, n
