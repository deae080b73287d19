"""Whether an optional dependency (an extra: numba, torch, triton) is installed.

Example:
    >>> from tadiff._optional import installed
    >>> installed("numpy"), installed("no_such_package_here")
    (True, False)
"""

from __future__ import annotations

import functools
import importlib.util

__all__ = ["installed"]


@functools.cache
def installed(name: str) -> bool:
    """Whether the top-level package ``name`` can be imported (looked up once per process,
    without importing it)."""
    return importlib.util.find_spec(name) is not None
