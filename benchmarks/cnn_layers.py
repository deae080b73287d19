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

``--instructions`` counts instructions with valgrind's callgrind instead of timing (a library
per process, the collector off): each layer on the output of the one before, the loss, the
whole backward pass, and each node of the backward graph called alone on the gradient it
received (torch's nodes are called as ``grad_fn(grad)``). Counts hold still where times swing
by 20% and more from run to run on a shared machine, but they weigh a vectorized instruction
like a scalar one: compare them between versions of one library, and across libraries only
where the same kind of work is counted. The cost of switching the count on and off, measured
once, is subtracted: counts of a few thousand instructions (views, a flatten) are within its
spread and shown as at least 0.

``--in-program`` times the layers where the whole program runs them instead: each library in a
worker process of its own (as ``benchmarks/programs.py`` times whole programs), the program's own
``gradient`` (a copy of the model, four SGD steps) called ``--calls`` times, with a pre- and a
post-hook on every layer and on the backward node of every layer's output (torch's
``Node.register_prehook``/``register_hook``, the same in tadiff). Layers then see the caches as
the program leaves them: each library's own earlier layers, no other library's. The workers of
the two libraries alternate ``--runs`` times (tadiff first in even runs); the table gives, per
layer and node, the median over the runs of its mean time per step, and the CPU time per
``gradient`` call. The hooks add the same few microseconds per layer to both libraries.

Run: ``python benchmarks/cnn_layers.py [--dtype float32] [--rounds 40] [--memory]
[--instructions [--calls 20]] [--in-program [--runs 6] [--calls 20]]``.
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

from _measure import count_calls, counted_totals, peak_mib  # noqa: E402

PROGRAM = Path(__file__).resolve().parents[1] / "examples" / "pytorch_programs" / "cnn_train.py"
LIBRARIES = ("tadiff", "torch")


def _program(backend: str, dtype: str) -> tuple[Any, dict[str, Any]]:
    """The CNN program's module on ``backend`` (one thread) and its ``"bench"`` inputs."""
    spec = importlib.util.spec_from_file_location("program_alias", PROGRAM.parent / "alias.py")
    alias = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alias)
    program = alias.load_program(PROGRAM, backend)
    program.torch.set_num_threads(1)
    return program, program.make_inputs("bench", dtype)


def _load(backend: str, dtype: str) -> dict[str, Any]:
    """The CNN program on ``backend``: its module, a training copy of its model, one batch."""
    program, inputs = _program(backend, dtype)
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


