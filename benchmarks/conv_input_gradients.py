"""Convolutions' input gradients: the product-first kernel's two layouts against torch.

An input gradient with fewer input than output channels, ``dx[b, c, r, s] = sum[o, i, j](dy[b,
o, i, j] * w[o, c, r - i, s - j])``, is computed product first (``P = w @ dy``, one BLAS
product) and then summed over shifted blocks of ``P``, one per window offset (see
``tadiff.index.compile._shifted_sum``). The *exact* layout adds each block through a view
clipped in every window dimension; the *flat* layout stores ``P`` on the output's grid and adds
each block with one contiguous addition, over a margin around the image. Each row times both
layouts and torch's ``convolution_backward`` (input gradient only) on the same arrays, in one
process on one thread, alternated call by call, and reports the median of the rounds' best
times, the ratios, the memory each tadiff layout allocates at its peak (``tracemalloc``;
torch's allocations are not traced, so its column is absent), and the layout tadiff takes by
itself (``taken``: flat where the margin's extra passes are few, see ``FLAT_MARGIN_PASSES``).

``--padded`` differentiates the zero-padded convolution instead (padding ``k // 2`` written
into the definition as clipped sum ranges, the offsets that read inside ``x``): the input
gradient is then the input's own, as torch's, where the default rows differentiate the
convolution of an already padded input and crop the margin off for the comparison.

Run: ``python benchmarks/conv_input_gradients.py [--dtype float32] [--rounds 15] [--padded]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread, set before NumPy or torch load their BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from tadiff.index import define  # noqa: E402
from tadiff.index.compile._shifted_sum import plan_shifted_sum  # noqa: E402

CONV = {
    1: "y[b, o, t] = sum[c, k](x[b, c, t + k] * w[o, c, k])",
    2: "y[b, o, i, j] = sum[c, p, q](x[b, c, i + p, j + q] * w[o, c, p, q])",
}


def padded_conv(kernel: tuple[int, ...]) -> str:
    """The convolution zero-padded by ``k // 2`` on both sides (odd kernels: the output has the
    input's size), the padding as clipped sum ranges."""
    outs, sums, reads = [], [], []
    for axis, (u, v, k) in enumerate(zip("ij", "pq", kernel, strict=False), start=2):
        half = k // 2
        outs.append(f"{u}:x.shape[{axis}] + {2 * half + 1} - w.shape[{axis}]")
        inside = f"min(w.shape[{axis}], x.shape[{axis}] + {half} - {u})"
        sums.append(f"{v}=max(0, {half} - {u}):{inside}")
        reads.append(f"{u} + {v} - {half}")
    window = ", ".join("pq"[: len(kernel)])
    return (
        f"y[b, o, {', '.join(outs)}] = sum[c, {', '.join(sums)}]"
        f"(x[b, c, {', '.join(reads)}] * w[o, c, {window}])"
    )


# (name, batch, channels in, channels out, image side or length, kernel)
CASES = [
    ("CNN's second conv, 3x3, 16->8, 32 x 8x8", 32, 8, 16, (8, 8), (3, 3)),
    ("3x3, 32->16, 16 x 16x16", 16, 16, 32, (16, 16), (3, 3)),
    ("5x5, 16->4, 8 x 28x28", 8, 4, 16, (28, 28), (5, 5)),
    ("7x7, 16->4, 8 x 28x28", 8, 4, 16, (28, 28), (7, 7)),
    ("1-d, 3, 32->16, 16 x 200", 16, 16, 32, (200,), (3,)),
]


def _best_us(fn, calls: int = 3) -> float:
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def _peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def run(dtype: str, rounds: int, padded_definition: bool = False) -> None:
    import torch

    torch.set_num_threads(1)
    dt = np.dtype(dtype)
    rng = np.random.default_rng(0)
    rows = []
    for name, batch, c_in, c_out, image, kernel in CASES:
        dims = len(image)
        if padded_definition:
            g = define(padded_conv(kernel)).grad("x")
            padded = image
        else:
            g = define(CONV[dims]).grad("x")
            padded = tuple(n + k - 1 for n, k in zip(image, kernel, strict=True))
        shapes = {
            "x": (batch, c_in, *padded),
            "w": (c_out, c_in, *kernel),
            "dy": (batch, c_out, *image),
        }
        arrays = {a: rng.standard_normal(s).astype(dt) for a, s in shapes.items()}
        out_shape = g.output_shape(**shapes)
        layouts = {
            layout: plan_shifted_sum(g, shapes, dt, out_shape, False, layout=layout)
            for layout in ("exact", "flat")
        }
        assert "(flat layout)" in layouts["flat"].source
        auto = plan_shifted_sum(g, shapes, dt, out_shape, False).source
        taken = "flat" if "(flat layout)" in auto else "exact"
        exact, flat = (layouts[k](arrays) for k in ("exact", "flat"))
        # both sum the same terms in another order: float32 round-off of ~1e-6 relative
        np.testing.assert_allclose(flat, exact, rtol=1e-4, atol=1e-4)
        dy, w = torch.from_numpy(arrays["dy"]), torch.from_numpy(arrays["w"])
        # torch's input is the unpadded image, its padding the kernel's half (odd kernels)
        x = torch.zeros((batch, c_in, *image), dtype=dy.dtype)
        pad = [k // 2 for k in kernel]
        ones = [1] * dims

        def torch_dx(dy=dy, x=x, w=w, pad=pad, ones=ones, zeros=[0] * dims):
            return torch.ops.aten.convolution_backward(
                dy, x, w, None, ones, pad, ones, False, zeros, 1, [True, False, False]
            )[0]

        want = torch_dx().numpy()
        crop = (slice(k // 2, k // 2 + n) for k, n in zip(kernel, image, strict=True))
        inner = (slice(None), slice(None), *crop) if not padded_definition else ...
        np.testing.assert_allclose(flat[inner], want, rtol=1e-4, atol=1e-4)
        fns = {
            "exact": lambda k=layouts["exact"], a=arrays: k(a),
            "flat": lambda k=layouts["flat"], a=arrays: k(a),
            "torch": torch_dx,
        }
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(rounds):
            for key, fn in fns.items():
                times[key].append(_best_us(fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        peaks = {k: _peak_mib(fns[k]) for k in ("exact", "flat")}
        rows.append((name, med, peaks, taken))
    what = "of zero-padded convolutions" if padded_definition else "product first"
    print(
        f"\n**Input gradients, {what}, {dtype}, one thread, µs (median of {rounds} "
        "rounds' best of 3)**\n"
    )
    print(
        "| case | exact layout | flat layout | torch | flat / exact | flat / torch "
        "| peak MiB exact | peak MiB flat | taken |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, med, peaks, taken in rows:
        print(
            f"| {name} | {med['exact']:.0f} | {med['flat']:.0f} | {med['torch']:.0f} | "
            f"{med['flat'] / med['exact']:.2f}× | {med['flat'] / med['torch']:.2f}× | "
            f"{peaks['exact']:.2f} | {peaks['flat']:.2f} | {taken} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--padded", action="store_true", help="the zero-padded convolution's own input gradient"
    )
    args = parser.parse_args()
    print(f"Load average at start: {os.getloadavg()[0]:.2f}")
    run(args.dtype, args.rounds, args.padded)
    print(f"\nLoad average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
