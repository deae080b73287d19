"""Benchmark: Fourier–Motzkin with redundancy removal vs the textbook method.

    python benchmarks/intlinalg.py            # 5 repeats
    python benchmarks/intlinalg.py --quick    # 3 repeats

Workload: the derivation's problem. For random systems ``A x = b`` (1-2 equations, 3-5 unknowns,
coefficients in [-6, 6], seed fixed) solved once with symbolic b, the box ``0 <= x < size``
becomes constraints on the kernel coordinates z, which are eliminated

* **tadiff**: ``fourier_motzkin`` (gcd normalisation, integer rounding, redundancy removal);
* **textbook**: the same elimination keeping every row (what the reference implementation
  does) — the baseline, measured in the same run.

Reported per workload: the number of bounds + conditions in the nest, the median time to build
it, and the median time to enumerate all solutions for 40 attained b (both nests must yield
the same points; checked before timing). Ratios are textbook / tadiff.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time

from tadiff.intlinalg import Affine, IntegerSolver, enumerate_points
from tadiff.intlinalg.fourier_motzkin import _eliminate
from tadiff.utils.progress import progress, set_quiet


def _system(rng: random.Random, m: int, n: int):
    A = [[rng.randint(-6, 6) for _ in range(n)] for _ in range(m)]
    sizes = [rng.randint(2, 6) for _ in range(n)]
    params = [f"b{i}" for i in range(m)]
    solver = IntegerSolver(A)
    sol = solver.solve_affine([Affine.variable(p) for p in params])
    zs = [f"z{k}" for k in range(n - solver.rank)]
    x = [
        x0 + Affine(dict(zip(zs, row, strict=True)))
        for x0, row in zip(sol.particular, sol.kernel, strict=True)
    ]
    constraints = x + [size - 1 - xi for xi, size in zip(x, sizes, strict=True)]
    bs = sorted(
        {
            tuple(sum(a * v for a, v in zip(row, p, strict=True)) for row in A)
            for p in itertools.product(*(range(s) for s in sizes))
        }
    )
    values = [dict(zip(params, b, strict=True)) for b in rng.sample(bs, min(40, len(bs)))]
    return constraints, zs, values


def _size(nest) -> int:
    return sum(len(r.lower) + len(r.upper) for r in nest.ranges) + len(nest.conditions)


def _build(systems, prune: bool):
    return [_eliminate(c, zs, prune=prune) for c, zs, _ in systems]


def _walk(systems, nests) -> None:
    for (_, _, values), nest in zip(systems, nests, strict=True):
        for v in values:
            for _ in enumerate_points(nest, v):
                pass


def _median_time(fn, args, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 5")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    repeats = 3 if args.quick else 5
    rng = random.Random(2024)
    print(
        "| workload | bounds tadiff | bounds textbook | ratio | build tadiff ms | "
        "build textbook ms | ratio | enumerate tadiff ms | enumerate textbook ms | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m, n in progress([(1, 3), (2, 4), (1, 4), (2, 5), (1, 5)], desc="workloads"):
        systems = [_system(rng, m, n) for _ in range(8)]
        nests = {p: _build(systems, p) for p in (True, False)}
        for (_, _, values), fast, slow in zip(systems, nests[True], nests[False], strict=True):
            for v in values:  # same points, or the comparison is meaningless
                assert list(enumerate_points(fast, v)) == list(enumerate_points(slow, v))
        row = [f"{m}×{n}, 8 systems"]
        sizes = [sum(_size(nest) for nest in nests[p]) for p in (True, False)]
        build = [_median_time(_build, (systems, p), repeats) for p in (True, False)]
        enum = [_median_time(_walk, (systems, nests[p]), repeats) for p in (True, False)]
        row += [str(sizes[0]), str(sizes[1]), f"{sizes[1] / sizes[0]:.1f}"]
        row += [f"{build[0] * 1e3:.1f}", f"{build[1] * 1e3:.1f}", f"{build[1] / build[0]:.2f}"]
        row += [f"{enum[0] * 1e3:.1f}", f"{enum[1] * 1e3:.1f}", f"{enum[1] / enum[0]:.2f}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
