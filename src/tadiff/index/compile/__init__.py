"""Compiled kernels for index-notation functions, and their engine integration.

* :func:`plan_program` — the schedule of a definition for concrete shapes: a short program of
  stages, each a loop nest with every subexpression at the level of its own indices, reading
  saved forward values where a derivative contains the forward (``f.explain`` prints it).
* :func:`kernel` — the cached kernel of a definition for given shapes, dtype and backend:
  ``"einsum"`` (pure contractions, BLAS), ``"numpy"`` (vectorized gathers, masks and sums, in
  chunks under :func:`memory_budget`), ``"numba"`` (the planned loop nests; needs numba),
  ``"triton"``, ``"auto"``; :func:`gradient_kernel` computes several derivatives of one
  definition together.
* :func:`stats` / :func:`clear_cache` — derivation and compilation counts and times;
  :func:`set_cache_limit` bounds how many kernels are kept (least recently used dropped first);
  :func:`set_memory_budget` bounds the temporaries of kernels compiled later.

The reference interpreter (``TensorFunction.reference``) stays the oracle every backend and
every schedule is tested against. See the index-notation guide, "Backends and performance".
"""

from tadiff.index.compile.cache import (
    BACKENDS,
    cache_limit,
    clear_cache,
    gradient_kernel,
    kernel,
    set_cache_limit,
    stats,
)
from tadiff.index.compile.schedule import (
    memory_budget,
    plan_gradients,
    plan_program,
    set_memory_budget,
)

__all__ = [
    "BACKENDS",
    "cache_limit",
    "clear_cache",
    "gradient_kernel",
    "kernel",
    "memory_budget",
    "plan_gradients",
    "plan_program",
    "set_cache_limit",
    "set_memory_budget",
    "stats",
]
