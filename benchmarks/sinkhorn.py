"""Benchmark: Sinkhorn backward — implicit n×n CG vs 2n×2n CG vs dense solve vs unrolled autograd.

    python benchmarks/sinkhorn.py            # batch 16384, n ∈ {4, 8, 16, 32}, iters ∈ {20, 100}
    python benchmarks/sinkhorn.py --quick    # batch 1024, a smoke run

For every (n, iters) and method it records the graph once (forward, untimed), then times
``repeats`` backward passes through it (``retain_graph=True``; one more untimed pass first) and
reports their median. float32, torch on CPU with one thread; the tadiff engine on NumPy.
Times are CPU time of this process (``time.process_time``: user + system, page faults included),
not wall-clock time: the machine is shared, and another process's burst would otherwise land
in whichever method happened to run then. With one thread the two agree on an idle machine.

Peak memory is that of forward + backward above what was resident before (inputs excluded), read
from the kernel's high-water mark (``/proc/self/status`` VmHWM, reset through
``/proc/self/clear_refs``). It is measured in a child process started with
``MALLOC_MMAP_THRESHOLD_=65536``, so that freed buffers leave the resident set at once and the mark
follows live memory; the timings come from this process with the default allocator (the fixed
threshold would add page faults to every large buffer). With CUDA, a second table times the
fused Triton kernels at batch 65536, n = 16.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

# One thread everywhere (BLAS under NumPy too), before NumPy or torch start their thread pools.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402

import tadiff  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn as engine_sinkhorn  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn_forward  # noqa: E402
from tadiff.torch.sinkhorn import sinkhorn  # noqa: E402
from tadiff.utils.progress import progress, set_quiet  # noqa: E402

METHODS = ["implicit", "implicit-2n", "direct", "unrolled"]
ENGINE_METHODS = ["implicit (tadiff engine)", "unrolled (tadiff engine)"]
MEMORY_LIMIT = 6e9  # skip an unrolled run whose saved iterates would not fit comfortably


def _resident() -> tuple[int, int]:
    """(high-water mark, current) resident bytes of this process."""
    with open("/proc/self/status") as f:
        text = f.read()
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) * 1024
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) * 1024
    return hwm, rss


def _reset_high_water() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _engine_unrolled_available() -> bool:
    """tadiff's engine can unroll when Tensors exist and carry the ops the forward uses."""
    if not hasattr(tadiff, "tensor"):
        return False
    try:
        x = tadiff.tensor([[[0.0, 1.0], [2.0, 3.0]]], requires_grad=True)
        R, _ = sinkhorn_forward(x, iters=2)
        R.sum().backward()
        return x.grad is not None
    except Exception:  # the engine's op set is still landing
        return False


def _graph(method, X, iters):
    """Run the forward that records the graph: (output, input leaf, grad function)."""
    if method.endswith("engine)"):
        x = tadiff.tensor(X.numpy(), requires_grad=True)
        R = engine_sinkhorn(x, iters=iters, backward=method.split()[0])
        return R, x, tadiff.autograd.grad
    x = X.detach().requires_grad_()
    return sinkhorn(x, iters=iters, backward=method), x, torch.autograd.grad


def _time_backward(method, X, G, iters, repeats):
    """Median seconds of ``repeats`` backward passes through one recorded graph (kept alive
    with retain_graph, so the forward runs once), after one untimed warm-up pass."""
    R, x, grad = _graph(method, X, iters)
    g = tadiff.tensor(G.numpy()) if method.endswith("engine)") else G
    times = []
    for _ in range(repeats + 1):
        start = time.process_time()
        grad(R, x, g, retain_graph=True)
        times.append(time.process_time() - start)
    return statistics.median(times[1:])


def _peak_memory(method, X, G, iters):
    """Peak resident bytes of forward + backward above the level before (child process)."""
    if not _reset_high_water():
        return None
    _, before = _resident()
    R, x, grad = _graph(method, X, iters)
    grad(R, x, tadiff.tensor(G.numpy()) if method.endswith("engine)") else G)
    del R, x
    return _resident()[0] - before


def _configs(batch, sizes, iters_list, methods):
    """(n, iters, X, G, methods to run) per configuration, with the same inputs everywhere."""
    for n in sizes:
        for iters in iters_list:
            gen = torch.Generator().manual_seed(n * 1000 + iters)
            X = torch.rand(batch, n, n, generator=gen) * 4
            G = torch.randn(batch, n, n, generator=gen)
            too_big = 3 * iters * X.numel() * X.element_size() > MEMORY_LIMIT
            active = [m for m in methods if not (m.startswith("unrolled") and too_big)]
            yield n, iters, X, G, active


def measure_memory(batch, sizes, iters_list, methods):
    """{"n,iters,method": peak bytes}; one run each after a small warm-up (child process)."""
    for m in methods:  # first-call allocations (thread pools, caches) are not the op's memory
        _peak_memory(m, torch.rand(2, 3, 3), torch.randn(2, 3, 3), 2)
    peaks = {}
    for n, iters, X, G, active in _configs(batch, sizes, iters_list, methods):
        for m in active:
            peaks[f"{n},{iters},{m}"] = _peak_memory(m, X, G, iters)
    return peaks


