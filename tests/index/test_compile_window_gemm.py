"""The window-unrolled BLAS lowering (``compile/_window_gemm.py``) against independent oracles.

Convolutions (1-D and 2-D, stride and dilation 1 and 2, odd sizes, clamped "same" bounds and
``where`` conditions) are compared, forward and both gradients, in float64 and float32, with
the reference interpreter and with ``torch.nn.functional`` convolutions (autograd through the
engine). The kernel's description says which lowering it used: the cases that must take the
new one assert it, so a silent fallback to im2col fails here (the cost model that keeps tiny
products on im2col is switched off here; one test checks it on its own). Hypothesis draws random
geometries (sizes, kernel, stride, dilation, trailing input elements no output reads).

Two plans evaluate a window product: products of strided views of prepared (padded,
phase-split) arguments, and per-block copies of the window terms read with the argument's own
strides. The cost rule picks one; the ``path`` fixture forces each in turn where both apply.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff import parallel
from tadiff.index import define
from tadiff.index.compile import _window_gemm
from tadiff.index.compile.vectorized import lower_numpy

_WINDOW = "window-unrolled BLAS"


@pytest.fixture(autouse=True)
def _small_sizes_take_the_window_lowering(monkeypatch):
    # at these test sizes the cost model would keep most convolutions on im2col (too little
    # arithmetic per NumPy call); the lowering under test is the window one, so switch it off.
    # Kernels are built with lower_numpy, outside the cache, so nothing leaks to other tests.
    monkeypatch.setattr(_window_gemm, "_MIN_FLOPS_PER_CALL", 0)


_BLOCKS = "copied per block"


def _many_threads(monkeypatch) -> None:
    """Every block loop on two threads, none too small and whatever the load: at these sizes
    the threads would otherwise never run."""
    monkeypatch.setattr(parallel, "_MIN_BLOCK_FLOPS", 0)
    monkeypatch.setattr(parallel, "_requested", 2)
    monkeypatch.setattr(parallel, "_dynamic", False)


@pytest.fixture(params=["chosen", "blocks", "views", "blocks threads"])
def path(request, monkeypatch):
    """Which plan evaluates window products: the cost rule's choice, or each one forced; the
    block copies also with their block loops on two threads (the views plan has none)."""
    if request.param.startswith("blocks"):
        monkeypatch.setattr(_window_gemm, "_copies_whole", lambda plan: True)
    elif request.param.startswith("views"):
        monkeypatch.setattr(_window_gemm, "_BLOCKS", False)
    if request.param.endswith("threads"):
        _many_threads(monkeypatch)
    return request.param.split()[0]


_TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _conv1d(s: int, d: int) -> str:
    return f"y[b,o,t] = sum[c,k](x[b,c,{s}*t+{d}*k] * w[o,c,k])"


def _conv2d(s: int, d: int) -> str:
    return f"y[b,o,h,v] = sum[c,i,j](x[b,c,{s}*h+{d}*i,{s}*v+{d}*j] * w[o,c,i,j])"


def _functions(f, arrays, rng):
    """The forward and both gradients with their arguments (``dy`` drawn at random)."""
    dy = rng.normal(size=f.output_shape(**{n: a.shape for n, a in arrays.items()}))
    out = [(f, arrays)]
    for name in f.args:
        g = f.grad(name)
        out.append((g, {n: {**arrays, f.grad_name: dy}[n] for n in g.args}))
    return out


_REFERENCES: dict = {}


def _reference(fn, typed):
    """The interpreter's value, computed once per function and argument values (the same case
    runs under each forced plan, and the interpreter is the slow part of this file)."""
    key = (str(fn), tuple((n, a.dtype.str, a.shape, a.tobytes()) for n, a in typed.items()))
    if key not in _REFERENCES:
        _REFERENCES[key] = fn.reference(**{n: a.astype(np.float64) for n, a in typed.items()})
    return _REFERENCES[key]


def _check(fn, arrays, dtype) -> str:
    """The NumPy kernel agrees with the interpreter; returns the kernel's description."""
    typed = {n: a.astype(dtype) for n, a in arrays.items()}
    k = lower_numpy(fn, {n: a.shape for n, a in typed.items()}, dtype)
    got = k(typed)
    # the oracle on the rounded inputs: what is compared is the kernel's arithmetic
    reference = _reference(fn, typed)
    assert got.dtype == dtype and got.shape == reference.shape
    tol = _TOL[dtype]
    scale = max(1.0, float(np.abs(reference).max(initial=0.0)))
    np.testing.assert_allclose(got, reference, rtol=tol, atol=tol * scale, err_msg=str(fn))
    return k.source


