"""Benchmark FastH against the sequential loop, torch.linalg.householder_product and dense matmul.

One run measures, for m = 32 columns (``--m``) and d ∈ {64, ..., 2048} (k = d reflectors, float32,
CPU):

* forward ``U X`` and forward+backward (gradients wrt ``V`` and ``X``) of
    - FastH (tadiff) with NumPy arrays (kernels called directly) and with torch tensors
      (``tadiff.torch.householder_apply``, a ``torch.autograd.Function``);
    - the sequential method, one reflector at a time, in the same backend: NumPy (forward loop plus
      the hand-written per-reflector backward) and torch (autograd through the loop);
    - ``torch.linalg.householder_product(A, tau) @ X`` with torch autograd (LAPACK-style
      parameterisation: same number of reflectors, same cost class);
    - the dense ``U @ X`` matmul with a ready-made ``d × d`` matrix, as the floor (NumPy and torch;
      its forward+backward is the torch autograd of the matmul, gradients wrt ``U`` and ``X``).
* FastH (torch) against the dense matmul head to head, for d ≥ 256: the two alone, alternating
  bursts for 15 rounds, the median of the per-round ratios and their range (the goal's "within
  4×", free of the state the other methods leave behind);
* the block-size trade-off (paper section 3.2) at d = 512;
* where one FastH forward+backward spends its time at d = 512, phase by phase (block build, the
  two sweeps, the batched vector gradients), with GFLOP/s against the dense matmul's GEMMs, and
  the floor: the same GEMM calls in torch on buffers allocated once, with no Python between
  them;
* an orthogonal RNN for d ∈ [128, 512]: 32 steps of ``h ← tanh(U h + x_t)``, FastH with and
  without ``householder.cached()`` against torch's ``parametrizations.orthogonal`` (matrix_exp,
  under ``parametrize.cached()``) and an unconstrained dense ``U``.

Times are medians over repeats (at least 3, more for fast cases, a fixed time budget per cell).
BLAS/torch threads default to 1 because the CPU is shared; pass ``--threads 2`` to use both cores.
Usage: ``python benchmarks/householder.py [--threads N] [--dims 64,128,...] [--m 32]
[--dtype float32] [--no-sweep] [--no-breakdown] [--no-head-to-head] [--no-rnn] [--device cuda]``
(on a GPU only the torch columns are measured). Combine several saved runs with
``benchmarks/median_of_runs.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys


def _set_threads_before_numpy(argv: list[str]) -> int:
    threads = 1
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            threads = int(argv[i + 1])
        elif a.startswith("--threads="):
            threads = int(a.split("=", 1)[1])
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    return threads


_THREADS = _set_threads_before_numpy(sys.argv)

import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tadiff.structured import householder as hh  # noqa: E402
from tadiff.torch.householder import householder_apply as torch_fasth  # noqa: E402
from tadiff.utils.progress import progress, set_quiet  # noqa: E402

M = 32  # columns of X; --m changes it
SLOW_LIMIT_S = 2.0  # a method whose single call took longer at d/2 is skipped at d (cost ~ d³)


_SYNC = [lambda: None]  # torch.cuda.synchronize when timing on a GPU


def _interleaved_times(fns, budget_s=0.25, min_reps=3, max_reps=15, burst_s=0.02):
    """Seconds per call of each function, one entry per round, measured in interleaved rounds.

    Each round runs every function for a short burst of back-to-back calls (warm caches, like a
    training loop), so a spell of load from other processes on the shared CPU inflates all
    methods alike instead of one column; slow methods get fewer rounds.
    """
    sync = _SYNC[0]
    plan, times = {}, {key: [] for key in fns}
    for key, fn in fns.items():
        t0 = time.perf_counter()
        fn()  # warm-up (allocator, BLAS buffers); also sizes the bursts and rounds
        sync()
        first = max(time.perf_counter() - t0, 1e-6)
        calls = max(1, int(burst_s / first))
        rounds = int(min(max_reps, max(min_reps, budget_s / (first * calls))))
        plan[key] = (calls, rounds)
    most = max((rounds for _, rounds in plan.values()), default=0)
    for r in progress(range(most), desc=f"rounds of {len(fns)} timings"):
        for key, fn in fns.items():
            calls, rounds = plan[key]
            if r < rounds:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                sync()
                times[key].append((time.perf_counter() - t0) / calls)
    return times


def _interleaved_medians_ms(fns, **options):
    """Median ms per call of each function (see :func:`_interleaved_times` for the options)."""
    return {
        key: 1e3 * float(np.median(ts)) for key, ts in _interleaved_times(fns, **options).items()
    }


def _numpy_cases(V, X, G, U):
    def fasth_fwd():
        hh.householder_apply(V, X)

    def fasth_fwd_bwd():
        hh.householder_vjp(V, X, G)

    def seq_fwd():
        hh.householder_sequential(V, X)

    def seq_fwd_bwd():
        Y = hh.householder_sequential(V, X)
        hh._sequential_backward(V, Y, G)

    def dense_fwd():
        U @ X

    return {
        "fasth": (fasth_fwd, fasth_fwd_bwd),
        "seq": (seq_fwd, seq_fwd_bwd),
        "dense": (dense_fwd, None),
    }


def _torch_cases(V, X, G, U, A=None, tau=None):
    """FastH, sequential, dense and (given ``A``, ``tau``) householder_product cases."""
    Vg, Xg = V.clone().requires_grad_(True), X.clone().requires_grad_(True)
    Ug = U.clone().requires_grad_(True)

    def fwd(f):
        def run():
            with torch.no_grad():
                f()

        return run

    def fwd_bwd(f, inputs):
        def run():
            torch.autograd.grad(f(), inputs, G)

        return run

    def fasth():
        return torch_fasth(Vg, Xg)

    def seq():
        return hh.householder_sequential(Vg, Xg)

    def hhprod():
        return torch.linalg.householder_product(Ag, taug) @ Xg

    def dense():
        return Ug @ Xg

    cases = {
        "fasth": (fwd(fasth), fwd_bwd(fasth, (Vg, Xg))),
        "seq": (fwd(seq), fwd_bwd(seq, (Vg, Xg))),
        "dense": (fwd(dense), fwd_bwd(dense, (Ug, Xg))),
    }
    if A is not None:
        Ag, taug = A.clone().requires_grad_(True), tau.clone().requires_grad_(True)
        cases["hhprod"] = (fwd(hhprod), fwd_bwd(hhprod, (Ag, taug, Xg)))
    return cases


def _fmt(t):
    if t is None:
        return "skip"
    return f"{t:.3f}" if t < 10 else f"{t:.1f}" if t < 1000 else f"{t:.0f}"


def _ratio(a, b):
    return "–" if a is None or b is None else f"{a / b:.1f}×"


def run_table(dims, dtype, device="cpu"):
    rng = np.random.default_rng(0)
    results = {}
    last_single = {}  # (backend, method, mode) -> seconds of one call at the previous d
    for d in dims:
        V = rng.standard_normal((d, d)).astype(dtype)
        X = rng.standard_normal((d, M)).astype(dtype)
        G = rng.standard_normal((d, M)).astype(dtype)
        U = hh.householder_product(V)
        A = rng.standard_normal((d, d)).astype(dtype)
        tau = (1.0 + rng.random(d)).astype(dtype)
        arrays = dict(V=V, X=X, G=G, U=U, A=A, tau=tau)
        T = {n: torch.from_numpy(a).to(device) for n, a in arrays.items()}
        cases = {"torch": _torch_cases(T["V"], T["X"], T["G"], T["U"], T["A"], T["tau"])}
        if device == "cpu":
            cases["np"] = _numpy_cases(V, X, G, U)
        todo = {}
        for backend, methods in cases.items():
            for method, fns in methods.items():
                for mode, fn in zip(("fwd", "fwdbwd"), fns, strict=True):
                    key = (backend, method, mode)
                    if fn is None or last_single.get(key, 0.0) > SLOW_LIMIT_S:
                        results[(d, *key)] = None
                    else:
                        todo[key] = fn
        for key, t in _interleaved_medians_ms(todo).items():
            results[(d, *key)] = t
            last_single[key] = t / 1e3
        print(f"  d={d} done", file=sys.stderr, flush=True)
    return results


def print_tables(dims, r):
    def g(d, *key):
        return r.get((d, *key))

    print(f"\n**Forward `U X`** (ms, median; m = {M}, k = d)\n")
    print(
        "| d | FastH np | seq np | seq/FastH np | FastH torch | seq torch | seq/FastH torch "
        "| hh_product torch | hh_product/FastH | dense torch | FastH/dense |"
    )
    print("|---:" * 11 + "|")
    for d in dims:
        fn_, sn = g(d, "np", "fasth", "fwd"), g(d, "np", "seq", "fwd")
        ft, st = g(d, "torch", "fasth", "fwd"), g(d, "torch", "seq", "fwd")
        hp, de = g(d, "torch", "hhprod", "fwd"), g(d, "torch", "dense", "fwd")
        print(
            f"| {d} | {_fmt(fn_)} | {_fmt(sn)} | {_ratio(sn, fn_)} | {_fmt(ft)} | {_fmt(st)} | "
            f"{_ratio(st, ft)} | {_fmt(hp)} | {_ratio(hp, ft)} | {_fmt(de)} | {_ratio(ft, de)} |"
        )
    print("\n**Forward + backward** (gradients wrt V and X; ms, median)\n")
    print(
        "| d | FastH np | seq np | seq/FastH np | FastH torch | seq torch | seq/FastH torch "
        "| hh_product torch | hh_product/FastH | dense torch | FastH/dense |"
    )
    print("|---:" * 11 + "|")
    for d in dims:
        fn_, sn = g(d, "np", "fasth", "fwdbwd"), g(d, "np", "seq", "fwdbwd")
        ft, st = g(d, "torch", "fasth", "fwdbwd"), g(d, "torch", "seq", "fwdbwd")
        hp, de = g(d, "torch", "hhprod", "fwdbwd"), g(d, "torch", "dense", "fwdbwd")
        print(
            f"| {d} | {_fmt(fn_)} | {_fmt(sn)} | {_ratio(sn, fn_)} | {_fmt(ft)} | {_fmt(st)} | "
            f"{_ratio(st, ft)} | {_fmt(hp)} | {_ratio(hp, ft)} | {_fmt(de)} | {_ratio(ft, de)} |"
        )
    print(
        "\nNumPy dense `U @ X` floor (ms):",
        ", ".join(f"d={d}: {_fmt(g(d, 'np', 'dense', 'fwd'))}" for d in dims),
    )


def _paired_ratios(fa, fb, rounds=15, burst_s=0.03):
    """Per-round time ratio of ``fa`` to ``fb``, alternating bursts of each (a head-to-head A/B).

    Returns ``(median ms of fa, median ms of fb, per-round ratios)``. Only the two compared
    functions run, so the ratio is free of the heap and cache state that the other methods of
    the main table leave behind; each round's pair shares one spell of machine load.
    """
    times = _interleaved_times(
        {"a": fa, "b": fb}, min_reps=rounds, max_reps=rounds, burst_s=burst_s
    )
    ta, tb = times["a"], times["b"]
    ratios = [a / b for a, b in zip(ta, tb, strict=True)]
    return 1e3 * float(np.median(ta)), 1e3 * float(np.median(tb)), ratios


def head_to_head(dims, dtype, device="cpu"):
    """FastH (torch) against the dense matmul alone, per-round ratios: the goal's "within 4×"."""
    print(
        f"\n**FastH against the dense matmul, head to head** (torch, m = {M}; alternating "
        "bursts of the two only, 15 rounds; ratio = median of the per-round ratios, with their "
        "range)\n"
    )
    print("| d | mode | FastH ms | dense ms | FastH/dense | range over rounds |")
    print("|---:|---|---:|---:|---:|---|")
    rng = np.random.default_rng(3)
    for d in dims:
        arrays = [rng.standard_normal(s).astype(dtype) for s in ((d, d), (d, M), (d, M))]
        V, X, G = (torch.from_numpy(a).to(device) for a in arrays)
        U = torch.from_numpy(hh.householder_product(arrays[0])).to(device)
        cases = _torch_cases(V, X, G, U)
        for i, mode in enumerate(("fwd", "fwd+bwd")):
            tf, td, ratios = _paired_ratios(cases["fasth"][i], cases["dense"][i])
            print(
                f"| {d} | {mode} | {_fmt(tf)} | {_fmt(td)} | {float(np.median(ratios)):.2f}× "
                f"| {min(ratios):.2f}–{max(ratios):.2f}× |"
            )


