"""One MLP training step in tadiff and in PyTorch (CPU), measured in the same run.

The step: MLP 784-256-256-10 with ReLU, batch 128, float32, cross entropy, backward, SGD with
momentum (``zero_grad``, forward, loss, backward, optimizer step). Both frameworks start from the
same weights and see the same batch. Printed: median and interquartile range over repeats, the
ratio tadiff / torch, and a per-phase split (forward+loss, backward, optimizer step). A third
row does the same step by hand in NumPy (no autograd): the floor for any NumPy-based engine,
which separates the engine's overhead from the difference between the BLAS libraries.

BLAS and torch use one thread by default because the CPU is shared; pass ``--threads N`` to
change it for both.

Usage: ``python benchmarks/train_step.py [--threads N] [--repeats R] [--batch B]``.
"""

from __future__ import annotations

import argparse
import os
import sys


def _set_threads_before_numpy(argv: list[str]) -> int:
    threads = 1
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            threads = int(argv[i + 1])
        elif arg.startswith("--threads="):
            threads = int(arg.split("=", 1)[1])
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    return threads


_THREADS = _set_threads_before_numpy(sys.argv)

import time  # noqa: E402 - thread counts must be set before NumPy loads its BLAS

import numpy as np  # noqa: E402

import tadiff as td  # noqa: E402
import tadiff.nn  # noqa: E402 - binds td.nn even before tadiff re-exports it
import tadiff.optim  # noqa: E402
from tadiff.errors import MissingDependencyError  # noqa: E402
from tadiff.utils.progress import progress, set_quiet  # noqa: E402

SIZES = (784, 256, 256, 10)


def _quantiles(samples: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    return float(median), float(q1), float(q3)


def _tadiff_step(weights, x, y, lr):
    model = td.nn.Sequential(
        td.nn.Linear(784, 256), td.nn.ReLU(), td.nn.Linear(256, 256), td.nn.ReLU(),
        td.nn.Linear(256, 10),
    )  # fmt: skip
    model.load_state_dict(weights)
    opt = td.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    inputs, labels = td.tensor(x), td.tensor(y)

    def phases():
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = td.nn.functional.cross_entropy(model(inputs), labels)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        return float(loss), (t1 - t0, t2 - t1, t3 - t2)

    return phases


def _torch_step(torch, weights, x, y, lr):
    nn = torch.nn
    model = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    inputs, labels = torch.from_numpy(x), torch.from_numpy(y)

    def phases():
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        return loss.item(), (t1 - t0, t2 - t1, t3 - t2)

    return phases


def _numpy_step(weights, x, y, lr):
    """The same step written by hand in NumPy: what the arrays cost without any autograd."""
    names = ["0", "2", "4"]
    ws = [weights[f"{n}.weight"].copy() for n in names]
    bs = [weights[f"{n}.bias"].copy() for n in names]
    params = ws + bs
    bufs = [np.zeros_like(p) for p in params]
    rows = np.arange(len(y))

    def phases():
        t0 = time.perf_counter()
        pre1 = x @ ws[0].T
        pre1 += bs[0]
        h1 = np.maximum(pre1, 0)
        pre2 = h1 @ ws[1].T
        pre2 += bs[1]
        h2 = np.maximum(pre2, 0)
        z = h2 @ ws[2].T
        z += bs[2]
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -logp[rows, y].mean()
        t1 = time.perf_counter()
        g = np.exp(logp)
        g[rows, y] -= 1
        g /= len(y)
        grads = [None] * 6
        grads[2], grads[5] = g.T @ h2, g.sum(axis=0)
        g = g @ ws[2]
        g *= pre2 > 0
        grads[1], grads[4] = g.T @ h1, g.sum(axis=0)
        g = g @ ws[1]
        g *= pre1 > 0
        grads[0], grads[3] = g.T @ x, g.sum(axis=0)
        t2 = time.perf_counter()
        for p, grad, buf in zip(params, grads, bufs, strict=True):
            buf *= 0.9
            buf += grad
            p -= lr * buf
        t3 = time.perf_counter()
        return float(loss), (t1 - t0, t2 - t1, t3 - t2)

    return phases


def _measure(steps: dict, repeats: int, warmup: int = 5):
    """Run the steps in turn (one of each per repeat), so machine-load drifts hit all alike."""
    losses = {name: [] for name in steps}
    times = {name: [] for name in steps}
    parts = {name: [] for name in steps}
    for i in progress(range(warmup + repeats), desc="steps"):
        for name, step in steps.items():
            loss, split = step()
            losses[name].append(loss)
            if i >= warmup:
                times[name].append(sum(split))
                parts[name].append(split)
    return losses, times, parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=_THREADS)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args(argv)
    set_quiet(args.quiet)
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("the train-step benchmark", "torch", "torch") from None
    torch.set_num_threads(args.threads)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], args.batch).astype(np.int64)
    td.manual_seed(0)
    weights = td.nn.Sequential(
        td.nn.Linear(784, 256), td.nn.ReLU(), td.nn.Linear(256, 256), td.nn.ReLU(),
        td.nn.Linear(256, 10),
    ).state_dict()  # fmt: skip

    steps = {
        "tadiff": _tadiff_step(weights, x, y, lr=0.01),
        "PyTorch": _torch_step(torch, weights, x, y, lr=0.01),
        "NumPy by hand (no autograd)": _numpy_step(weights, x, y, lr=0.01),
    }
    losses, times, parts = _measure(steps, args.repeats)
    agree = np.max(np.abs(np.array(losses["tadiff"]) - np.array(losses["PyTorch"])))

    print(
        f"MLP {'-'.join(map(str, SIZES))}, batch {args.batch}, float32, SGD momentum; "
        f"{len(times['tadiff'])} timed steps each; threads={args.threads}; "
        f"NumPy {np.__version__}, torch {torch.__version__}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"same weights and batch: largest tadiff/torch loss difference {agree:.2e}\n")
    print(
        "| implementation | step median (ms) | IQR (ms) | forward+loss | backward | optimizer "
        "| sum of phase medians | vs PyTorch (median / phase sum) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ref_median = _quantiles(times["PyTorch"])[0]
    ref_phases = float(np.median(np.array(parts["PyTorch"]), axis=0).sum())
    for name in steps:
        median, q1, q3 = _quantiles(times[name])
        split = np.median(np.array(parts[name]), axis=0)  # per phase: medians need not add up
        print(
            f"| {name} | {median * 1e3:.3f} | {q1 * 1e3:.3f}-{q3 * 1e3:.3f} | "
            f"{split[0] * 1e3:.3f} | {split[1] * 1e3:.3f} | {split[2] * 1e3:.3f} | "
            f"{split.sum() * 1e3:.3f} | "
            f"{median / ref_median:.2f}x / {split.sum() / ref_phases:.2f}x |"
        )
    ours_median = _quantiles(times["tadiff"])[0]
    ours_phases = float(np.median(np.array(parts["tadiff"]), axis=0).sum())
    print(
        f"\nratio tadiff / PyTorch: {ours_median / ref_median:.2f}x (median step), "
        f"{ours_phases / ref_phases:.2f}x (sum of phase medians; steadier when the CPU is shared: "
        "a preemption lands in one phase of a step and moves only that phase's samples)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
