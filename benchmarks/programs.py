"""Realistic PyTorch programs on tadiff and on PyTorch eager, timed in the same run.

The programs are the files of ``examples/pytorch_programs`` (GMM log-posterior, k-means with
Hessian-vector products, log-sum-exp, character LSTM, bundle adjustment, hand tracking, RK4 ODE
fit, mass-spring cloth, ray caster, CNN training loop): written for torch and run unchanged,
once as written and once with ``import torch`` resolving to tadiff (``alias.load_program``), on
the same inputs (their ``"bench"`` size).

For each program and dtype (float64, float32) two things are timed: the forward pass alone
(``forward(inputs)``: nothing requires grad, or ``inference_mode`` for the CNN) and the forward
pass with the program's own gradient computation (``gradient(inputs)``: ``backward``,
``autograd.grad``, ``func.grad_and_value``, ``vhp`` or a few SGD steps). Both libraries run on
one thread (``torch.set_num_threads(1)``, BLAS pinned to one thread before NumPy loads);
``--threads N`` gives each library ``N`` threads instead (``set_num_threads(N)``, BLAS started
with ``N``), as a program that does not pin its threads gets on an idle ``N``-core machine.
tadiff's leaving out of cores other processes keep busy is turned off there
(``td.parallel.set_dynamic(False)``): it would count the other library's worker, which has just
run on every core, as load.

Each library runs in a worker process of its own, started afresh for each program, as a
program using it would: the tadiff worker never imports torch, whose 150 000 Python objects
would otherwise be scanned by every full collection of Python's cyclic garbage collector (which
tadiff's graph, made of Python objects, triggers; torch's graph is C++), and one program's
imports do not weigh on the next program's collector (Numba, about 90 000 objects, which
tadiff's compiled loops import on their first use: log-sum-exp's and the CNN's do, bundle
adjustment's would not). The parent alternates the two workers within every
repeat (tadiff first on even repeats, torch first on odd ones). Timings are CPU time of the
worker (``time.process_time``), which other processes on a shared machine disturb far less than
wall-clock time (with ``--threads`` above 1, wall-clock time: CPU time would add up the threads,
and count the time they spin waiting for work); each timing repeats the call until it lasts at
least 20 ms, and the medians over ``--repeats`` repeats are reported with their ratio
tadiff / torch (< 1: tadiff faster), and the share of tadiff's time spent in the garbage
collector. ``--memory`` adds the peak resident memory each library's calls add (Linux),
measured in a fresh process per cell: the high-water mark of three calls above the resident
size before them.

tadiff sets glibc's malloc thresholds at import (``tadiff._malloc``: freed large arrays' memory
is reused instead of faulted in again); ``--torch-malloc tadiff`` gives the torch worker the same
thresholds, so the two libraries can also be compared with the same allocator settings.

``--instructions`` counts instructions per call instead, with valgrind's callgrind (``apt-get
install valgrind``), for one dtype (``--dtype``): each library runs in a child under callgrind,
instrumentation switched on only around ``--calls`` calls of each program and mode, the garbage
collector off. The counts repeat to within about 1% whatever the load, where a timing here moves
by ±20%: they show a change of a few percent in a whole program (an instruction is no unit of
time, though: NumPy's loops do more per instruction than Python's interpreter).

Run: ``python benchmarks/programs.py [--repeats 7] [--programs gmm,ba] [--memory]
[--torch-malloc tadiff] [--threads 2]``; combine several runs' Markdown with
``benchmarks/median_of_runs.py``. ``python benchmarks/programs.py --instructions [--dtype
float64] [--calls 3] [--programs ...]``.
"""

from __future__ import annotations

import os

_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
for _var in _THREAD_VARIABLES:
    os.environ[_var] = "1"  # one BLAS thread, set before NumPy or torch load their BLAS

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _measure import count_calls, counted_totals, peak_mib  # noqa: E402

PROGRAMS = Path(__file__).resolve().parents[1] / "examples" / "pytorch_programs"
MIN_SECONDS = 0.02  # each timing lasts at least this long
GOALS = {"forward": 1.5, "gradient": 1.0}  # the largest tadiff / torch ratio aimed for
MODES = tuple(GOALS)  # each program's two functions: forward(inputs), gradient(inputs)


