"""Threads for tadiff's CPU kernels that loop over blocks (one batch element at a time).

A compiled convolution kernel handles one batch element per step: it copies that element's
window views into a buffer, then makes one BLAS product. Run in one thread, the copies leave
every core but one idle, and the product's BLAS threads read a buffer that another core has
just written. Here each thread takes whole blocks: it copies into its own buffer, in its own
cache, then multiplies on its own core. On the 2-core development machine a stride-2 conv2d
forward at batch 16 takes 6.1 ms this way, against 8.1 ms in one thread with two-threaded BLAS.

The threads are OpenBLAS's own (NumPy's BLAS): a block loop sets OpenBLAS to one thread per
product, runs its workers on OpenBLAS's threads (the calling thread is the first), and sets
the previous count back. Threads of tadiff's own would compete with OpenBLAS's, which spin
for about 0.1 s after every threaded product. OpenBLAS's thread count is global to the
process, so a NumPy product made by *another* Python thread while a block loop runs gets one
thread. Where NumPy's BLAS is not OpenBLAS with its own threads (MKL, Accelerate, an OpenMP
build), block loops run in the calling thread, as before.

Results are deterministic: a block's product always runs on one BLAS thread, whichever thread
takes it, and partial sums over blocks are added in block order. They can differ from a
single-threaded run by float rounding, since BLAS may split a product differently when it has
several threads.

Public names:
    get_num_threads, set_num_threads, blas_info.

Example:
    >>> import tadiff as td
    >>> previous = td.set_num_threads(1)   # run block loops in the calling thread
    >>> td.get_num_threads()
    1
    >>> _ = td.set_num_threads(previous)
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tadiff.errors import InputError

__all__ = ["blas_info", "get_num_threads", "set_num_threads"]

_ENV = "TADIFF_NUM_THREADS"


class _Blas:
    """The OpenBLAS library NumPy uses: its global thread-count calls, and ``run``, its
    ``gotoblas_pthread(n, fn, args, stride)``, which calls ``fn(args + i * stride)`` on ``n``
    of its threads (the caller first) and returns when all are done."""

    def __init__(self, path: str, lib: ctypes.CDLL, set_threads: Any, get_threads: Any, run: Any):
        self.path, self._lib = path, lib
        self.set_threads, self.get_threads, self.run = set_threads, get_threads, run


def _symbol(lib: ctypes.CDLL, stem: str) -> Any:
    """``stem`` under the names OpenBLAS builds export it: plain, ILP64, scipy-openblas."""
    for name in (stem, f"{stem}64_", f"scipy_{stem}64_"):
        fn = getattr(lib, name, None)
        if fn is not None:
            return fn
    return None


def _candidate_paths() -> list[str]:
    """OpenBLAS shared libraries: NumPy's bundled copy first, then any other one loaded."""
    root = Path(np.__file__).resolve().parent
    found = []
    for folder in (root.parent / "numpy.libs", root / ".dylibs", root / ".libs"):
        if folder.is_dir():
            found += sorted(str(p) for p in folder.iterdir() if "openblas" in p.name.lower())
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps") as maps:
                loaded = {line.split()[-1] for line in maps if "openblas" in line.lower()}
        except OSError:
            loaded = set()
        found += sorted(p for p in loaded if p.startswith("/") and p not in found)
    return found


@functools.cache
def _blas() -> _Blas | None:
    """NumPy's OpenBLAS, if it runs threads of its own that tadiff can count and use."""
    for path in _candidate_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        calls = [_symbol(lib, f"openblas_{s}") for s in ("set_num_threads", "get_num_threads")]
        get_parallel = _symbol(lib, "openblas_get_parallel")
        run = getattr(lib, "gotoblas_pthread", None)
        if None in calls or get_parallel is None or run is None:
            continue
        set_threads, get_threads = calls
        set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
        get_threads.restype = get_parallel.restype = run.restype = ctypes.c_int
        run.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        if get_parallel() != 1:  # 0: a sequential build; 2: OpenMP threads, not its own
            continue
        return _Blas(path, lib, set_threads, get_threads, run)
    return None


def _threads_from_environment() -> int | None:
    text = os.environ.get(_ENV)
    if text is None or not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"${_ENV} must be a positive integer, got {text!r}")
    return value


_requested: int | None = None


def get_num_threads() -> int:
    """Threads tadiff's block-looping CPU kernels use (1: the calling thread alone).

    The default is ``$TADIFF_NUM_THREADS`` when set, else the thread count NumPy's OpenBLAS had
    when tadiff first asked (its ``OPENBLAS_NUM_THREADS``, or the number of cores), else 1
    where NumPy's BLAS is not such an OpenBLAS (see :func:`blas_info`).

    Example:
        >>> import tadiff as td
        >>> td.get_num_threads() >= 1
        True
    """
    return _requested if _requested is not None else _default_threads()


@functools.cache
def _default_threads() -> int:
    # read once, before any block loop has set OpenBLAS to one thread
    value = _threads_from_environment()
    if value is not None:
        return value
    blas = _blas()
    return max(1, int(blas.get_threads())) if blas is not None else 1


