"""The scheduler: programs of loop nests, their cost estimates, and what they compute.

* The cheap-gradient bound, statically: over a corpus of definitions (kernel sums, RBF
  matrices, the tech report's example, convolutions strided, dilated and depthwise, pooling,
  stencils, softmax, logsumexp, layer norm, attention, bilinear forms, flattening, diagonal,
  outer products, contractions, elementary functions...), every derivative's estimated work
  (operations, loads, stores) is at most 4 times its forward's, plus the writes of the gradient
  itself (a diagonal's gradient is a full matrix of mostly zeros: it must at least be written).
* Every planned program — forward, and each derivative reading the saved forward output — run
  as plain Python loops (the exact nests the Numba backend compiles) equals the reference
  interpreter; a subset runs compiled by Numba, float32 and float64.
* Rewrites that would read out of bounds are not made (a factor moved out of a sum that can be
  empty, a value hoisted out of a ``where``), and the NumPy lowering stays under its memory
  budget.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from tadiff.index import define
from tadiff.index.compile import kernel
from tadiff.index.compile.numba_backend import run_in_python
from tadiff.index.compile.schedule import memory_budget, plan_program, set_memory_budget

N = 200
# (definition, shapes for the cost estimates, small shapes for loops run by Python)
CORPUS = [
    (
        "out[i] = sum[j](exp(-sum[q]((a[i,q]-b[j,q])**2)) * v[j])",
        {"a": (N, 16), "b": (N + 7, 16), "v": (N + 7,)},
        {"a": (5, 3), "b": (6, 3), "v": (6,)},
    ),
    (
        "K[i,j] = exp(-sum[q]((a[i,q]-b[j,q])**2))",
        {"a": (N, 16), "b": (N + 7, 16)},
        {"a": (5, 3), "b": (4, 3)},
    ),
    (
        "f[i,j] = exp(-sum[k]((a[i,k]+b[j,k])**2 * c[i,i] + d[i+k]**3))",
        {"a": (N, 16), "b": (N, 16), "c": (N, N), "d": (N + 15,)},
        {"a": (5, 3), "b": (4, 3), "c": (5, 5), "d": (7,)},
    ),
    (
        "y[b,o,t] = sum[c,k](x[b,c,t+k] * w[o,c,k])",
        {"x": (4, 8, 64), "w": (6, 8, 5)},
        {"x": (2, 3, 9), "w": (2, 3, 3)},
    ),
    (
        "y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])",
        {"x": (4, 8, 64), "w": (6, 8, 5)},
        {"x": (2, 3, 10), "w": (2, 3, 3)},
    ),
    (
        "y[b,o,t] = sum[c,k](x[b,c,t+2*k] * w[o,c,k])",
        {"x": (4, 8, 64), "w": (6, 8, 5)},
        {"x": (2, 3, 10), "w": (2, 3, 3)},
    ),
    (
        "y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])",
        {"x": (2, 4, 16, 16), "w": (5, 4, 3, 3)},
        {"x": (1, 2, 5, 6), "w": (2, 2, 2, 3)},
    ),
    (
        "y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])",
        {"x": (2, 4, 16, 16), "w": (5, 4, 3, 3)},
        {"x": (1, 2, 7, 6), "w": (2, 2, 3, 2)},
    ),
    (
        "y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])",
        {"x": (4, 16, 128), "w": (16, 7)},
        {"x": (2, 3, 11), "w": (3, 3)},
    ),
    ("y[b,c,t] = sum[k=0:2](x[b,c,2*t+k]) / 2", {"x": (4, 16, 128)}, {"x": (2, 3, 9)}),
    ("y[b,c,t] = maximum(x[b,c,2*t], x[b,c,2*t+1])", {"x": (4, 16, 128)}, {"x": (2, 3, 9)}),
    (
        # explicit sizes: x[i, j+1] uses i plainly, which would make i run over all of x
        "y[i:30, j:40] = 4*x[i+1,j+1] - x[i,j+1] - x[i+2,j+1] - x[i+1,j] - x[i+1,j+2]",
        {"x": (32, 42)},
        {"x": (32, 42)},
    ),
    ("y[i:998] = x[i] - 2*x[i+1] + x[i+2]", {"x": (1000,)}, {"x": (1000,)}),
    ("y[i,j] = exp(x[i,j]) / sum[k](exp(x[i,k]))", {"x": (N, 64)}, {"x": (4, 5)}),
    ("y[i] = log(sum[k](exp(x[i,k])))", {"x": (N, 64)}, {"x": (4, 5)}),
    (
        "y[i,j] = (x[i,j] - sum[k](x[i,k]) / 64)"
        " / sqrt(sum[k]((x[i,k] - sum[l](x[i,l]) / 64)**2) / 64 + 0.00001)",
        {"x": (N, 64)},
        {"x": (3, 4)},  # the interpreter's cost is 4th-order in the row length
    ),
    (
        "s[b,i,j] = sum[d](q[b,i,d] * k[b,j,d]) * 0.125",
        {"q": (2, 64, 16), "k": (2, 80, 16)},
        {"q": (2, 3, 4), "k": (2, 5, 4)},
    ),
    (
        "o[i,d] = sum[j](exp(sum[e](q[i,e] * k[j,e])) * v[j,d])"
        " / sum[j](exp(sum[e](q[i,e] * k[j,e])))",
        {"q": (64, 16), "k": (80, 16), "v": (80, 16)},
        {"q": (4, 3), "k": (5, 3), "v": (5, 2)},
    ),
    (
        "y[b] = sum[i,j](x[b,i] * A[i,j] * z[b,j])",
        {"x": (16, 32), "A": (32, 40), "z": (16, 40)},
        {"x": (3, 4), "A": (4, 5), "z": (3, 5)},
    ),
    ("f[s, t:10] = x[10*s + t]", {"x": (1000,)}, {"x": (35,)}),
    ("y[i] = x[i,i]", {"x": (100, 100)}, {"x": (5, 5)}),
    ("y[i,j] = a[i] * b[j]", {"a": (100,), "b": (120,)}, {"a": (4,), "b": (5,)}),
    (
        "z[i,j] = sum[k](x[i,k] * w[k,j])",
        {"x": (64, 32), "w": (32, 48)},
        {"x": (3, 4), "w": (4, 5)},
    ),
    (
        "z[b,i,j] = sum[k](x[b,i,k] * w[b,k,j])",
        {"x": (4, 32, 16), "w": (4, 16, 24)},
        {"x": (2, 3, 4), "w": (2, 4, 5)},
    ),
    ("y[j,i] = x[i,j]", {"x": (64, 32)}, {"x": (3, 4)}),
    ("s[] = sum[i](a[i,i])", {"a": (64, 64)}, {"a": (5, 5)}),
    ("y[i] = x[x.shape[0] - 1 - i]", {"x": (100,)}, {"x": (6,)}),
    ("y[i:100] = sum[k=0:i+1](x[k])", {"x": (100,)}, {"x": (100,)}),
    (
        "y[i] = tanh(x[i]) * sigmoid(z[i]) + sin(x[i])**2",
        {"x": (500,), "z": (500,)},
        {"x": (6,), "z": (6,)},
    ),
    (
        "y[i] = log(sum[k](w[k] * exp(-sum[d]((x[i,d] - mu[k,d])**2))))",
        {"x": (N, 8), "w": (10,), "mu": (10, 8)},
        {"x": (4, 3), "w": (5,), "mu": (5, 3)},
    ),
    (
        "K[i,j] = (sum[d](a[i,d] * b[j,d]) + 1)**3",
        {"a": (N, 16), "b": (N, 16)},
        {"a": (4, 3), "b": (5, 3)},
    ),
    (
        "c[i,j] = sum[d](a[i,d] * b[j,d]) / sqrt(sum[d](a[i,d]**2) * sum[d](b[j,d]**2))",
        {"a": (N, 16), "b": (N, 16)},
        {"a": (4, 3), "b": (5, 3)},
    ),
    (
        "y[i,j] = sqrt(sum[d](w[d] * (a[i,d] - b[j,d])**2))",
        {"a": (N, 16), "b": (N, 16), "w": (16,)},
        {"a": (4, 3), "b": (5, 3), "w": (3,)},
    ),
    ("y[i,j:3] = exp(x[3*i+j])", {"x": (50,)}, {"x": (50,)}),
    (
        "y[b,o,h,v] = c[o] + sum[k,i,j](x[b,k,h+i,v+j] * w[o,k,i,j])",
        {"c": (5,), "x": (2, 4, 16, 16), "w": (5, 4, 3, 3)},
        {"c": (2,), "x": (1, 2, 5, 6), "w": (2, 2, 2, 3)},
    ),
    (
        "z[i,j] = 2*u[i] - sum[k](x[i,k] * w[k,j]) + sum[k](x[i,k])",
        {"u": (64,), "x": (64, 32), "w": (32, 48)},
        {"u": (3,), "x": (3, 4), "w": (4, 5)},
    ),
]


def _programs(source, shapes, dtype=np.float64):
    """The forward's program, and each derivative's reading the saved forward output."""
    f = define(source)
    out = f.output_shape(**shapes)
    forward = plan_program(f, shapes, dtype)
    grads = {}
    for name in f.args:
        g = f.grad(name)
        known = {} if f.out_name in g.args else {f.out_name: (f, out)}
        grads[name] = plan_program(g, {**shapes, f.grad_name: out}, dtype, known)
    return f, out, forward, grads


def test_corpus_has_at_least_thirty_definitions():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize(("source", "shapes", "small"), CORPUS, ids=[c[0] for c in CORPUS])
def test_every_derivative_costs_at_most_four_forwards(source, shapes, small):
    _, _, forward, grads = _programs(source, shapes)
    for name, program in grads.items():
        written = math.prod(shapes[name])  # the gradient must at least be written
        assert program.cost <= 4 * forward.cost + written, (
            f"d/d{name}: {program.cost:.3g} against forward {forward.cost:.3g}\n"
            + program.explain(loops=False)
        )


def _arrays(f, shapes, rng):
    # values in (0.2, 0.6): kernels and exponentials stay in a well-scaled range
    return {n: rng.uniform(0.2, 0.6, size=shapes[n]) for n in f.args}


# the corpus entries whose plans use temporaries, exchanged sums and accumulation in the output
SMALL = [
    (source, small)
    for source, _, small in CORPUS
    if source.startswith(("out[i] = ", "f[i,j] = exp", "o[i,d] = ", "y[i,j] = (x[i,j]"))
]


@pytest.mark.parametrize(("source", "shapes", "small"), CORPUS, ids=[c[0] for c in CORPUS])
def test_every_planned_program_computes_what_the_interpreter_computes(source, shapes, small):
    _check_programs(define(source), small, np.random.default_rng(0), np.float64)


def _check_programs(f, shapes, rng, dtype, run=run_in_python, tol=1e-12):
    arrays = _arrays(f, shapes, rng)
    out_shape = f.output_shape(**shapes)
    forward = plan_program(f, shapes, dtype)
    y = run(forward, arrays)
    np.testing.assert_allclose(y, f.reference(**arrays), rtol=tol, atol=tol, err_msg=str(f))
    dy = rng.normal(size=out_shape)
    for name in f.args:
        g = f.grad(name)
        known = {} if f.out_name in g.args else {f.out_name: (f, out_shape)}
        program = plan_program(g, {**shapes, f.grad_name: out_shape}, dtype, known)
        inputs = {**arrays, f.grad_name: dy, f.out_name: y}
        expected = g.reference(**arrays, **{f.grad_name: dy})
        got = run(program, inputs)
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=program.explain())


@pytest.mark.parametrize(("source", "shapes"), SMALL, ids=[c[0] for c in SMALL])
def test_schedules_with_temporaries_swaps_and_interchanges_run_right(source, shapes):
    _check_programs(define(source), shapes, np.random.default_rng(1), np.float64)


def test_the_planner_uses_each_technique_on_the_corpus():
    # each rewrite is exercised by the corpus (else the tests above would not test it)
    seen = set()
    for source, shapes, _ in CORPUS:
        _, _, forward, grads = _programs(source, shapes)
        for program in [forward, *grads.values()]:
            text = program.explain(loops=False)
            seen.update(
                key
                for key, marker in {
                    "saved": "reads the saved forward value",
                    "factored": "moved out of the sum",
                    "temporary": "(temporary)",
                    "swap": "nested sums exchanged",
                    "interchange": "output accumulated inside the sums",
                }.items()
                if marker in text
            )
    assert seen == {"saved", "factored", "temporary", "swap", "interchange"}


def test_rbf_gradient_reads_the_forward_and_accumulates_rows():
    f = define("K[i,j] = exp(-sum[q]((a[i,q]-b[j,q])**2))")
    shapes = {"a": (300, 32), "b": (250, 32)}
    _, _, forward, grads = _programs("K[i,j] = exp(-sum[q]((a[i,q]-b[j,q])**2))", shapes)
    program = grads["a"]
    assert program.saved == ("K",)
    (stage,) = program.stages
    assert stage.nest.order == ("i", "j", "q") and stage.nest.accumulate
    # the forward's inner sum over q is gone from the gradient: one pass of i, j, q
    assert "exp" not in stage.nest.text()
    assert program.cost <= 2 * forward.cost
    text = f.explain(a=(300, 32), b=(250, 32))
    assert "gradient wrt a" in text and "reads the saved forward value K" in text


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("source", "shapes"), SMALL[:3], ids=[c[0] for c in SMALL[:3]])
def test_numba_compiles_the_planned_nests(source, shapes, dtype):
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import lower_program

    def run(program, arrays):
        fn = program.fn
        known = {n: (fn.parent[0] if fn.parent else fn, arrays[n].shape) for n in program.saved}
        k = lower_program(fn, {a: arrays[a].shape for a in fn.args}, dtype, "numba", known)
        assert k.backend == "numba"
        got = k({n: np.asarray(a, dtype) for n, a in arrays.items()})
        assert got.dtype == dtype
        return got

    tol = 1e-12 if dtype == np.float64 else 2e-5
    _check_programs(define(source), shapes, np.random.default_rng(2), dtype, run, tol)


# sums whose ranges an output index clips (zero padding written as sum ranges, a causal
# window, a triangle): each bound uses one output index with coefficient +-1
CLIPPED = [
    (
        "y[b, o, i:x.shape[2] + 3 - w.shape[2], j:x.shape[3] + 1 - w.shape[3]] = sum[c, "
        "p=max(0, 2 - i):min(w.shape[2], x.shape[2] + 2 - i), "
        "q=max(0, -j):min(w.shape[3], x.shape[3] - j)](x[b, c, i + p - 2, j + q] * w[o, c, p, q])",
        {"x": (2, 3, 7, 6), "w": (4, 3, 3, 2)},
    ),
    (
        "y[b, o, t:x.shape[2]] = sum[c, k=max(0, w.shape[2] - 1 - t):w.shape[2]]"
        "(x[b, c, t + k - w.shape[2] + 1] * w[o, c, k])",
        {"x": (3, 2, 9), "w": (4, 2, 4)},
    ),
    ("y[n, i:6] = sum[k=0:i + 1](x[n, k] * w[i - k])", {"x": (5, 6), "w": (6,)}),
]


@pytest.mark.parametrize(("source", "shapes"), CLIPPED, ids=[c[0] for c in CLIPPED])
def test_sums_an_output_index_clips_go_outside_it(source, shapes):
    # interchanged: the sum runs over the union of its ranges, the index over the values whose
    # range holds the sum's value, so the innermost loop runs along the output row
    f = define(source)
    program = plan_program(f, shapes)
    (stage,) = program.stages
    order = stage.nest.order
    assert stage.nest.accumulate and order.index(f.out_vars[-1]) == len(order) - 1, order
    clipped = [v for v in f.out_vars if any(v in str(b) for b in _sum_bounds(f.body))]
    first_sum = min(order.index(s) for s in order if s not in f.out_vars)
    assert all(order.index(v) > first_sum for v in clipped), order
    _check_programs(f, shapes, np.random.default_rng(4), np.float64)


def _sum_bounds(node):
    from tadiff.index.expr import Sum, walk

    return [b for s in walk(node) if isinstance(s, Sum) for b in (*s.lower, *s.upper)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numba_compiles_interchanged_clipped_sums(dtype):
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import lower_program

    source, shapes = CLIPPED[0]
    f = define(source)
    k = lower_program(f, shapes, dtype, "numba")
    arrays = _arrays(f, shapes, np.random.default_rng(5))
    got = k({n: a.astype(dtype) for n, a in arrays.items()})
    tol = 1e-12 if dtype == np.float64 else 2e-5  # float32: sums of 18 products of size ~1
    np.testing.assert_allclose(got, f.reference(**arrays), rtol=tol, atol=tol)


def test_a_sum_over_a_window_around_an_output_index_stays_inside_it():
    # an input gradient's j runs from s - 2 to s: outside s it would bound s by the same three
    # values, a three-long innermost loop entered once per j
    f = define("y[b, o, h, v] = sum[c, i, j](x[b, c, h + i, v + j] * w[o, c, i, j])").grad("x")
    shapes = {"x": (2, 3, 9, 40), "w": (4, 3, 3, 3), "dy": (2, 4, 7, 38)}
    (stage,) = plan_program(f, shapes).stages
    assert stage.nest.order == tuple(f.out_vars) and not stage.nest.accumulate
    _check_programs(f, shapes, np.random.default_rng(7), np.float64)


WINDOWED = [
    # input gradients of 2-d convolutions zero-padded through their sum ranges: windows around
    # the output index, clipped at the edges, and no scatter form (the forward's ranges are
    # clipped too)
    ((CLIPPED[0][0], "x"), CLIPPED[0][1]),
    (
        (
            "y[b, o, i:x.shape[2] + 5 - w.shape[2], j:x.shape[3] + 3 - w.shape[3]] = sum[c, "
            "p=max(0, 2 - i):min(w.shape[2], x.shape[2] + 2 - i), "
            "q=max(0, 1 - j):min(w.shape[3], x.shape[3] + 1 - j)]"
            "(x[b, c, i + p - 2, j + q - 1] * w[o, c, p, q])",
            "x",
        ),
        {"x": (2, 3, 9, 12), "w": (4, 3, 5, 3)},
    ),
]


@pytest.mark.parametrize(("entry", "shapes"), WINDOWED, ids=[e[0] for e, _ in WINDOWED])
def test_window_sums_counted_from_their_start_run_their_offsets_outside_the_row(entry, shapes):
    # the loops count each window from its start, so the offsets can run outside the output
    # index they slide with: the innermost loop runs along the output row, not over the window
    source, wrt = entry
    f = define(source)
    g = f.grad(wrt)
    out_shape = f.output_shape(**shapes)
    program = plan_program(g, {**shapes, f.grad_name: out_shape})
    assert program.windowed is not None and program.loops == [program.windowed]
    assert "counted from the window's start" in program.explain()
    order = program.windowed.nest.order
    assert order[-1] == g.out_vars[-1] and program.windowed.nest.accumulate, order
    rng = np.random.default_rng(8)
    arrays = _arrays(f, shapes, rng)
    dy = rng.normal(size=out_shape)
    expected = g.reference(**arrays, **{f.grad_name: dy})
    got = run_in_python(program, {**arrays, f.grad_name: dy})
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numba_compiles_window_sums_counted_from_their_start(dtype):
    pytest.importorskip("numba")
    from tadiff.index.compile.lower import lower_program

    (source, wrt), shapes = WINDOWED[1]
    f = define(source)
    g = f.grad(wrt)
    out_shape = f.output_shape(**shapes)
    all_shapes = {**shapes, f.grad_name: out_shape}
    k = lower_program(g, {a: all_shapes[a] for a in g.args}, dtype, "numba")
    assert "_off" in k.source  # the windowed stage's offsets
    rng = np.random.default_rng(9)
    arrays = {**_arrays(f, shapes, rng), f.grad_name: rng.normal(size=out_shape)}
    got = k({a: np.asarray(arrays[a], dtype) for a in g.args})
    tol = 1e-12 if dtype == np.float64 else 2e-5  # float32: sums of 36 products of size ~1
    np.testing.assert_allclose(got, g.reference(**arrays), rtol=tol, atol=tol)


def _padded_conv(kernel, pads, dilation) -> str:
    """A convolution with a bias, zero-padded ``(before, after)`` per spatial dimension
    through its sum ranges (the window offsets that read inside ``x``), dilated."""
    outs, sums, reads = [], [], []
    n = len(kernel)
    for a, (i, k, (lo, hi), d) in enumerate(
        zip("ij"[:n], "pq"[:n], pads, dilation, strict=True), start=2
    ):
        outs.append(f"{i}:x.shape[{a}] + {lo + hi + d} - {d}*w.shape[{a}]")
        if d == 1:
            sums.append(f"{k}=max(0, {lo} - {i}):min(w.shape[{a}], x.shape[{a}] + {lo} - {i})")
        else:
            first = f"ceil(({lo} - {i})/{d})"
            last = f"floor((x.shape[{a}] + {lo - 1} - {i})/{d}) + 1"
            sums.append(f"{k}=max(0, {first}):min(w.shape[{a}], {last})")
        reads.append(f"{i} + {d}*{k} - {lo}")
    window = ", ".join("pq"[:n])
    return (
        f"y[b, o, {', '.join(outs)}] = bias[o] + sum[c, {', '.join(sums)}]"
        f"(x[b, c, {', '.join(reads)}] * w[o, c, {window}])"
    )


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize(
    ("kernel", "pads", "dilation", "image"),
    [
        ((3, 3), ((1, 1), (1, 1)), (1, 1), (7, 9)),  # "same"
        ((4, 2), ((2, 1), (0, 1)), (1, 1), (6, 5)),  # asymmetric, one side unpadded
        ((3, 2), ((2, 2), (1, 0)), (2, 1), (8, 6)),  # dilated: ceil/floor bounds, not swapped
        ((5,), ((4, 0),), (1,), (12,)),  # causal, 1-d
    ],
)
def test_convolutions_padded_through_sum_ranges_match_torch(kernel, pads, dilation, image, backend):
    # values and the three gradients against torch's padded convolution (an independent
    # implementation), on each backend: the clipped sums run outside the rows they clip, the
    # input gradient's windows are counted from their start, the NumPy plans take the sums
    # as derived
    torch = pytest.importorskip("torch")
    if backend == "numba":
        pytest.importorskip("numba")
    from tadiff.index.compile.cache import gradient_kernel
    from tadiff.index.compile.lower import lower_program

    f = define(_padded_conv(kernel, pads, dilation))
    rng = np.random.default_rng(len(image) * 10 + kernel[0])
    x = rng.standard_normal((2, 3, *image))
    w = rng.standard_normal((4, 3, *kernel))
    b = rng.standard_normal(4)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    conv = torch.nn.functional.conv1d if len(image) == 1 else torch.nn.functional.conv2d
    padded = torch.nn.functional.pad(tx, [p for lo_hi in reversed(pads) for p in lo_hi])
    ty = conv(padded, tw, tb, dilation=dilation)
    dy = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(dy))
    shapes = {"x": x.shape, "w": w.shape, "bias": b.shape}
    y = lower_program(f, shapes, np.float64, backend)({"x": x, "w": w, "bias": b})
    grads = gradient_kernel(f, ("x", "w", "bias"), {**shapes, "dy": dy.shape}, np.float64, backend)
    got = grads({"x": x, "w": w, "bias": b, "dy": dy})
    # float64 sums of at most 3 * 5 * 2 products of size ~1, in another order than torch's
    for mine, theirs in ((y, ty), (got["x"], tx.grad), (got["w"], tw.grad), (got["bias"], tb.grad)):
        np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_a_sum_clipped_with_a_coefficient_other_than_one_keeps_the_natural_order():
    # k <= i / 2 cannot be solved for i by one integer bound per k: the sum stays inside i
    f = define("y[n, i:8] = sum[k=0:floor(i/2) + 1](x[n, k] * w[i - k])")
    shapes = {"x": (5, 8), "w": (8,)}
    (stage,) = plan_program(f, shapes).stages
    assert stage.nest.order == ("n", "i")
    _check_programs(f, shapes, np.random.default_rng(6), np.float64)


def test_a_factor_is_not_moved_out_of_a_sum_that_can_be_empty():
    # at i = 0 the sum is empty and x[i - 1] is never read; outside the sum it would be x[-1]
    f = define("y[i:5] = sum[k=0:i](x[i - 1] * z[k])")
    program = plan_program(f, {"x": (5,), "z": (5,)})
    assert "moved out" not in program.explain()
    arrays = {"x": np.arange(1.0, 6.0), "z": np.ones(5)}
    np.testing.assert_array_equal(run_in_python(program, arrays), f.reference(**arrays))


def test_an_access_is_not_hoisted_out_of_a_where():
    # x[i - 1] is only valid where i >= 1: it stays inside the if, though it depends on i only
    f = define("y[i, j] = where(i >= 1, x[i - 1], 0) * z[j]")
    program = plan_program(f, {"x": (4,), "z": (3,)}, np.float64)
    text = program.stages[-1].nest.text()
    load = next(k for k, line in enumerate(text.splitlines()) if "load x[" in line)
    cond = next(k for k, line in enumerate(text.splitlines()) if line.strip().startswith("if"))
    assert load > cond, text
    arrays = {"x": np.arange(1.0, 5.0), "z": np.ones(3)}
    np.testing.assert_array_equal(run_in_python(program, arrays), f.reference(**arrays))


def _run_under_budget(f, arrays, budget):
    """The NumPy kernel of ``f`` compiled under ``budget``, its result, and the peak of the
    memory NumPy allocated while it ran (tracemalloc sees NumPy's allocations)."""
    previous = set_memory_budget(budget)
    try:
        k = kernel(f, {n: a.shape for n, a in arrays.items()}, np.float64, "numpy")
        tracemalloc.start()
        got = k(arrays)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        set_memory_budget(previous)
    assert memory_budget() == previous
    return k, got, peak


def test_numpy_lowering_stays_under_the_memory_budget():
    # the kernel sum's iteration space is i x j x q = 2000 x 2000 x 8 float64: 256 MB at once
    f = define("out[i] = sum[j](exp(-sum[q]((a[i,q]-b[j,q])**2)) * v[j])")
    rng = np.random.default_rng(3)
    arrays = {"a": rng.normal(size=(2000, 8)), "b": rng.normal(size=(2000, 8)), "v": np.ones(2000)}
    k, got, peak = _run_under_budget(f, arrays, 2**23)
    assert "chunks" in k.source
    # the budget with room for the chunk's output and NumPy's own temporaries of a reduction
    assert peak < 3 * 2**23, peak
    rows = slice(0, 7)
    small = {"a": arrays["a"][rows], "b": arrays["b"], "v": arrays["v"]}
    np.testing.assert_allclose(got[rows], f.reference(**small), rtol=1e-12)


def test_derivatives_sharing_their_loops_are_one_nest():
    # d/da, d/db and d/dv of the kernel sum all need exp(-|a_i - b_j|**2) for every pair:
    # one pass over the pairs computes the three, the exponential once; the one summed over
    # the parallel loop adds into a copy per thread, and da and db share their loop over q
    from tadiff.index.compile.schedule import plan_gradients

    f = define(CORPUS[0][0])
    shapes = {"a": (300, 4), "b": (200, 4), "v": (200,), "dout": (300,)}
    plan = plan_gradients(f, ("a", "b", "v"), shapes, np.float32, {"out": (f, (300,))})
    ((members, nest),) = plan.fused
    assert {w for w, _ in members} == {"a", "b", "v"}
    apart = sum(plan.programs[w].stages[k].nest.cost for w, k in members)
    assert nest.cost < 0.5 * apart
    text = nest.text()
    assert text.count("exp(") == 1
    assert len(nest.private) == 1 and "per thread" in text
    assert text.count("sub(") == 2  # once in the distance, once for both da and db


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_gradients_through_the_engine_match_the_interpreter(dtype, threads):
    # compiled by Numba, on one thread and on two (each thread adds into its own copy of the
    # output summed over the parallel loop; the copies are added up after)
    pytest.importorskip("numba")
    from tadiff.index.compile.schedule import plan_gradients

    f = define(CORPUS[0][0]).using("numba")
    rng = np.random.default_rng(6)
    arrays = {"a": rng.normal(size=(7, 3)), "b": rng.normal(size=(5, 3)), "v": rng.normal(size=5)}
    shapes = {**{k: v.shape for k, v in arrays.items()}, "dout": (7,)}
    plan = plan_gradients(f, f.args, shapes, dtype, {"out": (f, (7,))})
    assert any(nest.private for _, nest in plan.fused)
    _check_engine_gradients(f, arrays, dtype, threads, rng)


def _check_engine_gradients(f, arrays, dtype, threads: int, rng) -> None:
    """Backpropagate a random gradient through ``f`` on the engine with ``threads`` threads and
    compare every argument's gradient with the interpreter's."""
    import tadiff as td

    tensors = {k: td.tensor(v.astype(dtype), requires_grad=True) for k, v in arrays.items()}
    y = f(**tensors)
    g = rng.normal(size=y.shape)
    before = td.get_num_threads()
    td.set_num_threads(threads)
    try:
        y.backward(td.tensor(g.astype(dtype)))
    finally:
        td.set_num_threads(before)
    tol = 1e-12 if dtype == np.float64 else 2e-5  # float32: sums of a few dozen terms
    for name, t in tensors.items():
        expected = f.grad(name).reference(**arrays, **{f.grad_name: g})
        assert t.grad.data.dtype == dtype
        np.testing.assert_allclose(t.grad.data, expected, rtol=tol, atol=tol, err_msg=name)


def test_private_copies_beyond_the_memory_budget_are_not_made():
    # a copy of da (3000 x 3 float64, 72 kB) per thread does not fit a 64 KiB budget: the
    # planner does not make da private, a nest planned before would get one copy, and the
    # gradients are right either way
    pytest.importorskip("numba")
    import tadiff as td
    from tadiff.index.compile import memory_budget, set_memory_budget

    f = define(CORPUS[0][0]).using("numba")
    rng = np.random.default_rng(11)
    arrays = {
        "a": rng.normal(size=(3000, 3)),
        "b": rng.normal(size=(9, 3)),
        "v": rng.normal(size=9),
    }
    tensors = {k: td.tensor(v, requires_grad=True) for k, v in arrays.items()}
    previous, threads = set_memory_budget(2**16), td.get_num_threads()
    td.set_num_threads(2)
    try:
        y = f(**tensors)
        g = rng.normal(size=y.shape)
        y.backward(td.tensor(g))
    finally:
        set_memory_budget(previous)
        td.set_num_threads(threads)
    assert memory_budget() == previous
    from tadiff.index.compile.numba_backend import private_copies
    from tadiff.index.compile.schedule import plan_gradients

    shapes = {**{k: v.shape for k, v in arrays.items()}, "dout": (3000,)}
    previous = set_memory_budget(2**16)
    try:  # a nest with a private da would get one copy, not two
        assert private_copies(2, 3000 * 3 * 8) == 1
        assert private_copies(2, 2**15) == 2
        # and the planner, knowing it, does not make da private (one copy would run the whole
        # nest on one thread); it takes the order with the 9-row db and dv private instead
        plan = plan_gradients(f, f.args, shapes, np.float64, {"out": (f, (3000,))})
        assert [set(nest.private) for _, nest in plan.fused] == [{"db", "dv"}]
    finally:
        set_memory_budget(previous)
    plan = plan_gradients(f, f.args, shapes, np.float64, {"out": (f, (3000,))})
    assert [nest.private for _, nest in plan.fused] == [("da",)]
    # the gradients in closed form (the interpreter takes half a minute at this size):
    # with K[i, j] = exp(-|a_i - b_j|^2) and w[i, j] = g_i K_ij v_j,
    # da_i = -2 sum_j w_ij (a_i - b_j), db_j = 2 sum_i w_ij (a_i - b_j), dv_j = sum_i g_i K_ij
    a, b, v = arrays["a"], arrays["b"], arrays["v"]
    diff = a[:, None, :] - b[None, :, :]
    k = np.exp(-(diff**2).sum(axis=2))
    w = g[:, None] * k * v[None, :]
    expected = {
        "a": -2 * np.einsum("ij,ijq->iq", w, diff),
        "b": 2 * np.einsum("ij,ijq->jq", w, diff),
        "v": k.T @ g,
    }
    for name, t in tensors.items():
        np.testing.assert_allclose(
            t.grad.data, expected[name], rtol=1e-12, atol=1e-12, err_msg=name
        )


@pytest.mark.parametrize("name", ["n_j", "lo_j", "c_j", "acc1", "t3", "prm", "out", "a_b", "DT"])
def test_index_names_cannot_shadow_the_names_of_the_generated_code(name):
    # the printer's own names (chunk bounds, accumulators, parameters, arguments) and a user's
    # index called the same must not meet: an index `acc1` once silently summed into the
    # accumulator of the same name, an index `n_j` moved the threads' chunk bounds
    f = define(f"out2[i] = sum[j](exp(-sum[{name}]((a[i,{name}] - b[j,{name}])**2)) * v[j])")
    shapes = {"a": (5, 3), "b": (6, 3), "v": (6,)}
    rng = np.random.default_rng(12)
    _check_fused(f, shapes, rng)  # every fused nest, as Python, against the interpreter
    _check_programs(f, shapes, rng, np.float64)  # every planned stage, as Python
    pytest.importorskip("numba")
    import tadiff as td

    arrays = {k: rng.normal(size=s) for k, s in shapes.items()}
    tensors = {k: td.tensor(v, requires_grad=True) for k, v in arrays.items()}
    y = f.using("numba")(**tensors)
    g = rng.normal(size=y.shape)
    y.backward(td.tensor(g))
    np.testing.assert_allclose(y.data, f.reference(**arrays), rtol=1e-12)
    for k, t in tensors.items():
        expected = f.grad(k).reference(**arrays, dout2=g)
        np.testing.assert_allclose(t.grad.data, expected, rtol=1e-12, atol=1e-12, err_msg=k)


def test_numpy_lowering_of_a_scalar_sum_stays_under_the_memory_budget():
    # no output row to divide: the outermost sum's range is cut into pieces instead
    f = define("s[] = sum[i](sum[j](exp(-(x[i] - z[j])**2)) * w[i])")
    rng = np.random.default_rng(7)
    arrays = {"x": rng.normal(size=3000), "z": rng.normal(size=3000), "w": rng.normal(size=3000)}
    k, got, peak = _run_under_budget(f, arrays, 2**22)
    assert "pieces" in k.source
    assert peak < 3 * 2**22, peak  # the 72 MB pair matrix is never made whole
    x, z, w = arrays["x"], arrays["z"], arrays["w"]
    exact = sum(float(np.exp(-((x[i] - z) ** 2)).sum() * w[i]) for i in range(3000))
    np.testing.assert_allclose(got, exact, rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_inline_exponential_is_within_one_ulp(dtype):
    # the Numba kernels' exp (inlined so loops of it vectorize) against the correctly rounded
    # value: the float64 exp of float32 input rounded once is correctly rounded for float32.
    # For float64 inputs the exact value comes from the long double exp where long double has
    # more digits (x86: 64-bit mantissa, 2**-11 ulp of float64), and the bound is 1 ulp of the
    # exact value (+ the reference's own error); elsewhere NumPy's exp (itself within half an
    # ulp) is the reference and the bound 1.5 ulp
    pytest.importorskip("numba")
    f = define("y[i] = exp(x[i])").using("numba")
    lo, hi = (-104.0, 89.0) if dtype == np.float32 else (-746.0, 710.0)
    grid = np.linspace(lo, hi, 400_001)
    specials = [0.0, -0.0, 1e-30, -1e-30, np.inf, -np.inf, np.nan, lo - 1, hi + 1]
    x = np.concatenate([grid, specials]).astype(dtype)
    got = f.evaluate({"x": x})
    wide = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps / 2
    if dtype == np.float32:  # the correctly rounded float32 value, 1 ulp allowed
        reference, bound = np.float64, 1.0
    else:  # the (nearly) exact value, 1 ulp allowed; NumPy's, 1.5 ulp, without long double
        reference, bound = (np.longdouble, 1.0 + 2.0**-10) if wide else (np.float64, 1.5)
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(reference))
        rounded = exact.astype(dtype)
    if dtype == np.float32:
        exact = rounded
    finite = np.isfinite(rounded) & (rounded >= np.finfo(dtype).tiny)
    ulps = np.abs(got[finite].astype(reference) - exact[finite]) / np.spacing(rounded[finite])
    assert ulps.max() <= bound, ulps.max()
    exact = rounded
    # overflow, underflow, inf, nan behave as exp's
    tail = got[-len(specials) :]
    np.testing.assert_array_equal(tail[:4], [1.0, 1.0, 1.0, 1.0])
    assert tail[4] == np.inf and tail[5] == 0.0 and np.isnan(tail[6])
    assert tail[7] == 0.0 and tail[8] == np.inf
    subnormal = (exact > 0) & (exact < np.finfo(dtype).tiny)
    np.testing.assert_allclose(
        got[subnormal], exact[subnormal], rtol=0, atol=2 * np.finfo(dtype).smallest_subnormal
    )


def test_loops_with_an_exponential_after_an_inner_sum_run_in_strips():
    f = define(CORPUS[0][0])
    program = plan_program(f, {"a": (1000, 3), "b": (1000, 3), "v": (1000,)}, np.float32)
    text = program.stages[-1].nest.text()
    assert "in strips of" in text and "phase 2:" in text
    phase2 = text.split("phase 2:")[1]
    assert "exp(" in phase2 and "for q" not in phase2  # the exponentials: a loop of their own


STRIPPED = [
    # (definition, shapes): an inner sum feeding an exponential inside a loop of >= 64 values
    ("out[i] = sum[j](exp(-sum[q]((a[i,q]-b[j,q])**2)) * v[j])",
     {"a": (3, 2), "b": (100, 2), "v": (100,)}),
    ("K[i,j] = exp(-sum[q]((a[i,q]-b[j,q])**2))", {"a": (2, 3), "b": (130, 3)}),
    # one row of x: the interpreter's derivatives cost rows * 70**2 * d**2 (11 s for 3 rows)
    ("y[i] = log(sum[k](w[k] * exp(-sum[d]((x[i,d] - mu[k,d])**2))))",
     {"x": (1, 2), "w": (70,), "mu": (70, 2)}),
    ("y[i] = sum[j](sigmoid(sum[q](a[i,q] * b[j,q])) * (v[j] + where(j >= i, v[j] * 2, 1)))",
     {"a": (3, 2), "b": (70, 2), "v": (70,)}),
]  # fmt: skip


@pytest.mark.parametrize(("source", "shapes"), STRIPPED, ids=[c[0] for c in STRIPPED])
def test_loops_in_strips_compute_what_the_interpreter_computes(source, shapes):
    f = define(source)
    stripped = [
        s for s in plan_program(f, shapes, np.float64).stages if "in strips" in s.nest.text()
    ]
    assert stripped, "the forward is expected to run a loop in strips"
    _check_programs(f, shapes, np.random.default_rng(8), np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_loops_in_strips_compiled_by_numba(dtype):
    pytest.importorskip("numba")
    import tadiff as td

    source, shapes = STRIPPED[0]
    f = define(source).using("numba")
    rng = np.random.default_rng(9)
    arrays = {n: rng.normal(size=s) for n, s in shapes.items()}
    tensors = {k: td.tensor(v.astype(dtype), requires_grad=True) for k, v in arrays.items()}
    y = f(**tensors)
    g = rng.normal(size=y.shape)
    y.backward(td.tensor(g.astype(dtype)))
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(y.data, f.reference(**arrays), rtol=tol, atol=tol)
    for name, t in tensors.items():
        expected = f.grad(name).reference(**arrays, dout=g)
        np.testing.assert_allclose(t.grad.data, expected, rtol=tol, atol=tol, err_msg=name)


def _check_fused(f, shapes, rng) -> int:
    """Fuse every pair and triple of ``f``'s one-stage derivatives that share an outer loop, in
    every combination of their loop orders (not only those the cost model takes), run each nest
    as Python loops (private outputs in two copies) and compare with the interpreter; returns
    how many nests ran."""
    import itertools

    from tadiff.index.compile.loops import Part, build_fused_nest, loop_orders, shared_prefix
    from tadiff.index.compile.numba_backend import lower_numba_fused

    arrays = _arrays(f, shapes, rng)
    out_shape = f.output_shape(**shapes)
    dy = rng.normal(size=out_shape)
    known = {f.out_name: (f, out_shape)}
    inputs = {**arrays, f.grad_name: dy, f.out_name: f.reference(**arrays)}
    stages, all_shapes, params = {}, {}, {}
    for w in f.args:
        program = plan_program(f.grad(w), {**shapes, f.grad_name: out_shape}, np.float64, known)
        if len(program.stages) == 1:
            stage = stages[w] = program.stages[0]
            all_shapes.update(program.shapes)
            params.update(stage.fn._params({a: program.shapes[a] for a in stage.fn.args}))
    ran = 0
    groups = [*itertools.combinations(stages, 2), *itertools.combinations(stages, 3)]
    for names in groups:
        pair = [stages[w] for w in names]
        options = [
            [Part(s.fn.body, s.fn.out_name, s.fn.out_vars, s.out_shape, o)
             for o in loop_orders(s.fn.body, s.fn.out_vars)]
            for s in pair
        ]  # fmt: skip
        for parts in itertools.product(*options):
            if shared_prefix(parts, params) < 1:
                continue
            nest = build_fused_nest(parts, params)
            fns = [s.fn for s in pair]
            run = lower_numba_fused(
                fns, nest, all_shapes, np.float64, [s.out_shape for s in pair], python=True
            )
            got = run(inputs)
            for w, s in zip(names, pair, strict=True):
                expected = f.grad(w).reference(**arrays, **{f.grad_name: dy})
                np.testing.assert_allclose(
                    got[s.fn.out_name],
                    expected,
                    rtol=1e-12,
                    atol=1e-12,
                    err_msg=f"d{f.out_name}/d{w}, fused in {[p.order for p in parts]}:\n"
                    + nest.text(),
                )
            ran += 1
    return ran


FUSED = [
    c
    for c in CORPUS
    if ("2*t" in c[0] or c[0].startswith("out[i] = ")) and len(define(c[0]).args) > 1
]


@pytest.mark.parametrize(("source", "shapes", "small"), FUSED, ids=[c[0] for c in FUSED])
def test_fused_derivative_nests_compute_what_the_interpreter_computes(source, shapes, small):
    # first and second order: a fused nest must keep each output's own sums (a strided
    # convolution's second derivatives once lost one when its order left it inside the value)
    rng = np.random.default_rng(10)
    f = define(source)
    ran = _check_fused(f, small, rng)
    out_shape = f.output_shape(**small)
    for name in f.args:
        g = f.grad(name)
        sizes = {**small, f.grad_name: out_shape, f.out_name: out_shape}
        ran += _check_fused(g, {a: sizes[a] for a in g.args}, rng)
    assert ran >= 1


def test_a_guard_that_always_holds_does_not_hide_a_sum_from_the_loop_orders():
    # da of the report's demo carries the guard ``i + 1 <= df.shape[0]`` (a's and df's first
    # sizes need not agree); where they agree it is dropped, and the gradient accumulates the
    # rows inside the sum over j instead of re-reading df * f for every k
    f = define("f[i,j] = exp(-sum[k]((a[i,k]+b[j,k])**2 * c[i,i] + d[i+k]**3))")
    shapes = {"a": (200, 16), "b": (200, 16), "c": (200, 200), "d": (215,), "df": (200, 200)}
    program = plan_program(f.grad("a"), shapes, np.float64, {"f": (f, (200, 200))})
    (stage,) = program.stages
    assert "where" in str(f.grad("a")) and "where" not in str(stage.fn)
    assert stage.nest.order == ("i", "j", "k") and stage.nest.accumulate
    # a guard that holds for some rows only stays, and the program still computes the same
    g = define("y[i:6] = where(i >= 2, sum[j](x[i, j]), 0)")
    (kept,) = plan_program(g, {"x": (6, 4)}, np.float64).stages
    assert "where" in str(kept.fn)
    _check_programs(g, {"x": (6, 4)}, np.random.default_rng(11), np.float64)
    _check_programs(f, {"a": (5, 3), "b": (4, 3), "c": (5, 5), "d": (7,)},
                    np.random.default_rng(12), np.float64)  # fmt: skip


# -- derivatives in scatter form ----------------------------------------------------------------


def _scatter_program(g, shapes, dtype=np.float64):
    """The program of derivative ``g`` run as its scatter stage, whatever the estimate says;
    None where it has none."""
    from tadiff.index.compile.schedule import Program, _scatter_stage

    params = g._params(shapes)
    stage = _scatter_stage(g, shapes, params, g.output_shape(**shapes))
    return None if stage is None else Program(g, [stage], dict(shapes), np.dtype(dtype))


def _check_scatter(f, shapes, rng, order: int = 2) -> int:
    """Run every derivative of ``f`` (and, with ``order=2``, of those) that has a scatter form
    as Python loops against the interpreter; returns how many ran."""
    arrays = _arrays(f, shapes, rng)
    out_shape = f.output_shape(**shapes)
    dy = rng.normal(size=out_shape)
    ran = 0
    for name in f.args:
        g = f.grad(name)
        sizes = {**shapes, f.grad_name: out_shape}
        program = _scatter_program(g, sizes)
        if program is not None:
            got = run_in_python(program, {**arrays, f.grad_name: dy})
            expected = g.reference(**arrays, **{f.grad_name: dy})
            np.testing.assert_allclose(
                got, expected, rtol=1e-12, atol=1e-12, err_msg=program.explain()
            )
            ran += 1
        if order == 2:
            ran += _check_scatter(g, {a: sizes[a] for a in g.args}, rng, order=1)
    return ran


@pytest.mark.parametrize(("source", "shapes", "small"), CORPUS, ids=[c[0] for c in CORPUS])
def test_derivatives_in_scatter_form_compute_what_the_interpreter_computes(source, shapes, small):
    # first and second order; every scatter form, not only those the estimate takes
    _check_scatter(define(source), small, np.random.default_rng(13))


def test_the_corpus_has_derivatives_in_scatter_form():
    rng = np.random.default_rng(14)
    ran = sum(_check_scatter(define(src), small, rng, order=1) for src, _, small in CORPUS)
    assert ran >= 12


def test_a_scatter_adds_only_where_the_forward_reads():
    # the store stays inside the where: at i = 0 the forward never reads x[i - 1] (run as
    # Python, an index of -1 raises at the unsigned cast)
    f = define("y[i] = where(i >= 1, x[i - 1] * w[i], 0)")
    assert _check_scatter(f, {"x": (6,), "w": (6,)}, np.random.default_rng(15), order=1) == 2
    program = _scatter_program(f.grad("x"), {"x": (6,), "w": (6,), "dy": (6,)})
    text = program.stages[0].nest.text()
    store = next(line for line in text.splitlines() if "dx[" in line)
    if_line = next(line for line in text.splitlines() if line.lstrip().startswith("if "))
    assert len(store) - len(store.lstrip()) > len(if_line) - len(if_line.lstrip())


@pytest.mark.parametrize(
    ("source", "shapes", "first_loops"),
    [
        # a batch index: each value writes its own rows
        ("y[b,t] = sum[k](x[b,2*t+k] * w[k])", {"x": (3, 20), "w": (3,), "dy": (3, 9)}, {"b"}),
        # flattening: 10*s + t with t < 10 never meets the next s
        ("f[s, t:10] = x[10*s + t]", {"x": (50,), "df": (5, 10)}, {"s"}),
        # a window: 2*t + k meets 2*(t + 1) + k - 2
        ("y[t] = sum[k](x[2*t+k] * w[k])", {"x": (20,), "w": (3,), "dy": (9,)}, set()),
        # a stencil: x[i+1] at i and x[i] at i + 1 are the same element
        ("y[i:8] = x[i] - 2*x[i+1] + x[i+2]", {"x": (10,), "dy": (8,)}, set()),
        # a transpose added to itself: i writes a row and a column
        ("y[i,j] = x[i,j] + x[j,i]", {"x": (4, 4), "dy": (4, 4)}, set()),
    ],
)
def test_a_scatter_runs_in_parallel_only_where_no_two_threads_write_one_element(
    source, shapes, first_loops
):
    from tadiff.index.compile.loops import scatter_orders
    from tadiff.index.compile.schedule import _scatter_stage
    from tadiff.index.derive import occurrences, output_ranges

    f = define(source)
    wrt = f.args[0]
    terms = occurrences(f, wrt)
    ranges = dict(zip(f.out_vars, output_ranges(f), strict=True))
    ranges.update({var: (lo, hi) for var, lo, hi in terms[0].sums})
    params = f.grad(wrt)._params(shapes)
    orders = scatter_orders(terms, f.out_vars, ranges, params)
    assert {o[0] for o in orders} == first_loops
    g = f.grad(wrt)
    stage = _scatter_stage(g, shapes, params, g.output_shape(**shapes))
    assert (stage is not None) == bool(first_loops)


def test_the_depthwise_input_gradient_runs_in_scatter_form():
    # its gather form sums 3 or 4 terms per element in a loop whose bounds divide by the
    # stride; the scatter form runs the forward's long loop over t, the window outside it
    f = define("y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])")
    shapes = {"x": (16, 256, 4096), "w": (256, 7), "dy": (16, 256, 2045)}
    program = plan_program(f.grad("x"), shapes, np.float32, {"y": (f, shapes["dy"])})
    assert program.scatter is not None
    assert program.scatter.nest.order == ("b", "c", "k", "t")
    assert program.cost < 0.75 * sum(s.nest.cost for s in program.stages)
    assert "in scatter form" in program.explain()
    # the weight gradient sums along rows with an accumulator, not into dw inside the window
    dw = plan_program(f.grad("w"), shapes, np.float32, {"y": (f, shapes["dy"])})
    assert dw.stages[-1].nest.order == ("c", "k") and dw.scatter is None


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        ("y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])", {"x": (4, 3, 41), "w": (3, 5)}),
        ("y[b,c,t] = maximum(x[b,c,2*t], x[b,c,2*t+1])", {"x": (4, 3, 40)}),
        ("f[s, t:10] = x[10*s + t] * x[10*s + t]", {"x": (300,)}),
    ],
)
def test_scatter_forms_through_the_engine_match_the_interpreter(source, shapes, dtype, threads):
    # compiled by Numba on one and two threads: each thread adds into its own elements
    pytest.importorskip("numba")

    f = define(source).using("numba")
    rng = np.random.default_rng(16)
    arrays = {k: rng.normal(size=s) for k, s in shapes.items()}
    out = f.output_shape(**shapes)
    program = plan_program(f.grad("x"), {**shapes, f.grad_name: out}, dtype)
    assert program.scatter is not None, program.explain()
    _check_engine_gradients(f, arrays, dtype, threads, rng)
