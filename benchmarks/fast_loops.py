"""tadiff's compiled loops (Numba installed) against its NumPy passes and torch eager, per op.

The ops that run as compiled loops where Numba is installed (``tadiff.ops.fast_loops``,
``tadiff.ops.batchnorm_passes``, max pooling over tiling windows), each at the sizes of the
PyTorch-programs benchmark (the CNN's first layer: 32 images, 8 channels of 16 x 16;
log-sum-exp's 10 000 values), in three versions measured in the same run, alternated call by
call in every round:

* ``numpy``: tadiff with the loops' thresholds set out of reach (its NumPy passes);
* ``compiled``: tadiff as installed (the loops);
* ``torch``: the torch eager op doing the same work (``exp``, ``relu``,
  ``threshold_backward``, ``max_pool2d`` with and without its indices,
  ``max_pool2d_with_indices_backward``, ``native_batch_norm`` and its backward).

Everything runs on one thread (BLAS pinned before NumPy loads, ``torch.set_num_threads(1)``).
Each timing repeats its call until it lasts at least 5 ms and takes the CPU time per call; the
table gives the medians over ``--rounds`` rounds and the ratios to torch. ``--memory`` adds the
resident memory three calls add at their peak, each cell in a fresh process (tadiff's malloc
tuning off there, as in ``programs.py --memory``).

Run: ``python benchmarks/fast_loops.py [--rounds 15] [--dtype float32] [--memory]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread, set before NumPy or torch load their BLAS

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _measure import peak_mib  # noqa: E402

VERSIONS = ("numpy", "compiled", "torch")
MIN_SECONDS = 0.005


def _paths(version: str) -> None:
    """Set tadiff's thresholds for ``version`` (``numpy``: out of reach; else as shipped)."""
    from tadiff.ops import batchnorm_passes, fast_loops

    far = 1 << 62
    fast_loops.FAST_LOOP_MIN_SIZE = far if version == "numpy" else 1 << 13
    batchnorm_passes.FUSED_MIN_SIZE = far if version == "numpy" else 1 << 14


def _cases(dtype: str) -> dict[str, dict[str, Callable[[], Any]]]:
    """Per op, a zero-argument call per library (tadiff's serves both of its versions)."""
    import torch

    import tadiff as td
    from tadiff.ops.fast_loops import (
        exp_array,
        masked_array,
        put_array,
        relu_array,
        relu_grad_array,
    )

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    shape = (32, 8, 16, 16)
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    r = np.maximum(x, 0)
    pooled_g = rng.standard_normal((32, 8, 8, 8)).astype(dtype)
    tx, tg, tr, tpg = (torch.from_numpy(a) for a in (x, g, r, pooled_g))
    _, indices = torch.nn.functional.max_pool2d(tr, 2, return_indices=True)
    # tadiff's flat positions of each window's first maximum, as its max pooling saves them
    positions = indices.numpy() + (np.arange(32 * 8) * 256).reshape(32, 8, 1, 1)
    lse = (rng.standard_normal(10_000) * 3).astype(dtype)
    tlse = torch.from_numpy(lse)
    w, b = rng.uniform(0.5, 2, 8).astype(dtype), rng.standard_normal(8).astype(dtype)
    tw, tb = torch.from_numpy(w), torch.from_numpy(b)
    bx = td.tensor(x, requires_grad=True)
    bw, bb = td.tensor(w, requires_grad=True), td.tensor(b, requires_grad=True)

    def td_bn_forward():
        return td.nn.functional.batch_norm(bx, None, None, bw, bb, training=True)

    node = td_bn_forward().grad_fn
    # ReLU's gradient and max pooling choose by the data: each call of these takes the next of
    # eight ReLU outputs (ties at 0, as in a CNN) and gradients, as a program does. An input
    # repeated call after call stays in cache, and a branch predictor learns part of it (a
    # branching 2 x 2 pooling loop took a third of its time on a repeated input)
    relu_outputs = [np.maximum(rng.standard_normal(shape), 0).astype(dtype) for _ in range(8)]
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(8)]
    td_pool = [td.tensor(a, requires_grad=True) for a in relu_outputs]
    torch_pool = [torch.from_numpy(a).requires_grad_(True) for a in relu_outputs]
    torch_relu_outputs = [torch.from_numpy(a) for a in relu_outputs]
    torch_grads = [torch.from_numpy(a) for a in grads]
    turn = iter(range(1 << 62))

    def pooled(library, grad):
        inputs = (td_pool if library == "tadiff" else torch_pool)[next(turn) % 8]
        pool = (td if library == "tadiff" else torch).nn.functional.max_pool2d
        return pool(inputs if grad else inputs.detach(), 2)

    def relu_gradient(library, via_mask=False):
        k = next(turn) % 8
        if library == "torch":
            return torch.ops.aten.threshold_backward(torch_grads[k], torch_relu_outputs[k], 0)
        if via_mask:
            return masked_array(~(relu_outputs[k] <= 0), grads[k])
        return relu_grad_array(relu_outputs[k], grads[k])

    _, t_mean, t_invstd = torch.ops.aten.native_batch_norm(tx, tw, tb, None, None, True, 0.1, 1e-5)
    return {
        "exp, 10 000 values": {
            "tadiff": lambda: exp_array(lse),
            "torch": lambda: torch.exp(tlse),
        },
        "exp, 32x8x16x16": {
            "tadiff": lambda: exp_array(x),
            "torch": lambda: torch.exp(tx),
        },
        "relu": {"tadiff": lambda: relu_array(x), "torch": lambda: torch.relu(tx)},
        "relu gradient": {
            "tadiff": lambda: relu_gradient("tadiff"),
            "torch": lambda: relu_gradient("torch"),
        },
        # the same gradient as a NumPy comparison and the masked selection (clamp's and
        # where's gradients still take it; ReLU's did before its own loop)
        "relu gradient via a mask": {
            "tadiff": lambda: relu_gradient("tadiff", via_mask=True),
            "torch": lambda: relu_gradient("torch"),
        },
        "max pooling 2x2, forward": {
            "tadiff": lambda: pooled("tadiff", False),
            "torch": lambda: pooled("torch", False),
        },
        # the positions of the maxima too, saved for the gradient (torch: its indices)
        "max pooling 2x2, forward for the gradient": {
            "tadiff": lambda: pooled("tadiff", True),
            "torch": lambda: pooled("torch", True),
        },
        "max pooling gradient (put)": {
            "tadiff": lambda: put_array(pooled_g, positions, shape),
            "torch": lambda: torch.ops.aten.max_pool2d_with_indices_backward(
                tpg, tr, [2, 2], [2, 2], [0, 0], [1, 1], False, indices
            ),
        },
        "batch norm, training forward": {
            "tadiff": td_bn_forward,
            "torch": lambda: torch.ops.aten.native_batch_norm(
                tx, tw, tb, None, None, True, 0.1, 1e-5
            ),
        },
        "batch norm, backward": {
            "tadiff": lambda: node._apply(g, False),
            "torch": lambda: torch.ops.aten.native_batch_norm_backward(
                tg, tx, tw, None, None, t_mean, t_invstd, True, 1e-5, [True, True, True]
            ),
        },
    }


