"""What the Numba and Triton code generators share.

Both turn the IR into Python source one statement at a time: numbered temporaries, sizes read
from a parameter vector, and affine index expressions and index conditions written as integer
arithmetic. Only how a parameter is read differs (``param_ref``).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import lcm

from tadiff.index.expr import Affine, Cond, is_param


class SourceEmitter:
    """Base of the backends' emitters: ``lines`` of source, ``params`` in first-use order."""

    def __init__(self) -> None:
        self.params: list[str] = []
        self.lines: list[str] = []
        self.count = 0

    def param_ref(self, name: str) -> str:
        """Source that reads the size parameter ``name`` (its slot is ``param_slot(name)``)."""
        raise NotImplementedError

    def param_slot(self, name: str) -> int:
        if name not in self.params:
            self.params.append(name)
        return self.params.index(name)

    def temp(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def affine(self, expr: Affine, env: Mapping[str, str]) -> tuple[str, int]:
        """``(numerator, denominator)``: a parenthesised integer expression and the positive int
        that ``expr`` is it divided by (rational coefficients share one denominator)."""
        den = lcm(*(c.denominator for _, c in expr.items()), expr.const.denominator)
        terms = []
        for name, c in expr.items():
            ref = self.param_ref(name) if is_param(name) else env[name]
            k = int(c * den)
            # ``-1 * ref``, not ``-ref``: numba's prange indices are unsigned, and only a product
            # with a signed constant makes the term signed.
            terms.append(ref if k == 1 else f"{k} * {ref}")
        const = int(expr.const * den)
        if const or not terms:
            terms.append(str(const))
        return "(" + " + ".join(terms).replace("+ -", "- ") + ")", den

    def cond(self, c: Cond, env: Mapping[str, str]) -> str:
        """A parenthesised boolean for the index condition ``c``."""
        num, den = self.affine(c.expr, env)
        if c.kind == "ge":
            return f"({num} >= 0)"
        if c.kind == "eq":
            return f"({num} == 0)"
        if c.kind == "ne":
            return f"({num} != 0)"
        return f"({num} % {den * c.modulus} == 0)"


def nest(f: str, items: list[str]) -> str:
    """``f(f(a, b), c)`` for ``items = [a, b, c]``: max/min of several bounds."""
    out = items[0]
    for item in items[1:]:
        out = f"{f}({out}, {item})"
    return out
