"""Measurements the benchmark scripts share: median wall time of calls, and the resident memory
calls add at their peak (Linux).

Import from a script in ``benchmarks/`` (its folder is on ``sys.path`` when run as
``python benchmarks/<name>.py``)::

    from _measure import median_ms, peak_mib
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn`` in ms, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def peak_mib(fn: Callable[[], Any], calls: int = 3) -> float:
    """MiB of resident memory ``calls`` calls of ``fn`` add at their peak, measured from the
    resident size after one warm-up call (first-call caches are not the calls' memory).

    Linux resets the high-water mark of resident memory when ``5`` is written to
    ``/proc/self/clear_refs``. Run it in a fresh process, one measurement per process.
    """
    fn()
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    for _ in range(calls):
        fn()
    return max(0, _status_kib("VmHWM") - before) / 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")