def _rnn_case(step, params, context, h0, xs):
    """One forward+backward of ``h ← tanh(step(h) + x_t)`` over ``xs``, inside ``context()``."""

    def run():
        with context():
            h = h0
            for x in xs:
                h = torch.tanh(step(h) + x)
        torch.autograd.grad(h.square().sum(), params)

    return run


def rnn_table(dims, steps=32, device="cpu"):
    """An orthogonal RNN, ``h ← tanh(U h + x_t)`` for ``steps`` steps (batch m), forward+backward.

    One ``U`` is applied ``steps`` times per forward: FastH rebuilds its blocks at every step
    unless the loop runs inside ``householder.cached()``. Baselines: torch's
    ``parametrizations.orthogonal`` (``matrix_exp`` map) inside ``parametrize.cached()``, which
    forms ``U`` once per forward, and an unconstrained dense ``U`` (the floor).
    """
    from torch.nn.utils import parametrizations, parametrize

    print(
        f"\n**Orthogonal RNN** (torch, {steps} steps of `h ← tanh(U h + x_t)`, batch m = {M}, "
        "forward+backward wrt U's parameters and h₀; ms)\n"
    )
    print(
        "| d | FastH | FastH, `cached()` | uncached/cached | torch `orthogonal` (matrix_exp), "
        "`parametrize.cached()` | torch/FastH cached | dense `U` | FastH cached/dense |"
    )
    print("|---:" * 8 + "|")
    for d in dims:
        torch.manual_seed(0)
        V = torch.randn(d, d, device=device, requires_grad=True)
        h0 = torch.randn(d, M, device=device, requires_grad=True)
        xs = torch.randn(steps, d, M, device=device)
        lin = parametrizations.orthogonal(torch.nn.Linear(d, d, bias=False, device=device))
        dense_U = (torch.randn(d, d, device=device) / d**0.5).requires_grad_(True)

        fasth = functools.partial(torch_fasth, V)
        fns = {
            "fasth": _rnn_case(fasth, (V, h0), contextlib.nullcontext, h0, xs),
            "cached": _rnn_case(fasth, (V, h0), hh.cached, h0, xs),
            "torch": _rnn_case(
                lambda h, lin=lin: lin.weight @ h,
                (*lin.parameters(), h0),
                parametrize.cached,
                h0,
                xs,
            ),
            "dense": _rnn_case(dense_U.matmul, (dense_U, h0), contextlib.nullcontext, h0, xs),
        }
        t = _interleaved_medians_ms(fns, budget_s=0.5)
        print(
            f"| {d} | {_fmt(t['fasth'])} | {_fmt(t['cached'])} | {_ratio(t['fasth'], t['cached'])} "
            f"| {_fmt(t['torch'])} | {_ratio(t['torch'], t['cached'])} | {_fmt(t['dense'])} "
            f"| {_ratio(t['cached'], t['dense'])} |"
        )