def _cpu_per_call(fn: Callable[[], Any]) -> float:
    number, start = 0, time.process_time()
    while True:
        fn()
        number += 1
        elapsed = time.process_time() - start
        if elapsed >= MIN_SECONDS:
            return elapsed / number


def _library(version: str) -> str:
    return "torch" if version == "torch" else "tadiff"


def _time(dtype: str, rounds: int) -> dict[tuple[str, str], float]:
    cases = _cases(dtype)
    samples: dict[tuple[str, str], list[float]] = {}
    for fns in cases.values():
        for version in VERSIONS:  # warm-up: compiles or loads the loops
            _paths(version)
            fns[_library(version)]()
    for r in range(rounds):
        for name, fns in cases.items():
            for version in VERSIONS if r % 2 == 0 else VERSIONS[::-1]:
                _paths(version)
                seconds = _cpu_per_call(fns[_library(version)])
                samples.setdefault((name, version), []).append(seconds)
    _paths("compiled")
    return {key: statistics.median(values) for key, values in samples.items()}


def _memory_child(dtype: str, name: str, version: str) -> None:
    _paths(version)
    print(peak_mib(_cases(dtype)[name][_library(version)]))


def _peak(dtype: str, name: str, version: str) -> float:
    # tadiff's malloc tuning off: it keeps the first call's memory for the next ones, which
    # would hide their peak in the resident size before them
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", dtype, name, version],
        capture_output=True, text=True, check=True,
        env={**os.environ, "TADIFF_MALLOC_TUNING": "0"},
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--memory", action="store_true", help="peak resident memory per cell")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(*args.memory_child)
        return
    import numba
    import torch

    print(
        f"{platform.processor() or platform.machine()}, NumPy {np.__version__}, numba "
        f"{numba.__version__}, torch {torch.__version__}, one thread, {args.dtype}, "
        f"medians of {args.rounds} rounds\n"
    )
    medians = _time(args.dtype, args.rounds)
    names = list(dict.fromkeys(name for name, _ in medians))
    header = "| op | numpy µs | compiled µs | torch µs | numpy / torch | compiled / torch |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if args.memory:
        header += " numpy MiB | compiled MiB | torch MiB |"
        rule += "---:|---:|---:|"
    print(header)
    print(rule)
    for name in names:
        us = [medians[(name, v)] * 1e6 for v in VERSIONS]
        row = (
            f"| {name} | {us[0]:.1f} | {us[1]:.1f} | {us[2]:.1f} | {us[0] / us[2]:.2f}× | "
            f"{us[1] / us[2]:.2f}× |"
        )
        if args.memory:
            row += "".join(f" {_peak(args.dtype, name, v):.2f} |" for v in VERSIONS)
        print(row)


if __name__ == "__main__":
    main()
