"""Extended gcd and the Smith normal form ``S = U A V`` of an integer matrix.

Everything is exact Python ``int`` arithmetic. A row or column is cleared by Euclid's algorithm
run on all its entries at once: each is reduced by the pivot with the nearest-integer quotient
(so the remainder is at most half the pivot) and the smallest remainder becomes the next pivot.
Only additions of integer multiples and swaps are used, so U and V stay integral and unimodular,
and the pivot shrinks at every round; nearest quotients and smallest pivots keep U and V small
(on 5×6 matrices with entries in [-30, 30] their entries have about half the bit length that
2×2 Bézout steps give).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from tadiff.errors import InputError, ShapeError

Matrix = list[list[int]]


def xgcd(a: int, b: int) -> tuple[int, int, int]:
    """Extended Euclid: ``(g, s, t)`` with ``g = gcd(a, b) >= 0`` and ``s*a + t*b == g``.

    Args:
        a, b: integers of any size.

    Returns:
        ``(g, s, t)``; ``xgcd(0, 0) == (0, 0, 0)``.

    Example:
        >>> xgcd(12, -18)
        (6, -1, -1)
    """
    a = _as_int(a, "xgcd: a")
    b = _as_int(b, "xgcd: b")
    old_r, r = a, b
    old_s, s = 1, 0
    old_t, t = 0, 1
    while r:
        q = old_r // r
        old_r, r = r, old_r - q * r
        old_s, s = s, old_s - q * s
        old_t, t = t, old_t - q * t
    if old_r < 0:
        old_r, old_s, old_t = -old_r, -old_s, -old_t
    if old_r == 0:
        return 0, 0, 0
    return old_r, old_s, old_t


@dataclass(frozen=True, eq=False)
class SmithNormalForm:
    """Result of :func:`smith_normal_form`: ``S == U @ A @ V``.

    Attributes:
        S: m×n diagonal; ``S[i][i] > 0`` for ``i < rank``, each dividing the next; zero after.
        U: m×m unimodular (integer, determinant ±1).
        V: n×n unimodular.
        rank: number of nonzero diagonal entries.
    """

    S: Matrix
    U: Matrix
    V: Matrix
    rank: int

    @property
    def diagonal(self) -> list[int]:
        """The nonzero diagonal ``[S[0][0], ..., S[rank-1][rank-1]]``."""
        return [self.S[i][i] for i in range(self.rank)]


def smith_normal_form(A: Sequence[Sequence[int]], *, ncols: int | None = None) -> SmithNormalForm:
    """Smith normal form ``S = U A V`` of an integer matrix, with its unimodular transforms.

    Args:
        A: m×n integer matrix as a list of rows (lists/tuples of ``int``; a 2-D NumPy integer
            array is accepted too). ``[]`` is the 0×0 matrix.
        ncols: number of columns; needed only to describe a 0×n matrix (``A == []``), otherwise
            it must agree with the rows.

    Returns:
        :class:`SmithNormalForm` with ``S`` (m×n), ``U`` (m×m), ``V`` (n×n), ``rank``. The kernel
        of A is spanned by the columns ``rank..`` of V, the cokernel by the rows ``rank..`` of U;
        both are put in a reduced echelon form so that they are short and readable.

    Raises:
        ShapeError: ragged rows, or ``ncols`` disagreeing with the rows.
        InputError: an entry that is not an integer (float, Fraction, bool, str, ...), naming
            its row and column.

    Example:
        >>> snf = smith_normal_form([[2, 4], [6, 8]])
        >>> snf.S, snf.rank
        ([[2, 0], [0, 4]], 2)
    """
    rows, m, n = _int_matrix(A, "A", ncols)
    S = [row[:] for row in rows]
    U = _identity(m)
    V = _identity(n)
    rank = 0
    for t in range(min(m, n)):
        pivot = _smallest_nonzero(S, t, m, n)
        if pivot is None:
            break
        i, j = pivot
        _swap_rows(S, U, t, i)
        _swap_cols(S, V, t, j, m)
        _diagonalize_pivot(S, U, V, t, m, n)
        if S[t][t] < 0:
            S[t] = [-x for x in S[t]]
            U[t] = [-x for x in U[t]]
        rank += 1
    _reduce_kernel(V, rank, n)
    _reduce_cokernel(U, rank, m)
    return SmithNormalForm(S=S, U=U, V=V, rank=rank)


# -- validation ---------------------------------------------------------------------------------


def _as_int(value: object, where: str) -> int:
    # numbers.Integral admits NumPy integers; bool is an Integral but never a meant matrix entry.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{where} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _int_matrix(A: object, name: str, ncols: int | None = None) -> tuple[Matrix, int, int]:
    """Validate an integer matrix; return ``(rows as lists of int, m, n)``."""
    if ncols is not None and (isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 0):
        raise InputError(f"ncols must be a non-negative int, got {ncols!r}")
    shape = getattr(A, "shape", None)
    if shape is not None and hasattr(A, "tolist"):  # a NumPy array: keep its shape for 0×n
        if len(shape) != 2:
            raise ShapeError(f"{name} must be a 2-D matrix, got an array of shape {tuple(shape)}")
        if ncols is None:
            ncols = int(shape[1])
        A = A.tolist()
    if isinstance(A, str | bytes) or not isinstance(A, Sequence):
        raise InputError(f"{name} must be a list of rows, got {type(A).__name__}")
    rows: Matrix = []
    n = ncols
    for i, row in enumerate(A):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence):
            raise ShapeError(
                f"{name} row {i} must be a list of ints, got {type(row).__name__} {row!r}"
            )
        if n is None:
            n = len(row)
        elif len(row) != n:
            what = "the given ncols" if ncols is not None and i == 0 else "row 0"
            raise ShapeError(
                f"{name} is ragged: row {i} has {len(row)} entries, expected {n} like {what}"
            )
        rows.append(
            [_as_int(x, f"{name}[{i}][{j}] (row {i}, column {j})") for j, x in enumerate(row)]
        )
    return rows, len(rows), n or 0


# -- elimination steps --------------------------------------------------------------------------


def _identity(k: int) -> Matrix:
    return [[int(i == j) for j in range(k)] for i in range(k)]


def _smallest_nonzero(S: Matrix, t: int, m: int, n: int) -> tuple[int, int] | None:
    best = None
    for i in range(t, m):
        row = S[i]
        for j in range(t, n):
            if row[j] and (best is None or abs(row[j]) < abs(S[best[0]][best[1]])):
                best = (i, j)
    return best


def _swap_rows(S: Matrix, U: Matrix, a: int, b: int) -> None:
    if a != b:
        S[a], S[b] = S[b], S[a]
        U[a], U[b] = U[b], U[a]


def _swap_cols(S: Matrix, V: Matrix, a: int, b: int, m: int) -> None:
    if a != b:
        for M in (S, V):
            for row in M:
                row[a], row[b] = row[b], row[a]


def _nearest_quotient(b: int, a: int) -> int:
    """The integer q nearest to b / a, so that |b - q a| <= |a| / 2."""
    q, r = divmod(b, a)
    return q + 1 if 2 * r > abs(a) or (2 * r == abs(a) and a > 0) else q


def _eliminate_column(S: Matrix, U: Matrix, t: int, m: int) -> None:
    # Euclid on the whole column: reduce every entry by the pivot (nearest quotient, so the
    # remainders are at most half the pivot), then make the smallest remainder the new pivot.
    while True:
        a = S[t][t]
        for i in range(t + 1, m):
            q = _nearest_quotient(S[i][t], a) if S[i][t] else 0
            if q:
                S[i] = [x - q * y for x, y in zip(S[i], S[t], strict=True)]
                U[i] = [x - q * y for x, y in zip(U[i], U[t], strict=True)]
        rest = [i for i in range(t + 1, m) if S[i][t]]
        if not rest:
            return
        i = min(rest, key=lambda i: abs(S[i][t]))
        _swap_rows(S, U, t, i)


def _eliminate_row(S: Matrix, V: Matrix, t: int, n: int) -> None:
    while True:
        a = S[t][t]
        for j in range(t + 1, n):
            q = _nearest_quotient(S[t][j], a) if S[t][j] else 0
            if q:
                for row in S:
                    row[j] -= q * row[t]
                for row in V:
                    row[j] -= q * row[t]
        rest = [j for j in range(t + 1, n) if S[t][j]]
        if not rest:
            return
        j = min(rest, key=lambda j: abs(S[t][j]))
        _swap_cols(S, V, t, j, len(S))


def _diagonalize_pivot(S: Matrix, U: Matrix, V: Matrix, t: int, m: int, n: int) -> None:
    """Zero row t and column t outside (t, t), with S[t][t] dividing the rest of the block."""
    while True:
        _eliminate_column(S, U, t, m)
        _eliminate_row(S, V, t, n)
        if any(S[i][t] for i in range(t + 1, m)):
            continue  # the row step refilled the column; each round shrinks |S[t][t]|
        pivot = S[t][t]
        bad = next(
            (i for i in range(t + 1, m) if any(S[i][j] % pivot for j in range(t + 1, n))), None
        )
        if bad is None:
            return
        # Adding the offending row to row t puts a non-multiple into row t; the next column
        # elimination then replaces the pivot by a proper divisor of it.
        S[t] = [x + y for x, y in zip(S[t], S[bad], strict=True)]
        U[t] = [x + y for x, y in zip(U[t], U[bad], strict=True)]


# -- making the kernel and cokernel readable ----------------------------------------------------


def _echelon_reduce(vectors: list[list[int]], others: list[list[int]]) -> list[list[int]]:
    """Hermite-reduce a lattice basis (from its last coordinate up); reduce ``others`` modulo it.

    Only unimodular operations among ``vectors`` and additions of integer multiples of
    ``vectors`` to ``others`` are used. Returns the reduced basis ordered by pivot coordinate
    (first pivot first); ``others`` is modified in place.
    """
    basis = [v[:] for v in vectors]
    if not basis:
        return basis
    size = len(basis[0])
    pivots: list[tuple[int, list[int]]] = []  # (coordinate, vector), pivot entry > 0
    free = basis
    for coord in range(size - 1, -1, -1):
        active = [v for v in free if v[coord]]
        if not active:
            continue
        rest = [v for v in free if not v[coord]]
        while len(active) > 1:
            active.sort(key=lambda v: abs(v[coord]))
            head = active[0]
            survivors = [head]
            for v in active[1:]:
                q = v[coord] // head[coord]
                reduced = [x - q * y for x, y in zip(v, head, strict=True)]
                if reduced[coord]:
                    survivors.append(reduced)
                else:
                    rest.append(reduced)
            active = survivors
        head = active[0]
        if head[coord] < 0:
            head = [-x for x in head]
        for _, vec in pivots:  # keep earlier (lower) pivot vectors' entries here in [0, pivot)
            q = vec[coord] // head[coord]
            if q:
                vec[:] = [x - q * y for x, y in zip(vec, head, strict=True)]
        pivots.append((coord, head))
        free = rest
    for other in others:
        for coord, vec in pivots:  # pivots are in decreasing coordinate order
            q = other[coord] // vec[coord]
            if q:
                other[:] = [x - q * y for x, y in zip(other, vec, strict=True)]
    return [vec for _, vec in sorted(pivots, key=lambda p: p[0])]


def _reduce_kernel(V: Matrix, rank: int, n: int) -> None:
    columns = [[V[i][j] for i in range(n)] for j in range(n)]
    head, kernel = columns[:rank], columns[rank:]
    kernel = _echelon_reduce(kernel, head)
    for j, col in enumerate(head + kernel):
        for i in range(n):
            V[i][j] = col[i]


def _reduce_cokernel(U: Matrix, rank: int, m: int) -> None:
    head, cokernel = U[:rank], U[rank:]
    U[rank:] = _echelon_reduce(cokernel, head)