def _grad_of_inner_product(apply):
    """``(V, X, G) -> ∂⟨apply(V, X), G⟩/∂(V, X)`` by ``torch.func.grad``."""
    return torch.func.grad(lambda V, X, G: (apply(V, X) * G).sum(), argnums=(0, 1))


def _func_cases(d, batch, device):
    torch.manual_seed(0)
    V, X, G = (torch.randn(d, n, device=device) for n in (d, M, M))
    Vg, Xg = V.clone().requires_grad_(True), X.clone().requires_grad_(True)
    xs, gs = torch.randn(batch, d, 1, device=device), torch.randn(batch, d, 1, device=device)
    per_sample = torch.func.vmap(_grad_of_inner_product(torch_fasth), in_dims=(None, 0, 0))

    def loop():
        for x, g in zip(xs, gs, strict=True):
            torch.autograd.grad(torch_fasth(Vg, x), Vg, g)

    return {
        "autograd": lambda: torch.autograd.grad(torch_fasth(Vg, Xg), (Vg, Xg), G),
        "func": functools.partial(_grad_of_inner_product(torch_fasth), V, X, G),
        "seq": functools.partial(_grad_of_inner_product(hh.householder_sequential), V, X, G),
        "vmap": functools.partial(per_sample, V, xs, gs),
        "loop": loop,
    }


