"""``tadiff.cuda``: what ``torch.cuda`` answers on a machine without CUDA.

tadiff's engine runs on NumPy, so no CUDA device is ever available: ``is_available()`` is False
and ``device_count()`` 0, which is how device-agnostic programs decide to stay on the CPU
(``device = "cuda" if torch.cuda.is_available() else "cpu"``). Seeding is accepted and does
nothing, as torch's seeding does without CUDA. Anything that needs a CUDA device raises a
:class:`~tadiff.errors.DeviceError`; tadiff's ops run on GPUs through :mod:`tadiff.torch`.

Example:
    >>> import tadiff as td
    >>> td.cuda.is_available(), td.cuda.device_count()
    (False, 0)
"""

from __future__ import annotations

from typing import Any

from tadiff._device import check_device


def is_available() -> bool:
    """Always False: tadiff's engine has no CUDA device."""
    return False


def device_count() -> int:
    """Always 0."""
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored (no CUDA generator to seed), as torch does without CUDA."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored (no CUDA generators to seed), as torch does without CUDA."""


def current_device() -> int:
    """Raises :class:`~tadiff.errors.DeviceError`: there is no current CUDA device."""
    check_device("cuda", "cuda.current_device")
    return 0  # pragma: no cover - check_device raised


def synchronize(device: Any = None) -> None:
    """Raises :class:`~tadiff.errors.DeviceError`: there is no CUDA device to wait for."""
    check_device("cuda", "cuda.synchronize")
