"""Affine functions of named integer variables, with exact rational coefficients.

An index expression such as ``2*t + k - 1`` is an :class:`Affine`. The integer solver takes them
as symbolic right-hand sides and Fourier–Motzkin returns loop bounds as Affines, so the derivation
layer can print, substitute and evaluate them without ever touching floats.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping
from fractions import Fraction

from tadiff.errors import InputError

Scalar = int | Fraction


def _as_scalar(value: object, what: str) -> Fraction:
    """``value`` as a Fraction if it is an exact number (int, Fraction, NumPy int), else raise.

    bool is refused because ``True`` as a coefficient is almost always a mistake, and floats
    because they would silently make index arithmetic inexact.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Rational):
        raise InputError(
            f"{what} must be an int or fractions.Fraction, got {type(value).__name__} {value!r}"
        )
    return Fraction(int(value.numerator), int(value.denominator))


def _scalar_text(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


class Affine:
    """``sum(coeff[v] * v) + const`` over named integer variables; immutable, exact.

    Args:
        coeffs: variable name -> coefficient (int or Fraction); zero coefficients are dropped.
        const: the constant term.

    Example:
        >>> i, n = Affine.variable("i"), Affine.variable("n")
        >>> e = 2 * i - n + 1
        >>> str(e), e.evaluate({"i": 3, "n": 4})
        ('2*i - n + 1', Fraction(3, 1))
        >>> str(e.substitute({"i": n / 2}))
        '1'
    """

    __slots__ = ("_coeffs", "_const", "_hash")

    def __init__(self, coeffs: Mapping[str, Scalar] | None = None, const: Scalar = 0):
        items: dict[str, Fraction] = {}
        if coeffs is not None:
            if not isinstance(coeffs, Mapping):
                raise InputError(
                    f"Affine coefficients must be a mapping name -> number, got "
                    f"{type(coeffs).__name__}"
                )
            for name, value in coeffs.items():
                if not isinstance(name, str) or not name:
                    raise InputError(f"Affine variable names must be non-empty str, got {name!r}")
                coeff = _as_scalar(value, f"coefficient of {name!r}")
                if coeff:
                    items[name] = coeff
        self._coeffs = dict(sorted(items.items()))
        self._const = _as_scalar(const, "Affine constant")
        self._hash: int | None = None

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def variable(cls, name: str) -> Affine:
        """The affine function ``name`` (coefficient 1, constant 0)."""
        return cls({name: 1})

    @classmethod
    def constant(cls, value: Scalar) -> Affine:
        """The constant affine function ``value``."""
        return cls(None, value)

    @classmethod
    def _make(cls, coeffs: dict[str, Fraction], const: Fraction) -> Affine:
        # Fast path for internal results whose entries are already validated Fractions.
        obj = cls.__new__(cls)
        obj._coeffs = dict(sorted((k, v) for k, v in coeffs.items() if v))
        obj._const = const
        obj._hash = None
        return obj

    # -- views ----------------------------------------------------------------------------------
    @property
    def coeffs(self) -> Mapping[str, Fraction]:
        """Nonzero coefficients by variable name, sorted by name (a read-only copy)."""
        return dict(self._coeffs)

    @property
    def const(self) -> Fraction:
        """The constant term."""
        return self._const

    @property
    def variables(self) -> frozenset[str]:
        """Names with a nonzero coefficient."""
        return frozenset(self._coeffs)

    @property
    def is_constant(self) -> bool:
        """True if no variable has a nonzero coefficient."""
        return not self._coeffs

    @property
    def is_integral(self) -> bool:
        """True if every coefficient and the constant are integers."""
        return self._const.denominator == 1 and all(
            c.denominator == 1 for c in self._coeffs.values()
        )

    def coeff(self, name: str) -> Fraction:
        """Coefficient of ``name`` (0 if absent)."""
        return self._coeffs.get(name, Fraction(0))

    def items(self) -> Iterator[tuple[str, Fraction]]:
        """``(name, coefficient)`` pairs in sorted name order."""
        return iter(self._coeffs.items())

    # -- arithmetic -----------------------------------------------------------------------------
    @staticmethod
    def _coerce(other: object) -> Affine | None:
        if isinstance(other, Affine):
            return other
        if isinstance(other, bool) or not isinstance(other, numbers.Rational):
            return None
        return Affine._make({}, _as_scalar(other, "operand"))

    def __add__(self, other: object) -> Affine:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        coeffs = dict(self._coeffs)
        for name, value in rhs._coeffs.items():
            coeffs[name] = coeffs.get(name, 0) + value
        return Affine._make(coeffs, self._const + rhs._const)

    __radd__ = __add__

    def __neg__(self) -> Affine:
        return Affine._make({k: -v for k, v in self._coeffs.items()}, -self._const)

    def __sub__(self, other: object) -> Affine:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        return self + (-rhs)

    def __rsub__(self, other: object) -> Affine:
        lhs = self._coerce(other)
        if lhs is None:
            return NotImplemented
        return lhs + (-self)

    def _scale(self, factor: Fraction) -> Affine:
        return Affine._make({k: v * factor for k, v in self._coeffs.items()}, self._const * factor)

    def __mul__(self, other: object) -> Affine:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        if rhs.is_constant:
            return self._scale(rhs._const)
        if self.is_constant:
            return rhs._scale(self._const)
        raise InputError(
            f"product of two non-constant affine functions ({self}) * ({rhs}) is not affine"
        )

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> Affine:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        if not rhs.is_constant:
            raise InputError(f"division by the non-constant affine function ({rhs})")
        if rhs._const == 0:
            raise InputError(f"division of ({self}) by zero")
        return self._scale(1 / rhs._const)

    # -- substitution and evaluation ------------------------------------------------------------
    def substitute(self, mapping: Mapping[str, Affine | Scalar]) -> Affine:
        """Replace variables by affine functions or numbers; names not in ``mapping`` stay.

        Example:
            >>> str(Affine({"i": 2, "j": 1}).substitute({"i": Affine.variable("k") + 1}))
            'j + 2*k + 2'
        """
        result = Affine._make({}, self._const)
        kept: dict[str, Fraction] = {}
        for name, coeff in self._coeffs.items():
            if name in mapping:
                value = self._coerce(mapping[name])
                if value is None:
                    raise InputError(
                        f"substitute: value for {name!r} must be an Affine, int or Fraction, "
                        f"got {type(mapping[name]).__name__}"
                    )
                result = result + value._scale(coeff)
            else:
                kept[name] = coeff
        return result + Affine._make(kept, Fraction(0))

    def evaluate(self, values: Mapping[str, Scalar]) -> Fraction:
        """The value for concrete ``values`` of every variable.

        Raises:
            InputError: naming the variables that have no value.

        Example:
            >>> Affine({"i": Fraction(1, 2)}, 1).evaluate({"i": 3})
            Fraction(5, 2)
        """
        missing = [name for name in self._coeffs if name not in values]
        if missing:
            raise InputError(
                f"cannot evaluate {self}: no value for variable(s) {', '.join(missing)}"
            )
        total = self._const
        for name, coeff in self._coeffs.items():
            total += coeff * _as_scalar(values[name], f"value of {name!r}")
        return total

    # -- comparison and printing ----------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        return self._const == rhs._const and self._coeffs == rhs._coeffs

    def __hash__(self) -> int:
        if self._hash is None:
            # A constant hashes like its number, consistent with ``Affine.constant(3) == 3``.
            self._hash = (
                hash(self._const)
                if not self._coeffs
                else hash((tuple(self._coeffs.items()), self._const))
            )
        return self._hash

    def __repr__(self) -> str:
        return f"Affine({str(self)!r})"

    def __str__(self) -> str:
        parts: list[str] = []
        for name, coeff in self._coeffs.items():
            magnitude = abs(coeff)
            if magnitude == 1:
                term = name
            elif magnitude.denominator == 1:
                term = f"{magnitude.numerator}*{name}"
            else:
                term = f"({_scalar_text(magnitude)})*{name}"
            parts.append(_signed(term, coeff < 0, first=not parts))
        if self._const or not parts:
            parts.append(_signed(_scalar_text(abs(self._const)), self._const < 0, first=not parts))
        return "".join(parts)


def _signed(term: str, negative: bool, first: bool) -> str:
    if first:
        return f"-{term}" if negative else term
    return f" - {term}" if negative else f" + {term}"
