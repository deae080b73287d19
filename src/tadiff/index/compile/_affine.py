"""Affine index expressions as integer ``numerator / denominator`` pairs (shared by the backends).

A derived index such as ``p/2`` has rational coefficients; it is only evaluated where a
congruence condition makes it an integer. Every backend therefore works with the integer
numerator ``n`` and the positive denominator ``d`` of ``expr`` (size parameters substituted):
floor is ``n // d``, ceil is ``-((-n) // d)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import lcm

from tadiff.index.expr import Affine, is_param


def integer_form(expr: Affine, params: Mapping[str, int]) -> tuple[dict[str, int], int, int]:
    """``expr`` with size parameters substituted, as ``({var: int coeff}, int const, den)``.

    Example:
        >>> integer_form(Affine.variable("p") / 2 + 1, {})
        ({'p': 1}, 2, 2)
    """
    den = lcm(*(c.denominator for _, c in expr.items()), expr.const.denominator)
    const = expr.const * den
    coeffs: dict[str, int] = {}
    for name, c in expr.items():
        if is_param(name):
            const += c * den * params[name]
        else:
            coeffs[name] = int(c * den)
    return coeffs, int(const), den
