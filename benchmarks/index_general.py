"""Benchmark: index-notation functions that are neither convolutions nor plain contractions.

    python benchmarks/index_general.py                  # every workload, 1 and 2 threads
    python benchmarks/index_general.py --quick          # small sizes, a smoke run
    python benchmarks/index_general.py --only rbf-sum   # the workloads whose name contains it
    python benchmarks/index_general.py --threads 1 --repeats 5 --no-memory

Workloads (float32, forward and forward+backward with respect to every input):

* ``rbf-sum-q3`` / ``rbf-sum-q32`` — the RBF kernel sum ``out[i] = sum[j](exp(-sum[q]((a[i,q] -
  b[j,q])**2)) * v[j])``, N = M = 10 000, q = 3 and 32;
* ``rbf-matrix`` — the full RBF matrix ``K[i,j] = exp(-sum[q]((a[i,q] - b[j,q])**2))``,
  2000 x 2000 x 32;
* ``report-demo`` — the tech report's ``f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] +
  d[i+k]**3))``, i = j = 1000, k = 64;
* ``depthwise-s2`` — ``y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])``, 16 x 256 x 4096, k = 7;
* ``stencil-2d`` — a five-point stencil on 2048 x 2048;
* ``conv-same`` — a 3 x 3 convolution zero-padded to its input's size, the padding written as
  sum ranges (``p=max(0, 1 - i):min(3, n + 1 - i)``), 32 images of 64 x 64, 1 -> 8 channels
  (a CNN's first layer): its loops run the window offsets outside the rows they clip.

Methods, measured in the same process, interleaved round by round (medians of the rounds):
tadiff (engine Tensors, backend ``auto``), PyTorch eager, ``torch.compile`` (Inductor on the CPU;
its compile time is reported apart), KeOps (pykeops, where it expresses the function: the
kernel sums; skipped with a note when not installed) and, for the kernel sum, a hand-written
fused Numba loop (the floor). Each threads setting runs in a child process (the thread pools
of NumPy, Numba, torch and KeOps' OpenMP are set before they start). A method whose
estimated memory exceeds ``--max-gb`` is not run and the table says so.

Peak memory: each (workload, method) runs once more in a child of its own, after a warm-up
call: the resident memory above what it was before the call, sampled every millisecond.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

WORKLOADS = [
    "rbf-sum-q3",
    "rbf-sum-q32",
    "rbf-matrix",
    "report-demo",
    "depthwise-s2",
    "stencil-2d",
    "conv-same",
]
METHODS = ["tadiff", "torch", "torch.compile", "keops", "hand-numba"]

SIZES = {
    # workload: (full sizes, quick sizes)
    "rbf-sum-q3": ({"n": 10000, "m": 10000, "q": 3}, {"n": 800, "m": 700, "q": 3}),
    "rbf-sum-q32": ({"n": 10000, "m": 10000, "q": 32}, {"n": 800, "m": 700, "q": 32}),
    "rbf-matrix": ({"n": 2000, "m": 2000, "q": 32}, {"n": 300, "m": 250, "q": 32}),
    "report-demo": ({"n": 1000, "k": 64}, {"n": 150, "k": 16}),
    "depthwise-s2": ({"b": 16, "c": 256, "t": 4096, "k": 7}, {"b": 2, "c": 16, "t": 256, "k": 7}),
    "stencil-2d": ({"n": 2048}, {"n": 128}),
    "conv-same": ({"b": 32, "c": 1, "o": 8, "n": 64}, {"b": 2, "c": 1, "o": 4, "n": 16}),
}

DEFINITIONS = {
    "rbf-sum": "out[i] = sum[j](exp(-sum[q]((a[i,q] - b[j,q])**2)) * v[j])",
    "rbf-matrix": "K[i,j] = exp(-sum[q]((a[i,q] - b[j,q])**2))",
    "report-demo": "f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))",
    "depthwise-s2": "y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])",
    "stencil-2d": "y[i:{m}, j:{m}] = 4*x[i+1,j+1] - x[i,j+1] - x[i+2,j+1] - x[i+1,j] - x[i+1,j+2]",
    "conv-same": (
        "y[b, o, i:x.shape[2], j:x.shape[3]] = sum[c, p=max(0, 1 - i):min(3, x.shape[2] + 1 - i), "
        "q=max(0, 1 - j):min(3, x.shape[3] + 1 - j)](x[b, c, i + p - 1, j + q - 1] * w[o, c, p, q])"
    ),
}


# -- workloads ----------------------------------------------------------------------------------


def _inputs(name: str, quick: bool) -> dict[str, np.ndarray]:
    sz = SIZES[name][1 if quick else 0]
    rng = np.random.default_rng(0)

    def u(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    if name.startswith("rbf-sum"):
        q = sz["q"]
        s = 1.0 / np.sqrt(q)  # distances of order 1: the kernel is neither 0 nor 1
        return {"a": u(sz["n"], q, scale=s), "b": u(sz["m"], q, scale=s), "v": u(sz["m"])}
    if name == "rbf-matrix":
        s = 1.0 / np.sqrt(sz["q"])
        return {"a": u(sz["n"], sz["q"], scale=s), "b": u(sz["m"], sz["q"], scale=s)}
    if name == "report-demo":
        n, k = sz["n"], sz["k"]
        s = 0.5 / np.sqrt(k)
        return {
            "a": u(n, k, scale=s),
            "b": u(n, k, scale=s),
            "c": (rng.uniform(0.5, 1.5, (n, n))).astype(np.float32),
            "d": u(n + k - 1, scale=0.5),
        }
    if name == "depthwise-s2":
        return {"x": u(sz["b"], sz["c"], sz["t"]), "w": u(sz["c"], sz["k"])}
    if name == "conv-same":
        fan_in = 1.0 / np.sqrt(9 * sz["c"])
        return {
            "x": u(sz["b"], sz["c"], sz["n"], sz["n"]),
            "w": u(sz["o"], sz["c"], 3, 3, scale=fan_in),
        }
    return {"x": u(sz["n"], sz["n"])}


def _definition(name: str, inputs) -> str:
    if name.startswith("rbf-sum"):
        return DEFINITIONS["rbf-sum"]
    if name == "stencil-2d":
        return DEFINITIONS[name].format(m=inputs["x"].shape[0] - 2)
    return DEFINITIONS[name]


def _torch_function(name: str):
    import torch
    import torch.nn.functional as F

    if name.startswith("rbf-sum"):

        def rbf_sum(a, b, v):
            d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
            return torch.exp(-d) @ v

        return rbf_sum
    if name == "rbf-matrix":
        return lambda a, b: torch.exp(-((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    if name == "report-demo":

        def demo(a, b, c, d):
            k = a.shape[1]
            diag = torch.diagonal(c)  # c[i, i]
            windows = d.unfold(0, k, 1)[: a.shape[0]]  # d[i + k]
            s = ((a[:, None, :] + b[None, :, :]) ** 2 * diag[:, None, None]).sum(-1)
            return torch.exp(-(s + (windows**3).sum(-1)[:, None]))

        return demo
    if name == "depthwise-s2":
        return lambda x, w: F.conv1d(x, w[:, None, :], stride=2, groups=x.shape[1])
    if name == "conv-same":
        return lambda x, w: F.conv2d(x, w, padding=1)

    def stencil(x):
        return 4 * x[1:-1, 1:-1] - x[:-2, 1:-1] - x[2:, 1:-1] - x[1:-1, :-2] - x[1:-1, 2:]

    return stencil


def _memory_estimate_gb(name: str, method: str, inputs) -> float:
    """What a method materializes at most (GB), to skip runs that would not fit."""
    if method in ("torch", "torch.compile") and name.startswith(("rbf", "report")):
        a, b = inputs["a"], inputs["b"]
        pairs = a.shape[0] * b.shape[0] * a.shape[1] * 4
        # eager keeps the (n, m, q) difference and its square for the backward
        return pairs * (3 if method == "torch" else 1) / 1e9
    return 0.0


# -- methods ------------------------------------------------------------------------------------


class _Runner:
    """Forward and forward+backward closures of one method on one workload."""

    def __init__(self, name: str, method: str, inputs, threads: int):
        self.name, self.method, self.inputs = name, method, inputs
        self.compile_seconds = 0.0
        self.forward, self.full = getattr(self, "_" + method.replace(".", "_").replace("-", "_"))()

    def _tadiff(self):
        import tadiff as td

        f = td.define(_definition(self.name, self.inputs))
        arrays = self.inputs

        def forward():
            return f(**{k: td.tensor(v) for k, v in arrays.items()})

        def full():
            ts = {k: td.tensor(v, requires_grad=True) for k, v in arrays.items()}
            y = f(**ts)
            y.backward(td.ones_like(y))
            return y, *(t.grad for t in ts.values())

        return forward, full

    def _torch_tensors(self, grad: bool):
        import torch

        return {k: torch.tensor(v, requires_grad=grad) for k, v in self.inputs.items()}

    def _torch_with(self, fn):
        import torch

        def forward():
            with torch.no_grad():
                return fn(**self._torch_tensors(False))

        def full():
            ts = self._torch_tensors(True)
            y = fn(**ts)
            y.backward(torch.ones_like(y))
            return y, *(t.grad for t in ts.values())

        return forward, full

    def _torch(self):
        return self._torch_with(_torch_function(self.name))

    def _torch_compile(self):
        import torch

        compiled = torch.compile(_torch_function(self.name))
        forward, full = self._torch_with(compiled)
        start = time.perf_counter()
        forward()
        full()
        self.compile_seconds = time.perf_counter() - start
        return forward, full

    def _keops(self):
        if not self.name.startswith("rbf-sum"):
            raise _Skip("not a KeOps reduction")
        try:
            from pykeops.torch import LazyTensor
        except ImportError:
            raise _Skip("pykeops not installed") from None

        def fn(a, b, v):
            ai, bj = LazyTensor(a[:, None, :]), LazyTensor(b[None, :, :])
            return ((-((ai - bj) ** 2).sum(-1)).exp() @ v[:, None])[:, 0]

        return self._torch_with(fn)

    def _hand_numba(self):
        if not self.name.startswith("rbf-sum"):
            raise _Skip("written for the kernel sum only")
        return _hand_rbf_sum(self.inputs)


class _Skip(Exception):
    pass


def _hand_rbf_sum(inputs):
    """The kernel sum and its gradients as the fused loops one would write by hand: one pass
    over pairs for the forward, one for da (rows of a), one for db and dv together."""
    import numba

    @numba.njit(parallel=True, fastmath={"reassoc", "contract"}, cache=True)
    def forward(a, b, v, out):
        for i in numba.prange(a.shape[0]):
            acc = np.float32(0.0)
            for j in range(b.shape[0]):
                s = np.float32(0.0)
                for q in range(a.shape[1]):
                    t = a[i, q] - b[j, q]
                    s += t * t
                acc += np.exp(-s) * v[j]
            out[i] = acc

    @numba.njit(parallel=True, fastmath={"reassoc", "contract"}, cache=True)
    def grad_a(a, b, v, g, da):
        for i in numba.prange(a.shape[0]):
            for j in range(b.shape[0]):
                s = np.float32(0.0)
                for q in range(a.shape[1]):
                    t = a[i, q] - b[j, q]
                    s += t * t
                w = np.float32(-2.0) * g[i] * v[j] * np.exp(-s)
                for q in range(a.shape[1]):
                    da[i, q] += w * (a[i, q] - b[j, q])

    @numba.njit(parallel=True, fastmath={"reassoc", "contract"}, cache=True)
    def grad_bv(a, b, v, g, db, dv):
        for j in numba.prange(b.shape[0]):
            acc = np.float32(0.0)
            for i in range(a.shape[0]):
                s = np.float32(0.0)
                for q in range(a.shape[1]):
                    t = a[i, q] - b[j, q]
                    s += t * t
                e = g[i] * np.exp(-s)
                acc += e
                w = np.float32(2.0) * v[j] * e
                for q in range(a.shape[1]):
                    db[j, q] += w * (a[i, q] - b[j, q])
            dv[j] = acc

    a, b, v = inputs["a"], inputs["b"], inputs["v"]

    def run_forward():
        out = np.empty(a.shape[0], np.float32)
        forward(a, b, v, out)
        return out

    def run_full():
        out = run_forward()
        g = np.ones_like(out)
        da, db, dv = np.zeros_like(a), np.zeros_like(b), np.empty_like(v)
        grad_a(a, b, v, g, da)
        grad_bv(a, b, v, g, db, dv)
        return out, da, db, dv

    return run_forward, run_full


# -- child processes ----------------------------------------------------------------------------


def _set_threads(threads: int) -> None:
    import torch

    import tadiff as td

    td.set_num_threads(threads)
    torch.set_num_threads(threads)


def _child_time(args) -> None:
    """Time every method on one workload, interleaved round by round."""
    _set_threads(args.threads)
    inputs = _inputs(args.workload, args.quick)
    runners, notes = {}, {}
    for method in args.methods:
        need = _memory_estimate_gb(args.workload, method, inputs)
        if need > args.max_gb:
            notes[method] = f"needs ~{need:.0f} GB"
            continue
        try:
            runner = _Runner(args.workload, method, inputs, args.threads)
            start = time.perf_counter()
            runner.forward()
            runner.full()  # warm: JIT compilation, caches
            runner.first_call = time.perf_counter() - start
            runners[method] = runner
        except _Skip as e:
            notes[method] = str(e)
        except (MemoryError, RuntimeError) as e:
            notes[method] = "out of memory" if "memory" in str(e).lower() else type(e).__name__
    _check_agreement(runners)
    times = {m: {"forward": [], "full": []} for m in runners}
    for _ in range(args.repeats):
        for m, r in runners.items():
            for kind, fn in (("forward", r.forward), ("full", r.full)):
                start = time.perf_counter()
                fn()
                times[m][kind].append(time.perf_counter() - start)
    result = {
        m: {
            "forward": statistics.median(t["forward"]),
            "full": statistics.median(t["full"]),
            "compile": runners[m].compile_seconds,
            "first_call": runners[m].first_call,
        }
        for m, t in times.items()
    }
    print(json.dumps({"times": result, "notes": notes}))


def _check_agreement(runners) -> None:
    """Every method's forward equals torch's (or the first one's) to float32 accuracy."""
    values = {}
    for m, r in runners.items():
        y = r.forward()
        y = y.data if hasattr(y, "grad_fn") and not hasattr(y, "detach") else y
        values[m] = np.asarray(y.detach() if hasattr(y, "detach") else y, dtype=np.float64)
    if not values:
        return
    ref_name = "torch" if "torch" in values else next(iter(values))
    ref = values[ref_name]
    scale = np.abs(ref).max() or 1.0
    for m, v in values.items():
        err = np.abs(v - ref).max() / scale
        if err > 1e-3:
            raise SystemExit(f"{m} disagrees with {ref_name}: relative error {err:.2e}")


def _child_memory(args) -> None:
    """Peak resident memory of one method's forward+backward above the memory before it."""
    _set_threads(1)
    inputs = _inputs(args.workload, args.quick)
    need = _memory_estimate_gb(args.workload, args.methods[0], inputs)
    if need > args.max_gb:
        print(json.dumps({"note": f"needs ~{need:.0f} GB"}))
        return
    try:
        runner = _Runner(args.workload, args.methods[0], inputs, 1)
    except _Skip as e:
        print(json.dumps({"note": str(e)}))
        return
    runner.full()
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * page

    base, peak, done = rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    runner.full()
    done.set()
    sampler.join()
    peak[0] = max(peak[0], rss())
    print(json.dumps({"peak_mb": (peak[0] - base) / 2**20}))


def _spawn(mode: str, workload: str, methods, threads: int, args) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env[var] = str(threads)
    cmd = [
        sys.executable,
        __file__,
        f"--child-{mode}",
        workload,
        "--methods",
        ",".join(methods),
        "--threads",
        str(threads),
        "--repeats",
        str(args.repeats),
        "--max-gb",
        str(args.max_gb),
    ] + (["--quick"] if args.quick else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " / ".join(tail) or f"exit {proc.returncode}"}
    return json.loads(lines[-1])


# -- report -------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def _table(results, threads: int, methods) -> None:
    for workload, res in results.items():
        if "error" in res:
            print(f"{workload}: the child process failed: {res['error']}", file=sys.stderr)
    print(f"\n**Time, {threads} thread(s), float32 (ms, median of the rounds)**\n")
    print(
        "| workload | pass | "
        + " | ".join(methods)
        + " | tadiff / torch.compile | tadiff / best other |"
    )
    print("|---|---|" + "---:|" * (len(methods) + 2))
    for workload, res in results.items():
        times, notes = res.get("times", {}), res.get("notes", {})
        for kind, label in (("forward", "fwd"), ("full", "fwd+bwd")):
            cells = []
            for m in methods:
                if m in times:
                    cells.append(_ms(times[m][kind]))
                elif "error" in res:
                    cells.append("error" if m == methods[0] else "")
                else:
                    cells.append(notes.get(m, "—"))
            mine = times.get("tadiff", {}).get(kind)
            vs_compile = times.get("torch.compile", {}).get(kind)
            others = [t[kind] for m, t in times.items() if m != "tadiff"]
            r1 = f"{mine / vs_compile:.2f}×" if mine and vs_compile else "—"
            r2 = f"{mine / min(others):.2f}×" if mine and others else "—"
            print(f"| {workload} | {label} | " + " | ".join(cells) + f" | {r1} | {r2} |")
    print(f"\n**Backward / forward time, {threads} thread(s)**\n")
    print("| workload | " + " | ".join(methods) + " |")
    print("|---|" + "---:|" * len(methods))
    for workload, res in results.items():
        times = res.get("times", {})
        cells = []
        for m in methods:
            t = times.get(m)
            cells.append(f"{(t['full'] - t['forward']) / t['forward']:.2f}×" if t else "—")
        print(f"| {workload} | " + " | ".join(cells) + " |")
    print(f"\n**One-time costs, {threads} thread(s) (s)**\n")
    print("| workload | tadiff first call (plan + JIT) | torch.compile compile |")
    print("|---|---:|---:|")
    for workload, res in results.items():
        times = res.get("times", {})
        first = times.get("tadiff", {}).get("first_call")
        comp = times.get("torch.compile", {}).get("compile")
        f1 = f"{first:.2f}" if first is not None else "—"
        f2 = f"{comp:.1f}" if comp is not None else "—"
        print(f"| {workload} | {f1} | {f2} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--only", default="", help="workloads whose name contains this")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per method")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--max-gb", type=float, default=8.0, help="skip methods needing more")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory table")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--child-time", metavar="WORKLOAD", help=argparse.SUPPRESS)
    parser.add_argument("--child-memory", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.methods = [m for m in args.methods.split(",") if m]
    if args.child_time or args.child_memory:
        args.threads = int(args.threads)
    if args.child_time:
        args.workload = args.child_time
        _child_time(args)
        return
    if args.child_memory:
        args.workload = args.child_memory
        _child_memory(args)
        return
    workloads = [w for w in WORKLOADS if args.only in w]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"# index_general — {'quick' if args.quick else 'full'} sizes, {args.repeats} rounds")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for n in threads:
        results = {}
        for w in workloads:
            if not args.quiet:
                print(f"[{n} thread(s)] {w} ...", file=sys.stderr, flush=True)
            results[w] = _spawn("time", w, args.methods, n, args)
        _table(results, n, args.methods)
    if not args.no_memory:
        print("\n**Peak memory of forward+backward above the inputs (MB, 1 thread)**\n")
        print("| workload | " + " | ".join(args.methods) + " |")
        print("|---|" + "---:|" * len(args.methods))
        for w in workloads:
            cells = []
            for m in args.methods:
                if not args.quiet:
                    print(f"[memory] {w} {m} ...", file=sys.stderr, flush=True)
                r = _spawn("memory", w, [m], 1, args)
                if "peak_mb" in r:
                    mb = r["peak_mb"]
                    cells.append(f"{mb:.1f}" if mb < 10 else f"{mb:.0f}")
                else:
                    cells.append(r.get("note", "—"))
            print(f"| {w} | " + " | ".join(cells) + " |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