def func_table(dims, batch=16, device="cpu"):
    """FastH under ``torch.func``: what the transform path costs against plain autograd.

    ``torch.func`` needs an ``autograd.Function`` whose forward keeps nothing, so FastH's
    backward recomputes the block inputs with differentiable operations; the first two columns
    measure that price (gradients wrt V and X of ``⟨U X, G⟩``, m = M). The sequential loop under
    ``torch.func.grad`` is what a user without FastH's rule would run. Per-sample gradients wrt V
    (``vmap(grad)``, ``batch`` samples of one column) are compared with a loop of
    ``torch.autograd.grad`` calls.
    """
    print(
        f"\n**`torch.func`** (torch; gradients wrt V and X of ⟨U X, G⟩, m = {M}; per-sample "
        f"gradients wrt V of {batch} single columns; ms)\n"
    )
    print(
        "| d | autograd.grad | func.grad | func/autograd | func.grad, sequential | "
        "sequential/FastH | per-sample `vmap(grad)` | loop of autograd.grad | loop/vmap |"
    )
    print("|---:" * 9 + "|")
    for d in dims:
        fns = _func_cases(d, batch, device)
        t = _interleaved_medians_ms(fns)
        print(
            f"| {d} | {_fmt(t['autograd'])} | {_fmt(t['func'])} | "
            f"{_ratio(t['func'], t['autograd'])} | {_fmt(t['seq'])} | "
            f"{_ratio(t['seq'], t['func'])} | {_fmt(t['vmap'])} | {_fmt(t['loop'])} | "
            f"{_ratio(t['loop'], t['vmap'])} |"
        )


