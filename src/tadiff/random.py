"""Random number generators with torch's names: ``Generator``, ``manual_seed``, ``seed``,
``initial_seed``, ``get_rng_state``, ``set_rng_state``.

Every random draw tadiff makes comes from one default generator unless a ``generator=`` is
passed: the random factories (``rand``, ``randn``, ``randint``, ``randperm``, ``normal``,
``bernoulli``, ``multinomial`` and their ``_like`` forms), the in-place fills (``uniform_``,
``normal_``, ``bernoulli_``), ``nn.init``, dropout, ``td.distributions`` samples, the shuffling
of ``DataLoader``/``RandomSampler`` and ``random_split``. So ``get_rng_state`` at a checkpoint and
``set_rng_state`` after loading it make a resumed run draw exactly what the uninterrupted run
would have drawn.

A state is a 1-D ``uint8`` tensor, as in torch (here: the NumPy bit generator's state as JSON
text), so it goes into a checkpoint with :func:`tadiff.save` like any tensor.

Example:
    >>> import tadiff as td
    >>> state = td.get_rng_state()
    >>> a = td.randn(3)
    >>> td.set_rng_state(state)
    >>> bool((td.randn(3) == a).all())
    True
    >>> g = td.Generator().manual_seed(0)
    >>> td.randn(2, generator=g).shape
    (2,)
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import numpy as np

from tadiff.autograd import factories
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError

__all__ = [
    "Generator", "default_generator", "get_rng_state", "initial_seed", "manual_seed", "seed",
    "set_rng_state",
]  # fmt: skip


def _encode(rng: np.random.Generator) -> Tensor:
    text = json.dumps(rng.bit_generator.state, separators=(",", ":"))
    return Tensor(np.frombuffer(text.encode(), dtype=np.uint8).copy())


def _decode(state: Any, who: str) -> np.random.Generator:
    """A new NumPy generator in ``state`` (made by ``get_state``/``get_rng_state``)."""
    data = state.data if isinstance(state, Tensor) else state
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1):
        raise DTypeError(
            f"{who}: expected the 1-D uint8 tensor that get_rng_state()/get_state() returns, got "
            f"{type(state).__name__}"
            + (f" of dtype {data.dtype} and shape {data.shape}" if hasattr(data, "dtype") else "")
        )
    try:
        saved = json.loads(data.tobytes().decode())
        bit_generator = getattr(np.random, saved["bit_generator"])()
        bit_generator.state = saved
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{who}: the tensor is not a generator state ({exc})") from None
    return np.random.Generator(bit_generator)


class Generator:
    """A random generator with ``torch.Generator``'s methods, over NumPy's PCG64.

    Pass it as ``generator=`` to the random factories, ``DataLoader``, ``RandomSampler`` and
    ``random_split`` to draw from it instead of the default generator.

    Args:
        device: ``"cpu"`` (accepted for torch's signature; tadiff computes on the CPU).

    Example:
        >>> import tadiff as td
        >>> g = td.Generator().manual_seed(42)
        >>> state = g.get_state()
        >>> a = td.rand(2, generator=g)
        >>> bool((td.rand(2, generator=g.set_state(state)) == a).all())
        True
    """

    def __init__(self, device: str = "cpu"):
        if str(device) != "cpu":
            raise InputError(f"Generator: tadiff generators are CPU generators, got {device!r}")
        self._numpy = np.random.default_rng()
        self._initial_seed: int | None = None

    @property
    def numpy(self) -> np.random.Generator:
        """The NumPy generator drawn from (for NumPy code that should follow this one)."""
        return self._numpy

    @property
    def device(self) -> str:
        return "cpu"

    def manual_seed(self, seed: int) -> Generator:
        """Start over from ``seed``, an int (a negative one counts modulo 2**64, as in torch);
        returns ``self``."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise DTypeError(f"manual_seed: seed must be an int, got {seed!r}")
        value = int(seed) % 2**64
        self._numpy = np.random.default_rng(value)
        self._initial_seed = value
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the seed used."""
        value = secrets.randbits(63)
        self.manual_seed(value)
        return value

    def initial_seed(self) -> int:
        """The seed last given (drawn from the operating system's entropy if none was)."""
        if self._initial_seed is None:
            self.seed()
        return self._initial_seed  # type: ignore[return-value]

    def get_state(self) -> Tensor:
        """The generator's state, a 1-D ``uint8`` tensor for :meth:`set_state`."""
        return _encode(self._numpy)

    def set_state(self, state: Any) -> Generator:
        """Continue from a state :meth:`get_state` returned; returns ``self``."""
        self._numpy = _decode(state, f"{type(self).__name__}.set_state")
        return self

    def __repr__(self) -> str:
        return f"<tadiff.Generator {self._numpy.bit_generator.__class__.__name__}>"


class _DefaultGenerator(Generator):
    """The generator every random function draws from by default: its NumPy generator is
    ``tadiff.autograd.factories._rng``, which the factories read at each draw."""

    def __init__(self) -> None:
        self._initial_seed = None

    @property  # type: ignore[override]
    def _numpy(self) -> np.random.Generator:
        return factories._rng

    @_numpy.setter
    def _numpy(self, value: np.random.Generator) -> None:
        factories._rng = value


default_generator: Generator = _DefaultGenerator()
"""The generator that random functions draw from when no ``generator=`` is given."""


def manual_seed(seed: int) -> Generator:
    """Seed the default generator; returns it (as ``torch.manual_seed`` does).

    Example:
        >>> import tadiff as td
        >>> _ = td.manual_seed(0); a = td.rand(2)
        >>> _ = td.manual_seed(0); bool((td.rand(2) == a).all())
        True
    """
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state: a 1-D ``uint8`` tensor for :func:`set_rng_state`."""
    return default_generator.get_state()


def set_rng_state(new_state: Any) -> None:
    """Continue the default generator from a state :func:`get_rng_state` returned.

    Raises:
        InputError: ``new_state`` is not such a state.
    """
    default_generator.set_state(new_state)
