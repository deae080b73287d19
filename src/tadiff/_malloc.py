"""Keep the memory of freed large arrays for the next ones (glibc's ``malloc``, Linux).

An eager engine makes a new array for every op's result and frees it soon after. glibc serves
an allocation of 128 KiB or more with a fresh ``mmap`` and gives it back to the system when it is
freed, so the next array of that size starts on pages the kernel has to fault in again, one 4 KiB
page at a time: a (1000, 25, 10) float64 result (2 MB) cost 3 ms to fault in against 0.5 ms to
compute, and the k-means program's gradient took 29 ms instead of 5 (one thread). glibc raises
its threshold by itself after such a free, but trims the heap back soon after, so a program that
frees a few large arrays at once faults again.

At import, tadiff sets glibc's thresholds as its documentation suggests for such workloads:
arrays up to :data:`MMAP_THRESHOLD` come from the heap, and up to :data:`TRIM_THRESHOLD` of free
memory at the heap's top stays with the process. This is what allocators such as jemalloc or
tcmalloc do by default (the PyTorch performance guide recommends preloading one for CPU
training). The cost is memory: a process keeps up to 128 MiB it freed, instead of returning it.

It is skipped where it does not apply or was decided elsewhere: other systems and C libraries
(no ``mallopt``), a process whose environment sets glibc's own ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_`` (the user's choice stands), and ``TADIFF_MALLOC_TUNING=0``.

Example:
    >>> from tadiff import _malloc
    >>> _malloc.TUNED in (True, False)
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

MMAP_THRESHOLD = 32 << 20
"""Allocations below this many bytes come from the heap (glibc's largest allowed value)."""

TRIM_THRESHOLD = 128 << 20
"""Free memory at the top of the heap kept by the process, in bytes."""

_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h> parameter numbers
_M_MMAP_THRESHOLD = -3

TUNED = False
"""Whether this process's ``malloc`` thresholds were set at import."""


def tune() -> bool:
    """Set glibc's mmap and trim thresholds (see the module docstring); True where it did."""
    global TUNED
    if sys.platform != "linux" or os.environ.get("TADIFF_MALLOC_TUNING", "1") == "0":
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success; the trim threshold first, so a refused mmap threshold leaves
    # at most a larger trim threshold behind
    TUNED = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    )
    return TUNED