def block_sweep(d, dtype, candidates=(8, 16, 32, 48, 64, 96, 128, 256)):
    rng = np.random.default_rng(1)
    V = rng.standard_normal((d, d)).astype(dtype)
    X = rng.standard_normal((d, M)).astype(dtype)
    G = rng.standard_normal((d, M)).astype(dtype)
    candidates = [b for b in candidates if b <= d]
    arrays = {"NumPy": (np, (V, X, G)), "torch": (torch, [torch.from_numpy(a) for a in (V, X, G)])}
    fns = {}
    for b in candidates:
        for name, (xp, (Vx, Xx, Gx)) in arrays.items():

            def run(xp=xp, Vx=Vx, Xx=Xx, Gx=Gx, b=b):
                blocks = hh._build_blocks(xp, Vx, b)
                _, saved = hh._forward(xp, blocks, Xx, save=True)
                hh._backward(xp, blocks, saved, Gx, need_v=True)

            fns[(b, name)] = run
    t = _interleaved_medians_ms(fns, budget_s=0.1)
    rows = [(b, t[(b, "NumPy")], t[(b, "torch")]) for b in candidates]
    print(f"\n**Block size trade-off** (FastH forward+backward, d = {d}, m = {M}; ms)\n")
    print(f"The default rule picks b = {hh.default_block(d, M)}.\n")
    print("| block b | NumPy | torch |")
    print("|---:|---:|---:|")
    for b, tn, tt in rows:
        print(f"| {b} | {_fmt(tn)} | {_fmt(tt)} |")


