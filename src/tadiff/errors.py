"""Exceptions raised by tadiff.

Every error tadiff raises on bad input is one of these. Each subclasses the built-in exception a
user would catch for the same mistake (``ValueError``, ``TypeError``, ``RuntimeError``), so
``except ValueError`` keeps working, and each message names the tensor, index, shape or text
position at fault and what was expected.
"""

from __future__ import annotations


class TadiffError(Exception):
    """Base class of every tadiff exception."""


class InputError(TadiffError, ValueError):
    """A value has the right type but is not acceptable (wrong size, non-integer entry, ...)."""


class ShapeError(InputError):
    """Tensor shapes do not fit together, or a matrix is ragged."""


class DTypeError(TadiffError, TypeError):
    """An argument has a type or dtype the operation cannot take."""


class ParseError(InputError):
    """Index-notation source text could not be parsed; carries the column at fault.

    Attributes:
        source: the text that was parsed.
        column: 0-based column of the offending character.
    """

    def __init__(self, message: str, source: str = "", column: int | None = None):
        self.source = source
        self.column = column
        if source and column is not None:
            message = f"{message} (column {column + 1})\n  {source}\n  {' ' * column}^"
        super().__init__(message)


class BoundsError(InputError):
    """An index expression can leave the bounds of the tensor it indexes."""


class DerivationError(TadiffError, ValueError):
    """A symbolic derivative cannot be formed for this definition."""


class AutogradError(TadiffError, RuntimeError):
    """Misuse of the autograd engine (second backward through freed buffers, bad gradients, ...)."""


class MissingDependencyError(TadiffError, ImportError):
    """An optional extra (torch, numba, triton, graphviz) is needed but not installed."""

    def __init__(self, feature: str, package: str, extra: str | None = None):
        hint = f'pip install "tadiff[{extra}]"' if extra else f"install {package}"
        super().__init__(f"{feature} needs {package}, which is not installed: {hint}")
        self.feature = feature
        self.package = package


class ConvergenceError(TadiffError, RuntimeError):
    """An iterative method missed its tolerance and the caller asked for strictness."""


class ConvergenceWarning(RuntimeWarning):
    """An iterative method stopped before reaching its tolerance; the result is approximate."""


class MissingProgramError(MissingDependencyError):
    """An external program (graphviz's ``dot``) is needed but not on ``PATH``."""

    def __init__(self, feature: str, program: str, install_hint: str):
        TadiffError.__init__(
            self, f"{feature} needs the `{program}` program, which is not on PATH: {install_hint}"
        )
        self.feature = feature
        self.package = program


class GradcheckError(AutogradError):
    """``gradcheck``/``gradgradcheck`` found analytical and numerical derivatives apart."""


class IndexingError(InputError, IndexError):
    """An index is out of range or malformed for the tensor it indexes."""
