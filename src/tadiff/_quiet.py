"""Call a function with some of NumPy's floating-point errors ignored, cheaply.

``with np.errstate(over="ignore"): ...`` costs about 10 000 instructions (1.4 µs), more than a
ufunc call on a small array, and ops like ``sigmoid`` need it on every call. :class:`Quiet`
does the same thing for one call at under 4 000: it computes NumPy's merged error settings
once per settings in force (the caller's own ``np.errstate`` or ``np.seterr`` still applies to
every other kind of error) and sets them for the call.

It uses two names NumPy does not export (the context variable that holds the settings and the
function that builds them); where they are missing it falls back to ``np.errstate``, which
behaves the same.

Example:
    >>> import numpy as np
    >>> float(Quiet(over="ignore")(np.exp, np.float64(1000.0)))
    inf
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

try:  # NumPy >= 2.0 keeps the settings in a context variable
    from numpy._core._multiarray_umath import _make_extobj
    from numpy._core._ufunc_config import _extobj_contextvar

    _get, _set, _reset = _extobj_contextvar.get, _extobj_contextvar.set, _extobj_contextvar.reset
except ImportError:  # pragma: no cover - another NumPy: np.errstate does the same, slower
    _make_extobj = _get = _set = _reset = None

# Merged settings remembered per Quiet: one per distinct settings object in force, which is one
# in a program that never changes them; a program changing them in a loop makes new ones.
_REMEMBERED = 8


class Quiet:
    """Calls ``fn(*args, **kwargs)`` with the given ``np.errstate`` settings in force.

    Args:
        **settings: ``np.errstate``'s keywords (``over="ignore"``, ``divide="ignore"``, ...).

    Example:
        >>> import numpy as np
        >>> quiet = Quiet(divide="ignore")
        >>> float(quiet(np.log, np.float64(0.0)))
        -inf
    """

    __slots__ = ("_merged", "_settings")

    def __init__(self, **settings: str) -> None:
        with np.errstate(**settings):  # np.errstate's keywords and values, checked now
            pass
        self._settings = settings
        self._merged: dict[Any, Any] = {}

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if _get is None:  # pragma: no cover - see the module
            with np.errstate(**self._settings):
                return fn(*args, **kwargs)
        current = _get()
        merged = self._merged.get(current)
        if merged is None:
            merged = self._merge(current)
        token = _set(merged)
        try:  # (no ** where there are no keywords: unpacking an empty dict costs a call's worth)
            return fn(*args, **kwargs) if kwargs else fn(*args)
        finally:
            _reset(token)

    def in_place(self, ufunc: Any, a: np.ndarray) -> np.ndarray:
        """``ufunc(a, a)``, writing into ``a``, with the settings in force: :meth:`__call__`
        without its argument packing, for ops on small arrays where that is a sixth of the
        cost (``sigmoid``'s ``exp``).

        Example:
            >>> import numpy as np
            >>> Quiet(over="ignore").in_place(np.exp, np.array([1000.0])).tolist()
            [inf]
        """
        if _get is None:  # pragma: no cover - see the module
            with np.errstate(**self._settings):
                return ufunc(a, a)
        current = _get()
        merged = self._merged.get(current)
        if merged is None:
            merged = self._merge(current)
        token = _set(merged)
        try:
            return ufunc(a, a)
        finally:
            _reset(token)

    def _merge(self, current: Any) -> Any:
        """These settings over ``current`` (which is in force now: NumPy merges with it)."""
        if len(self._merged) >= _REMEMBERED:
            self._merged.clear()
        merged = self._merged[current] = _make_extobj(**self._settings)
        return merged


__all__ = ["Quiet"]
