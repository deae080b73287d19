"""Compiled kernels for index-notation functions, and their engine integration.

* :func:`kernel` — the cached kernel of a definition for given shapes, dtype and backend:
  ``"einsum"`` (pure contractions, BLAS), ``"numpy"`` (vectorized gathers, masks and sums),
  ``"numba"`` (generated parallel loop nests with exact bounds; needs numba), ``"auto"``.
* :func:`stats` / :func:`clear_cache` — derivation and compilation counts and times.

The reference interpreter (:mod:`tadiff.index.interpret`) stays the oracle every backend is
tested against. See docs/index-notation.md, "Backends and performance".
"""

from tadiff.index.compile.cache import BACKENDS, clear_cache, kernel, stats

__all__ = ["BACKENDS", "clear_cache", "kernel", "stats"]