CONVS = [
    # (source, x shape, w shape): odd sizes, non-square kernels
    *[(_conv1d(s, d), (2, 3, 19), (4, 3, 3)) for s in (1, 2) for d in (1, 2)],
    *[(_conv2d(s, d), (2, 3, 11, 9), (4, 3, 3, 2)) for s in (1, 2) for d in (1, 2)],
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("source", "xs", "ws"), CONVS, ids=[c[0] for c in CONVS])
def test_convolutions_take_the_window_lowering_and_match_the_interpreter(
    source, xs, ws, dtype, path
):
    rng = np.random.default_rng(0)
    f = define(source)
    arrays = {"x": rng.normal(size=xs), "w": rng.normal(size=ws)}
    for fn, args in _functions(f, arrays, rng):
        plan = _check(fn, args, dtype)
        assert _WINDOW in plan, f"{fn} fell back to the general path"
        if path == "views":
            assert _BLOCKS not in plan
        elif path == "blocks":
            assert _BLOCKS in plan, f"{fn} did not take the block copies"


SAME = "y[b,o,h:9,v:8] = sum[c, i=max(0,1-h):min(3,10-h), j=max(0,1-v):min(3,9-v)]"
CONDITIONED = [
    # zero padding written as clamped sum bounds: the mask is implied by the padding
    (SAME + "(x[b,c,h+i-1,v+j-1] * w[o,c,i,j])", True),
    # zero padding written as a where: the forward stays general, its gradients are windows
    (
        "y[b,o,h:9,v:8] = sum[c,i,j](where(h+i >= 1 and h+i <= 9 and v+j >= 1 and v+j <= 8, "
        "x[b,c,h+i-1,v+j-1], 0) * w[o,c,i,j])",
        False,
    ),
    # a condition around the sum: the sum inside is still a window product
    ("y[b,o,h,v] = where(h % 2 == 0, sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j]), 0)", True),
    # a condition inside the sum: not a product of two accesses, the general path
    ("y[b,o,h,v] = sum[c,i,j](where(c != o, x[b,c,h+i,v+j] * w[o,c,i,j], 0))", False),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("source", "window"), CONDITIONED, ids=[c[0] for c in CONDITIONED])
def test_bounds_and_conditions_match_the_interpreter(source, window, dtype):
    rng = np.random.default_rng(1)
    f = define(source)
    arrays = {"x": rng.normal(size=(2, 3, 9, 8)), "w": rng.normal(size=(3, 3, 3, 3))}
    sources = [_check(fn, args, dtype) for fn, args in _functions(f, arrays, rng)]
    assert (_WINDOW in sources[0]) == window


def test_dilated_input_gradient_is_one_window_product_not_split_by_residue():
    # dx of a dilation-2 convolution divides p by 2 in its sum bounds only; split by residue
    # its reads of dy would be stride-2 (no BLAS), kept whole they are views with zero padding
    f = define(_conv2d(1, 2))
    grad = f.grad("x")
    assert "/2" in str(grad)
    rng = np.random.default_rng(2)
    arrays = {"x": rng.normal(size=(2, 3, 12, 10)), "w": rng.normal(size=(4, 3, 3, 3))}
    (_, _), (fn, args), _ = _functions(f, arrays, rng)
    assert fn is grad and _WINDOW in _check(fn, args, np.float64)


def test_non_contiguous_arguments_are_read_by_value():
    f = define(_conv2d(2, 1))
    rng = np.random.default_rng(3)
    x = np.asfortranarray(rng.normal(size=(2, 3, 11, 9)))
    w = rng.normal(size=(3, 4, 3, 3)).transpose(1, 0, 2, 3)  # a transposed view
    k = lower_numpy(f, {"x": x.shape, "w": w.shape}, np.float64)
    assert _WINDOW in k.source
    np.testing.assert_allclose(k({"x": x, "w": w}), f(x=x, w=w), rtol=1e-12, atol=1e-12)


