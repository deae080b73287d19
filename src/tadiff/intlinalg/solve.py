"""Integer solutions of ``A x = b``: pseudo-inverse, kernel, cokernel, symbolic right-hand sides.

With the Smith normal form ``S = U A V`` the system ``A x = b`` becomes ``S y = U b`` with
``x = V y``. Row ``i`` of it reads ``s_i y_i = (U b)_i``: for ``i < rank`` it needs ``s_i`` to
divide ``(U b)_i``, for ``i >= rank`` it needs ``(U b)_i = 0`` (the cokernel condition
``C b = 0``). The free coordinates ``y_rank..`` move x along the kernel. Hence every integer
solution is ``x = I b + K z`` with ``I = V S⁺ U`` and ``K`` the last ``n - rank`` columns of V.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from tadiff.errors import InputError, ShapeError
from tadiff.intlinalg.affine import Affine, Scalar
from tadiff.intlinalg.smith import Matrix, SmithNormalForm, _as_int, smith_normal_form


@dataclass(frozen=True, eq=False)
class SymbolicSolution:
    """All integer solutions of ``A x = b`` for a right-hand side affine in integer parameters.

    For parameter values that satisfy every equality (``e == 0``) and congruence
    (``e ≡ 0 mod d``), the integer solutions are exactly ``particular + kernel @ z`` for
    ``z`` in ``Z^(n - rank)``; if any of them fails there is no integer solution.

    Attributes:
        particular: ``x0 = I b``, one Affine per unknown (length n).
        kernel: n×(n - rank) integer matrix whose columns span the integer kernel of A.
        equalities: Affines that must be 0 (rows of ``C b`` that are not identically 0); a
            nonzero constant among them means the system is never solvable.
        congruences: ``(e, d)`` pairs meaning ``e ≡ 0 (mod d)``, ``d >= 2``, e with integer
            coefficients in ``[0, d)`` and constant in ``[0, d)``.
    """

    particular: tuple[Affine, ...]
    kernel: Matrix
    equalities: tuple[Affine, ...]
    congruences: tuple[tuple[Affine, int], ...]

    def is_solvable(self, values: Mapping[str, int]) -> bool:
        """Whether ``A x = b`` has an integer solution for these parameter values."""
        return all(e.evaluate(values) == 0 for e in self.equalities) and all(
            e.evaluate(values) % d == 0 for e, d in self.congruences
        )

    def point(self, values: Mapping[str, int], z: Sequence[int]) -> list[int]:
        """The solution ``x0 + K z`` for parameter values and kernel coordinates ``z``.

        Raises:
            ShapeError: ``len(z) != n - rank``.
            InputError: the parameters make the system unsolvable.
        """
        free = len(self.kernel[0]) if self.kernel else 0
        if len(z) != free:
            raise ShapeError(f"point: z has {len(z)} entries, expected n - rank = {free}")
        z = [_as_int(v, f"point: z[{k}]") for k, v in enumerate(z)]
        if not self.is_solvable(values):
            raise InputError(f"point: A x = b has no integer solution for parameters {values}")
        return [
            int(x0.evaluate(values)) + sum(k * v for k, v in zip(row, z, strict=True))
            for x0, row in zip(self.particular, self.kernel, strict=True)
        ]


class IntegerSolver:
    """Everything about the integer solutions of ``A x = b`` for one m×n integer matrix A.

    Args:
        A: m×n integer matrix (list of rows); validated like :func:`smith_normal_form`.
        ncols: number of unknowns when A has no rows (``A == []``).

    Attributes:
        shape: ``(m, n)``.
        rank: rank of A.
        smith: the :class:`SmithNormalForm` ``S = U A V``.
        pinv: n×m Fraction matrix ``I = V S⁺ U``, so ``A I A == A``.
        kernel: n×(n - rank) ints, ``A K == 0``; its columns span all integer ``x`` with
            ``A x = 0``.
        cokernel: (m - rank)×m ints, ``C A == 0``; ``A x = b`` needs ``C b == 0``.

    Example:
        >>> solver = IntegerSolver([[1, -2, -2]])
        >>> solver.solve([3]), solver.kernel
        ([3, 0, 0], [[2, 2], [1, 0], [0, 1]])
    """

    def __init__(self, A: Sequence[Sequence[int]], *, ncols: int | None = None):
        self.smith: SmithNormalForm = smith_normal_form(A, ncols=ncols)
        m, n = len(self.smith.U), len(self.smith.V)
        self.shape: tuple[int, int] = (m, n)
        self.rank: int = self.smith.rank
        V, U, r = self.smith.V, self.smith.U, self.rank
        diag = self.smith.diagonal
        self.pinv: list[list[Fraction]] = [
            [
                sum((Fraction(V[i][k] * U[k][j], diag[k]) for k in range(r)), Fraction(0))
                for j in range(m)
            ]
            for i in range(n)
        ]
        self.kernel: Matrix = [row[r:] for row in V]
        self.cokernel: Matrix = [row[:] for row in U[r:]]

    def _check_rhs(self, b: object, what: str) -> list:
        m = self.shape[0]
        if isinstance(b, str | bytes) or not isinstance(b, Sequence):
            raise InputError(f"{what}: b must be a sequence of length {m}, got {type(b).__name__}")
        if len(b) != m:
            raise ShapeError(f"{what}: b has {len(b)} entries, expected m = {m} (rows of A)")
        return list(b)

    def solve(self, b: Sequence[int]) -> list[int] | None:
        """An integer ``x`` with ``A x == b``, or ``None`` if there is none.

        All solutions are ``x + K z`` for integer ``z``. The returned ``x`` is reduced modulo
        the kernel lattice, so it is small.

        Raises:
            ShapeError: ``len(b) != m``.
            InputError: a non-integer entry of b.
        """
        b = [_as_int(v, f"solve: b[{i}]") for i, v in enumerate(self._check_rhs(b, "solve"))]
        U, V, r = self.smith.U, self.smith.V, self.rank
        c = [sum(u * v for u, v in zip(row, b, strict=True)) for row in U]
        if any(c[r:]):
            return None
        diag = self.smith.diagonal
        if any(c[k] % diag[k] for k in range(r)):
            return None
        y = [c[k] // diag[k] for k in range(r)]
        return [sum(V[i][k] * y[k] for k in range(r)) for i in range(self.shape[1])]

    def solve_affine(self, b: Sequence[Affine | Scalar]) -> SymbolicSolution:
        """Solve ``A x = b`` for b affine in integer parameters, once for all parameter values.

        Args:
            b: m entries, each an :class:`Affine` (or int/Fraction) in the parameters.

        Returns:
            :class:`SymbolicSolution` with ``particular = I b``, the kernel, and the equalities
            and congruences on the parameters under which integer solutions exist.

        Example:
            >>> sol = IntegerSolver([[2, 4]]).solve_affine([Affine.variable("p")])
            >>> [str(x) for x in sol.particular], [(str(e), d) for e, d in sol.congruences]
            (['(1/2)*p', '0'], [('p', 2)])
        """
        rhs = []
        for i, v in enumerate(self._check_rhs(b, "solve_affine")):
            if not isinstance(v, Affine):
                try:
                    v = Affine.constant(v)
                except InputError:
                    raise InputError(
                        f"solve_affine: b[{i}] must be an Affine, int or Fraction, "
                        f"got {type(v).__name__} {v!r}"
                    ) from None
            rhs.append(v)
        U, V, r = self.smith.U, self.smith.V, self.rank
        zero = Affine.constant(0)
        c = [sum((u * v for u, v in zip(row, rhs, strict=True) if u), zero) for row in U]
        diag = self.smith.diagonal
        y = [c[k] / diag[k] for k in range(r)]
        particular = tuple(
            sum((V[i][k] * y[k] for k in range(r) if V[i][k]), zero) for i in range(self.shape[1])
        )
        equalities = tuple(e for e in c[r:] if e != 0)
        congruences = []
        for k in range(r):
            congruence = _integrality_congruence(c[k], diag[k])
            if congruence is not None:
                congruences.append(congruence)
        return SymbolicSolution(
            particular=particular,
            kernel=[row[:] for row in self.kernel],
            equalities=equalities,
            congruences=tuple(congruences),
        )


def _integrality_congruence(e: Affine, d: int) -> tuple[Affine, int] | None:
    """``e / d`` is an integer as ``(e', d')`` meaning ``e' ≡ 0 mod d'``; None if always true.

    A rational e is first scaled by the lcm L of its denominators (``e/d ∈ Z`` iff
    ``L e ≡ 0 mod L d``); then coefficients are reduced modulo d and a common factor with d
    is divided out, so equal conditions print equally.
    """
    scale = math.lcm(e.const.denominator, *(c.denominator for _, c in e.items()))
    d *= scale
    coeffs = {name: int(c * scale) % d for name, c in e.items()}
    const = int(e.const * scale) % d
    g = math.gcd(d, const, *coeffs.values())
    d //= g
    if d == 1:
        return None
    reduced = Affine({name: c // g for name, c in coeffs.items()}, const // g)
    return reduced, d
