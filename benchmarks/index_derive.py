"""Benchmark: cost of symbolic derivation, and size of the derived expressions.

    python benchmarks/index_derive.py            # 7 repeats per definition
    python benchmarks/index_derive.py --quick    # 3 repeats

For every definition of a corpus (matmul, strided convolution, flattening, diagonal, the
exp/sum example, ...) it derives the gradient with respect to every argument, twice:

* **tadiff**: the normal derivation (simplifying constructors, delta elimination, dropping
  conditions and bounds implied by the output ranges);
* **raw**: the same algorithm with every simplification switched off
  (``tadiff.index.expr.raw_construction``) — the baseline, measured in the same run.

It reports the median wall time of the derivations (a fresh ``define`` each repeat, so nothing is
cached), and the size of the result as the number of distinct DAG nodes, with ratios
raw / tadiff. Before timing, both results are evaluated on small random inputs and must agree.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tadiff.index.expr import node_count, raw_construction
from tadiff.index.function import define
from tadiff.utils.progress import progress, set_quiet

CORPUS = [
    ("matmul", "z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (2, 3), "w": (3, 2)}),
    (
        "conv stride 2",
        "y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])",
        {"x": (1, 2, 7), "w": (2, 2, 3)},
    ),
    ("flatten", "f[s, t:4] = x[4*s+t]", {"x": (12,)}),
    ("diagonal", "y[i] = c[i,i]", {"c": (3, 3)}),
    ("x[2*i]", "y[i] = x[2*i]", {"x": (7,)}),
    ("max pool", "y[i] = maximum(x[2*i], x[2*i+1])", {"x": (6,)}),
    (
        "exp/sum",
        "f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))",
        {"a": (2, 2), "b": (2, 2), "c": (2, 2), "d": (3,)},
    ),
    ("elementwise", "y[i] = log(x[i]) / sqrt(x[i]) + tanh(x[i]) * x[i]**2", {"x": (3,)}),
]


def _derive_all(source: str, raw: bool) -> tuple[float, int, dict]:
    start = time.perf_counter()
    if raw:
        with raw_construction():
            f = define(source)
            grads = {a: f.grad(a) for a in f.args}
    else:
        f = define(source)
        grads = {a: f.grad(a) for a in f.args}
    elapsed = time.perf_counter() - start
    return elapsed, sum(node_count(g.body) for g in grads.values()), {"f": f, **grads}


def _agree(source: str, shapes: dict) -> None:
    rng = np.random.default_rng(0)
    _, _, fast = _derive_all(source, raw=False)
    _, _, slow = _derive_all(source, raw=True)
    f = fast["f"]
    arrays = {a: rng.uniform(0.5, 1.5, size=shapes[a]) for a in f.args}
    g = rng.normal(size=f.reference(**arrays).shape)
    for a in f.args:
        args = {**arrays, f.grad_name: g}
        # both by the interpreter: the simplified and the raw derivative must agree as formulas
        fast_value, slow_value = fast[a].reference(**args), slow[a].reference(**args)
        np.testing.assert_allclose(fast_value, slow_value, rtol=1e-12, atol=1e-14)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    repeats = 3 if args.quick else 7
    print(
        "| definition | tadiff derive ms | raw derive ms | time raw/tadiff "
        "| tadiff nodes | raw nodes | nodes raw/tadiff |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, source, shapes in progress(CORPUS, desc="definitions"):
        _agree(source, shapes)
        times: dict[bool, list[float]] = {False: [], True: []}
        nodes: dict[bool, int] = {}
        for _ in range(repeats):
            for raw in (False, True):  # interleaved, so machine noise hits both alike
                t, n, _ = _derive_all(source, raw)
                times[raw].append(t)
                nodes[raw] = n
        fast, slow = statistics.median(times[False]), statistics.median(times[True])
        print(
            f"| {name} | {fast * 1e3:.1f} | {slow * 1e3:.1f} | {slow / fast:.2f} "
            f"| {nodes[False]} | {nodes[True]} | {nodes[True] / nodes[False]:.2f} |"
        )


if __name__ == "__main__":
    main()