def _torch_gemm_floor(V, X, G, b):
    """The GEMM calls of one FastH forward+backward in torch, with nothing else around them.

    Every buffer is allocated once and reused, the per-block views are made once, and there is
    no zero-row check, padding or Python between the calls beyond the loops (``d`` must be a
    multiple of ``b``). What this takes is what the vendor GEMMs alone cost in the shapes FastH
    needs: a floor for any rearrangement of library calls.
    """
    d, n = int(V.shape[1]), int(X.shape[1])
    nb = d // b
    Vb = V.reshape(nb, b, d)
    eye, upper = torch.eye(b, dtype=V.dtype), torch.ones(b, b, dtype=torch.bool).triu_()
    T, E, gV = V.new_empty(nb, b, b), V.new_empty(nb, b, b), V.new_empty(nb, b, d)
    As, Gs = V.new_empty(nb, d, n), V.new_empty(nb, d, n)
    Ks, Qs = V.new_empty(nb, b, n), V.new_empty(nb, b, n)
    W, out, gX = V.new_empty(b, n), V.new_empty(d, n), V.new_empty(d, n)
    Vl, VTl = Vb.unbind(0), Vb.mT.unbind(0)
    Al, Gl, Kl, Ql = (a.unbind(0) for a in (As, Gs, Ks, Qs))

    def run():
        torch.bmm(Vb, Vb.mT, out=T)
        T.diagonal(dim1=1, dim2=2).mul_(0.5)
        Ti = torch.linalg.solve_triangular(T, eye, upper=True)
        Til, TiTl = Ti.unbind(0), Ti.mT.unbind(0)
        Al[-1].copy_(X)
        for j in range(nb - 1, -1, -1):
            torch.mm(Vl[j], Al[j], out=W)
            torch.mm(Til[j], W, out=Kl[j])
            torch.addmm(Al[j], VTl[j], Kl[j], alpha=-1, out=Al[j - 1] if j else out)
        Gl[0].copy_(G)
        for j in range(nb):
            torch.mm(Vl[j], Gl[j], out=W)
            torch.mm(TiTl[j], W, out=Ql[j])
            torch.addmm(Gl[j], VTl[j], Ql[j], alpha=-1, out=Gl[j + 1] if j + 1 < nb else gX)
        torch.bmm(Qs, Ks.mT, out=E)
        torch.bmm(torch.where(upper, E, E.mT), Vb, out=gV)
        gV.baddbmm_(Ks, Gs.mT, alpha=-1).baddbmm_(Qs, As.mT, alpha=-1)

    run()  # the floor must compute what FastH computes
    want_V, want_X = hh.householder_vjp(V, X, G, block=b)
    scale = float(want_V.abs().max())
    if not (
        torch.allclose(gV.reshape(d, d), want_V, rtol=1e-3, atol=1e-4 * scale)
        and torch.allclose(gX, want_X, rtol=1e-3, atol=1e-4 * float(want_X.abs().max()))
    ):
        raise AssertionError("the GEMM floor does not compute FastH's gradients")
    return run