def test_scaled_products_and_unused_sum_variables_are_counted():
    # a constant factor and a sum variable the product does not read (it counts 2 terms)
    f = define("y[b,o,t] = sum[c,k,r=0:2](x[b,c,t+k] * w[o,c,k] * 0.5)")
    rng = np.random.default_rng(4)
    arrays = {"x": rng.normal(size=(2, 3, 10)), "w": rng.normal(size=(2, 3, 3))}
    for fn, args in _functions(f, arrays, rng):
        _check(fn, args, np.float64)
    assert _WINDOW in _check(f, arrays, np.float64)


TORCH_CASES = [(n, s, d) for n in (1, 2) for s in (1, 2) for d in (1, 2)]


@pytest.mark.parametrize(("dims", "stride", "dilation"), TORCH_CASES)
def test_engine_convolution_matches_torch_forward_and_gradients(dims, stride, dilation):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    spatial = (13,) if dims == 1 else (12, 11)
    x = rng.normal(size=(3, 4, *spatial))
    w = rng.normal(size=(5, 4, *(3,) * dims))
    f = define((_conv1d if dims == 1 else _conv2d)(stride, dilation))
    tx, tw = td.tensor(x, requires_grad=True), td.tensor(w, requires_grad=True)
    y = f(x=tx, w=tw)
    g = rng.normal(size=y.shape)
    (y * td.tensor(g)).sum().backward()
    rx = torch.tensor(x, requires_grad=True)
    rw = torch.tensor(w, requires_grad=True)
    conv = F.conv1d if dims == 1 else F.conv2d
    ry = conv(rx, rw, stride=stride, dilation=dilation)
    ry.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ry.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tx.grad.data, rx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tw.grad.data, rw.grad.numpy(), rtol=1e-10, atol=1e-10)


@st.composite
def _geometries(draw):
    dims = draw(st.integers(1, 2))
    stride = draw(st.integers(1, 3))
    dilation = draw(st.integers(1, 3))
    kernel_size = tuple(draw(st.integers(1, 4)) for _ in range(dims))
    out = tuple(draw(st.integers(1, 5)) for _ in range(dims))
    extra = tuple(draw(st.integers(0, 2)) for _ in range(dims))  # input no output reaches
    spatial = tuple(
        stride * (n - 1) + dilation * (k - 1) + 1 + e
        for n, k, e in zip(out, kernel_size, extra, strict=True)
    )
    batch, c_in, c_out = (draw(st.integers(1, 3)) for _ in range(3))
    source = (_conv1d if dims == 1 else _conv2d)(stride, dilation)
    return source, (batch, c_in, *spatial), (c_out, c_in, *kernel_size)


