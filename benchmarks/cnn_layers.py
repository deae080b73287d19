"""Where the PyTorch-programs CNN spends its training step, layer by layer, tadiff against torch.

The model of ``examples/pytorch_programs/cnn_train.py`` (Conv2d 1->8, BatchNorm2d, ReLU,
MaxPool2d, Conv2d 8->16, BatchNorm2d, ReLU, Linear; its ``"bench"`` inputs, batches of 32
images of 16 x 16) runs one training-mode forward layer by layer with a timer around each
layer, then the cross-entropy loss and ``loss.backward()``, in tadiff (``import torch``
resolving to tadiff) and in torch eager. Each layer sees the previous layer's real output, so
pooling sees ReLU's ties and the second convolution the pooled, cache-cold activations, as in
the program.

Both libraries run in one process on one thread (BLAS pinned before NumPy loads), alternated
in every round (tadiff first in even rounds); the table gives per-layer medians over the
rounds, their ratio tadiff / torch and the totals. torch's Python objects in the same process
make tadiff's garbage collector walk more, which the whole-program benchmark avoids
(``benchmarks/programs.py`` times each library in a worker of its own); this graph is small.
``--memory`` adds the resident memory one training step adds at its peak, per library, each in
a fresh process.

Run: ``python benchmarks/cnn_layers.py [--dtype float32] [--rounds 40] [--memory]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread, set before NumPy or torch load their BLAS

import argparse  # noqa: E402
import copy  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from _measure import peak_mib  # noqa: E402

PROGRAM = Path(__file__).resolve().parents[1] / "examples" / "pytorch_programs" / "cnn_train.py"
LIBRARIES = ("tadiff", "torch")


def _load(backend: str, dtype: str) -> dict[str, Any]:
    """The CNN program on ``backend``: its module, a training copy of its model, one batch."""
    spec = importlib.util.spec_from_file_location("program_alias", PROGRAM.parent / "alias.py")
    alias = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alias)
    program = alias.load_program(PROGRAM, backend)
    program.torch.set_num_threads(1)
    inputs = program.make_inputs("bench", dtype)
    model = copy.deepcopy(inputs["model"])
    model.train()
    batch = len(inputs["images"]) // 2
    return {
        "lib": program.torch,
        "model": model,
        "images": inputs["images"][:batch],
        "labels": inputs["labels"][:batch],
    }


def _layer_names(model: Any) -> list[str]:
    names, seen = [], {}
    for layer in model.features:
        kind = type(layer).__name__
        seen[kind] = seen.get(kind, 0) + 1
        names.append(f"{kind} {seen[kind]}")
    return [*names, "flatten", "Linear", "cross_entropy", "backward"]


def _step(state: dict[str, Any]) -> list[float]:
    """One training-mode forward, loss and backward; the seconds of each stage."""
    lib, model = state["lib"], state["model"]
    stages: list[Any] = [*model.features, lambda h: lib.flatten(h, 1), model.classifier]
    stages.append(lambda h: lib.nn.functional.cross_entropy(h, state["labels"]))
    times, h = [], state["images"]
    for stage in stages:
        start = time.perf_counter()
        h = stage(h)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    h.backward()
    times.append(time.perf_counter() - start)
    for parameter in model.parameters():
        parameter.grad = None
    return times


def _memory_child(backend: str, dtype: str) -> None:
    state = _load(backend, dtype)
    print(peak_mib(lambda: _step(state)))


def _peak(backend: str, dtype: str) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", backend, "--dtype", dtype],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def run(dtype: str, rounds: int, memory: bool) -> None:
    states = {lib: _load(lib, dtype) for lib in LIBRARIES}
    names = _layer_names(states["tadiff"]["model"])
    times: dict[str, list[list[float]]] = {lib: [] for lib in LIBRARIES}
    for r in range(rounds + 3):
        for lib in LIBRARIES if r % 2 == 0 else reversed(LIBRARIES):
            step = _step(states[lib])
            if r >= 3:  # the first rounds warm caches and compile kernels
                times[lib].append(step)
    medians = {
        lib: [statistics.median(t[k] for t in times[lib]) * 1e3 for k in range(len(names))]
        for lib in LIBRARIES
    }
    title = f"CNN training step by layer, {dtype}, one thread, median of {rounds} rounds"
    print(f"\n**{title}**\n")
    print("| stage | tadiff ms | torch ms | tadiff / torch |")
    print("|---|---:|---:|---:|")
    for k, name in enumerate(names):
        ours, theirs = medians["tadiff"][k], medians["torch"][k]
        print(f"| {name} | {ours:.3f} | {theirs:.3f} | {ours / theirs:.2f}× |")
    forward = {lib: sum(medians[lib][:-1]) for lib in LIBRARIES}
    total = {lib: sum(medians[lib]) for lib in LIBRARIES}
    for label, value in (("forward and loss", forward), ("step", total)):
        ratio = value["tadiff"] / value["torch"]
        print(f"| **{label}** | {value['tadiff']:.3f} | {value['torch']:.3f} | {ratio:.2f}× |")
    if memory:
        peaks = {lib: _peak(lib, dtype) for lib in LIBRARIES}
        print(
            f"\npeak resident memory one step adds: tadiff {peaks['tadiff']:.1f} MiB, "
            f"torch {peaks['torch']:.1f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("float32", "float64", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--memory", action="store_true", help="also peak memory per library")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(args.memory_child, args.dtype)
        return
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for dtype in ("float32", "float64") if args.dtype == "both" else (args.dtype,):
        run(dtype, args.rounds, args.memory)
    print("\nload average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