def set_num_threads(threads: int) -> int:
    """Set how many threads tadiff's block-looping CPU kernels use; returns the previous value.

    ``1`` runs every block in the calling thread, with BLAS's own threading. More than 1 needs
    NumPy's OpenBLAS with threads of its own, and uses at most as many as it has (see
    :func:`blas_info`); elsewhere the kernels stay in the calling thread whatever this says.
    It does not change how many threads NumPy's BLAS uses outside these kernels
    (``OPENBLAS_NUM_THREADS`` or ``threadpoolctl`` do).

    Args:
        threads: a positive int.

    Returns:
        The previous :func:`get_num_threads`.

    Raises:
        InputError: ``threads`` is not a positive int.

    Example:
        >>> import tadiff as td
        >>> before = td.set_num_threads(2)
        >>> _ = td.set_num_threads(before)
    """
    global _requested
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise InputError(f"set_num_threads: threads must be a positive int, got {threads!r}")
    previous = get_num_threads()
    _requested = int(threads)
    return previous


def blas_info() -> dict[str, object]:
    """What tadiff found of NumPy's BLAS, and the threads its kernels will use.

    Returns:
        ``{"library": the OpenBLAS path or None, "blas_threads": its thread count now (None if
        not found), "parallel": whether block loops can run on its threads, "num_threads":
        get_num_threads()}``.

    Example:
        >>> import tadiff as td
        >>> sorted(td.parallel.blas_info())
        ['blas_threads', 'library', 'num_threads', 'parallel']
    """
    blas = _blas()
    return {
        "library": blas.path if blas is not None else None,
        "blas_threads": int(blas.get_threads()) if blas is not None else None,
        "parallel": blas is not None,
        "num_threads": get_num_threads(),
    }


# ----------------------------------------------------------------------------------------------
# Block loops on OpenBLAS's threads
# ----------------------------------------------------------------------------------------------

_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_claim = threading.Lock()


def _claim_threads(blas: _Blas) -> int:
    """Set OpenBLAS to one thread for a block loop; returns the count to restore (0: none
    free, because another block loop holds them or BLAS already runs on one thread)."""
    with _claim:
        current = int(blas.get_threads())
        if current < 2:
            return 0
        blas.set_threads(1)
        return current


_MIN_BLOCK_FLOPS = 48e6
"""Blocks of less arithmetic than this run in the calling thread: below it, handing the GIL
back and forth between threads costs more than the second core gains. Measured on 102 conv
kernels (stride 1 and 2, 16-64 channels, 14-56 pixels, batch 8 and 16; 2 cores): always
parallel was 1.28x the serial time (geometric mean; up to 2.96x on small blocks), 4e6 0.99x
(worst 1.40x), 16e6 0.98x (1.25x), 48e6 0.97x (worst 1.04x, best 0.75x)."""


def threads_for(count: int, flops: float = math.inf) -> int:
    """How many threads :func:`run_blocks` would use for ``count`` blocks of ``flops`` each
    (fewer if another block loop holds OpenBLAS's threads when it starts)."""
    if _blas() is None or flops < _MIN_BLOCK_FLOPS:
        return 1
    return max(1, min(get_num_threads(), count))


def run_blocks(
    count: int, make_worker: Callable[[], Callable[[int], None]], flops: float = math.inf
) -> list:
    """Call ``worker(i)`` for every block ``i < count``, spread over OpenBLAS's threads.

    ``make_worker()`` builds one thread's worker (with its own scratch buffers); blocks are
    handed out one at a time, so a core slowed by another job takes fewer. A worker must write
    only its own outputs (a block's slice, or a slot of its own).

    The workers run on OpenBLAS's own threads (its ``gotoblas_pthread``, the calling thread
    being the first) while OpenBLAS is set to one thread per product: a thread of our own would
    compete with OpenBLAS's, which keep spinning for about 0.1 s after each threaded product
    (measured: a stride-2 conv2d forward right after a threaded product 9.7-11 ms on a pool of
    our own against 6.1 ms this way). With one thread, a nested call, or another block loop
    running, everything runs in the calling thread with BLAS's own threading.

    Args:
        count: number of blocks.
        make_worker: builds a callable ``worker(i)``; called once per thread used.
        flops: arithmetic of one block (its BLAS products); below :data:`_MIN_BLOCK_FLOPS`
            the blocks run in the calling thread.

    Returns:
        The workers made (one per thread used), for the caller to collect what they hold.

    Raises:
        Whatever a worker raised (the first, after every thread has stopped).
    """
    want = threads_for(count, flops)
    blas = _blas()
    restore = _claim_threads(blas) if want > 1 else 0
    if not restore:
        worker = make_worker()
        for i in range(count):
            worker(i)
        return [worker]
    threads = min(want, restore)
    taken = itertools.count()  # next() on it is atomic under the GIL
    workers: list = [None] * threads
    errors: list[BaseException] = []

    def body(arg: int | None) -> None:  # on an OpenBLAS thread, arg = its index (None for 0)
        try:
            worker = workers[arg or 0] = make_worker()
            while not errors and (i := next(taken)) < count:
                worker(i)
        except BaseException as error:  # raised in the caller below, never lost in C
            errors.append(error)

    callback = _WORKER(body)
    try:
        blas.run(threads, ctypes.cast(callback, ctypes.c_void_p), None, 1)
    finally:
        blas.set_threads(restore)
    if errors:
        raise errors[0]
    return [w for w in workers if w is not None]