@pytest.mark.parametrize("mode", ["chosen", "blocks", "threads"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometry=_geometries(), seed=st.integers(0, 2**32 - 1))
def test_random_convolution_geometries_match_the_interpreter(mode, geometry, seed):
    with pytest.MonkeyPatch.context() as mp:
        if mode == "blocks":  # the block copies wherever they apply (clipped boxes everywhere)
            mp.setattr(_window_gemm, "_copies_whole", lambda plan: True)
        elif mode == "threads":
            _many_threads(mp)
        _random_geometry(geometry, seed)


def _random_geometry(geometry, seed):
    source, xs, ws = geometry
    rng = np.random.default_rng(seed)
    f = define(source)
    arrays = {"x": rng.normal(size=xs), "w": rng.normal(size=ws)}
    for fn, args in _functions(f, arrays, rng):
        _check(fn, args, np.float64)


def test_results_are_new_writeable_arrays_on_every_call():
    # the kernel hands out a strided view of the plan's own buffer instead of copying it: each
    # call must get its own buffer, and writing into one result must not touch the next
    f = define(_conv2d(1, 1))
    rng = np.random.default_rng(6)
    arrays = {"x": rng.normal(size=(2, 3, 9, 8)), "w": rng.normal(size=(4, 3, 3, 3))}
    k = lower_numpy(f, {n: a.shape for n, a in arrays.items()}, np.float64)
    first = k(arrays)
    first[...] = np.nan
    second = k(arrays)
    assert not np.shares_memory(first, second)
    np.testing.assert_allclose(second, f.reference(**arrays), rtol=1e-12, atol=1e-12)
    assert not np.isnan(arrays["x"]).any() and not np.isnan(arrays["w"]).any()


VARIANTS = [
    # operand order, channels-last layout, per-batch weights (no stacking), depthwise, a
    # flipped (negative) index, 3-D, two long signals, unequal strides, constant factors
    (
        "y[b,o,h,v] = sum[c,i,j](w[o,c,i,j] * x[b,c,h+i,v+j])",
        {"x": (2, 3, 9, 8), "w": (4, 3, 3, 3)},
    ),
    (
        "y[b,h,v,o] = sum[c,i,j](x[b,h+i,v+j,c] * w[i,j,c,o])",
        {"x": (2, 9, 8, 3), "w": (3, 3, 3, 4)},
    ),
    ("y[b,o,t] = sum[c,k](x[b,c,t+k] * w[b,o,c,k])", {"x": (3, 2, 11), "w": (3, 4, 2, 3)}),
    ("y[t] = sum[k](x[t-k+2] * w[k])", {"x": (12,), "w": (3,)}),
    (
        "y[b,o,d,h,v] = sum[c,i,j,l](x[b,c,d+l,h+i,v+j] * w[o,c,l,i,j])",
        {"x": (2, 2, 5, 6, 7), "w": (3, 2, 2, 3, 2)},
    ),
    ("y[i:12,j:10] = sum[k=0:5](a[i+k] * b[j+k])", {"a": (16,), "b": (14,)}),
    (
        "y[b,o,h,v] = sum[c,i,j](x[b,c,3*h+i,2*v+2*j] * w[o,c,i,j])",
        {"x": (2, 3, 14, 13), "w": (4, 3, 3, 3)},
    ),
    ("y[b,o,t] = sum[c,k](-x[b,c,t+k] * w[o,c,k] * 2) * 3", {"x": (2, 3, 11), "w": (4, 3, 3)}),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("source", "shapes"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_layout_and_index_variants_match_the_interpreter(source, shapes, dtype, path):
    rng = np.random.default_rng(7)
    f = define(source)
    arrays = {n: rng.normal(size=s) for n, s in shapes.items()}
    for fn, args in _functions(f, arrays, rng):
        assert _WINDOW in _check(fn, args, dtype), f"{fn} fell back to the general path"


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_depthwise_convolution_takes_no_product_over_its_channels(dtype):
    # c is in both factors and in the output: a window product over it would multiply every
    # channel with every other, c times the definition's work; the plan must refuse it
    rng = np.random.default_rng(7)
    f = define("y[b,c,t] = sum[k](x[b,c,2*t+k] * w[c,k])")
    arrays = {"x": rng.normal(size=(2, 40, 13)), "w": rng.normal(size=(40, 3))}
    for fn, args in _functions(f, arrays, rng):
        plan = _check(fn, args, dtype)
        if fn is f:
            assert _WINDOW not in plan, plan


def test_gradients_read_broadcast_and_strided_arguments_by_value():
    # the engine's gradient of y.sum() is a broadcast of ones (stride 0): the weight gradient
    # copies it straight into its zero-filled buffer, the input gradient pads it
    f = define(_conv2d(1, 1))
    rng = np.random.default_rng(8)
    x = rng.normal(size=(3, 2, 10, 9))[::-1]  # negative batch stride
    w = rng.normal(size=(4, 2, 3, 3))
    dy = np.broadcast_to(np.float64(1.5), f.output_shape(x=x.shape, w=w.shape))
    for name in ("x", "w"):
        grad = f.grad(name)
        args = {n: {"x": x, "w": w, "dy": dy}[n] for n in grad.args}
        k = lower_numpy(grad, {n: a.shape for n, a in args.items()}, np.float64)
        assert _WINDOW in k.source
        reference = grad.reference(**{n: np.array(a) for n, a in args.items()})
        np.testing.assert_allclose(k(args), reference, rtol=1e-12, atol=1e-12)


def test_cost_model_keeps_many_tiny_blocks_on_im2col_and_full_sizes_on_windows(monkeypatch):
    monkeypatch.setattr(_window_gemm, "_MIN_FLOPS_PER_CALL", 1 << 16)
    f = define(_conv2d(1, 1))
    # 256 batch elements of 3x28x28 images, 16 output channels: about 60k flops per NumPy call
    # in the forward, below the threshold; the size is far above it
    small = {"x": (256, 3, 28, 28), "w": (16, 3, 3, 3)}
    large = {"x": (16, 64, 56, 56), "w": (64, 64, 3, 3)}
    assert _WINDOW not in lower_numpy(f, small, np.float32).source
    assert _WINDOW in lower_numpy(f, large, np.float32).source


def test_cost_rule_copies_blocks_where_the_views_plan_would_copy_an_argument_whole():
    # stride 2, dilation 1 reads every phase of x: the views plan would split x whole first;
    # stride 2, dilation 2 reads one phase (a quarter of x): its views plan stays. Input
    # gradients read dy past its edges (a padded copy): always block copies.
    large = {"x": (16, 64, 56, 56), "w": (64, 64, 3, 3)}
    for (stride, dilation), expected in {(2, 1): [True] * 3, (2, 2): [False, True, False]}.items():
        f = define(_conv2d(stride, dilation))
        shapes = {**large, "dy": f.output_shape(**large)}
        plans = [
            lower_numpy(fn, {n: shapes[n] for n in fn.args}, np.float32).source
            for fn in (f, f.grad("x"), f.grad("w"))
        ]
        assert all(_WINDOW in p for p in plans)
        assert [_BLOCKS in p for p in plans] == expected, (stride, dilation)


@pytest.mark.parametrize(("stride", "dilation"), [(2, 1), (1, 1), (2, 2)])
def test_float32_engine_convolution_matches_torch(stride, dilation):
    # the block copies at float32, through the engine (odd sizes, both gradients)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    x = rng.normal(size=(3, 5, 15, 13)).astype(np.float32)
    w = rng.normal(size=(6, 5, 3, 3)).astype(np.float32)
    f = define(_conv2d(stride, dilation))
    tx, tw = td.tensor(x, requires_grad=True), td.tensor(w, requires_grad=True)
    y = f(x=tx, w=tw)
    g = rng.normal(size=y.shape).astype(np.float32)
    (y * td.tensor(g)).sum().backward()
    rx = torch.tensor(x, requires_grad=True)
    rw = torch.tensor(w, requires_grad=True)
    ry = torch.nn.functional.conv2d(rx, rw, stride=stride, dilation=dilation)
    ry.backward(torch.tensor(g))
    assert y.data.dtype == np.float32
    for got, want in ((y.data, ry), (tx.grad.data, rx.grad), (tw.grad.data, rw.grad)):
        want = want.detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


# -- threads, shared residue classes ------------------------------------------------------------


@pytest.mark.skipif(parallel._cores() < 2, reason="one core: no second thread to run on")
def test_forced_threads_really_run_block_loops_on_two_threads(monkeypatch):
    # the "threads" variants above mean something only if the loops leave the calling thread
    import threading
    import time

    _many_threads(monkeypatch)
    seen = set()
    original = _window_gemm.run_blocks

    def spy(count, make_worker, flops=float("inf")):
        def make():
            work = make_worker()

            def record(i):
                seen.add(threading.get_ident())
                time.sleep(0.005)  # a slow block, so the other thread gets some: no race
                work(i)

            return record

        return original(count, make, flops)

    monkeypatch.setattr(_window_gemm, "run_blocks", spy)
    f = define(_conv2d(2, 1))
    rng = np.random.default_rng(10)
    x, w = rng.normal(size=(8, 3, 11, 9)), rng.normal(size=(4, 3, 3, 3))
    lower_numpy(f, {"x": x.shape, "w": w.shape}, np.float64)({"x": x, "w": w})
    assert len(seen) == 2


# input sizes that the stride divides (every residue class has the same output shape), and
# dy larger than w (dy is then the operand copied per block)
STRIDED = [
    (_conv1d(2, 1), (3, 4, 22), (5, 4, 3)),
    (_conv1d(2, 1), (3, 4, 22), (5, 4, 5)),
    (_conv1d(3, 1), (2, 3, 21), (4, 3, 4)),  # classes of 2, 1 and 1 terms
    (_conv2d(2, 1), (3, 4, 12, 12), (5, 4, 3, 3)),
    (_conv2d(2, 1), (4, 3, 14, 12), (4, 3, 5, 4)),
    ("y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,3*v+j] * w[o,c,i,j])", (3, 3, 14, 15), (4, 3, 3, 4)),
]


@pytest.mark.parametrize("threads", [False, True], ids=["serial", "threads"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("source", "xs", "ws"), STRIDED, ids=[f"{c[0]} {c[2]}" for c in STRIDED])
def test_strided_input_gradient_classes_share_their_views(
    source, xs, ws, dtype, threads, monkeypatch
):
    # the residue classes of a strided input gradient read overlapping shifted views of dy:
    # evaluated together, each distinct view is copied once per batch element
    if threads:
        _many_threads(monkeypatch)
    rng = np.random.default_rng(11)
    f = define(source)
    arrays = {"x": rng.normal(size=xs), "w": rng.normal(size=ws)}
    (_, _), (fn, args), _ = _functions(f, arrays, rng)
    assert fn.out_name == "dx" and "share their window views" in _check(fn, args, dtype)


def test_classes_that_are_not_block_plans_are_left_to_the_caller():
    # plan_classes takes the block-plan classes it can share and names them; any other part
    # (here a stand-in for a class read in place) stays with the caller
    f = define(_conv2d(2, 1))
    shapes = {"x": (3, 4, 12, 12), "w": (5, 4, 3, 3)}
    grad = f.grad("x")
    shapes["dy"] = f.output_shape(**shapes)
    k = lower_numpy(grad, {n: shapes[n] for n in grad.args}, np.float64)
    assert "share" in k.source
    classes = [p for p in _plan_parts(grad, shapes) if p is not None]
    assert len(classes) == 4
    other = (lambda arrays: np.zeros(()), (slice(None),))
    found = _window_gemm.plan_classes([other, *classes], (3, 4, 12, 12))
    assert found is not None and found[1] == [1, 2, 3, 4]


def _plan_parts(fn, shapes):
    """The (plan, slices) of each residue class of ``fn``, as lower_numpy builds them."""
    from tadiff.index.compile import vectorized

    captured = []
    original = vectorized.plan_classes

    def spy(parts, out_shape):
        captured.extend(parts)
        return original(parts, out_shape)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(vectorized, "plan_classes", spy)
        lower_numpy(fn, {n: shapes[n] for n in fn.args}, np.float64)
    return captured


def test_classes_of_different_shapes_are_evaluated_one_by_one():
    # an odd input length: the stride-2 classes have 11 and 10 positions, so no shared buffer
    f = define(_conv1d(2, 1))
    rng = np.random.default_rng(12)
    arrays = {"x": rng.normal(size=(2, 3, 21)), "w": rng.normal(size=(4, 3, 3))}
    (_, _), (fn, args), _ = _functions(f, arrays, rng)
    plan = _check(fn, args, np.float64)
    assert _WINDOW in plan and "share" not in plan


@pytest.mark.parametrize("name", ["x", "w"])
def test_threaded_kernels_give_the_same_bits_on_every_call(name, monkeypatch):
    # a block's product runs on one BLAS thread whichever thread takes it, and partial sums
    # over blocks are added in block order: no run-to-run float differences
    _many_threads(monkeypatch)
    f = define(_conv2d(2, 1))
    rng = np.random.default_rng(13)
    arrays = {"x": rng.normal(size=(9, 5, 13, 12)), "w": rng.normal(size=(6, 5, 3, 3))}
    dy = rng.normal(size=f.output_shape(x=(9, 5, 13, 12), w=(6, 5, 3, 3)))
    fn = f.grad(name)
    args = {n: {**arrays, "dy": dy}[n].astype(np.float32) for n in fn.args}
    k = lower_numpy(fn, {n: a.shape for n, a in args.items()}, np.float32)
    first = k(args)
    for _ in range(5):
        np.testing.assert_array_equal(k(args), first)


@pytest.mark.parametrize("scratch", [1, 50, 1 << 23], ids=["one per group", "groups", "all"])
def test_sum_over_blocks_adds_every_block_once_in_any_grouping(scratch, monkeypatch):
    _many_threads(monkeypatch)
    monkeypatch.setattr(_window_gemm, "_SCRATCH", scratch)
    rng = np.random.default_rng(14)
    parts = rng.normal(size=(13, 4, 6))
    out = np.empty((4, 6))

    def make_product():
        def product(i, into):
            into[...] = parts[i]

        return product

    _window_gemm.sum_over_blocks(13, out, make_product, flops=1e9)
    np.testing.assert_allclose(out, parts.sum(axis=0), rtol=1e-13, atol=1e-13)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 5), min_size=1, max_size=6), min_size=1, max_size=4))
def test_consecutive_order_is_found_exactly_when_one_exists(sets):
    import itertools

    def contiguous(order):
        where = {e: i for i, e in enumerate(order)}
        return all(max(where[e] for e in s) - min(where[e] for e in s) + 1 == len(s) for s in sets)

    universe = sorted(set().union(*sets))
    exists = any(contiguous(p) for p in itertools.permutations(universe))
    order = _window_gemm._consecutive_order(sets)
    if order is not None:
        assert sorted(order) == universe and contiguous(order)
    assert (order is not None) == exists
