"""Threads: how many tadiff uses, in NumPy's BLAS and in its own block loops.

:func:`set_num_threads` bounds every thread tadiff starts or lets BLAS start: NumPy's BLAS
(through `threadpoolctl <https://github.com/joblib/threadpoolctl>`_), the parallel loops of the
Numba backend, and the helper threads of tadiff's block-looping kernels (a compiled convolution
handles one batch element per block).

**Cores other processes keep busy are not used** (on Linux, where ``/proc/stat`` says how busy
the cores are). BLAS libraries split a product between their threads in equal parts and wait
for the slowest: when another process holds a core, the thread that has to share it finishes
its part a scheduler time slice late, on every product. Measured on 2 cores with one other
CPU-bound process: a 128x128 float32 product took 15 ms on two OpenBLAS threads against
0.05 ms on one, and training a small CNN took twice as long as on one thread. So before a
training step, a backward pass or a block loop, tadiff looks (at most every
:data:`_SAMPLE_SECONDS`) at how much CPU the *other* processes used since the last look and
runs on ``min(get_num_threads(), idle cores)`` threads: an idle machine gets every thread, a
loaded one what is left. ``set_dynamic(False)`` turns this off (a fixed count, e.g. for timing).

**Small products.** A loop of small BLAS products (a compiled convolution makes one per batch
element) runs them on one BLAS thread (:func:`blas_threads_for`): a second thread gains little
on products that small, and costs a time slice per product when another process holds a core.

**Small kernels.** A Numba kernel estimated below about half a millisecond of one core's work
runs on one thread (``tadiff.index.compile.numba_backend.PARALLEL_FROM``): its second thread
would gain a fraction of that, while Numba's and the BLAS library's pools, each spinning after
its parallel calls, would take each other's cores.

**Block loops.** A block loop (:func:`run_blocks`) hands its blocks one at a time to the calling
thread and to helper threads of tadiff's own, with BLAS set to one thread per product while it
runs; a helper that has not started when the blocks run out is not waited for, so a core taken
by another process costs at most the one block its helper holds. Nested loops, and a loop
started while another Python thread runs one, run in their calling threads.

Results are deterministic: a block's product always runs on one BLAS thread, whichever thread
takes it, and partial sums over blocks are added in block order. They can differ from a run
with another thread count by float rounding, since BLAS may split a product differently.

NumPy's BLAS thread count is global to the process: while a block loop runs, a NumPy product
made by *another* Python thread gets one thread too, and tadiff sets the count back to its own
choice whenever it changes (a ``threadpoolctl.threadpool_limits`` around tadiff calls is
overridden; use :func:`set_num_threads`).

Public names:
    get_num_threads, set_num_threads, get_dynamic, set_dynamic, threads_in_use, blas_info.

Example:
    >>> import tadiff as td
    >>> previous = td.set_num_threads(1)   # one BLAS thread, block loops in the calling thread
    >>> td.get_num_threads(), td.parallel.threads_in_use()
    (1, 1)
    >>> _ = td.set_num_threads(previous)
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.errors import InputError

__all__ = [
    "blas_info", "get_dynamic", "get_num_threads", "set_dynamic", "set_num_threads",
    "threads_in_use",
]  # fmt: skip

_ENV = "TADIFF_NUM_THREADS"
_ENV_DYNAMIC = "TADIFF_DYNAMIC_THREADS"

_SAMPLE_SECONDS = 0.25
"""How often (at most) tadiff looks at how busy the cores are: ``/proc/stat`` counts in
hundredths of a second, so a shorter interval would measure little but rounding."""

_BUSY_CORE = 0.25
"""A core is left out when other processes kept it busy more than this fraction of the last
interval: a BLAS thread that shares a core for even a quarter of the time waits time slices."""


# ----------------------------------------------------------------------------------------------
# Settings
# ----------------------------------------------------------------------------------------------


def _positive_int_from_environment(name: str) -> int | None:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or (value == 0 and name == _ENV) or (value > 1 and name == _ENV_DYNAMIC):
        kind = "a positive integer" if name == _ENV else "0 or 1"
        raise InputError(f"${name} must be {kind}, got {text!r}")
    return value


@functools.cache
def _blas_controllers() -> tuple[Any, ...]:
    """threadpoolctl's controllers of the BLAS libraries loaded (NumPy's, and any other)."""
    from threadpoolctl import ThreadpoolController

    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


@functools.cache
def _default_threads() -> int:
    # read once, before tadiff has changed BLAS's thread count
    value = _positive_int_from_environment(_ENV)
    if value is not None:
        return value
    counts = [c.get_num_threads() for c in _blas_controllers()]
    counts = [int(n) for n in counts if n]
    return max(counts) if counts else _cores()


_requested: int | None = None
_dynamic: bool | None = None


def get_num_threads() -> int:
    """The most threads tadiff uses: in NumPy's BLAS, and in its block loops (the calling
    thread included).

    The default is ``$TADIFF_NUM_THREADS`` when set, else the thread count NumPy's BLAS had when
    tadiff first asked (``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` where set, else the
    number of cores). :func:`threads_in_use` says how many it uses now.

    Example:
        >>> import tadiff as td
        >>> td.get_num_threads() >= 1
        True
    """
    return _requested if _requested is not None else _default_threads()


def set_num_threads(threads: int) -> int:
    """Set the most threads tadiff uses, in NumPy's BLAS and in its own block loops; returns
    the previous value.

    ``1`` runs every product on one BLAS thread and every block loop in the calling thread.
    NumPy's BLAS is set at once (process-wide, like ``torch.set_num_threads``); fewer threads
    are used while other processes keep cores busy, unless :func:`set_dynamic` turned that off.

    Args:
        threads: a positive int.

    Returns:
        The previous :func:`get_num_threads`.

    Raises:
        InputError: ``threads`` is not a positive int.

    Example:
        >>> import tadiff as td
        >>> before = td.set_num_threads(2)
        >>> td.get_num_threads()
        2
        >>> _ = td.set_num_threads(before)
    """
    global _requested
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise InputError(f"set_num_threads: threads must be a positive int, got {threads!r}")
    previous = get_num_threads()
    _requested = int(threads)
    sync_threads(force=True)
    return previous


def get_dynamic() -> bool:
    """Whether tadiff leaves out cores other processes keep busy (default ``True``, or
    ``$TADIFF_DYNAMIC_THREADS`` = ``0``/``1``).

    Example:
        >>> import tadiff as td
        >>> isinstance(td.parallel.get_dynamic(), bool)
        True
    """
    return _dynamic if _dynamic is not None else _default_dynamic()


@functools.cache
def _default_dynamic() -> bool:
    value = _positive_int_from_environment(_ENV_DYNAMIC)
    return True if value is None else bool(value)


def set_dynamic(enabled: bool) -> bool:
    """Turn on or off the use of fewer threads while other processes keep cores busy; returns
    the previous setting. Off, tadiff always uses :func:`get_num_threads` threads.

    Example:
        >>> import tadiff as td
        >>> before = td.parallel.set_dynamic(False)
        >>> td.parallel.threads_in_use() == td.get_num_threads()
        True
        >>> _ = td.parallel.set_dynamic(before)
    """
    global _dynamic
    if not isinstance(enabled, bool):
        raise InputError(f"set_dynamic: enabled must be a bool, got {enabled!r}")
    previous = get_dynamic()
    _dynamic = enabled
    sync_threads(force=True)
    return previous


# ----------------------------------------------------------------------------------------------
# How many cores the other processes leave idle
# ----------------------------------------------------------------------------------------------


def _read_cpu_times(cpus: frozenset[int]) -> tuple[int, int] | None:
    """(busy, total) clock ticks of the cores in ``cpus`` since boot, from /proc/stat."""
    try:
        with open("/proc/stat", "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return None
    busy = total = 0
    for line in lines[1:]:
        if not line.startswith(b"cpu"):
            break
        fields = line.split()
        if int(fields[0][3:]) not in cpus:
            continue
        ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return busy, total


def _read_own_ticks() -> int | None:
    """Clock ticks this process (every thread) has run, from /proc/self/stat."""
    try:
        with open("/proc/self/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


class _Load:
    """Samples of the cores' busy time and this process's own, at most every
    :data:`_SAMPLE_SECONDS`; ``idle_cores()`` is how many cores the *other* processes left
    idle over the last interval (all of them before the first interval has passed)."""

    def __init__(self) -> None:
        self.cpus = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        self.last: tuple[float, int, int, int] | None = None
        self.idle = _cores()

    def idle_cores(self) -> int:
        now = time.monotonic()
        if self.last is not None and now - self.last[0] < _SAMPLE_SECONDS:
            return self.idle
        times = _read_cpu_times(self.cpus) if self.cpus else None
        own = _read_own_ticks()
        if times is None or own is None:
            self.cpus = None  # not Linux: every core counts as idle
            return self.idle
        if self.last is not None:
            _, busy0, total0, own0 = self.last
            total = times[1] - total0
            if total > 0:
                cores = len(self.cpus)
                others = max(0.0, (times[0] - busy0 - (own - own0)) / total * cores)
                self.idle = max(1, cores - math.ceil(others - _BUSY_CORE))
        self.last = (now, times[0], times[1], own)
        return self.idle


_load = _Load()
_applied: int | None = None  # the BLAS thread count tadiff set last
_sync_lock = threading.Lock()


def threads_in_use() -> int:
    """How many threads tadiff uses now: :func:`get_num_threads`, less the cores other
    processes keep busy when :func:`get_dynamic` is on.

    Example:
        >>> import tadiff as td
        >>> 1 <= td.parallel.threads_in_use() <= td.get_num_threads()
        True
    """
    wanted = get_num_threads()
    if wanted == 1 or not get_dynamic():
        return wanted
    return max(1, min(wanted, _load.idle_cores()))


def sync_threads(force: bool = False) -> int:
    """Set NumPy's BLAS, and Numba's parallel kernels where Numba is loaded (for the calling
    thread: Numba's count is per thread), to :func:`threads_in_use` threads where that changed
    (or ``force``); returns the count. Cheap: called before every module call, backward pass
    and block loop.
    """
    global _applied
    threads = threads_in_use()
    if threads != _applied or force:
        with _sync_lock:
            for controller in _blas_controllers():
                controller.set_num_threads(threads)
            numba = sys.modules.get("numba")  # its parallel kernels (the Numba backend)
            if numba is not None:
                numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            _applied = threads
    return threads


def blas_info() -> dict[str, object]:
    """What tadiff found of the BLAS libraries loaded, and the threads it uses.

    Returns:
        ``{"libraries": [{"library": its internal name ("openblas", "mkl", ...), "path",
        "threads": its thread count now}], "num_threads": get_num_threads(), "threads_in_use":
        threads_in_use(), "dynamic": get_dynamic()}``.

    Example:
        >>> import tadiff as td
        >>> sorted(td.parallel.blas_info())
        ['dynamic', 'libraries', 'num_threads', 'threads_in_use']
    """
    return {
        "libraries": [
            {"library": c.internal_api, "path": c.filepath, "threads": c.get_num_threads()}
            for c in _blas_controllers()
        ],
        "num_threads": get_num_threads(),
        "threads_in_use": threads_in_use(),
        "dynamic": get_dynamic(),
    }


# ----------------------------------------------------------------------------------------------
# Block loops
# ----------------------------------------------------------------------------------------------


_MIN_THREADED_PRODUCT_FLOPS = 2e6
"""Loops of BLAS products smaller than this (per product) run them on one BLAS thread. Measured
on 2 cores (float32 n x n products, OpenBLAS): a second thread gains nothing at n = 64
(0.5 MFLOP) and 20% at n = 96 (1.8 MFLOP) on an idle machine, while with one other busy process
every threaded product waits a time slice (n = 96: 5x slower, n = 128: 300x). A compiled
convolution makes such products by the hundred per call, one per batch element."""


@contextlib.contextmanager
def blas_threads_for(flops_per_product: float):
    """Run the block of code with NumPy's BLAS on one thread when its products are smaller
    than :data:`_MIN_THREADED_PRODUCT_FLOPS` each, else on :func:`threads_in_use` threads.

    Example:
        >>> import numpy as np
        >>> from tadiff.parallel import blas_threads_for
        >>> with blas_threads_for(2 * 32 * 32 * 32):     # a loop of small products
        ...     c = [np.ones((32, 32)) @ np.ones((32, 32)) for _ in range(4)]
    """
    threads = sync_threads()
    small = flops_per_product < _MIN_THREADED_PRODUCT_FLOPS and threads > 1
    if small:
        for controller in _blas_controllers():
            controller.set_num_threads(1)
    try:
        yield
    finally:
        if small:
            sync_threads(force=True)


_MIN_BLOCK_FLOPS = 48e6
"""Blocks of less arithmetic than this run in the calling thread: below it, handing the GIL
back and forth between threads costs more than the second core gains. Measured on 102 conv
kernels (stride 1 and 2, 16-64 channels, 14-56 pixels, batch 8 and 16; 2 cores): always
parallel was 1.28x the serial time (geometric mean; up to 2.96x on small blocks), 4e6 0.99x
(worst 1.40x), 16e6 0.98x (1.25x), 48e6 0.97x (worst 1.04x, best 0.75x)."""


class _Helpers:
    """Daemon threads that run block loops' jobs; started when first needed, never more than
    a loop asks for, and forgotten in a forked child (whose copy has none)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.count = 0

    def submit(self, job: Callable[[], None], helpers: int) -> None:
        while self.count < helpers:
            threading.Thread(target=self._serve, name="tadiff-block", daemon=True).start()
            self.count += 1
        self.jobs.put(job)

    def _serve(self) -> None:
        while True:
            self.jobs.get()()


_helpers = _Helpers()
_one_loop = threading.Lock()  # one threaded loop at a time: BLAS's count is process-wide
_inside = threading.local()  # .loop: this thread runs a block of a loop


def _after_fork_in_child() -> None:
    global _helpers, _one_loop, _load, _applied
    _helpers, _one_loop, _load, _applied = _Helpers(), threading.Lock(), _Load(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def threads_for(count: int, flops: float = math.inf) -> int:
    """How many threads :func:`run_blocks` would use for ``count`` blocks of ``flops`` each
    (one if another block loop runs when it starts)."""
    if flops < _MIN_BLOCK_FLOPS:
        return 1
    return max(1, min(threads_in_use(), count))


class _Loop:
    """One threaded block loop: blocks handed out one at a time; ``close`` waits only for
    threads that have started (a helper that starts later finds the loop closed)."""

    def __init__(self, count: int, make_worker: Callable[[], Callable[[int], None]]):
        self.count, self.make_worker = count, make_worker
        self.taken = itertools.count()  # next() on it is atomic under the GIL
        self.cond = threading.Condition()
        self.closed, self.active = False, 0
        self.workers: list = []
        self.errors: list[BaseException] = []

    def help(self) -> None:
        with self.cond:
            if self.closed:
                return
            self.active += 1
        try:
            self.work()
        finally:
            with self.cond:
                self.active -= 1
                self.cond.notify_all()

    def work(self) -> None:
        _inside.loop = True
        try:
            worker = self.make_worker()
            self.workers.append(worker)
            while not self.errors and (i := next(self.taken)) < self.count:
                worker(i)
        except BaseException as error:  # raised in the caller by close()
            self.errors.append(error)
        finally:
            _inside.loop = False

    def close(self) -> None:
        with self.cond:
            self.closed = True
            while self.active:
                self.cond.wait()
        if self.errors:
            raise self.errors[0]


def run_blocks(
    count: int, make_worker: Callable[[], Callable[[int], None]], flops: float = math.inf
) -> list:
    """Call ``worker(i)`` for every block ``i < count``, spread over threads.

    ``make_worker()`` builds one thread's worker (with its own scratch buffers); blocks are
    handed out one at a time, so a core slowed by another job takes fewer. A worker must write
    only its own outputs (a block's slice, or a slot of its own). While the loop runs, BLAS
    makes each product on one thread; the calling thread takes blocks too. With one thread in
    use, blocks below :data:`_MIN_BLOCK_FLOPS`, a nested call, or another block loop running,
    everything runs in the calling thread, with BLAS's threads for blocks of at least
    :data:`_MIN_THREADED_PRODUCT_FLOPS` (see :func:`blas_threads_for`).

    Args:
        count: number of blocks.
        make_worker: builds a callable ``worker(i)``; called once per thread used.
        flops: arithmetic of one block (its BLAS products).

    Returns:
        The workers made (one per thread that took part), for the caller to collect.

    Raises:
        BaseException: whatever a worker raised (the first, after every thread that started
            has stopped).

    Example:
        >>> from tadiff.parallel import run_blocks
        >>> out = [0] * 5
        >>> def make_worker():
        ...     def work(i):
        ...         out[i] = i * i
        ...     return work
        >>> _ = run_blocks(5, make_worker)
        >>> out
        [0, 1, 4, 9, 16]
    """
    want = 1 if getattr(_inside, "loop", False) else threads_for(count, flops)
    if want == 1 or not _one_loop.acquire(blocking=False):
        with blas_threads_for(flops):
            worker = make_worker()
            for i in range(count):
                worker(i)
        return [worker]
    try:
        for controller in _blas_controllers():
            controller.set_num_threads(1)
        loop = _Loop(count, make_worker)
        for _ in range(want - 1):
            _helpers.submit(loop.help, want - 1)
        loop.work()
        loop.close()
        return loop.workers
    finally:
        sync_threads(force=True)
        _one_loop.release()
