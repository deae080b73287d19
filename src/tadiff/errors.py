"""Exceptions raised by tadiff.

Every error tadiff raises on bad input is one of these. Each subclasses the built-in exceptions a
user would catch for the same mistake, so ``except ValueError`` keeps working and a PyTorch
program's ``except RuntimeError`` (or ``IndexError``, ``TypeError``) catches what torch would raise
there: torch reports bad shapes, dtypes and values with ``RuntimeError``, an index or dim out of
range with ``IndexError``, a wrong Python type with ``TypeError``. Each message names the tensor,
index, shape or text position at fault and what was expected.

Example:
    >>> import tadiff as td
    >>> try:
    ...     td.ones(2) @ td.ones(3)
    ... except RuntimeError as e:  # as in torch; also a ValueError and a tadiff ShapeError
    ...     print(type(e).__name__)
    ShapeError
"""

from __future__ import annotations


def type_name(value: object) -> str:
    """``value``'s type as a user would write it: ``list``, ``torch.Tensor``,
    ``jax.Array`` — the module named for anything not built in, so that a message never calls a
    torch tensor just "Tensor".

    Example:
        >>> type_name([1]), type_name(ValueError())
        ('list', 'ValueError')
    """
    kind = type(value)
    module = kind.__module__
    if module == "builtins":
        return kind.__qualname__
    if module.startswith("torch"):
        module = "torch"  # torch.Tensor, not torch._tensor.Tensor
    return f"{module}.{kind.__qualname__}"


class TadiffError(Exception):
    """Base class of every tadiff exception."""


class InputError(TadiffError, ValueError, RuntimeError):
    """A value has the right type but is not acceptable (wrong size, non-integer entry, ...).

    Also a ``RuntimeError``: torch raises that for the same mistakes (``narrow`` past the end,
    ``topk`` with too large a ``k``, a negative size).
    """


class ShapeError(InputError):
    """Tensor shapes do not fit together, or a matrix is ragged."""


class DTypeError(TadiffError, TypeError, RuntimeError):
    """An argument has a type or dtype the operation cannot take.

    Also a ``RuntimeError``: torch raises that for a tensor of the wrong dtype (an integer tensor
    asked to require grad, an integer mask), and ``TypeError`` for a wrong Python type.
    """


class DataError(InputError, DTypeError):
    """Data given to ``td.tensor`` is not a rectangular array of numbers (a ragged nested list,
    a string, ``None``); the message names the index at fault.

    A ``ValueError``, a ``TypeError`` and a ``RuntimeError`` at once: torch raises any of the
    three for the same data, depending on the case.
    """


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


class DeviceError(TadiffError, RuntimeError, AssertionError):
    """A device other than the CPU was asked of tadiff's NumPy engine (``device="cuda"``,
    ``.cuda()``). Also an ``AssertionError``: a CPU build of torch raises that for the same
    request ("Torch not compiled with CUDA enabled")."""


class SharingError(TadiffError, BufferError):
    """Memory cannot be shared through DLPack (a tensor that requires grad must be detached
    first); a ``BufferError``, as torch raises."""


class GradcheckError(AutogradError):
    """``gradcheck``/``gradgradcheck`` found analytical and numerical derivatives apart."""


class IndexingError(InputError, IndexError):
    """An index or dim is out of range or malformed for the tensor it indexes (torch:
    ``IndexError``)."""


class LinAlgError(InputError):
    """A matrix is singular or not positive definite where the function needs it to be; torch's
    ``torch.linalg.LinAlgError`` (a ``RuntimeError``), also ``td.linalg.LinAlgError``."""
