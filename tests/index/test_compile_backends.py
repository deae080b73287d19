"""Every compiled backend against the reference interpreter (the oracle).

The corpus is the derivation corpus of test_derive (imported, not copied): forward and every
gradient, float64 and float32, for the einsum/NumPy lowering ("auto"), the vectorized NumPy
kernels alone and the Numba loop nests. Hypothesis adds random affine definitions (triangular
sums, conditions, negative strides) from test_random_definitions' strategy.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_derive import CORPUS, SECOND_ORDER
from test_random_definitions import definitions

from tadiff.errors import BoundsError, InputError, MissingDependencyError, ShapeError
from tadiff.index import define
from tadiff.index.compile import kernel

BACKENDS = ["auto", "numpy", "numba"]
_TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _needs(backend: str) -> None:
    if backend == "numba":
        pytest.importorskip("numba")


def _cases(source, shapes, rng):
    """(function, argument arrays) for the forward and every gradient, reference values."""
    f = define(source)
    arrays = {n: rng.uniform(0.3, 0.9, size=shapes[n]) for n in f.args}
    g = rng.normal(size=f.reference(**arrays).shape)
    return [(f, arrays)] + [(f.grad(n), {**arrays, f.grad_name: g}) for n in f.args]


def _agree(fn, arrays, backend, dtype):
    reference = fn.reference(**arrays)
    typed = {n: arrays[n].astype(dtype) for n in fn.args}
    k = kernel(fn, {n: a.shape for n, a in typed.items()}, dtype, backend)
    got = k(typed)
    assert got.dtype == dtype and got.shape == reference.shape, str(fn)
    if dtype == np.float32:
        # the oracle on the float32-rounded inputs: what is compared is the kernel's arithmetic
        reference = fn.reference(**{n: a.astype(np.float64) for n, a in typed.items()})
    tol = _TOL[dtype]
    np.testing.assert_allclose(got, reference, rtol=tol, atol=tol, err_msg=str(fn))
    return k


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "shapes"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_forward_and_gradients_match_interpreter(source, shapes, backend, dtype):
    _needs(backend)
    for fn, arrays in _cases(source, shapes, np.random.default_rng(0)):
        k = _agree(fn, arrays, backend, dtype)
        assert k.backend == ("numba" if backend == "numba" else k.backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("source", "shapes", "first", "second"),
    SECOND_ORDER,
    ids=[f"{c[0]} {c[2]},{c[3]}" for c in SECOND_ORDER],
)
def test_second_derivatives_match_interpreter(source, shapes, first, second, backend):
    _needs(backend)
    rng = np.random.default_rng(1)
    f = define(source)
    arrays = {n: rng.uniform(0.2, 0.8, size=shapes[n]) for n in f.args}
    g1 = f.grad(first)
    args1 = {**arrays, f.grad_name: rng.normal(size=f.reference(**arrays).shape)}
    g2 = g1.grad(second)
    args2 = {**args1, g1.grad_name: rng.normal(size=g1(**args1).shape)}
    _agree(g2, args2, backend, np.float64)


def _agree_or_refused(fn, args) -> None:
    """The NumPy kernel agrees with the oracle, or both refuse the shapes.

    A derivation whose sum range is too wide (a derivation issue, reported) is refused by the
    oracle's static bounds check; the kernel runs the same check and must refuse it too.
    """
    try:
        _agree(fn, args, "numpy", np.float64)
    except BoundsError:
        with pytest.raises(BoundsError):
            kernel(fn, {n: np.shape(args[n]) for n in fn.args}, backend="numpy")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(definitions(), st.integers(0, 2**32 - 1))
def test_random_definitions_vectorized_matches_interpreter(case, seed):
    source, shapes = case
    f = define(source)
    rng = np.random.default_rng(seed)
    arrays = {a: rng.uniform(-1, 1, size=shapes[a]) for a in f.args}
    g = rng.normal(size=f.reference(**arrays).shape)
    _agree(f, arrays, "numpy", np.float64)
    for name in f.args:
        grad = f.grad(name)
        args = {**arrays, f.grad_name: g}
        _agree_or_refused(grad, args)
        # and one level deeper: the derivative of the derivative (all its arguments)
        gg = rng.normal(size=grad.output_shape(**{n: np.shape(args[n]) for n in grad.args}))
        for second in grad.args:
            _agree_or_refused(grad.grad(second), {**args, grad.grad_name: gg})


def test_contractions_lower_to_einsum_and_others_do_not():
    f = define("z[b,i,j] = sum[k](x[b,i,k] * w[b,k,j])")
    shapes = {"x": (2, 3, 4), "w": (2, 4, 5)}
    assert kernel(f, shapes).backend == "einsum"
    assert "einsum" in kernel(f, shapes).source
    # both gradients of a batched matmul are contractions again
    gshapes = {**shapes, "dz": (2, 3, 5)}
    assert kernel(f.grad("x"), gshapes).backend == "einsum"
    assert kernel(f.grad("w"), gshapes).backend == "einsum"
    conv = define("y[t] = sum[k](x[2*t+k] * w[k])")
    assert kernel(conv, {"x": (9,), "w": (3,)}).backend == "numpy"
    with pytest.raises(InputError, match="y is not a pure contraction"):
        kernel(conv, {"x": (9,), "w": (3,)}, backend="einsum")


def test_windowed_sum_is_masked_to_the_widest_window_not_the_whole_range():
    # the input gradient of a long strided convolution sums over t in a window of at most
    # ceil(K/2) values per element: the vectorized kernel must not build a (P, T) mask
    f = define("y[t] = sum[k](x[2*t+k] * w[k])")
    grad = f.grad("x")
    shapes = {"x": (2001,), "w": (3,), "dy": (1000,)}
    from tadiff.index.compile.vectorized import _Planner

    planner = _Planner(grad, grad._params(shapes), shapes, (2001,), np.dtype(np.float64))
    planner.plan(grad.body)
    widest = max(g.shape[-1] for g in planner._keep)
    assert widest == 2  # t = lower(p) + j, j in {0, 1}
    rng = np.random.default_rng(3)
    args = {n: rng.normal(size=s) for n, s in shapes.items()}
    dense = np.zeros(2001)
    for t in range(1000):  # independent scatter oracle
        dense[2 * t : 2 * t + 3] += args["dy"][t] * args["w"]
    np.testing.assert_allclose(kernel(grad, shapes, backend="numpy")(args), dense, rtol=1e-12)


def test_numba_source_has_exact_bounds_and_parallel_outer_loop():
    pytest.importorskip("numba")
    from tadiff.index.compile.numba_backend import stage_source
    from tadiff.index.compile.schedule import plan_program

    f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    src = f.grad("x").source("numba")
    assert "numba.prange(" in src
    assert "cache=True" in src
    # on Numba in scatter form: the forward's loops, each adding into its own image's dx
    assert "out[_U((i_b)), _U((i_c)), _U((i_k + 2 * i_t))] +=" in src
    assert "np.add.at" not in src
    # the gather form: the window of t, max(0, ceil((p - K + 1)/2)) .. min(T - 1, floor(p/2)),
    # for each element
    shapes = {"x": (64, 64, 64), "w": (64, 64, 3), "dy": (64, 64, 31)}
    program = plan_program(f.grad("x"), shapes)
    src, _ = stage_source(program.stages[-1].fn, program.stages[-1].nest, np.float64)
    assert "max(" in src and "min(" in src and "// 2" in src
    assert "numba.prange(" in src and "+=" in src


def test_bad_backend_dtype_and_shapes_are_reported():
    f = define("y[t] = sum[k](x[t+k] * w[k])")
    with pytest.raises(InputError, match="unknown backend 'cuda'"):
        kernel(f, {"x": (5,), "w": (2,)}, backend="cuda")
    with pytest.raises(InputError, match="float32 or float64, got dtype int64"):
        kernel(f, {"x": (5,), "w": (2,)}, np.int64)
    with pytest.raises(ShapeError, match="output index 't' of y would have size 0"):
        kernel(f, {"x": (2,), "w": (5,)})
    g = define("y[i:4] = x[2*i]")
    with pytest.raises(BoundsError, match="x"):
        kernel(g, {"x": (5,)})
    with pytest.raises(InputError, match="unknown backend"):
        f.using("fortran")


def test_missing_numba_raises_missing_dependency(monkeypatch):
    f = define("y[i] = x[i] * 3")
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.delitem(sys.modules, "tadiff.index.compile.numba_backend", raising=False)
    with pytest.raises(MissingDependencyError, match=r"needs numba.*pip install"):
        kernel(f, {"x": (7,)}, backend="numba")
    with pytest.raises(MissingDependencyError, match="numba"):
        f.source("numba")


def test_evaluate_keeps_float32_and_matches_reference():
    f = define("y[i] = sum[k=0:3](x[3*i+k]) / 3")
    x = np.random.default_rng(0).normal(size=12).astype(np.float32)
    got = f.evaluate({"x": x})
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x.reshape(4, 3).mean(axis=1), rtol=1e-6)
    assert f.evaluate({"x": x.astype(np.float64)}, backend="numpy").dtype == np.float64


def test_strided_gradient_is_split_by_residue_into_affine_classes():
    from tadiff.index.compile.vectorized import _residue_classes

    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])")
    classes = list(_residue_classes(f.grad("x"), (1, 2, 9, 8)))
    # p = 2q + r for both spatial indices: four classes covering the output exactly once
    assert len(classes) == 4
    covered = np.zeros((1, 2, 9, 8), dtype=int)
    for _, slices, sub_shape in classes:
        covered[slices] += 1
        assert covered[slices].shape == sub_shape
    assert (covered == 1).all()
    # a stride-1 gradient and a forward need no split
    assert len(list(_residue_classes(f, (1, 2, 3, 3)))) == 1


def test_missing_triton_raises_missing_dependency(monkeypatch):
    f = define("y[i] = x[i] * 3")
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(MissingDependencyError, match="the triton backend needs"):
        kernel(f, {"x": (7,)}, backend="triton")


def test_a_matrix_product_plan_serves_each_layout_it_was_made_for(monkeypatch):
    # the NumPy path's matrix-product steps are worked out once per operand layout and kept:
    # the same kernel called with C-ordered, Fortran-ordered and strided arrays makes a plan
    # for each and agrees with the interpreter every time (also on the second call)
    from tadiff.index.compile import vectorized

    made = []
    plan_pair = vectorized._plan_pair
    monkeypatch.setattr(vectorized, "_plan_pair", lambda *a: made.append(1) or plan_pair(*a))
    monkeypatch.setattr(vectorized, "_PAIR_PLANS", {})
    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])")
    rng = np.random.default_rng(21)
    x, w = rng.normal(size=(2, 3, 6, 6)), rng.normal(size=(4, 3, 3, 3))
    k = vectorized.lower_numpy(f, {"x": x.shape, "w": w.shape}, np.float64)
    expected = f.reference(x=x, w=w)
    wide = np.zeros((2, 3, 6, 12))
    wide[..., ::2] = x
    for layout in (x, np.asfortranarray(x), wide[..., ::2], x):
        got = k({"x": layout, "w": w})
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert len(made) == 3  # the C-ordered layout's plan was reused


def test_window_rows_are_copied_as_one_run_across_the_gap_they_step_over(monkeypatch):
    # the im2col copy of x[b, c, h+i, v+j] reads each output row h as one run through the
    # columns its windows skip (the merged axis of _gap_merge); what those gap positions hold
    # reaches only output positions that are dropped, so NaN in columns no window reads (the
    # hidden columns of a wider array) leaves the result exact, in both dtypes
    from tadiff.index.compile import vectorized

    merges = []
    gap_merge = vectorized._gap_merge
    monkeypatch.setattr(
        vectorized, "_gap_merge", lambda *a: merges.append(gap_merge(*a)) or merges[-1]
    )
    monkeypatch.setattr(vectorized, "_PAIR_PLANS", {})
    f = define("y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])")
    rng = np.random.default_rng(22)
    for dtype in (np.float64, np.float32):
        wide = rng.normal(size=(2, 3, 7, 7)).astype(dtype)
        wide[..., 6] = np.nan
        x, w = wide[..., :6], rng.normal(size=(4, 3, 3, 3)).astype(dtype)
        k = vectorized.lower_numpy(f, {"x": x.shape, "w": w.shape}, dtype)
        got = k({"x": x, "w": w})
        expected = f.reference(x=x.astype(np.float64), w=w.astype(np.float64))
        np.testing.assert_allclose(got, expected, rtol=_TOL[dtype], atol=_TOL[dtype])
        # the product comes out transposed (channels outermost); the result is copied row-major,
        # as torch's convolution returns it
        assert got.flags.c_contiguous
    assert sum(m is not None for m in merges) == 2  # one merge per dtype's plan


@pytest.mark.parametrize("hidden", ["finite", "nan in the gap", "inf in the windows"])
def test_a_contracted_pair_is_read_through_its_gap_against_zeros(monkeypatch, hidden):
    # a weight gradient's window rows (i, j) are contracted: x is read through the columns
    # its windows skip and dy is spaced out with zeros there (_GapMerge.spread); a gap holding
    # NaN (hidden columns of a wider array) or an inf anywhere makes 0 * inf = NaN, and then
    # the sum without the gap is taken, which the interpreter's value must match (inf included)
    from tadiff.index.compile import vectorized

    exact_plans = []
    plan_pair = vectorized._plan_pair

    def recording(*args, **kwargs):
        if kwargs.get("through_gaps") is False:
            exact_plans.append(1)
        return plan_pair(*args, **kwargs)

    monkeypatch.setattr(vectorized, "_plan_pair", recording)
    monkeypatch.setattr(vectorized, "_PAIR_PLANS", {})
    spreads = []
    spread = vectorized._GapMerge.spread
    monkeypatch.setattr(
        vectorized._GapMerge, "spread", lambda m, a: spreads.append(1) or spread(m, a)
    )
    f = define("dw[o,c,p,q] = sum[b,i,j](dy[b,o,i,j] * x[b,c,i+p,j+q])")
    rng = np.random.default_rng(23)
    wide = rng.normal(size=(2, 3, 7, 7))
    if hidden == "nan in the gap":
        wide[..., 6] = np.nan
    x, dy = wide[..., :6], rng.normal(size=(2, 4, 5, 4))
    if hidden == "inf in the windows":
        x[1, 2, 3, 1] = np.inf
    k = vectorized.lower_numpy(f, {"x": x.shape, "dy": dy.shape}, np.float64)
    for _ in range(2):  # the plan is kept, and checked again on each call
        got = k({"x": x, "dy": dy})
        np.testing.assert_allclose(got, f.reference(x=x, dy=dy), rtol=1e-12, atol=1e-12)
    assert spreads and len(exact_plans) == (0 if hidden == "finite" else 1)
    assert (hidden != "inf in the windows") == bool(np.isfinite(got).all())


def test_a_kept_matrix_product_plan_holds_no_operand_array(monkeypatch):
    # plans are cached per operand layout for the life of the process: an operand's memory
    # (a large batch's window view) must be freed with the call, also where the plan falls
    # back to the sum without the gap (made from the arrays of the call that needs it)
    import gc
    import weakref

    from tadiff.index.compile import vectorized

    monkeypatch.setattr(vectorized, "_PAIR_PLANS", {})
    f = define("dw[o,c,p,q] = sum[b,i,j](dy[b,o,i,j] * x[b,c,i+p,j+q])")
    rng = np.random.default_rng(24)
    k = vectorized.lower_numpy(f, {"x": (2, 3, 7, 6), "dy": (2, 4, 5, 4)}, np.float64)
    for hidden in (0.0, np.inf):
        x, dy = rng.normal(size=(2, 3, 7, 6)), rng.normal(size=(2, 4, 5, 4))
        x[0, 0, 0, 5] = hidden  # inf: the result is not finite, the exact plan is made
        freed = weakref.ref(x)
        k({"x": x, "dy": dy})
        del x
        gc.collect()
        assert freed() is None
    assert len(vectorized._PAIR_PLANS) == 1