def _counted_stages(state: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """Names and callables of what ``--instructions`` counts (see the module docstring)."""
    lib, model = state["lib"], state["model"]
    stages: list[Any] = [*model.features, lambda h: lib.flatten(h, 1), model.classifier]
    stages.append(lambda h: lib.nn.functional.cross_entropy(h, state["labels"]))
    names = _layer_names(model)[:-1]
    fns, h = [], state["images"]
    for stage in stages:
        fns.append(lambda stage=stage, h=h: stage(h))
        h = stage(h)
    loss = h
    names.append("backward")
    fns.append(lambda: loss.backward(retain_graph=True))
    received = _received_gradients(lib, loss)
    seen: dict[str, int] = {}
    for node, grad in received:
        kind = node.name()
        seen[kind] = seen.get(kind, 0) + 1
        names.append(f"backward node {kind} {seen[kind]}")
        if lib.__name__ == "torch":
            fns.append(lambda node=node, grad=grad: node(*grad))
        else:
            fns.append(lambda node=node, grad=grad: node._apply(grad, False))
    return names, fns


def _received_gradients(lib: Any, loss: Any) -> list[tuple[Any, Any]]:
    """Each node of ``loss``'s backward graph (leaves' accumulators left out), from the loss
    down, with the gradient it receives."""
    order, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or "AccumulateGrad" in node.name():
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(f for f, _ in node.next_functions)
    received: dict[int, Any] = {}
    if lib.__name__ == "torch":
        handles = [
            node.register_prehook(lambda grads, node=node: received.__setitem__(id(node), grads))
            for node in order
        ]
        loss.backward(retain_graph=True)
        for handle in handles:
            handle.remove()
    else:
        applies = {}
        for node in order:
            kind = type(node)
            if kind not in applies:
                applies[kind] = kind._apply

                def spy(self, grad, create_graph, _apply=applies[kind]):
                    received[id(self)] = grad
                    return _apply(self, grad, create_graph)

                kind._apply = spy
        try:
            loss.backward(retain_graph=True)
        finally:
            for kind, apply in applies.items():
                kind._apply = apply
    return [(node, received[id(node)]) for node in order if id(node) in received]


def _counting_child(backend: str, dtype: str, calls: int) -> None:
    """Under callgrind (:func:`_measure.counted_totals`): count every stage, a dump each."""
    count_calls(_counted_stages(_load(backend, dtype))[1], calls)


def counted(dtype: str, calls: int) -> None:
    """Thousands of instructions per stage and per backward node, tadiff and torch."""
    per: dict[str, dict[str, float]] = {}
    for lib in LIBRARIES:
        argv = [__file__, "--counting-child", lib, "--dtype", dtype, "--calls", str(calls)]
        names = _stage_names(lib, dtype)
        totals = counted_totals(argv)
        per[lib] = {
            name: (total - totals[0]) / calls / 1e3
            for name, total in zip(names, totals[1:], strict=True)
        }
    print(f"\n**CNN training step, {dtype}, thousands of instructions per call "
          f"({calls} calls counted by callgrind)**\n")  # fmt: skip
    print("| stage | tadiff | torch | tadiff / torch |")
    print("|---|---:|---:|---:|")
    for name in [n for n in per["tadiff"] if not n.startswith("backward node")]:
        ours, theirs = per["tadiff"][name], per["torch"][name]
        ours, theirs = max(ours, 0.0), max(theirs, 0.0)
        ratio = f"{ours / theirs:.2f}×" if theirs >= 1 else "–"
        print(f"| {name} | {ours:.1f} | {theirs:.1f} | {ratio} |")
    for lib in LIBRARIES:
        print(f"\n**{lib}'s backward nodes, thousands of instructions per call**\n")
        print("| node | instructions |")
        print("|---|---:|")
        for name, value in per[lib].items():
            if name.startswith("backward node"):
                print(f"| {name[len('backward node ') :]} | {max(value, 0.0):.1f} |")


def _stage_names(backend: str, dtype: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, __file__, "--stage-names", backend, "--dtype", dtype],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip().splitlines()


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


def _hooked_child(backend: str, dtype: str, calls: int) -> None:
    """``--in-program``'s worker: the program's ``gradient`` with every layer and its output's
    backward node timed by hooks; prints JSON ``{"stage": seconds per step, ...}``."""
    import json
    import types

    program, inputs = _program(backend, dtype)
    spent: dict[str, float] = {}
    counts: dict[str, int] = {}
    started: dict[str, float] = {}

    def timed(name: str) -> tuple[Any, Any]:
        def before(*_: Any) -> None:
            started[name] = time.perf_counter()

        def after(*_: Any) -> None:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - started[name]
            counts[name] = counts.get(name, 0) + 1

        return before, after

    def hooked_copy(model: Any) -> Any:  # the program copies its model: hook the copy
        model = copy.deepcopy(model)
        kinds: dict[str, int] = {}
        for layer in [*model.features, model.classifier]:
            kind = type(layer).__name__
            kinds[kind] = kinds.get(kind, 0) + 1
            name = f"{kind} {kinds[kind]}"
            before, after = timed(f"forward {name}")
            layer.register_forward_pre_hook(before)

            def hook_output(_: Any, __: Any, out: Any, name: str = name, after: Any = after):
                after()
                if out.grad_fn is not None:
                    node_before, node_after = timed(f"backward {name}")
                    out.grad_fn.register_prehook(node_before)
                    out.grad_fn.register_hook(node_after)

            layer.register_forward_hook(hook_output)
        return model

    program.copy = types.SimpleNamespace(deepcopy=hooked_copy)
    for _ in range(3):  # compile kernels, warm caches
        program.gradient(inputs)
    spent.clear()
    counts.clear()
    start = time.process_time()
    for _ in range(calls):
        program.gradient(inputs)
    per_call = (time.process_time() - start) / calls
    result = {name: spent[name] / counts[name] for name in spent}
    print(json.dumps({"gradient call": per_call, **result}))


def in_program(dtype: str, runs: int, calls: int) -> None:
    """Per layer, in the program as it runs (see the module docstring)."""
    import json

    per: dict[str, dict[str, list[float]]] = {lib: {} for lib in LIBRARIES}
    for r in range(runs):
        for lib in LIBRARIES if r % 2 == 0 else reversed(LIBRARIES):
            argv = [sys.executable, __file__, "--hooked-child", lib, "--dtype", dtype]
            argv += ["--calls", str(calls)]
            out = subprocess.run(argv, capture_output=True, text=True, check=True)
            for name, seconds in json.loads(out.stdout.strip().splitlines()[-1]).items():
                per[lib].setdefault(name, []).append(seconds * 1e3)
    title = (
        f"CNN training in the program, by layer, {dtype}, one thread, ms per step (per call "
        f"for the whole gradient), medians of {runs} runs of {calls} calls"
    )
    print(f"\n**{title}**\n")
    print("| stage | tadiff ms | torch ms | tadiff / torch |")
    print("|---|---:|---:|---:|")
    for name in per["tadiff"]:
        ours, theirs = (statistics.median(per[lib][name]) for lib in LIBRARIES)
        label = f"**{name}**" if name == "gradient call" else name
        print(f"| {label} | {ours:.3f} | {theirs:.3f} | {ours / theirs:.2f}× |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("float32", "float64", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--memory", action="store_true", help="also peak memory per library")
    parser.add_argument(
        "--instructions", action="store_true",
        help="count instructions per stage and backward node with valgrind's callgrind",
    )  # fmt: skip
    parser.add_argument(
        "--calls", type=int, default=20,
        help="with --instructions: calls counted; with --in-program: gradient calls per worker",
    )  # fmt: skip
    parser.add_argument(
        "--in-program", action="store_true",
        help="time each layer inside the program's own gradient, a worker per library",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=6, help="with --in-program: workers each")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--hooked-child", help=argparse.SUPPRESS)
    parser.add_argument("--counting-child", help=argparse.SUPPRESS)
    parser.add_argument("--stage-names", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(args.memory_child, args.dtype)
        return
    if args.hooked_child:
        _hooked_child(args.hooked_child, args.dtype, args.calls)
        return
    if args.counting_child:
        _counting_child(args.counting_child, args.dtype, args.calls)
        return
    if args.stage_names:
        print("\n".join(_counted_stages(_load(args.stage_names, args.dtype))[0]))
        return
    if args.instructions:
        for dtype in ("float32", "float64") if args.dtype == "both" else (args.dtype,):
            counted(dtype, args.calls)
        return
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for dtype in ("float32", "float64") if args.dtype == "both" else (args.dtype,):
        if args.in_program:
            in_program(dtype, args.runs, args.calls)
        else:
            run(dtype, args.rounds, args.memory)
    print("\nload average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
