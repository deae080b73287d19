"""tadiff ops inside a torch training step vs the torch-native equivalent (CPU, forward+backward).

Each row times one training step — forward, loss, ``backward()`` — of a small model whose
middle layer is a tadiff op, against the same model with torch's own layer, in the same run.
Cells are medians over rounds; in each round every method runs a short burst back to back, so
load from other jobs on the machine hits all columns alike. One torch thread.

Workloads:

* **orthogonal**: ``y = x Uᵀ`` with a trainable orthogonal ``U`` (d × d). tadiff: FastH
  ``tadiff.torch.Orthogonal`` (``torch.autograd.Function``) and the same map through the
  ``torch.library`` op. torch: ``torch.nn.utils.parametrizations.orthogonal`` on a bias-free
  ``Linear`` with its default map (``matrix_exp``) and with ``orthogonal_map="householder"``.
* **sinkhorn**: ``R = sinkhorn(logits)`` for a batch of n × n matrices, loss ``⟨R, T⟩``.
  tadiff's implicit backward (Function and ``torch.library`` op) vs unrolled torch autograd
  through the same iterations (the torch-native way to differentiate Sinkhorn).
* **function() bridge**: a user's tadiff ``Function`` (softplus of a matmul, hand-written
  backward) run through :func:`tadiff.torch.function` vs the same expression in torch ops.
* **index conv** (only when ``tadiff.torch.define`` exists): a 1-D convolution written in index
  notation vs ``torch.nn.functional.conv1d``; CPU, and CUDA (Triton kernels vs cuDNN) when a GPU
  is present.

Usage: ``python benchmarks/torch_interop.py [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import tadiff.torch as tdt
from tadiff.utils.progress import progress, set_quiet


def _median_ms(fns: dict, rounds: int, burst: int) -> dict:
    """Median ms per call of each zero-argument callable, interleaved round by round."""
    for fn in fns.values():  # warm up (caches, allocator, lazy init)
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in progress(range(rounds), desc=f"rounds of {len(fns)} timings"):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(burst):
                fn()
            times[name].append((time.perf_counter() - start) / burst * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def _step(model, x, loss_fn):
    def run():
        for p in model.parameters():
            p.grad = None
        loss_fn(model(x)).backward()

    return run


class _FastH(torch.nn.Module):
    def __init__(self, d, library):
        super().__init__()
        self.layer = tdt.Orthogonal(d, init="random")
        self.library = library

    def forward(self, x):
        if self.library:
            return tdt.library.householder_apply(self.layer.V, x.mT).mT
        return self.layer(x)


def _orthogonal_rows(sizes, batch, rounds, burst):
    rows = []
    for d in sizes:
        torch.manual_seed(0)
        x = torch.randn(batch, d)
        target = torch.randn(batch, d)

        def loss(y, target=target):
            return ((y - target) ** 2).mean()

        models = {
            "FastH Function": _FastH(d, library=False),
            "FastH library op": _FastH(d, library=True),
            "torch matrix_exp": torch.nn.utils.parametrizations.orthogonal(
                torch.nn.Linear(d, d, bias=False)
            ),
        }
        if d <= 128:  # householder_product's backward loops over reflectors: seconds at d=256
            models["torch householder"] = torch.nn.utils.parametrizations.orthogonal(
                torch.nn.Linear(d, d, bias=False), orthogonal_map="householder"
            )
        ms = _median_ms({k: _step(m, x, loss) for k, m in models.items()}, rounds, burst)
        rows.append((f"orthogonal d={d}, batch {batch}", ms))
    return rows


class _Sinkhorn(torch.nn.Module):
    def __init__(self, n, iters, mode):
        super().__init__()
        self.n, self.iters, self.mode = n, iters, mode
        self.proj = torch.nn.Linear(16, n * n)

    def forward(self, x):
        logits = self.proj(x).reshape(-1, self.n, self.n)
        if self.mode == "library":
            return tdt.library.sinkhorn(logits, iters=self.iters)
        return tdt.sinkhorn(logits, iters=self.iters, backward=self.mode)


def _sinkhorn_rows(cases, batch, rounds, burst):
    rows = []
    for n, iters in cases:
        torch.manual_seed(0)
        x = torch.randn(batch, 16)
        target = torch.randn(batch, n, n)

        def loss(R, target=target):
            return (R * target).sum()

        models = {
            "implicit Function": _Sinkhorn(n, iters, "implicit"),
            "implicit library op": _Sinkhorn(n, iters, "library"),
            "unrolled torch": _Sinkhorn(n, iters, "unrolled"),
        }
        ms = _median_ms({k: _step(m, x, loss) for k, m in models.items()}, rounds, burst)
        rows.append((f"sinkhorn n={n}, iters {iters}, batch {batch}", ms))
    return rows


def _function_rows(rounds, burst):
    import tadiff as td
    from tadiff._array import namespace

    class SoftplusLinear(td.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            xp = namespace(x)
            ctx.save_for_backward(x, w)
            return xp.log1p(xp.exp(x @ w))

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            gz = grad * namespace(x).sigmoid(x @ w)
            return gz @ w.mT, x.mT @ gz

    bridged = tdt.function(SoftplusLinear)
    rows = []
    for n in (64, 512):
        torch.manual_seed(0)
        x = torch.randn(n, n, requires_grad=True)
        w = torch.randn(n, n, requires_grad=True)

        def via_bridge(x=x, w=w):
            x.grad = w.grad = None
            bridged.apply(x, w).sum().backward()

        def native(x=x, w=w):
            x.grad = w.grad = None
            torch.nn.functional.softplus(x @ w).sum().backward()

        ms = _median_ms({"function() bridge": via_bridge, "torch ops": native}, rounds, burst)
        rows.append((f"softplus(x @ w), {n} x {n}", ms))
    return rows


def _conv_rows(rounds, burst, device="cpu"):
    define = getattr(tdt, "define", None)
    if define is None:
        return []
    conv = define("y[b,o,t] = sum[c,k](x[b,c,t+k] * w[o,c,k])")  # Triton kernels on CUDA
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows = []
    for b, c, o, t, k in ((8, 16, 16, 256, 5), (16, 32, 32, 512, 7)):
        torch.manual_seed(0)
        x = torch.randn(b, c, t, device=device)
        w = torch.randn(o, c, k, device=device, requires_grad=True)
        target = torch.randn(b, o, t - k + 1, device=device)

        def via_index(x=x, w=w, target=target):
            w.grad = None
            ((conv(x=x, w=w) - target) ** 2).mean().backward()
            sync()

        def native(x=x, w=w, target=target):
            w.grad = None
            ((torch.nn.functional.conv1d(x, w) - target) ** 2).mean().backward()
            sync()

        ms = _median_ms({"tadiff index conv": via_index, "torch conv1d": native}, rounds, burst)
        rows.append((f"conv1d b={b} c={c} o={o} t={t} k={k} ({device})", ms))
    return rows


def _table(title, rows, baseline_cols):
    cols = list(rows[0][1])
    print(f"\n**{title}** (ms per training step, median)\n")
    ratio_cols = [(a, b) for a in cols if a not in baseline_cols for b in baseline_cols]
    header = ["workload", *cols, *(f"{a} / {b}" for a, b in ratio_cols)]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for name, ms in rows:
        cells = [f"{ms[c]:.3f}" if c in ms else "–" for c in cols]
        ratios = [f"{ms[a] / ms[b]:.2f}" if a in ms and b in ms else "–" for a, b in ratio_cols]
        print("| " + " | ".join([name, *cells, *ratios]) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds (smoke)")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    torch.set_num_threads(1)
    rounds, burst = (3, 2) if args.quick else (9, 5)
    start = time.perf_counter()
    print(f"torch interop benchmark: cpu, float32, threads = 1, torch {torch.__version__}")
    sizes = (32,) if args.quick else (64, 128, 256, 512)
    orth = _orthogonal_rows(sizes, batch=256, rounds=rounds, burst=burst)
    _table("Orthogonal layer", orth, ["torch matrix_exp", "torch householder"])
    cases = ((4, 20),) if args.quick else ((4, 20), (8, 20), (8, 100), (16, 50))
    sk = _sinkhorn_rows(cases, batch=64 if args.quick else 1024, rounds=rounds, burst=burst)
    _table("Sinkhorn layer", sk, ["unrolled torch"])
    _table("function() bridge", _function_rows(rounds, burst), ["torch ops"])
    conv = _conv_rows(rounds, burst)
    if conv and torch.cuda.is_available():  # not measured yet: no GPU so far
        conv += _conv_rows(rounds, burst, device="cuda")
    if conv:
        _table("Index-notation convolution", conv, ["torch conv1d"])
    else:
        print("\nIndex-notation convolution: skipped (tadiff.torch.define is not available).")
    print(f"\nTotal {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
    main()
