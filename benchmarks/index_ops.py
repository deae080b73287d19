"""Benchmark: compiled index-notation ops against PyTorch, a scatter baseline and the interpreter.

    python benchmarks/index_ops.py                  # medium sizes (the default), 5 repeats
    python benchmarks/index_ops.py --size full      # batch 16, 64->64 channels, 56x56, 3x3
    python benchmarks/index_ops.py --quick          # small sizes, 3 repeats (a smoke run)
    python benchmarks/index_ops.py --only "conv2d s2"   # only the rows whose name contains it

Table 1 — engine ops (``f(x=Tensor, w=Tensor)``, then ``.sum().backward()``) against
``torch.nn.functional`` with autograd, float32, medians of the repeats: conv1d and conv2d with
stride 1/2 and dilation 1/2, 2x2 average pooling, matmul and batched matmul. "auto" is the
einsum / vectorized NumPy lowering, "numba" the generated loop nests (compiled before timing).

Table 2 — what gather form buys: the input and weight gradients of a conv2d evaluated (a) by the
compiled gather-form kernels, (b) the naive way, a scatter with ``np.add.at`` over every
(output element, sum index) pair — the atomic-add approach the tech report argues against — and
(c) by the reference interpreter at a small size. All three are checked to agree first.

Also printed: the one-time cost of deriving and compiling a conv2d (``stats()``), and the load
average before and after (other jobs on the machine move the ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import tadiff as td
from tadiff.index import define
from tadiff.index.compile import clear_cache, kernel, stats
from tadiff.index.compile._affine import integer_form
from tadiff.index.compile.rewrite import product_factors
from tadiff.index.expr import Access, Sum
from tadiff.utils.progress import progress, set_quiet

SIZES = {
    # batch, channels in, channels out, image side, conv1d length
    "quick": (2, 8, 8, 14, 64),
    "medium": (8, 32, 32, 28, 256),
    "full": (16, 64, 64, 56, 1024),
}


def _median_time(fn, repeats: int) -> float:
    # let the other library's idle worker threads stop spinning first: OpenBLAS's workers keep
    # a core busy for a while after each product, which would slow a torch step that follows
    time.sleep(0.3)
    fn()  # warm: compile, caches, allocator
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cases(size: str):
    import torch.nn.functional as F

    b, c, o, side, length = SIZES[size]
    rng = np.random.default_rng(0)
    cases = []
    for s, d in [(1, 1), (2, 1), (1, 2)]:
        cases.append(
            (
                f"conv1d s{s} d{d} ({b}x{c}x{length}, {o}x{c}x3)",
                f"y[b,o,t] = sum[c,k](x[b,c,{s}*t+{d}*k] * w[o,c,k])",
                {"x": rng.normal(size=(b, c, length)), "w": rng.normal(size=(o, c, 3))},
                lambda x, w, s=s, d=d: F.conv1d(x, w, stride=s, dilation=d),
            )
        )
    for s, d in [(1, 1), (2, 1), (1, 2), (2, 2)]:
        cases.append(
            (
                f"conv2d s{s} d{d} ({b}x{c}x{side}x{side}, {o}x{c}x3x3)",
                f"y[b,o,h,v] = sum[c,i,j](x[b,c,{s}*h+{d}*i,{s}*v+{d}*j] * w[o,c,i,j])",
                {"x": rng.normal(size=(b, c, side, side)), "w": rng.normal(size=(o, c, 3, 3))},
                lambda x, w, s=s, d=d: F.conv2d(x, w, stride=s, dilation=d),
            )
        )
    cases.append(
        (
            f"avg pool 2x2 ({b}x{c}x{side}x{side})",
            "y[b,c,h,v] = sum[i=0:2,j=0:2](x[b,c,2*h+i,2*v+j]) / 4",
            {"x": rng.normal(size=(b, c, side, side))},
            lambda x: F.avg_pool2d(x, 2),
        )
    )
    n = 8 * side
    cases.append(
        (
            f"matmul ({n}x{n} @ {n}x{n})",
            "z[i,j] = sum[k](x[i,k] * w[k,j])",
            {"x": rng.normal(size=(n, n)), "w": rng.normal(size=(n, n))},
            lambda x, w: x @ w,
        )
    )
    cases.append(
        (
            f"batched matmul ({4 * b}x{2 * side}x{2 * side})",
            "z[b,i,j] = sum[k](x[b,i,k] * w[b,k,j])",
            {
                "x": rng.normal(size=(4 * b, 2 * side, 2 * side)),
                "w": rng.normal(size=(4 * b, 2 * side, 2 * side)),
            },
            lambda x, w: x @ w,
        )
    )
    return cases


def _engine_step(f, arrays, backward: bool):
    ts = {k: td.tensor(v, requires_grad=backward) for k, v in arrays.items()}
    y = f(**ts)
    if backward:
        y.sum().backward()
    return y, ts


def _torch_step(fn, arrays, names, backward: bool):
    import torch

    ts = [torch.tensor(arrays[n], requires_grad=backward) for n in names]
    y = fn(*ts)
    if backward:
        y.sum().backward()
    return y, ts


def table_engine(size: str, repeats: int, backends: list[str], only: str | None = None) -> None:
    print(f"\n### Engine ops vs PyTorch (float32, size {size!r}, median of {repeats})\n")
    head = "| op | torch fwd | tadiff fwd | ratio | torch fwd+bwd |"
    rule = "|---|---:|---:|---:|---:|"
    for be in backends:
        head += f" {be} fwd+bwd | ratio |"
        rule += "---:|---:|"
    print(head)
    print(rule)
    for name, source, arrays64, torch_fn in progress(_cases(size), desc="engine ops"):
        if only is not None and only not in name:
            continue
        arrays = {k: v.astype(np.float32) for k, v in arrays64.items()}
        print(_engine_row(name, define(source), arrays, torch_fn, repeats, backends), flush=True)


def _engine_row(name, f, arrays, torch_fn, repeats: int, backends: list[str]) -> str:
    names = list(f.args)
    # agreement first: forward and gradients of every backend against torch
    ty, tts = _torch_step(torch_fn, arrays, names, True)
    for be in backends:
        y, ts = _engine_step(f.using(be), arrays, True)
        np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=2e-3, atol=2e-3)
        for n, t in zip(names, tts, strict=True):
            scale = np.abs(t.grad.numpy()).max()
            np.testing.assert_allclose(
                ts[n].grad.data, t.grad.numpy(), rtol=2e-3, atol=2e-3 * scale
            )
    t_f = _median_time(lambda: _torch_step(torch_fn, arrays, names, False), repeats)
    a_f = _median_time(lambda: _engine_step(f, arrays, False), repeats)
    t_fb = _median_time(lambda: _torch_step(torch_fn, arrays, names, True), repeats)
    row = f"| {name} | {t_f * 1e3:.2f} ms | {a_f * 1e3:.2f} ms | {a_f / t_f:.1f}x | "
    row += f"{t_fb * 1e3:.2f} ms |"
    for be in backends:
        g = f.using(be)
        fb = _median_time(lambda g=g: _engine_step(g, arrays, True), repeats)
        row += f" {fb * 1e3:.2f} ms | {fb / t_fb:.1f}x |"
    return row


def scatter_vjp(f, wrt: str, arrays: dict, dy: np.ndarray) -> np.ndarray:
    """The naive gradient: every (output element, sum index) pair adds its contribution to the
    argument element it read, with ``np.add.at`` (a vectorized atomic add).

    Handles ``scale * sum[...](product of accesses)`` with constant sum ranges and one access
    of ``wrt`` (convolutions, pooling, matmul).
    """
    shapes = {k: v.shape for k, v in arrays.items()}
    params = f._params(shapes)
    out_shape = f.output_shape(**shapes)
    scale, (body,) = product_factors(f.body)
    names, ranges = list(f.out_vars), list(out_shape)
    while isinstance(body, Sum):
        lo = max(-((-c) // d) for _, c, d in (integer_form(b, params) for b in body.lower))
        hi = min(c // d for _, c, d in (integer_form(b, params) for b in body.upper))
        names.append(body.var)
        ranges.append(hi - lo + 1)
        body = body.body
        assert lo == 0
    inner, factors = product_factors(body)
    grids = dict(zip(names, np.indices(ranges, sparse=True), strict=True))

    def index(access: Access) -> tuple:
        out = []
        for e in access.indices:
            coeffs, const, den = integer_form(e, params)
            out.append(sum((c * grids[v] for v, c in coeffs.items()), np.int64(const)) // den)
        return tuple(out)

    contribution = dy[tuple(grids[v] for v in f.out_vars)] * (scale * inner)
    target = None
    for a in factors:
        if a.name == wrt and target is None:
            target = a
        else:
            contribution = contribution * arrays[a.name][index(a)]
    full = np.broadcast_shapes(*(g.shape for g in grids.values()))
    contribution = np.broadcast_to(contribution, full)
    where = tuple(np.broadcast_to(i, full) for i in index(target))
    result = np.zeros(shapes[wrt])
    np.add.at(result, where, contribution)
    return result


def table_gather_vs_scatter(size: str, repeats: int) -> None:
    b, c, o, side, _ = SIZES[size]
    rng = np.random.default_rng(1)
    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])")
    print("\n### Gather form vs scatter (np.add.at) vs the reference interpreter (float64)\n")
    print(
        "| derivative | size | gather numpy | gather numba | scatter np.add.at | "
        "scatter / best gather | interpreter | interpreter / best gather |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, dims in [(size, (b, c, o, side)), ("tiny", (1, 2, 2, 9))]:
        nb, nc, no, ns = dims
        x, w = rng.normal(size=(nb, nc, ns, ns)), rng.normal(size=(no, nc, 3, 3))
        y = f(x=x, w=w) if label == "tiny" else f.evaluate({"x": x, "w": w})
        dy = rng.normal(size=y.shape)
        args = {"x": x, "w": w, "dy": dy}
        for wrt in ("x", "w"):
            print(_gather_row(f, wrt, args, label, dims, repeats), flush=True)


def _gather_row(f, wrt: str, args: dict, label: str, dims: tuple, repeats: int) -> str:
    g = f.grad(wrt)
    shapes = {k: v.shape for k, v in args.items()}
    compiled = kernel(g, shapes, np.float64)
    numba_k = kernel(g, shapes, np.float64, "numba")
    forward_args = {"x": args["x"], "w": args["w"]}

    def scatter():
        return scatter_vjp(f, wrt, forward_args, args["dy"])

    np.testing.assert_allclose(compiled(args), scatter(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(numba_k(args), compiled(args), rtol=1e-9, atol=1e-9)
    tg = _median_time(lambda: compiled(args), repeats)
    tn = _median_time(lambda: numba_k(args), repeats)
    ts = _median_time(scatter, max(1, repeats // 2))
    row = f"| d{wrt} of conv2d s2 | {label} {dims} | {tg * 1e3:.2f} ms | "
    row += f"{tn * 1e3:.2f} ms | {ts * 1e3:.1f} ms | {ts / min(tg, tn):.0f}x |"
    if label != "tiny":
        return row + " — | — |"
    np.testing.assert_allclose(g.reference(**args), compiled(args), rtol=1e-12, atol=1e-12)
    ti = _median_time(lambda: g.reference(**args), 1)
    return row + f" {ti * 1e3:.0f} ms | {ti / min(tg, tn):.0f}x |"


def one_time_cost() -> None:
    clear_cache()
    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])")
    x, w = np.ones((2, 3, 9, 9)), np.ones((4, 3, 3, 3))
    _engine_step(f, {"x": x, "w": w}, True)
    s = stats()
    _engine_step(f, {"x": x, "w": w}, True)
    s2 = stats()
    print(
        f"\nconv2d, first forward+backward: {s['derivations']} derivations "
        f"{s['derivation_seconds'] * 1e3:.1f} ms, {s['compilations']} compilations "
        f"{s['compile_seconds'] * 1e3:.1f} ms; second: {s2['compilations'] - s['compilations']} "
        f"compilations, {s2['cache_hits'] - s['cache_hits']} cache hits"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="medium")
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repeats")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-numba", action="store_true")
    parser.add_argument(
        "--only", metavar="SUBSTRING", help="time only the engine rows whose name contains it"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")
    args = parser.parse_args()
    set_quiet(args.quiet)
    size, repeats = ("quick", 3) if args.quick else (args.size, args.repeats)
    backends = ["auto"] if args.no_numba else ["auto", "numba"]
    # other jobs on the machine move the ratios: the load average says how busy it was
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    if args.only is None:
        one_time_cost()
    table_engine(size, repeats, backends, args.only)
    if args.only is None:
        table_gather_vs_scatter("medium" if size == "full" else size, repeats)
    print("\nload average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
