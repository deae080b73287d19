"""Measurements the benchmark scripts share: median wall time of calls, the resident memory
calls add at their peak (Linux), and instructions per call counted by valgrind's callgrind.

Import from a script in ``benchmarks/`` (its folder is on ``sys.path`` when run as
``python benchmarks/<name>.py``)::

    from _measure import median_ms, peak_mib
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
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


def counted_totals(argv: Sequence[str]) -> list[int]:
    """Run ``python argv...`` under callgrind with instrumentation off, and return the
    instruction totals of the dumps it makes (in order): the child calls
    :func:`count_calls`, which switches instrumentation on around the calls it counts.

    Raises:
        SystemExit: valgrind is not installed.
    """
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit("counting instructions needs valgrind's callgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={out}", sys.executable, *argv],
            check=True, capture_output=True,
        )  # fmt: skip
        dumps = sorted(Path(folder).glob("callgrind.out.*"), key=lambda f: int(f.suffix[1:]))
        return [_total(dump) for dump in dumps]


def count_calls(fns: Sequence[Callable[[], Any]], calls: int, warmups: int = 2) -> None:
    """In a child of :func:`counted_totals`: for each of ``fns``, ``warmups`` uncounted calls
    (first-call caches), then ``calls`` counted ones and a dump. One dump of an empty function
    comes first: the cost of switching, to subtract from every other. The collector is off."""
    pid = str(os.getpid())

    def control(*flags: str) -> None:
        subprocess.run(["callgrind_control", *flags, pid], check=True, capture_output=True)

    gc.disable()
    for fn in [lambda: None, *fns]:
        for _ in range(warmups):
            fn()
        control("--zero")
        control("--instr=on")
        for _ in range(calls):
            fn()
        control("--instr=off")
        control("--dump")


def _total(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"{dump} has no totals line")
