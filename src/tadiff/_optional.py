"""Whether an optional dependency (an extra: numba, torch, triton) is installed.

Example:
    >>> from tadiff._optional import installed
    >>> installed("numpy"), installed("no_such_package_here")
    (True, False)
"""

from __future__ import annotations

import functools
import importlib.util
import sys

__all__ = ["installed"]


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
