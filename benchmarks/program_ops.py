"""The ops of the PyTorch programs one at a time, recorded: tadiff against torch eager, same run.

``benchmarks/programs.py`` times whole programs; when one is slower than torch, this finds the
op at fault. Each case is one op as the programs call it (``examples/pytorch_programs/``: the
cloth's gathers, norms and ``index_add_``, the LSTM's row writes and iteration, hand tracking's
``stack``, small ``matmul``s and element-wise functions, the ray caster's broadcast products
of 48 × 48 images with colours and points), on inputs that require grad, so the
op records a node as it does inside a program. Two columns per library:

- *record*: the op alone, grad mode on (the recorded forward of a program);
- *+backward*: the op and its share of a backward pass (the op runs 16 times on the same
  leaves, then one ``autograd.backward`` over the 16 outputs; the time per op): its node's
  formula, the engine's work per node and the leaves' gradient accumulation.

Both libraries run in this process on one thread (``torch.set_num_threads(1)``, BLAS pinned
before NumPy loads); the cyclic garbage collector is off while a case runs, as in ``timeit``
(``benchmarks/programs.py`` reports its share of whole programs). Times are the best of
``--repeats`` rounds of CPU time (``time.process_time``), each round the mean over enough calls
for 20 ms; the cases of the two libraries alternate. Best-of, not median: a per-op cost is a
floor that other load on a shared machine only adds to.

``--instructions`` counts instructions per op instead, with valgrind's callgrind (``apt-get
install valgrind``): each library runs in a child process under callgrind with instrumentation
switched on only around a case's calls. The counts do not move with other load, so they show a
change of a few percent that timings on a shared machine cannot (an instruction is not a unit of
time: NumPy's vectorized loops do more per instruction than Python's interpreter).

Run: ``python benchmarks/program_ops.py [--repeats 7] [--dtype float64] [--cases NAME ...]
[--instructions [--calls 200]]``
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads: its BLAS reads them once

import numpy as np  # noqa: E402
from _measure import count_calls, counted_totals  # noqa: E402

import tadiff as td  # noqa: E402

MIN_SECONDS = 0.02


def _cases(m: Any, dtype: str) -> dict[str, tuple[Callable[[], Any], list[Any]]]:
    """``name -> (op, leaves)``: ``op()`` runs the op once and returns its output."""
    rng = np.random.default_rng(0)
    dt = getattr(m, dtype)

    def leaf(*shape: int) -> Any:
        return m.tensor(rng.standard_normal(shape), dtype=dt, requires_grad=True)

    x, delta, length = leaf(100, 2), leaf(180, 2), leaf(180, 1)
    stiffness = leaf(180)
    index = m.from_numpy(rng.integers(0, 100, 180))
    pinned = m.from_numpy(np.arange(100) % 10 == 0)
    rows, vec, mat, small = leaf(4, 14), leaf(14), leaf(3, 3), leaf(3)
    tension = leaf(180, 2)
    points, point, shading = leaf(48, 48, 3), leaf(3), leaf(48, 48, 1)  # the ray caster's
    hit, image = m.from_numpy(rng.random((48, 48, 1)) < 0.5), leaf(48, 48, 3)

    def index_add() -> Any:
        return m.zeros_like(x).index_add_(0, index, tension)

    def mask_write() -> Any:
        v = x * 1.0
        v[pinned] = 0.0
        return v

    def row_write() -> Any:
        state = rows.clone()
        state[1] = vec * 2.0
        return state

    def iterate() -> Any:
        return sum(vec)  # Python's sum over the elements: one unbind, 14 additions

    def stack() -> Any:
        return m.stack([small[0], small[1], small[2]])

    camera = m.from_numpy(np.array(1))  # bundle adjustment's cams[camera]

    def write_beside_view() -> Any:  # the LSTM's new_state[h] = ... while x = new_state[0] lives
        state = rows.clone()
        state[0] = vec * 2.0
        x = state[0]  # alive while row 2 is written  # noqa: F841
        state[2] = vec * 3.0
        return state

    return {
        "gather rows x[index]": (lambda: x[index], [x]),
        "sub (180, 2)": (lambda: delta - delta, [delta]),
        "mul broadcast (180, 1) * (180, 2)": (lambda: length * delta, [length, delta]),
        "div broadcast (180, 2) / (180, 1)": (lambda: delta / length, [length, delta]),
        "norm dim=1 keepdim": (lambda: delta.norm(dim=1, keepdim=True), [delta]),
        "squeeze(1)": (lambda: length.squeeze(1), [length]),
        "unsqueeze(1)": (lambda: stiffness.unsqueeze(1), [stiffness]),
        "mul scalar": (lambda: stiffness * 0.5, [stiffness]),
        "zeros_like + index_add_": (index_add, [tension]),
        "mask write v[mask] = 0": (mask_write, [x]),
        "clone + row write": (row_write, [rows, vec]),
        "sum(vec) over 14 elements": (iterate, [vec]),
        "stack of 3 scalars": (stack, [small]),
        "cross (3,) x (3,)": (lambda: m.cross(small, small * 2.0, dim=0), [small]),
        "index by a 0-d int tensor": (lambda: mat[camera], [mat]),
        "cat of four (14,)": (lambda: m.cat((vec, vec, vec, vec)), [vec]),
        "row write beside a live view": (write_beside_view, [rows, vec]),
        "matmul (3, 3) @ (3,)": (lambda: mat @ small, [mat, small]),
        "sigmoid (14,)": (lambda: m.sigmoid(vec), [vec]),
        "tanh (14,)": (lambda: m.tanh(vec), [vec]),
        "sum (180, 2)": (lambda: delta.sum(), [delta]),
        "exp then log (14,)": (lambda: m.log(m.exp(vec)), [vec]),
        "sub (48, 48, 3) - (3,)": (lambda: points - point, [points, point]),
        "mul (48, 48, 3) * (3,)": (lambda: points * point, [points, point]),
        "mul (48, 48, 1) * (3,)": (lambda: shading * point, [shading, point]),
        "mul (48, 48, 1) * (48, 48, 3)": (lambda: shading * points, [shading, points]),
        "where (48, 48, 1) mask, (48, 48, 3)": (
            lambda: m.where(hit, points, image),
            [points, image],
        ),
        "sum(dim=-1) (48, 48, 3)": (lambda: points.sum(dim=-1), [points]),
    }


def _seconds_per_call(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    start = time.process_time()
    fn()
    once = max(time.process_time() - start, 1e-7)
    number = max(1, int(MIN_SECONDS / once))
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number)
    return best


def _with_backward(op: Callable[[], Any], leaves: list[Any], m: Any) -> Callable[[], None]:
    """``op`` run ``PER_PASS`` times and one backward pass over all the outputs: the pass's
    fixed cost (finding the roots, counting dependencies) is shared as in a program."""
    seeds: list[Any] = []

    def run() -> None:
        for t in leaves:
            t.grad = None
        outs = [op() for _ in range(PER_PASS)]
        if not seeds:
            seeds.extend(out.detach() * 0 + 1 for out in outs)
        m.autograd.backward(outs, seeds)

    return run


PER_PASS = 16
KINDS = ("record", "backward")


def _runner(cases: dict[str, Any], name: str, kind: str, m: Any) -> tuple[Callable[[], Any], int]:
    """The function to time for ``name`` and ``kind``, and how many ops one call of it runs."""
    op, leaves = cases[name]
    return (op, 1) if kind == "record" else (_with_backward(op, leaves, m), PER_PASS)


def _table(names: list[str], cell: Callable[[str, str, str], float], digits: int) -> None:
    print("| op | tadiff record | torch record | ratio | tadiff +backward | torch +backward "
          "| ratio |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        cells = []
        for kind in KINDS:
            ours, theirs = cell("tadiff", name, kind), cell("torch", name, kind)
            cells += [f"{ours:.{digits}f}", f"{theirs:.{digits}f}", f"{ours / theirs:.2f}×"]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def _import(library: str) -> Any:
    module = importlib.import_module(library)
    module.set_num_threads(1)
    return module


def _timed(names: list[str], dtype: str, repeats: int) -> None:
    modules = {lib: _import(lib) for lib in ("tadiff", "torch")}
    cases = {lib: _cases(m, dtype) for lib, m in modules.items()}
    print(f"{dtype}, one thread, µs per op (best of {repeats} rounds)\n")

    def cell(lib: str, name: str, kind: str) -> float:
        fn, ops = _runner(cases[lib], name, kind, modules[lib])
        return _seconds_per_call(fn, repeats) / ops * 1e6

    gc.disable()
    try:
        _table(names, cell, 1)
    finally:
        gc.enable()


# -- instruction counts ---------------------------------------------------------------------------


def _counting_child(library: str, dtype: str, names: list[str], calls: int) -> None:
    """Run under callgrind (:func:`_measure.counted_totals`): count ``calls`` calls of every
    case, a dump each."""
    m = _import(library)
    cases = _cases(m, dtype)
    count_calls([_runner(cases, n, k, m)[0] for n in names for k in KINDS], calls)


def _counted(names: list[str], dtype: str, calls: int) -> None:
    counts: dict[str, dict[tuple[str, str], float]] = {}
    for lib in ("tadiff", "torch"):
        totals = counted_totals([__file__, "--counting-child", lib, "--dtype", dtype,
                                 "--calls", str(calls), "--cases", *names])  # fmt: skip
        switching = totals[0]
        keys = [(n, k) for n in names for k in KINDS]
        counts[lib] = {
            key: (total - switching) / calls / (1 if key[1] == "record" else PER_PASS) / 1e3
            for key, total in zip(keys, totals[1:], strict=True)
        }
    print(f"{dtype}, thousands of instructions per op ({calls} calls counted by callgrind)\n")
    _table(names, lambda lib, name, kind: counts[lib][(name, kind)], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--cases", nargs="*", help="names (or the start of names) to run")
    parser.add_argument(
        "--instructions", action="store_true",
        help="count instructions per op with valgrind's callgrind instead of timing",
    )  # fmt: skip
    parser.add_argument("--calls", type=int, default=200, help="calls counted per case")
    parser.add_argument("--counting-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.counting_child:
        _counting_child(args.counting_child, args.dtype, args.cases, args.calls)
        return
    if importlib.util.find_spec("torch") is None:
        sys.exit("this benchmark compares against torch: pip install 'torch>=2.4,<2.14'")
    every = list(_cases(td, args.dtype))
    names = [n for n in every if not args.cases or any(n.startswith(c) for c in args.cases)]
    if args.instructions:
        _counted(names, args.dtype, args.calls)
    else:
        _timed(names, args.dtype, args.repeats)


if __name__ == "__main__":
    main()