def _alias() -> Any:
    spec = importlib.util.spec_from_file_location("program_alias", PROGRAMS / "alias.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _with_threads(backend: str, threads: int = 1) -> Any:
    """Import ``backend`` (``"tadiff"`` or ``"torch"``) alone, set to ``threads`` threads (for
    tadiff, without leaving out busy cores: the other library's worker, which has just run on
    every core, is not load a program would meet)."""
    module = importlib.import_module(backend)
    module.set_num_threads(threads)
    if backend == "tadiff" and threads > 1:
        module.parallel.set_dynamic(False)
    return module


def _calls(fn: Callable[[], Any], number: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(number):
        fn()
    return clock() - start


class _GcClock:
    """Seconds spent in Python's cyclic garbage collector (through ``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start


def _worker(backend: str, threads: int) -> None:
    """Serve timing requests (one JSON object per line on stdin) for one library."""
    _with_threads(backend, threads)
    timer = time.process_time if threads == 1 else time.perf_counter
    alias = _alias()
    clock = _GcClock()
    program = inputs = None
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "load":
            program = alias.load_program(PROGRAMS / f"{request['program']}.py", backend)
            inputs = program.make_inputs("bench", request["dtype"])
            reply: Any = None
        else:  # "time": seconds and gc seconds for ``number`` calls of ``mode``
            fn = getattr(program, request["mode"])
            gc_before = clock.seconds
            seconds = _calls(lambda fn=fn, x=inputs: fn(x), request["number"], timer)
            reply = [seconds, clock.seconds - gc_before]
        print(json.dumps(reply), flush=True)


class _Worker:
    def __init__(self, backend: str, env: dict[str, str], threads: int = 1):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", backend, "--threads", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, **request: Any) -> Any:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker stopped (exit code {self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def time_pair(workers: dict[str, _Worker], mode: str, repeats: int) -> dict[str, Any]:
    """Median seconds per call of ``mode`` in each worker, and tadiff's share of gc time."""
    for worker in workers.values():
        worker.ask(cmd="time", mode=mode, number=1)  # warm up: first-call caches
    slowest = max(w.ask(cmd="time", mode=mode, number=1)[0] for w in workers.values())
    number = max(1, int(np.ceil(MIN_SECONDS / max(slowest, 1e-6))))
    times: dict[str, list[float]] = {name: [] for name in workers}
    gc_share = []
    names = list(workers)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            seconds, gc_seconds = workers[name].ask(cmd="time", mode=mode, number=number)
            times[name].append(seconds / number)
            if name == "tadiff":
                gc_share.append(gc_seconds / max(seconds, 1e-12))
    medians: dict[str, Any] = {name: statistics.median(v) for name, v in times.items()}
    medians["gc"] = statistics.median(gc_share)
    return medians


def _memory_child(name: str, backend: str, dtype: str, mode: str) -> float:
    """Run in a fresh process: MiB of resident memory three calls add at their peak, from the
    resident size just before them (inputs made, the library loaded, one call made)."""
    _with_threads(backend)
    program = _alias().load_program(PROGRAMS / f"{name}.py", backend)
    inputs = program.make_inputs("bench", dtype)
    return peak_mib(lambda: getattr(program, mode)(inputs))


def peak_memory(name: str, backend: str, dtype: str, mode: str) -> float:
    """:func:`_memory_child` in a subprocess. tadiff's malloc tuning is off there: it keeps the
    memory of the first call for the next ones, which would hide their peak (what the program
    needs) in the resident size before them."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", json.dumps([name, backend, dtype, mode])],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "TADIFF_MALLOC_TUNING": "0"},
    )
    return float(out.stdout.strip().splitlines()[-1])


def _worker_env(backend: str, torch_malloc: str, threads: int = 1) -> dict[str, str]:
    """A worker's environment: BLAS started with ``threads`` threads, and for torch with
    ``--torch-malloc tadiff`` the glibc malloc thresholds tadiff sets for itself at import, so
    both libraries allocate alike."""
    env = {**os.environ, **{var: str(threads) for var in _THREAD_VARIABLES}}
    if backend == "torch" and torch_malloc == "tadiff":
        from tadiff import _malloc

        env["MALLOC_MMAP_THRESHOLD_"] = str(_malloc.MMAP_THRESHOLD)
        env["MALLOC_TRIM_THRESHOLD_"] = str(_malloc.TRIM_THRESHOLD)
    return env


def run(
    names: list[str], repeats: int, memory: bool, torch_malloc: str = "default", threads: int = 1
) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        # fresh workers per program: what one program imported (Numba, which tadiff's compiled
        # loops load on first use) does not weigh on the next one's garbage collector
        workers = {
            b: _Worker(b, _worker_env(b, torch_malloc, threads), threads)
            for b in ("tadiff", "torch")
        }
        try:
            for dtype in ("float64", "float32"):
                for worker in workers.values():
                    worker.ask(cmd="load", program=name, dtype=dtype)
                row: dict[str, Any] = {"program": name, "dtype": dtype}
                for mode in MODES:
                    medians = time_pair(workers, mode, repeats)
                    row[mode] = (medians["tadiff"], medians["torch"])
                    row[f"{mode} gc"] = medians["gc"]
                    if memory:
                        row[f"{mode} MiB"] = tuple(
                            peak_memory(name, b, dtype, mode) for b in ("tadiff", "torch")
                        )
                rows.append(row)
                _print_row(row, memory)
        finally:
            for worker in workers.values():
                worker.close()
    return rows


def _print_row(row: dict[str, Any], memory: bool) -> None:
    cells = [row["program"], row["dtype"]]
    for mode in MODES:
        ours, theirs = row[mode]
        cells += [f"{ours * 1e3:.3f}", f"{theirs * 1e3:.3f}", f"{ours / theirs:.2f}×",
                  f"{100 * row[f'{mode} gc']:.0f} %"]  # fmt: skip
    if memory:
        for mode in MODES:
            cells += [f"{v:.1f}" for v in row[f"{mode} MiB"]]
    print("| " + " | ".join(cells) + " |", flush=True)


def _header(memory: bool) -> None:
    columns = ["program", "dtype", "forward tadiff ms", "forward torch ms", "forward ratio",
               "forward tadiff gc", "fwd+grad tadiff ms", "fwd+grad torch ms", "fwd+grad ratio",
               "fwd+grad tadiff gc"]  # fmt: skip
    if memory:
        columns += ["fwd MiB tadiff", "fwd MiB torch", "fwd+grad MiB tadiff",
                    "fwd+grad MiB torch"]  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * 2 + "---:|" * (len(columns) - 2))


def _machine(threads: int) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in ("torch", "tadiff"):
        spec = importlib.util.find_spec(name)
        versions[name] = importlib.metadata.version(name) if spec else "not installed"
    return (
        f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, NumPy "
        f"{np.__version__}, torch {versions['torch']}, tadiff {versions['tadiff']}; "
        + ("one thread, CPU time" if threads == 1 else f"{threads} threads, wall-clock time")
    )


def _counting_child(backend: str, names: list[str], dtype: str, calls: int) -> None:
    """Run under callgrind (:func:`_measure.counted_totals`): ``calls`` counted calls of each
    program's forward and gradient, a dump each."""
    _with_threads(backend)
    alias = _alias()
    fns = []
    for name in names:
        program = alias.load_program(PROGRAMS / f"{name}.py", backend)
        inputs = program.make_inputs("bench", dtype)
        for mode in MODES:
            fn = getattr(program, mode)
            fns.append(lambda fn=fn, x=inputs: fn(x))
    count_calls(fns, calls)


def counted(names: list[str], dtype: str, calls: int) -> None:
    """Print millions of instructions per call of every program and mode, tadiff and torch
    (callgrind; the garbage collector off, so that its share, which ``run`` reports, is not in
    them)."""
    per_call: dict[str, list[float]] = {}
    for backend in ("tadiff", "torch"):
        child = ["--counting-child", backend, "--programs", ",".join(names)]
        totals = counted_totals([__file__, *child, "--dtype", dtype, "--calls", str(calls)])
        per_call[backend] = [(t - totals[0]) / calls / 1e6 for t in totals[1:]]
    print(f"{dtype}, millions of instructions per call ({calls} calls counted by callgrind)\n")
    print("| program | mode | tadiff | torch | tadiff / torch |")
    print("|---|---|---:|---:|---:|")
    keys = [(n, m) for n in names for m in MODES]
    for k, (name, mode) in enumerate(keys):
        ours, theirs = per_call["tadiff"][k], per_call["torch"][k]
        label = "forward" if mode == "forward" else "fwd+grad"
        print(f"| {name} | {label} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}× |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--programs", default="", help="comma-separated names (default: all)")
    parser.add_argument("--memory", action="store_true", help="also peak memory per cell")
    parser.add_argument(
        "--torch-malloc",
        choices=("default", "tadiff"),
        default="default",
        help="torch's glibc malloc thresholds: as installed, or those tadiff sets at import",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads per library (default 1); above 1, times are wall-clock",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per call with valgrind's callgrind instead of timing",
    )
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                        help="with --instructions: the programs' dtype")  # fmt: skip
    parser.add_argument("--calls", type=int, default=3, help="with --instructions: calls counted")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--counting-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.counting_child:
        _counting_child(args.counting_child, args.programs.split(","), args.dtype, args.calls)
        return 0
    if args.memory_child:
        print(_memory_child(*json.loads(args.memory_child)))
        return 0
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.worker:
        _worker(args.worker, args.threads)
        return 0
    known = list(_alias().NAMES)
    names = [n for n in args.programs.split(",") if n] or known
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown program(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    if args.instructions:
        counted(names, args.dtype, args.calls)
        return 0
    print(f"Machine: {_machine(args.threads)}; torch's malloc thresholds: {args.torch_malloc}")
    print(f"Load average at start: {os.getloadavg()[0]:.2f}\n")
    print(f"**PyTorch programs, tadiff vs torch eager (median of {args.repeats}, ms per call)**\n")
    _header(args.memory)
    rows = run(names, args.repeats, args.memory, args.torch_malloc, args.threads)
    print(f"\nLoad average at end: {os.getloadavg()[0]:.2f}")
    for mode, goal in GOALS.items():
        over = [f"{r['program']} {r['dtype']} ({r[mode][0] / r[mode][1]:.2f}×)" for r in rows
                if r[mode][0] / r[mode][1] > goal]  # fmt: skip
        label = "forward" if mode == "forward" else "forward+gradient"
        print(f"{label} above {goal}× torch: {', '.join(over) if over else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
