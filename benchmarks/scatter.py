"""Scatter-adds: the gradient of a gather (an embedding lookup), ``index_add`` and
``scatter_add``, tadiff vs PyTorch eager and vs ``np.add.at`` (what tadiff used before), in the
same run.

Workloads, float32 and float64, forward + backward unless noted:

- ``gather``: ``(table[idx] * w).sum().backward()`` with a ``(rows, cols)`` table and ``n``
  indices: the backward scatters ``n × cols`` values into the table's gradient.
- ``index_add``: ``x.index_add(0, idx, src)`` forward alone (``n × cols`` values added).
- ``scatter_add``: ``x.scatter_add(0, index, src)`` with a ``(n, cols)`` index, forward alone.

The ``np.add.at`` column times the scatter itself the old way (``np.add.at`` into zeros), the
floor of the previous implementation. One thread; medians of ``--repeats`` calls; peak memory
(MiB the calls add to the resident size) of each method in a fresh process, with every array
of 64 KiB or more mapped on its own so that freed memory leaves the resident size.

Run: ``python benchmarks/scatter.py [--repeats 7]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from _measure import median_ms, peak_mib

SIZES = [(1000, 16, 5000), (10000, 64, 50000), (100, 8, 200000)]  # (rows, cols, n)
WORKLOADS = ("gather", "index_add", "scatter_add")
METHODS = ("tadiff", "torch", "np.add.at")


def _case(method: str, workload: str, size: tuple[int, int, int], dtype: str) -> Callable[[], Any]:
    """A no-argument callable running one workload with one method."""
    rows, cols, n = size
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, cols)).astype(dtype)
    idx = rng.integers(0, rows, n)
    src = rng.standard_normal((n, cols)).astype(dtype)
    index2d = rng.integers(0, rows, (n, cols))
    if method == "np.add.at":
        key = (idx,) if workload != "scatter_add" else (index2d, np.arange(cols)[None, :])
        return lambda: np.add.at(np.zeros((rows, cols), dtype), key, src)
    lib = __import__(method)
    lib.set_num_threads(1)
    t_table = lib.tensor(table, requires_grad=True)
    t_idx, t_src, t_index2d = lib.tensor(idx), lib.tensor(src), lib.tensor(index2d)

    def gather() -> None:
        t_table.grad = None
        (t_table[t_idx] * t_src).sum().backward()

    calls = {
        "gather": gather,
        "index_add": lambda: t_table.detach().index_add(0, t_idx, t_src),
        "scatter_add": lambda: t_table.detach().scatter_add(0, t_index2d, t_src),
    }
    return calls[workload]


def _memory_child(method: str, workload: str, size: list[int], dtype: str) -> float:
    """In a fresh process: MiB the calls of one case add to the resident size at their peak."""
    return peak_mib(_case(method, workload, tuple(size), dtype))


def _peak_mib(method: str, workload: str, size: tuple[int, int, int], dtype: str) -> float:
    args = json.dumps([method, workload, list(size), dtype])
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", args],
        capture_output=True,
        text=True,
        check=True,
        # every block from 64 KiB up is mapped on allocation and unmapped when freed, so the
        # resident size's high-water mark is the peak of live arrays (glibc otherwise raises
        # its threshold after the first free and serves later arrays from resident heap)
        env={**os.environ, "TADIFF_MALLOC_TUNING": "0", "MALLOC_MMAP_THRESHOLD_": "65536"},
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        print(_memory_child(*json.loads(args.memory_child)))
        return 0
    from threadpoolctl import threadpool_limits

    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"NumPy {np.__version__}; one thread\n")  # fmt: skip
    print(f"**Scatter-adds, ms per call (median of {args.repeats})**\n")
    print(
        "| workload | rows × cols, n | dtype | tadiff | torch | np.add.at | tadiff / torch "
        "| tadiff / np.add.at | peak MiB tadiff / torch / np.add.at |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---|")
    with threadpool_limits(1):
        for workload in WORKLOADS:
            for size in SIZES:
                for dtype in ("float32", "float64"):
                    cases = {m: _case(m, workload, size, dtype) for m in METHODS}
                    times = {m: [] for m in METHODS}
                    for _ in range(3):  # interleaved rounds: load drifts hit every method
                        for m, fn in cases.items():
                            times[m].append(median_ms(fn, args.repeats))
                    ms = {m: statistics.median(t) for m, t in times.items()}
                    peaks = (
                        "—"
                        if args.no_memory
                        else " / ".join(
                            f"{_peak_mib(m, workload, size, dtype):.1f}" for m in METHODS
                        )
                    )
                    rows, cols, n = size
                    cells = [
                        workload, f"{rows} × {cols}, {n}", dtype,
                        *(f"{ms[m]:.3f}" for m in METHODS),
                        f"{ms['tadiff'] / ms['torch']:.2f}×",
                        f"{ms['tadiff'] / ms['np.add.at']:.2f}×", peaks,
                    ]  # fmt: skip
                    print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
