"""Compiled kernels for index-notation functions, and their engine integration.

* :func:`kernel` — the cached kernel of a definition for given shapes, dtype and backend:
  ``"einsum"`` (pure contractions, BLAS), ``"numpy"`` (vectorized gathers, masks and sums),
  ``"numba"`` (generated parallel loop nests with exact bounds; needs numba), ``"auto"``.
* :func:`stats` / :func:`clear_cache` — derivation and compilation counts and times;
  :func:`set_cache_limit` bounds how many kernels are kept (least recently used dropped first).

The reference interpreter (:mod:`tadiff.index.interpret`) stays the oracle every backend is
tested against. See docs/index-notation.md, "Backends and performance".
"""

from tadiff.index.compile.cache import (
    BACKENDS,
    cache_limit,
    clear_cache,
    kernel,
    set_cache_limit,
    stats,
)

__all__ = ["BACKENDS", "cache_limit", "clear_cache", "kernel", "set_cache_limit", "stats"]