def breakdown(d, dtype, reps=15):
    """Where one FastH forward+backward spends its time at dimension d (k = d, default b).

    The phases run in training-step order in every repetition (so each sees the cache state it
    has in practice); the Gram matrices are also timed on their own inside the block build.
    """
    rng = np.random.default_rng(2)
    V = rng.standard_normal((d, d)).astype(dtype)
    X = rng.standard_normal((d, M)).astype(dtype)
    G = rng.standard_normal((d, M)).astype(dtype)
    U = hh.householder_product(V)
    b = hh.default_block(d, M)
    nb = -(-d // b)
    flops = {
        "Gram matrices V_j V_jᵀ (in the block build)": 2 * nb * b * b * d,
        "rest of the block build (T_j⁻¹, views)": 0,
        "forward sweep (Algorithm 1, saves A_j, K_j)": nb * (4 * b * d * M + 2 * b * b * M),
        "backward sweep (Algorithm 2 step 1)": nb * (4 * b * d * M + 2 * b * b * M),
        "vector gradients (step 2: E_j, F_j V_j, K_j G_jᵀ, Q_j A_jᵀ)": nb
        * (2 * b * b * M + 2 * b * b * d + 4 * b * d * M),
    }
    names = list(flops)
    print(f"\n**Where the time goes** (FastH forward+backward, d = {d}, m = {M}, b = {b}; ms)\n")
    print("| phase | NumPy ms | share | GFLOP/s | torch ms | share | GFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = {n: [] for n in names}
    totals, dense, floor_t = [], [], []
    for xp, arrays in ((np, (V, X, G, U)), (torch, [torch.from_numpy(a) for a in (V, X, G, U)])):
        Vx, Xx, Gx, Ux = arrays
        acc = {n: [] for n in names}
        dense_t = []
        floor = _torch_gemm_floor(Vx, Xx, Gx, b) if xp is torch and nb * b == d else None
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            Vb = Vx.reshape(nb, b, d) if nb * b == d else None
            if Vb is not None:
                Vb @ Vb.mT
            t1 = time.perf_counter()
            blocks = hh._build_blocks(xp, Vx, b)
            t2 = time.perf_counter()
            _, saved = hh._forward(xp, blocks, Xx, save=True)
            t3 = time.perf_counter()
            Gs, Qs, _ = hh._backward_sweep(xp, blocks, Gx)
            t4 = time.perf_counter()
            hh._vector_gradient(xp, blocks, saved, Gs, Qs)
            t5 = time.perf_counter()
            Ux @ Xx, Gx @ Xx.mT, Ux.mT @ Gx  # the dense matmul's three GEMMs (fwd, dU, dX)
            t6 = time.perf_counter()
            phases = (t1 - t0, t2 - t1 - (t1 - t0), t3 - t2, t4 - t3, t5 - t4)
            for n, t in zip(names, phases, strict=True):
                acc[n].append(t)
            dense_t.append(t6 - t5)
            if floor is not None:
                floor()
                floor_t.append(time.perf_counter() - t6)
        med = {n: 1e3 * float(np.median(v[1:])) for n, v in acc.items()}
        for n in names:
            rows[n].append(med[n])
        totals.append(sum(med.values()))
        dense.append(1e3 * float(np.median(dense_t[1:])))
    for n in names:
        cells = []
        for i in range(2):
            t = rows[n][i]
            rate = f"{flops[n] / (t * 1e6):.0f}" if flops[n] else "–"
            cells += [_fmt(t), f"{100 * t / totals[i]:.0f} %", rate]
        print(f"| {n} | " + " | ".join(cells) + " |")
    flop_total = sum(flops.values())
    cells = []
    for i in range(2):
        cells += [_fmt(totals[i]), "100 %", f"{flop_total / (totals[i] * 1e6):.0f}"]
    print("| **FastH kernels, total** | " + " | ".join(cells) + " |")
    dense_flops = 6 * d * d * M
    cells = []
    for i in range(2):
        cells += [
            _fmt(dense[i]),
            f"{totals[i] / dense[i]:.1f}× less",
            f"{dense_flops / (dense[i] * 1e6):.0f}",
        ]
    print("| dense `U @ X` fwd+bwd: 3 GEMMs, no autograd | " + " | ".join(cells) + " |")
    if floor_t:
        t = 1e3 * float(np.median(floor_t[1:]))
        print(
            "| floor: the same GEMM calls on buffers allocated once, no Python between them "
            f"| – | – | – | {_fmt(t)} | {t / dense[1]:.1f}× dense | {flop_total / (t * 1e6):.0f} |"
        )
    print(
        f"\nFlop ratio FastH/dense: {flop_total / dense_flops:.2f} "
        f"(`12 d² m + 4 d² b` against `6 d² m`); `–`: no flops counted (small or no GEMMs)."
    )


def main():
    global M
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dims", default="64,128,256,512,1024,2048")
    parser.add_argument("--m", type=int, default=32, help="columns of X (default 32)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--no-sweep", action="store_true", help="skip the block-size sweep")
    parser.add_argument(
        "--no-breakdown", action="store_true", help="skip the per-phase time breakdown"
    )
    parser.add_argument(
        "--no-head-to-head", action="store_true", help="skip the FastH-vs-dense A/B table"
    )
    parser.add_argument("--no-rnn", action="store_true", help="skip the orthogonal-RNN table")
    parser.add_argument("--no-func", action="store_true", help="skip the torch.func table")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda (NumPy skipped)")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    M = args.m
    torch.set_num_threads(args.threads)
    if args.device != "cpu":
        _SYNC[0] = lambda: torch.cuda.synchronize(args.device)
    dims = [int(s) for s in args.dims.split(",")]
    t0 = time.perf_counter()
    print(
        f"FastH benchmark: {args.device}, {args.dtype}, m = {M}, k = d, threads = {args.threads}, "
        f"torch {torch.__version__}, numpy {np.__version__}"
    )
    load = os.getloadavg()[0]
    results = run_table(dims, args.dtype, args.device)
    print_tables(dims, results)
    if not args.no_head_to_head:
        head_to_head([d for d in dims if d >= 256], args.dtype, args.device)
    if not args.no_rnn:
        rnn_table([d for d in dims if 128 <= d <= 512], device=args.device)
    if not args.no_func:
        func_table([d for d in dims if 128 <= d <= 512], device=args.device)
    if not args.no_sweep and args.device == "cpu":
        block_sweep(512 if 512 in dims else dims[-1], args.dtype)
    if not args.no_breakdown and args.device == "cpu":
        breakdown(512 if 512 in dims else dims[-1], args.dtype)
    print(
        f"\n`skip`: not run because one call at the previous d took over {SLOW_LIMIT_S:.0f} s "
        f"(its cost grows ~d³). Total benchmark time {time.perf_counter() - t0:.0f} s; "
        f"1-min load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end "
        f"({os.cpu_count()} CPUs)."
    )


if __name__ == "__main__":
    main()