def _memory_in_child(args, methods):
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    cmd = [sys.executable, __file__, "--memory-json", "--batch", str(args.batch)]
    cmd += ["--methods", ",".join(methods)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fmt_ms(s):
    return "—" if s is None else f"{s * 1e3:.1f}"


def _fmt_mb(b):
    return "—" if b is None else f"{b / 1e6:.0f}"


def run_cpu(batch, sizes, iters_list, repeats, methods):
    for m in methods:  # first calls (thread pools, lazy imports) are not part of any timing
        _time_backward(m, torch.rand(2, 3, 3), torch.randn(2, 3, 3), 2, 1)
    rows = []
    configs = _configs(batch, sizes, iters_list, methods)
    for n, iters, X, G, active in progress(
        configs, desc="sizes", total=len(sizes) * len(iters_list)
    ):
        med = {m: None for m in methods}
        for m in active:
            med[m] = _time_backward(m, X, G, iters, repeats)
        rows.append((n, iters, med))
        line = ", ".join(f"{m} {_fmt_ms(med[m])} ms" for m in methods)
        print(f"  n={n:>2} iters={iters:>3}: {line}", file=sys.stderr, flush=True)
    return rows


def _ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.1f}×"


def print_cpu_table(methods, rows, peaks, batch):
    print(f"\n### Backward, batch {batch}, float32, CPU, 1 thread: median CPU ms, peak MB\n")
    head = ["n", "iters"] + [f"{m} ms" for m in methods]
    head += ["unrolled / implicit", "2n / implicit", "direct / implicit"]
    engine = ENGINE_METHODS[0] in methods
    head += ["engine: unrolled / implicit"] if engine else []
    head += [f"{m} MB" for m in methods]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n, iters, med in rows:
        cells = [str(n), str(iters)] + [_fmt_ms(med[m]) for m in methods]
        cells += [
            _ratio(med["unrolled"], med["implicit"]),
            _ratio(med["implicit-2n"], med["implicit"]),
            _ratio(med["direct"], med["implicit"]),
        ]
        cells += [_ratio(med[ENGINE_METHODS[1]], med[ENGINE_METHODS[0]])] if engine else []
        cells += [_fmt_mb(peaks.get(f"{n},{iters},{m}")) for m in methods]
        print("| " + " | ".join(cells) + " |")
    print("\n— : not run (unrolled iterates would need more than "
          f"{MEMORY_LIMIT / 1e9:.0f} GB) or not available.")  # fmt: skip


def run_gpu(repeats, device="cuda", batch=65536, n=16):
    """Fused Triton kernels vs the torch kernels vs unrolled autograd on one GPU (float32).

    Effective bandwidth counts only the unavoidable traffic: the backward reads R and G and writes
    dX (12n² bytes per matrix), the forward reads X and writes R (8n²); the GPU's peak memory
    bandwidth is the floor to compare with. ``device="cpu"`` under TRITON_INTERPRET=1 smoke-tests
    this function at a small batch.
    """
    from tadiff.structured.sinkhorn import sinkhorn_vjp
    from tadiff.structured.sinkhorn_triton import sinkhorn_forward_triton, sinkhorn_vjp_triton

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    X = torch.rand(batch, n, n, device=device) * 4
    G = torch.randn_like(X)
    R, _ = sinkhorn_forward(X, iters=20)

    def timed(fn):
        out = []
        for _ in range(repeats + 1):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            out.append(time.perf_counter() - start)
        return statistics.median(out[1:])

    x = X.detach().requires_grad_()
    R_unrolled, _ = sinkhorn_forward(x, iters=20)
    rows = [
        ("backward: fused Triton implicit", timed(lambda: sinkhorn_vjp_triton(R, G)), 12),
        ("backward: torch kernels, implicit", timed(lambda: sinkhorn_vjp(R, G)), 12),
        (
            "backward: unrolled torch autograd, 20 iters",
            timed(lambda: torch.autograd.grad(R_unrolled, x, G, retain_graph=True)),
            12,
        ),
        ("forward: fused Triton, 20 iters", timed(lambda: sinkhorn_forward_triton(X, iters=20)), 8),
        ("forward: torch kernels, 20 iters", timed(lambda: sinkhorn_forward(X, iters=20)), 8),
    ]
    name = torch.cuda.get_device_name() if device == "cuda" else device
    print(f"\n### {name}, batch {batch}, n = {n}, float32: median of {repeats}\n")
    print("| what | ms | effective GB/s (floor traffic) |")
    print("|---|---|---|")
    for what, t, bytes_per_entry in rows:
        gbps = bytes_per_entry * n * n * batch / t / 1e9
        print(f"| {what} | {t * 1e3:.3f} | {gbps:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 1024, 2 repeats")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="timed passes (5)")
    parser.add_argument("--memory-json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--methods", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    torch.set_num_threads(1)
    args.batch = args.batch or (1024 if args.quick else 16384)
    sizes, iters_list = [4, 8, 16, 32], [20, 100]
    if args.memory_json:
        print(json.dumps(measure_memory(args.batch, sizes, iters_list, args.methods.split(","))))
        return
    repeats = args.repeats or (2 if args.quick else 5)
    engine = _engine_unrolled_available()
    methods = METHODS + (ENGINE_METHODS if engine else [])
    start = time.perf_counter()
    rows = run_cpu(args.batch, sizes, iters_list, repeats, methods)
    peaks = _memory_in_child(args, methods) if sys.platform.startswith("linux") else {}
    print_cpu_table(methods, rows, peaks, args.batch)
    if not engine:
        print("\nThe tadiff engine cannot unroll yet (its op set has not landed): not measured.")
    if torch.cuda.is_available():
        run_gpu(repeats)
    print(f"\nTotal {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
    main()
