"""Engine overhead: tadiff vs PyTorch eager (CPU) on graphs of small ops, in the same run.

Workloads (each timed forward + backward unless noted):

- ``chain mul-scalar``: ``y = y * 1.0001`` 1000 times, then ``y.sum().backward()``.
- ``chain sin``: ``y = y.sin()`` 1000 times.
- ``chain x*w+b``: ``y = y * w + b`` (tensor-tensor ops, two leaves) 500 times = 1000 ops.
- ``chain forward, no_grad``: the mul-scalar chain under ``no_grad`` (the fast path).
- ``mixed graph``: a small MLP step (matmul, broadcast add, tanh, softmax, indexing, log,
  mean, pow, sum; 10 layers) — realistic op variety.

Each at 1 and 100 elements (the mixed graph at batch 1 and 100 rows). Per-op microseconds are the
median of ``--repeats`` timings divided by the number of ops; the ratio is tadiff / torch (< 1:
tadiff faster). torch runs single-threaded (``torch.set_num_threads(1)``): these are overhead
measurements, not throughput. Times are CPU time of this process (``time.process_time``), which
other load on a shared machine disturbs far less than wall-clock time; both libraries run
single-threaded, so for them CPU time and wall time coincide on an idle machine.

Run: ``python benchmarks/engine_overhead.py [--repeats 7]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tadiff as td
from tadiff.utils.progress import progress, set_quiet


def _median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def _workloads(m: Any, size: int, as_tensor: Callable[..., Any]) -> dict[str, tuple[Callable, int]]:
    rng = np.random.default_rng(0)
    x = as_tensor(rng.standard_normal(size).astype(np.float32), True)
    w = as_tensor(rng.uniform(0.9, 1.1, size).astype(np.float32), True)
    b = as_tensor(rng.standard_normal(size).astype(np.float32) * 1e-3, True)

    def chain_mul() -> None:
        y = x
        for _ in range(1000):
            y = y * 1.0001
        y.sum().backward()

    def chain_sin() -> None:
        y = x
        for _ in range(1000):
            y = y.sin()
        y.sum().backward()

    def chain_affine() -> None:
        y = x
        for _ in range(500):
            y = y * w + b
        y.sum().backward()

    def chain_no_grad() -> None:
        with m.no_grad():
            y = x
            for _ in range(1000):
                y = y * 1.0001

    width = 8
    weights = [
        as_tensor(rng.standard_normal((width, width)).astype(np.float32) * 0.3, True)
        for _ in range(10)
    ]
    biases = [as_tensor(np.zeros(width, np.float32), True) for _ in range(10)]
    inputs = as_tensor(rng.standard_normal((size, width)).astype(np.float32), False)

    def mixed() -> None:
        h = inputs
        for wt, bs in zip(weights, biases, strict=True):
            h = (h @ wt + bs).tanh()
        p = m.softmax(h, dim=-1)[:, 0]
        loss = -(p.log().mean()) + (h**2).sum() * 1e-3
        loss.backward()

    mixed_ops = 10 * 3 + 9  # 3 per layer; softmax, index, log, mean, neg, pow, sum, mul, add

    rows = 100
    table = as_tensor(rng.standard_normal((rows, size)).astype(np.float32), True)

    def row_writes() -> None:  # a recurrence written row by row into a buffer (in place)
        h = table * 1.0
        for t in range(1, rows):
            h[t] = (h[t - 1].clone() * 0.5).tanh() + h[t]
        h.sum().backward()

    return {
        "chain mul-scalar": (chain_mul, 1001),
        "chain sin": (chain_sin, 1001),
        "chain x*w+b": (chain_affine, 1001),
        "chain forward, no_grad": (chain_no_grad, 1000),
        "mixed graph (MLP step)": (mixed, mixed_ops),
        "row writes h[t] = f(h[t-1])": (row_writes, 2 + 7 * (rows - 1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed: tadiff timings only")
    else:
        torch.set_num_threads(1)

    def td_tensor(a: np.ndarray, rg: bool) -> Any:
        return td.tensor(a, requires_grad=rg)

    def torch_tensor(a: np.ndarray, rg: bool) -> Any:
        return torch.tensor(a, requires_grad=rg)

    print("| workload | elements | tadiff µs/op | torch µs/op | tadiff / torch |")
    print("|---|---:|---:|---:|---:|")
    for size in (1, 100):
        ours = _workloads(td, size, td_tensor)
        theirs = _workloads(torch, size, torch_tensor) if torch is not None else {}
        for name, (fn, n_ops) in progress(ours.items(), desc=f"workloads of {size}"):
            t_ours = _median_seconds(fn, args.repeats) / n_ops * 1e6
            if name in theirs:
                t_theirs = _median_seconds(theirs[name][0], args.repeats) / n_ops * 1e6
                print(
                    f"| {name} | {size} | {t_ours:.2f} | {t_theirs:.2f} | {t_ours / t_theirs:.2f} |"
                )
            else:
                print(f"| {name} | {size} | {t_ours:.2f} | - | - |")


if __name__ == "__main__":
    main()
