"""Exact integer linear algebra for index equations: pure Python ints and Fractions.

- :class:`Affine`: affine functions of named integer variables (index expressions, bounds).
- :func:`xgcd`, :func:`smith_normal_form`: ``S = U A V`` with unimodular U, V.
- :class:`IntegerSolver`: pseudo-inverse, kernel, cokernel; ``solve`` for a concrete b,
  ``solve_affine`` for a b affine in parameters (-> :class:`SymbolicSolution`).
- :func:`fourier_motzkin`: loop bounds of the integer points of ``{z : constraints >= 0}``
  (-> :class:`LoopNest`), and :func:`enumerate_points` to walk them.

See docs/intlinalg.md for a worked example.
"""

from tadiff.intlinalg.affine import Affine
from tadiff.intlinalg.fourier_motzkin import LoopNest, VarRange, enumerate_points, fourier_motzkin
from tadiff.intlinalg.smith import SmithNormalForm, smith_normal_form, xgcd
from tadiff.intlinalg.solve import IntegerSolver, SymbolicSolution

__all__ = [
    "Affine",
    "IntegerSolver",
    "LoopNest",
    "SmithNormalForm",
    "SymbolicSolution",
    "VarRange",
    "enumerate_points",
    "fourier_motzkin",
    "smith_normal_form",
    "xgcd",
]
