"""Whether an optional dependency (an extra: numba, torch, triton) is installed, and usable.

Example:
    >>> from tadiff._optional import installed, usable
    >>> installed("numpy"), installed("no_such_package_here"), usable("numpy")
    (True, False, True)
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import warnings

__all__ = ["installed", "usable"]


def installed(name: str) -> bool:
    """Whether the top-level package ``name`` can be imported, without importing it: a module
    already imported counts, one blocked in ``sys.modules`` (set to None) does not, and
    otherwise the import system's answer, looked up once per process."""
    module = sys.modules.get(name, _ABSENT)
    if module is not _ABSENT:
        return module is not None
    return _found(name)


_ABSENT = object()


@functools.cache
def _found(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def usable(name: str) -> bool:
    """Whether ``name`` is installed and imports: for choices tadiff makes on its own (a
    compiled loop instead of NumPy's passes), where a package that is installed but broken
    (Numba built for another NumPy, say) must not break the op. The first call imports it; a
    failing import warns once (``RuntimeWarning``) and counts as not usable."""
    return installed(name) and _imports(name)


@functools.cache
def _imports(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception as error:  # any failure at import: ImportError, or NumPy's ABI checks
        warnings.warn(
            f"{name} is installed but fails to import ({type(error).__name__}: {error}); "
            "tadiff runs without it",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True
