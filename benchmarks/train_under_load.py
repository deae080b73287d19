"""Training a small CNN on the digits data while another CPU-bound process runs.

The digits data (1797 grey 8x8 images of handwritten digits, from scikit-learn's
``load_digits``; 1437 for training) trains a CNN: conv 1->16 3x3, ReLU, conv 16->32 3x3, ReLU,
max pool 2, linear 512->10; Adam (lr 1e-3), batches of 32, ``--epochs`` epochs, float32. Each
framework starts from the same weights and sees the same batches.

Timed, each run in a fresh process (thread settings are process-wide), the runs of all
configurations interleaved round by round:

* tadiff with its default threads (every core, less the cores other processes keep busy);
* tadiff with ``td.parallel.set_dynamic(False)``: every core whatever the load (the behaviour
  before tadiff left busy cores out, to show what that costs);
* tadiff with ``td.set_num_threads(1)``;
* PyTorch with its default threads, and with ``torch.set_num_threads(1)``.

With ``--load`` (the default) one competing process, a Python busy loop, runs on one core for the
whole measurement; ``--no-load`` measures an otherwise idle machine. Printed: the median
training time (interquartile range), its ratio to PyTorch's default and to tadiff's one-thread
run, the peak resident memory of the process, and the test accuracy, as a Markdown table.

Needs PyTorch and scikit-learn (``pip install torch scikit-learn``).

Usage: ``python benchmarks/train_under_load.py [--epochs 5] [--rounds 5] [--no-load] [--quiet]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 32
CONFIGS = {
    "tadiff, default threads": ("tadiff", "default"),
    "tadiff, every core (dynamic off)": ("tadiff", "static"),
    "tadiff, 1 thread": ("tadiff", "one"),
    "torch, default threads": ("torch", "default"),
    "torch, 1 thread": ("torch", "one"),
}
TADIFF_ONE, TORCH_DEFAULT = "tadiff, 1 thread", "torch, default threads"


def load_digits() -> tuple[np.ndarray, ...]:
    """(train images (1437, 1, 8, 8) float32, train labels int64, test images, test labels)."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ModuleNotFoundError:
        sys.exit("this benchmark trains on scikit-learn's digits data: pip install scikit-learn")
    digits = sklearn_digits()
    images = (digits.images[:, None] / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(images))
    train, test = order[:1437], order[1437:]
    return images[train], labels[train], images[test], labels[test]


def initial_weights() -> dict[str, np.ndarray]:
    """The model's first weights, the same in both frameworks: uniform in ±1/sqrt(fan-in), as
    torch's default initialisation draws them."""
    rng = np.random.default_rng(0)
    shapes = {"0": ((16, 1, 3, 3), 9), "2": ((32, 16, 3, 3), 144), "6": ((10, 512), 512)}
    weights = {}
    for name, (shape, fan_in) in shapes.items():
        bound = 1 / np.sqrt(fan_in)
        weights[f"{name}.weight"] = rng.uniform(-bound, bound, shape).astype(np.float32)
        weights[f"{name}.bias"] = rng.uniform(-bound, bound, shape[0]).astype(np.float32)
    return weights


def _run(framework: str, threads: str, epochs: int, data) -> tuple[float, float]:
    """Train ``epochs`` epochs from the shared first weights; returns (seconds, test accuracy).
    tadiff and torch run the same code: the model and the loop use the names both have."""
    if framework == "tadiff":
        import tadiff as lib
        import tadiff.nn as nn
        import tadiff.optim as optim

        to_tensor = lib.tensor
        set_one_thread, set_all_cores = (
            lambda: lib.set_num_threads(1),
            lambda: lib.parallel.set_dynamic(False),
        )
    else:
        import torch as lib
        from torch import nn, optim

        to_tensor = lib.from_numpy
        set_one_thread, set_all_cores = lambda: lib.set_num_threads(1), lambda: None
    if threads == "one":
        set_one_thread()
    elif threads == "static":
        set_all_cores()
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 10),
    )  # fmt: skip
    model.load_state_dict({k: to_tensor(v) for k, v in initial_weights().items()})
    opt = optim.Adam(model.parameters(), lr=1e-3)
    x, y, tx, ty = data
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), BATCH):
            batch = order[i : i + BATCH]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(to_tensor(x[batch])), to_tensor(y[batch]))
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    with lib.no_grad():
        accuracy = float((model(to_tensor(tx)).numpy().argmax(1) == ty).mean())
    return seconds, accuracy


def child(config: str, epochs: int) -> None:
    """One timed training run; prints its figures as one JSON line."""
    framework, threads = CONFIGS[config]
    data = load_digits()
    _run(framework, threads, 1, data)  # warm-up: compile kernels, touch memory
    seconds, accuracy = _run(framework, threads, epochs, data)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "accuracy": accuracy, "peak_mb": peak_mb}))


def _hog() -> subprocess.Popen:
    """The competing process: a Python busy loop, one core."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float(median), float(q1), float(q3)


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    import tadiff as td

    blas = ", ".join(lib["library"] for lib in td.parallel.blas_info()["libraries"]) or "?"
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"NumPy {np.__version__} ({blas}), load average {os.getloadavg()[0]:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5, help="runs of each configuration")
    parser.add_argument("--load", action=argparse.BooleanOptionalAction, default=True,
                        help="run a competing CPU-bound process (default: yes)")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    parser.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.epochs)
        return 0
    for module, hint in (("torch", "torch"), ("sklearn", "scikit-learn")):
        try:
            __import__(module)
        except ModuleNotFoundError:
            sys.exit(f"this benchmark needs {hint}: pip install {hint}")
    from tadiff.utils.progress import progress

    runs = [(r, c) for r in range(args.rounds) for c in CONFIGS]
    results: dict[str, list[dict]] = {c: [] for c in CONFIGS}
    hog = _hog() if args.load else None
    try:
        time.sleep(0.5)  # the competing process is running before the first measurement
        for _, config in progress(runs, desc="training runs", quiet=args.quiet):
            command = [sys.executable, __file__, "--child", config, "--epochs", str(args.epochs)]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            results[config].append(json.loads(out.strip().splitlines()[-1]))
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()

    medians = {c: _quartiles([r["seconds"] for r in rs]) for c, rs in results.items()}
    load = "one competing CPU-bound process" if args.load else "no competing process"
    print(f"**CNN on digits, {args.epochs} epochs, {load}** — median of {args.rounds} runs")
    print(f"\n{_machine()}\n")
    print("| configuration | training (s) | IQR (s) | ÷ torch default | ÷ tadiff 1 thread "
          "| peak memory (MB) | test accuracy |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for config, rs in results.items():
        median, q1, q3 = medians[config]
        peak = statistics.median(r["peak_mb"] for r in rs)
        accuracy = statistics.median(r["accuracy"] for r in rs)
        print(
            f"| {config} | {median:.2f} | {q1:.2f}–{q3:.2f} "
            f"| {median / medians[TORCH_DEFAULT][0]:.2f}× | {median / medians[TADIFF_ONE][0]:.2f}× "
            f"| {peak:.0f} | {accuracy:.1%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
